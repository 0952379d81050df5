"""A text constant that is no value of the compared column's type (``CASE k WHEN 'a'``, ``k = 'a'`` over an int
``k``) fails only where a row reaches the comparison, as in DuckDB.

Fuzz round 7 found them refused while planning ("cannot compare 'a' with int64"). DuckDB binds them (its constant
folding swallows the cast's error) and raises "Could not convert string 'a' to INT64" when a row evaluates the
comparison: over an empty table, in a CASE branch no row reaches, or in a conjunct after a false one it answers.
The constant stays the checked CAST (plans/scalar_translation.py ``_text_constant_as``).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import ExecutionError

T = pa.table({
    "id": pa.array(range(6), pa.int64()),
    "k": pa.array([1, None, 3, 1, -2, 2], pa.int64()),
    "x": pa.array([0.5, None, 2.0, -1.0, 3.0, 1e3]),
})
TABLES = {"t": T, "e": T.slice(0, 0)}

QUERIES = [
    "SELECT id, CASE k WHEN 'a' THEN 1 ELSE 0 END AS c FROM e",
    "SELECT id FROM e WHERE k = 'a' OR k IN ('b', 1)",
    "SELECT k, sum(CASE k WHEN 'a' THEN 1 ELSE 2 END) AS c FROM e GROUP BY k",
    "SELECT id, CASE k WHEN 1 THEN 1 WHEN 'b' THEN 2 END AS c FROM t WHERE k = 1",
    "SELECT id, CASE WHEN k IS NULL OR k < 5 THEN 0 WHEN k = 'b' THEN 2 END AS c FROM t",
    "SELECT id, CASE WHEN false THEN k = 'a' END AS c FROM t",
    "SELECT id FROM t WHERE k > 5 AND k = 'a'",
    "SELECT k, sum(CASE WHEN k > 100 THEN (CASE k WHEN 'a' THEN 1 END) ELSE 2 END) AS c FROM t GROUP BY k",
    "SELECT id FROM e WHERE (x > 100) = 'maybe'",
]

FAILING = [
    "SELECT id, CASE k WHEN 'a' THEN 1 ELSE 0 END AS c FROM t",
    "SELECT id, CASE k WHEN '1' THEN 1 WHEN 'b' THEN 2 ELSE 0 END AS c FROM t",
    "SELECT id, CASE k WHEN NULL THEN 1 WHEN 'x' THEN 3 END AS c FROM t WHERE k IS NULL",
    "SELECT k, sum(CASE k WHEN 'a' THEN 1 ELSE 2 END) AS c FROM t GROUP BY k",
    "SELECT id FROM t WHERE k IN ('a', 1)",
]


@pytest.mark.parametrize("drivers", [1, 2])
def test_unreached_unconvertible_text_answers_as_duckdb(drivers, reference):
    session = session_with_tables(TABLES, split_rows=2, device="cpu", drivers=drivers)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_unreached_unconvertible_text_on_each_device(device_name, reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), reference, QUERIES[3:4])


@pytest.mark.parametrize("sql", FAILING)
def test_a_row_reaching_unconvertible_text_fails_as_duckdb(sql, reference):
    with pytest.raises(Exception, match="Could not convert string"):
        reference.execute(sql).fetchall()
    with pytest.raises(ExecutionError, match="Could not convert string"):
        session_with_tables(TABLES, split_rows=2, device="cpu").sql(sql)
