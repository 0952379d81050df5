"""``factorial(n)`` (issue 30 item 5) against DuckDB: HUGEINT of an INTEGER (or narrower), NULLs, 0! .. 20!, and
DuckDB's errors (a negative n, past 33!); 21! .. 33! need more than the engine's 64-bit HUGEINT storage and raise
a named error; a BIGINT argument is refused as DuckDB refuses it (no overload)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import ExecutionError, PlanError

TABLES = {"t": pa.table({"n": pa.array([0, 1, None, 5, 20, 12, 3], pa.int32()),
                         "m": pa.array([3, None, 2, 1, 0, 4, 7], pa.int8())})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT n, factorial(n) AS f FROM t",
    "SELECT factorial(m) AS f, typeof(factorial(m)) AS ty FROM t",
    "SELECT factorial(3) AS a, factorial(0) AS b, factorial(NULL) AS c, factorial(20) AS d",
    "SELECT sum(factorial(m)) AS s FROM t WHERE factorial(m) > 2",
    "SELECT factorial(n) AS f FROM e",
]


def _session(device_name):
    return session_with_tables(TABLES, device=device_name, drivers=2, batch_rows=3)


def test_factorial_matches_duckdb_on_cpu(reference):
    assert_queries_match_duckdb(_session("cpu"), reference, QUERIES, exact_types=True)


@pytest.mark.cpu_case_in("test_factorial_matches_duckdb_on_cpu")
def test_factorial_matches_duckdb_on_each_device(device_name, reference):
    assert_queries_match_duckdb(_session(device_name), reference, QUERIES[:1], exact_types=True)


@pytest.mark.parametrize("sql, message", [
    ("SELECT factorial(n - 1) AS f FROM t", "factorial of a negative number is undefined"),
    ("SELECT factorial(n + 14) AS f FROM t", "Value out of range"),
])
def test_factorial_raises_where_duckdb_raises(sql, message, reference):
    with pytest.raises(Exception, match=message):
        reference.sql(sql).fetchall()
    with pytest.raises(ExecutionError, match=message):
        _session("cpu").sql(sql)


def test_factorials_past_twenty_raise_a_named_error_and_a_bigint_is_refused():
    with pytest.raises(ExecutionError, match="exceeds the engine's 64-bit HUGEINT storage"):
        _session("cpu").sql("SELECT factorial(n + 1) AS f FROM t")
    with pytest.raises(PlanError, match=r"factorial\(\) takes an INTEGER.*line 1, column"):
        _session("cpu").sql("SELECT factorial(n::BIGINT) AS f FROM t")
