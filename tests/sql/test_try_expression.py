"""DuckDB's ``TRY(expr)``: the expression, NULL on each row where it raises, through Session.sql against DuckDB.

It was refused ("unsupported function 'try'"). The evaluator computes the operand on all rows, and where that
raises, on the rows apart (gpu_engine/expressions/evaluate.py ``_try``): casts of bad text, overflow, integer
division by zero, substring bounds beyond DuckDB's range; in SELECT, WHERE, inside aggregates and CASE, with
NULLs, several batches and an empty table; a subexpression shared by two TRYs is not computed outside them.
Aggregates and volatile functions inside TRY are refused, as DuckDB's binder refuses them.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.errors import PlanError

T = pa.table({
    "id": pa.array(range(8), pa.int32()),
    "s": pa.array(["1", "x", None, "300", "-5", "9999999999", "", "42"]),
    "k": pa.array([1, 0, 2, None, 4, 5, -1, 3], pa.int32()),
})
TABLES = {"t": T, "e": T.slice(0, 0)}

QUERIES = [
    "SELECT id, TRY(CAST(s AS INTEGER)) AS a, TRY(CAST(s AS TINYINT) + k) AS b FROM t",
    "SELECT id, TRY(CAST(s AS BIGINT) * 100000000000000000) AS a, TRY(100 // k) AS b, TRY(k) AS c FROM t",
    "SELECT id FROM t WHERE TRY(CAST(s AS INTEGER)) > 0",
    "SELECT sum(TRY(CAST(s AS INTEGER) + 1)) AS a, sum(TRY(CAST(s AS INTEGER) + 2)) AS b, count(TRY(CAST(s AS "
    "SMALLINT))) AS c FROM t",
    "SELECT id, TRY(CASE WHEN k > 0 THEN CAST(s AS INTEGER) END) AS a, TRY(substr(s, k * 4294967295)) AS b FROM t",
    "SELECT id, TRY(CAST(s AS INTEGER)) AS a FROM e",
    "SELECT TRY(NULL) AS a, TRY(1 + 2) AS b",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def test_try_matches_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, device="cpu", batch_rows=5)
    assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


def test_try_on_each_device(device_name, reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), reference, QUERIES[:1],
                                exact_types=True)


@pytest.mark.parametrize("sql, message", [
    ("SELECT TRY(sum(k)) AS a FROM t", "aggregates are not allowed inside the TRY expression"),
    ("SELECT TRY(random() + k) AS a FROM t", "TRY can not be used in combination with a volatile function"),
])
def test_what_duckdb_refuses_inside_try_is_refused(reference, sql, message):
    with pytest.raises(Exception, match=message):
        reference.sql(sql).fetchall()
    with pytest.raises(PlanError, match=message):
        session_with_tables(TABLES, device="cpu").sql(sql)
