"""CREATE [OR REPLACE] [TEMP] VIEW, CREATE TABLE AS and DROP VIEW/TABLE in a Session (issue 30 item 7).

Each script runs statement by statement through ``Session.sql`` and through DuckDB, and every result (the
statements' own ``Count``/``Success`` results included) must match: views planned inline where they are read
(over tables, over other views, with column lists, joined, aggregated, read twice, after a view they read is
replaced), tables made by CREATE TABLE AS (empty results and NULLs too) read like registered ones, DROP and
IF [NOT] EXISTS. Then the refusals, each naming the object and pointing into the statement: a name taken, an
object of the other kind, an unknown name, a view reading itself, a query that does not plan.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import rows_mismatch

from gpu_engine.errors import PlanError

TABLE = pa.table({"a": pa.array([1, 2, None, 2, 5], pa.int64()), "b": pa.array(["x", "y", None, "y", "z"])})

SCRIPTS = {
    "views": [
        "CREATE VIEW v AS SELECT a, count(*) FROM t GROUP BY a",
        "SELECT * FROM v",
        "SELECT v.a FROM v WHERE a > 1",
        "SELECT x.a, y.b FROM v x JOIN t y ON x.a = y.a",
        "SELECT count(*) AS n FROM v v1 JOIN v v2 ON v1.a = v2.a",
        "CREATE OR REPLACE VIEW v(k) AS SELECT a, b FROM t WHERE a IS NOT NULL",
        "SELECT * FROM v",
        "CREATE VIEW w AS SELECT k, upper(b) AS u FROM v WHERE k < 5",
        "SELECT u, sum(k) AS s FROM w GROUP BY u",
        "CREATE OR REPLACE VIEW v(k) AS SELECT a + 100, b FROM t",  # w reads the new v
        "SELECT * FROM w",
        "WITH v AS (SELECT 7 AS seven) SELECT * FROM v",  # a CTE of the query hides the view
        "CREATE TEMP VIEW empty_view AS SELECT a FROM t WHERE a > 100",
        "SELECT count(*) AS n, max(a) AS m FROM empty_view",
        "CREATE VIEW lookup(k, name) AS VALUES (1, 'one'), (2, 'two'), (NULL, 'none')",
        "SELECT t.a, lookup.name FROM t LEFT JOIN lookup ON t.a = lookup.k",
        "DROP VIEW lookup",
        "DROP VIEW w",
        "DROP VIEW IF EXISTS w",
        "DROP VIEW v",
        "DROP VIEW empty_view",
    ],
    "tables": [
        "CREATE TABLE c AS SELECT a * 2 AS a2, b FROM t",
        "SELECT * FROM c",
        "SELECT b, sum(a2) AS s FROM c GROUP BY b",
        "CREATE TABLE IF NOT EXISTS c AS SELECT 1 AS one",
        "CREATE OR REPLACE TEMP TABLE c AS SELECT 1 AS one, NULL AS nothing",
        "SELECT * FROM c",
        "CREATE TABLE e AS SELECT a FROM t WHERE a > 100",
        "CREATE TABLE pairs AS VALUES (1, 2.5), (3, NULL)",
        "SELECT col0 + 1 AS k, col1 FROM pairs",
        "DROP TABLE pairs",
        "SELECT count(*) AS n FROM e",
        "CREATE VIEW ve AS SELECT * FROM c",
        "SELECT * FROM ve",
        "DROP TABLE c",
        "DROP TABLE IF EXISTS c",
        "DROP TABLE e",
    ],
}


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_catalog_statements_match_duckdb(script, device_name):
    import duckdb

    from gpu_engine import Session

    session = Session(device=device_name, drivers=2, batch_rows=3)
    session.register("t", TABLE)
    connection = duckdb.connect()
    connection.register("t", TABLE)
    for sql in SCRIPTS[script]:
        expected = connection.sql(sql).to_arrow_table()
        actual = session.sql(sql)
        problem = rows_mismatch(actual, expected)
        assert problem is None, f"{sql}: {problem}"
    connection.close()


def _session():
    from gpu_engine import Session

    session = Session(device="cpu")
    session.register("t", TABLE)
    session.sql("CREATE VIEW v AS SELECT a FROM t")
    session.sql("CREATE VIEW w AS SELECT a FROM v")
    session.sql("CREATE TABLE c AS SELECT b FROM t")
    return session


@pytest.mark.parametrize("sql, message, column", [
    ("CREATE VIEW v AS SELECT 1", "view 'v' already exists; write CREATE OR REPLACE VIEW", 13),
    ("CREATE TABLE c AS SELECT 1", "table 'c' already exists; write CREATE OR REPLACE TABLE", 14),
    ("CREATE VIEW t AS SELECT 1", "a table named 't' exists", 13),
    ("CREATE OR REPLACE TABLE v AS SELECT 1", "a view named 'v' exists", 25),
    ("DROP VIEW nope", "unknown view 'nope'", 11),
    ("DROP TABLE nope", "unknown table 'nope'", 12),
    ("DROP VIEW c", "'c' is a table; write DROP TABLE", 11),
    ("DROP TABLE w", "'w' is a view; write DROP VIEW", 12),
    ("CREATE OR REPLACE VIEW v AS SELECT a FROM w", "view 'v' reads itself (v -> w -> v)", 43),
    ("CREATE VIEW x AS SELECT a FROM x", "view 'x' reads itself (x -> x)", 32),
    ("CREATE VIEW z AS\n  SELECT zz FROM t", "unknown column 'zz'", 10),
    ("CREATE VIEW z AS SELECT * FROM nope", "unknown table 'nope'", 32),
    ("CREATE VIEW z(p, q) AS SELECT a FROM t", "2 column names for a query of 1 columns", 18),
    ("CREATE TABLE q (a INTEGER)", "needs AS followed by a query", 14),
    ("CREATE MACRO m(x) AS x + 1", "unsupported statement: CREATE MACRO", None),
    ("CREATE VIEW other.v2 AS SELECT 1", "unknown schema", 19),
    ("DROP VIEW v, w", "names 2 objects; drop one at a time", 14),
])
def test_catalog_statements_the_engine_refuses_name_the_object_and_position(sql, message, column):
    session = _session()
    with pytest.raises(PlanError) as info:
        session.sql(sql)
    text = str(info.value)
    assert message in text, text
    if column is not None:
        assert f"column {column})" in text, text
    assert session.sql("SELECT count(*) AS n FROM w").column(0).to_pylist() == [5]  # nothing changed


def test_a_view_is_planned_inline_and_a_query_without_views_is_left_as_written():
    from gpu_engine.sql.views import View, expand_views

    views = {"v": View("v", "SELECT a FROM t", "duckdb", ("a",))}
    assert expand_views("SELECT b FROM t", views, "duckdb") == "SELECT b FROM t"
    assert expand_views("SELECT a FROM v WHERE a > 1", views, "duckdb") == \
        'SELECT a FROM (SELECT * FROM (SELECT a FROM t) AS "v"("a")) AS v WHERE a > 1'
    assert expand_views("SELECT a FROM v AS x", views, "duckdb") == \
        'SELECT a FROM (SELECT * FROM (SELECT a FROM t) AS "v"("a")) AS x'


@pytest.mark.parametrize("sql, message, line, column", [
    ("SELECT a FROM w WHERE zz > 1", "unknown column 'zz'", 1, 23),
    ("SELECT a FROM w\nJOIN v ON w.a = v.a\nWHERE v.zz > 1", "unknown column 'zz'", 3, 9),
    ("SELECT a FROM t\nWHERE a IN (SELECT b FROM broken)", "in view 'broken': unknown table 'c'", 2, 27),
])
def test_an_error_in_a_query_over_views_points_into_the_text_as_written(sql, message, line, column):
    session = _session()
    session.sql("CREATE VIEW broken AS SELECT b FROM c")
    session.sql("DROP TABLE c")
    for plan in (session.sql, session.sql_plan):
        with pytest.raises(PlanError) as info:
            plan(sql)
        assert message in str(info.value) and f"(line {line}, column {column})" in str(info.value), str(info.value)


def test_registering_a_table_replaces_a_view_of_that_name():
    session = _session()
    session.register("V", pa.table({"a": [7]}))
    assert session.sql("SELECT a FROM v").column(0).to_pylist() == [7]
    assert session.sql("SELECT count(*) AS n FROM w").column(0).to_pylist() == [1]  # w reads the table now


def test_a_view_is_found_by_its_qualified_name():
    session = _session()
    assert session.sql("SELECT count(*) AS n FROM memory.main.v").column(0).to_pylist() == [5]
    assert session.sql("SELECT count(*) AS n FROM main.v AS x").column(0).to_pylist() == [5]


def test_sql_plan_reads_views_too():
    session = _session()
    plan = session.sql_plan("SELECT a FROM w WHERE a = 2")
    assert session.execute(plan).column(0).to_pylist() == [2, 2]
