"""DuckDB's ``epoch_us(t)`` / ``epoch_ns(t)`` against DuckDB (issue 30 item 5; "unknown function" before).

Microseconds (nanoseconds) since 1970 of a TIMESTAMP or DATE, a BIGINT: planned as ``date_diff('microsecond',
TIMESTAMP '1970-01-01', t)`` (times 1000), so negative values, NULLs and an empty input come out as DuckDB's, and a
timestamp whose nanoseconds overflow BIGINT raises as DuckDB raises.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.errors import ExecutionError, PlanError

TABLES = {"t": pa.table({"ts": pa.array([1700000000123456, None, 0, -86400000001], pa.timestamp("us")),
                         "d": pa.array([19000, None, 0, -1], pa.date32()), "n": pa.array([1, 2, 3, 4])})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT epoch_us(ts) AS us, epoch_ns(ts) AS ns FROM t",
    "SELECT epoch_us(d) AS us, epoch_ns(d) AS ns FROM t",
    "SELECT epoch_us(ts) FROM t",
    "SELECT epoch_us(NULL::TIMESTAMP) AS us",
    "SELECT epoch_us(e.ts) AS us FROM e",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def test_epoch_units_match_duckdb_on_cpu(reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device="cpu"), reference, QUERIES, exact_types=True)


@pytest.mark.cpu_case_in("test_epoch_units_match_duckdb_on_cpu")
def test_epoch_units_match_duckdb_on_each_device(device_name, reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), reference, QUERIES[:1],
                                exact_types=True)


def test_epoch_units_refuse_what_duckdb_refuses(reference):
    session = session_with_tables(TABLES, device="cpu")
    with pytest.raises(Exception):
        reference.sql("SELECT epoch_ns(TIMESTAMP '2300-01-01') AS ns").fetchall()
    with pytest.raises(ExecutionError):
        session.sql("SELECT epoch_ns(TIMESTAMP '2300-01-01') AS ns")
    with pytest.raises(PlanError):
        session.sql("SELECT epoch_us(n) FROM t")
