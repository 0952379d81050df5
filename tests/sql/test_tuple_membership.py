"""``(a, b) [NOT] IN (SELECT x, y ...)`` through Session.sql against DuckDB: row membership, three-valued.

A row IN is TRUE where a row of the subquery equals every column, NULL where one could but for NULLs, FALSE
otherwise (also over no rows); so a NULL in one column of one row does not make every answer NULL, as the
single-column null-aware anti join would. Checked with NULLs on both sides and in each column, empty
subqueries, duplicate rows, set operations and aggregating subqueries, in the WHERE (a conjunct, under OR and
NOT, NOT IN) and in the SELECT list (inside CASE). What stays refused names the construct and its position.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, assert_same_rows, duckdb_table, \
    session_with_tables

from gpu_engine.sql.errors import SqlError

T = pa.table({
    "a": pa.array([1, 2, None, 3, None, 4, 1, 5], pa.int32()),
    "b": pa.array(["x", None, "y", "z", None, "w", "x", "q"]),
    "c": pa.array([1.5, 2.5, None, 4.0, 5.0, None, 1.5, 0.5], pa.float64()),
})
U = pa.table({
    "x": pa.array([1, 2, 3, None, 1, 5], pa.int64()),
    "y": pa.array(["x", "q", None, "w", "x", None]),
    "z": pa.array([1.5, None, 4.0, 2.0, 1.5, 0.5], pa.float64()),
})
TABLES = {"t": T, "u": U}

QUERIES = [
    # values: NULLs in the row, in the subquery's rows, an empty subquery; NOT IN; = ANY / <> ALL spellings
    "SELECT a, b, (a, b) IN (SELECT x, y FROM u) AS m, (a, b) NOT IN (SELECT x, y FROM u) AS n FROM t",
    "SELECT a, b, (a, b) IN (SELECT x, y FROM u WHERE x IS NOT NULL AND y IS NOT NULL) AS m, "
    "(a, b) NOT IN (SELECT x, y FROM u WHERE x > 100) AS e FROM t",
    "SELECT a, b, c, (b, a, c) IN (SELECT y, x, z FROM u UNION SELECT 'y', 2, 2.5) AS m, "
    "(a, b) = ANY (SELECT x, y FROM u) AS p, (a, b) <> ALL (SELECT x, y FROM u) AS q FROM t",
    "SELECT a, CASE WHEN (a, b) IN (SELECT x, y FROM u) THEN 'in' ELSE 'out' END AS w FROM t",
    # WHERE: NOT IN (a NULL in one column keeps the rows other columns tell apart), NOT (... IN ...)
    "SELECT a, b FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u)",
    "SELECT a, b FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u WHERE x IS NOT NULL)",
    "SELECT a, b FROM t WHERE NOT ((a, b) IN (SELECT x, y FROM u WHERE x <> 3))",
    "SELECT b, count(*) AS n, sum(a) AS s FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u WHERE x > 1) GROUP BY b",
    # WHERE where only TRUE counts: a semi join on every column, under OR a mark
    "SELECT a, b, c FROM t WHERE (a, b) IN (SELECT x, y FROM u)",
    "SELECT a, b FROM t WHERE (a + 1, upper(b)) IN (SELECT x + 1, upper(y) FROM u)",
    "SELECT a, b FROM t WHERE (a, b) IN (SELECT max(x), y FROM u GROUP BY y)",
    "SELECT a, b FROM t WHERE (a, b) IN (SELECT x, y FROM u UNION ALL SELECT 3, 'z')",
    "SELECT a, b FROM t WHERE (a, b) IN (SELECT x, y FROM u) OR a = 5",
    "SELECT a, b FROM t WHERE (a, b) IN (SELECT max(x), y FROM u GROUP BY y) OR a IS NULL",
    "SELECT t.a, t.b FROM t JOIN u ON t.a = u.x WHERE (t.a, t.b, t.c) NOT IN (SELECT x, y, z FROM u WHERE x <> 1)",
    # a row over several FROM items, or over the NULL rows an outer join adds (one FROM item's own distinct
    # tuples lack them: it answered FALSE where DuckDB answers NULL)
    "SELECT t.a, w.x, (w.x, w.x) IN (SELECT x, x FROM u) AS m FROM t LEFT JOIN (SELECT x FROM u WHERE x > 1) w "
    "ON t.a = w.x",
    "SELECT t.a, u.y FROM t, u WHERE t.a = u.x AND (t.b, u.y) NOT IN (SELECT y, y FROM u)",
    "SELECT t.a, u.y FROM t FULL JOIN u ON t.a = u.x WHERE (t.a, u.y) NOT IN (SELECT x, y FROM u WHERE x > 1)",
]
SIMULATED = [QUERIES[0], QUERIES[4], QUERIES[8], QUERIES[12]]


def test_row_memberships_match_duckdb_on_cpu(reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device="cpu", fuse=False), reference, QUERIES)


def test_row_memberships_match_duckdb_on_each_device(device_name, reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), reference, SIMULATED)


def test_a_row_in_under_or_is_a_typed_predicate():
    """Where only TRUE counts, ``(a, b) IN (S) OR ...`` is a typed EXISTS of the row's equalities in the Filter
    (the optimizer's mark join), not a LEFT join of S's distinct rows written on the sqlglot tree."""
    from gpu_engine.plans.expressions import walk
    from gpu_engine.plans.nodes import FilterNode, walk_plan
    from gpu_engine.plans.subqueries import Exists

    session = session_with_tables(TABLES, device="cpu")
    for sql in (QUERIES[12], QUERIES[13]):
        plan = session.sql_plan(sql)
        assert any(isinstance(e, Exists) for n in walk_plan(plan) if isinstance(n, FilterNode)
                   for e in walk(n.predicate)), sql


def test_a_correlated_row_in_is_the_exists_of_its_equalities(reference):
    """DuckDB refuses a correlated row IN; where only TRUE counts it is EXISTS with the columns compared."""
    session = session_with_tables(TABLES, device="cpu", fuse=False)
    actual = session.sql("SELECT a, b FROM t WHERE (a, b) IN (SELECT x, y FROM u WHERE u.z > t.c)")
    expected = duckdb_table(reference, "SELECT a, b FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.z > t.c "
                                       "AND u.x = t.a AND u.y = t.b)")
    assert_same_rows(actual, expected)


@pytest.mark.parametrize("sql, message", [
    ("SELECT a, (a, b) NOT IN (SELECT x, y FROM u WHERE u.z > t.c) AS n FROM t", "correlated subquery other than"),
    ("SELECT a FROM t WHERE (a, b) IN (SELECT x FROM u)", "a row of 2 values IN a subquery of 1 columns"),
    ("SELECT b, count(*) AS n, (b, b) IN (SELECT y, y FROM u) AS m FROM t GROUP BY b", "aggregating query"),
    ("SELECT a, (1, 2) IN (SELECT x, x FROM u) AS m FROM t", "reads no column"),
    ("SELECT a FROM t WHERE (a, b) IN (SELECT max(x), y FROM u WHERE u.z > t.c GROUP BY y)",
     "correlated subquery that aggregates"),
])
def test_row_memberships_refused_name_the_construct_and_position(sql, message):
    session = session_with_tables(TABLES, device="cpu")
    with pytest.raises(SqlError) as raised:
        session.sql(sql)
    assert message in str(raised.value) and raised.value.line == 1 and raised.value.column_number is not None
