"""Fixtures for operator tests: the shared table and the DuckDB comparison (Velox's ``assertQuery``).

Tests import helpers from ``operator_tables`` and ``duckdb_reference``, never from here (see operator_tables.py).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import duckdb_rows
from gpu_engine import Session
from operator_tables import ROWS, make_table


@pytest.fixture(params=[1, 4], ids=["drivers1", "drivers4"])
def drivers(request) -> int:
    """Yield the driver counts every operator test runs with."""
    return request.param


@pytest.fixture(params=["small_batches", "large_batches"])
def batch_rows(request, device_name) -> int:
    """Yield a batch size that splits the data into many batches, and one that does not."""
    if request.param == "small_batches":
        return 64 if device_name == "cuda-sim" else 256
    return 1 << 16


@pytest.fixture
def table(device_name) -> pa.Table:
    """Yield the test table, sized for the device (the simulator is slow)."""
    return make_table(ROWS[device_name])


@pytest.fixture(params=[True, False], ids=["fused", "unfused"])
def fuse(request) -> bool:
    """Yield whether the session fuses pipeline stretches (issue 11: the operator suite runs both ways).

    Fused (the default) runs the generated kernels; unfused runs each plan node as its own operator, the
    eager path that fusion falls back to for whatever it cannot compile. The unfused cases run on ``cpu``
    at one (drivers, batch size) pair (``UNFUSED_CASE`` in tests/conftest.py): about a hundred cases,
    ~13 s on two cores, keep the eager operators under the whole suite.
    """
    return request.param


@pytest.fixture
def session(device_name, drivers, batch_rows, table, fuse) -> Session:
    """Yield a Session over ``t`` with several splits, so drivers share the scan."""
    s = Session(device=device_name, drivers=drivers, batch_rows=batch_rows, fuse=fuse)
    s.register("t", table, split_rows=max(1, table.num_rows // 5))
    return s


@pytest.fixture
def assert_query(session, table):
    """Return ``check(plan, sql, ordered=False)``: run the plan, run the SQL in DuckDB over ``t``, compare."""
    from duckdb_reference import assert_same_rows

    def check(plan, sql: str, ordered: bool = False, **extra_tables) -> pa.Table:
        result = session.execute(plan)
        expected = duckdb_rows(sql, t=table, **extra_tables)
        assert result.schema.names == expected.schema.names
        assert_same_rows(result, expected, ordered=ordered)
        return result

    return check


@pytest.fixture
def reference(table):
    """Return ``rows(sql)``: DuckDB's answer to ``sql`` over the test table ``t``."""
    return lambda sql: duckdb_rows(sql, t=table)
