"""TPC-H data for the cluster tests: the same cached files tests/test_tpch_queries.py uses."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest


SCALE_FACTOR_BY_DEVICE = {"cpu": 0.01, "cuda": 0.01, "cuda-sim": 0.001}
LINEITEM_SPLITS = 6


@pytest.fixture(scope="session")
def tpch_folder(tpch_data):
    """Return a function: scale factor -> folder of TPC-H Parquet files (tests/conftest.py's ``tpch_data``)."""
    return tpch_data


def register_lineitem(session, folder: Path) -> None:
    """Register lineitem in memory, cut into several splits, so every leaf Task gets some.

    The small scale factors write lineitem as a single row group: registered as
    Parquet it would be a single split, and all but one leaf Task would idle.
    """
    table = pq.read_table(folder / "lineitem.parquet")
    session.register("lineitem", table, split_rows=-(-table.num_rows // LINEITEM_SPLITS))
