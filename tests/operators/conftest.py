"""Shared data and the DuckDB comparison for operator tests (Velox's ``assertQuery``)."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine import Session

ROWS = {"cpu": 3000, "cuda-sim": 400, "cuda": 3000}


def make_table(rows: int, seed: int = 7) -> pa.Table:
    """Return a table with nulls in every column: int/str/dictionary keys, numeric, decimal and date values."""
    rng = np.random.default_rng(seed)

    def nulls(values, fraction=0.1):
        mask = rng.random(rows) < fraction
        return [None if m else v for v, m in zip(values, mask)]

    words = ["apple", "banana", "", "cherry pie", "durian-long-name-beyond-16", "é-accent", "fig"]
    start = datetime.date(1994, 1, 1)
    return pa.table({
        "k_int": pa.array(nulls(rng.integers(-5, 20, rows).tolist()), pa.int32()),
        "k_str": pa.array(nulls([words[i] for i in rng.integers(0, len(words), rows)])),
        "k_dict": pa.array(nulls([words[i] for i in rng.integers(0, 3, rows)])).dictionary_encode(),
        "v_int": pa.array(nulls(rng.integers(-10**6, 10**6, rows).tolist()), pa.int64()),
        "v_float": pa.array(nulls(rng.normal(0, 100, rows).tolist()), pa.float64()),
        "v_dec": pa.array(nulls([decimal.Decimal(int(x)).scaleb(-2) for x in rng.integers(-10**7, 10**7, rows)]), pa.decimal128(15, 2)),
        "d_date": pa.array(nulls([start + datetime.timedelta(days=int(x)) for x in rng.integers(0, 2000, rows)]), pa.date32()),
    })


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


def duckdb_rows(sql: str, **tables) -> pa.Table:
    """Run reference SQL in DuckDB over the given Arrow tables (on the process's shared connection)."""
    from duckdb_reference import duckdb_table_over

    return duckdb_table_over(tables, sql)


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
