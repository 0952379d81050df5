"""DuckDB's ``setseed(x)`` is refused by name with the reason and an alternative (it was "unknown function"): the
engine's random() draws per batch on each driver, so a seed could not make a query's values repeat."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import session_with_tables

from gpu_engine.errors import PlanError


def test_setseed_is_refused_by_name_with_its_position():
    session = session_with_tables({"t": pa.table({"n": [1, 2]})}, device="cpu")
    with pytest.raises(PlanError) as info:
        session.sql("SELECT setseed(0.5)")
    message = str(info.value)
    assert "setseed(x) is not supported" in message and "register them" in message and "column 8)" in message
