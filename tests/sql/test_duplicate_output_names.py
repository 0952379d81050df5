"""Two result columns of one name, as DuckDB keeps them: ``SELECT * | DISTINCT *`` over a join, ``SELECT t.a, u.a``.

The plan's columns stay unique (``a``, ``a_1``, as DuckDB names repeats inside a derived table); Session.sql
shows the result under the names as written. Inside a derived table or CTE the repeats are ``a_1``, as DuckDB
names them (``s.a`` is the first ``a``). ``ORDER BY <n>`` naming a repeated name (which the qualifier leaves
a number) sorts by that column, not by a constant. Checked against DuckDB with the column names compared.
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.sql.duplicate_output_names import unique_output_names

T = pa.table({
    "a": pa.array([1, 2, None, 4, 2, 7], pa.int32()),
    "b": pa.array(["x", "y", "z", None, "y", "q"]),
})
U = pa.table({
    "x": pa.array([1, 2, None, 4, 7, 2], pa.int64()),
    "a": pa.array([10, 20, 30, None, 50, 20], pa.int32()),
    "b": pa.array(["x", None, "w", "v", "q", None]),
})
TABLES = {"t": T, "u": U}

QUERIES = [
    "SELECT * FROM t JOIN u ON t.a = u.x",
    "SELECT DISTINCT * FROM t JOIN u ON t.a = u.x",
    "SELECT t.*, u.* FROM t, u WHERE t.a = u.x AND u.a > 10",
    "SELECT a, a, a AS a_1 FROM t",
    "SELECT b, count(*) AS n, count(*) AS n FROM t GROUP BY b",
    "SELECT * FROM t LEFT JOIN u ON t.a = u.x UNION ALL SELECT * FROM t JOIN u ON t.a = u.x",
    # a derived table or CTE names repeats a_1 (DuckDB): s.a is the first (it read the last), * over it works
    "SELECT s.a FROM (SELECT t.a, u.a FROM t JOIN u ON t.a = u.x) s",
    "SELECT s.a, s.b_1 FROM (SELECT * FROM t JOIN u ON t.a = u.x) s",
    "SELECT * FROM (SELECT t.a, u.a FROM t JOIN u ON t.a = u.x) s",
    "WITH w AS (SELECT * FROM t JOIN u ON t.a = u.x) SELECT * FROM w WHERE w.a_1 > 10",
    "SELECT * FROM (SELECT t.*, u.a, u.x FROM t JOIN u ON t.a = u.x) s",
]
ORDERED = [
    "SELECT t.a, t.b, u.a FROM t JOIN u ON t.a = u.x ORDER BY 3 DESC, 1 LIMIT 3",
    "SELECT DISTINCT * FROM t JOIN u ON t.a = u.x ORDER BY 4, 1",
]


def test_repeated_output_names_match_duckdb(device_name, reference):
    session = session_with_tables(TABLES, device=device_name, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES if device_name == "cpu" else QUERIES[:2])
    assert_queries_match_duckdb(session, reference, ORDERED, ordered=lambda sql: True)


def test_a_plan_names_repeats_as_duckdb_names_them_in_a_derived_table():
    assert unique_output_names(["a", "b", "a", "a_1", "a"]) == ["a", "b", "a_2", "a_1", "a_3"]
    session = session_with_tables(TABLES, device="cpu")
    plan = session.sql_plan("SELECT t.a, u.a FROM t JOIN u ON t.a = u.x")
    assert list(plan.output_schema.names) == ["a", "a_1"]
    assert session.sql("SELECT t.a, u.a FROM t JOIN u ON t.a = u.x").column_names == ["a", "a"]
