"""SQL arguments and clauses the engine does not run are refused with the construct and its position, never dropped.

Issue 28, item 6: ``LIMIT 10%`` returned every row (the planner read the 10
as a row count... of nothing: the percent option was dropped), and ``max(v, 2)``
/ ``min(v, 2)`` returned max(v) / min(v) where DuckDB returns the two largest /
smallest values as a list. An argument or clause the planner does not read is
refused as unsupported SQL, naming what it is; nothing is silently ignored.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.sql import SqlError, plan_sql

CATALOG = {"t": pa.schema([("a", pa.int32()), ("b", pa.float64()), ("s", pa.string())])}


@pytest.mark.parametrize("sql, construct, column", [
    ("SELECT a FROM t LIMIT 10%", "PERCENT", 23),
    ("SELECT a FROM t ORDER BY a LIMIT 50 PERCENT", "PERCENT", 34),
    ("SELECT max(a, 2) FROM t", "max(x, n)", 15),
    ("SELECT s, min(b, 3) AS m FROM t GROUP BY s", "min(x, n)", 18),
    ("SELECT count(a, b) FROM t", "more than one argument", 8),
    ("SELECT sum(a ORDER BY b) FROM t", "ORDER BY inside sum", 8),
    ("SELECT a FROM t ORDER BY a WITH FILL", "WITH FILL", 26),
    ("SELECT a FROM t FOR UPDATE", "FOR UPDATE", None),
    # an ASOF join counted as an inner join on its inequality, a POSITIONAL join as a cross join
    ("SELECT count(*) FROM t ASOF JOIN t u ON t.a >= u.a", "ASOF JOIN", None),
    ("SELECT count(*) FROM t POSITIONAL JOIN t u", "POSITIONAL JOIN", None),
])
def test_unplanned_arguments_and_clauses_are_refused(sql, construct, column):
    with pytest.raises(SqlError, match="unsupported SQL") as raised:
        plan_sql(sql, CATALOG)
    assert construct in str(raised.value)
    if column is not None:
        assert (raised.value.line, raised.value.column_number) == (1, column)


@pytest.mark.parametrize("sql, construct", [
    ("SELECT a FROM t SORT BY a", "SORT BY"),
    ("SELECT a FROM t DISTRIBUTE BY a", "DISTRIBUTE BY"),
    ("SELECT a FROM t CLUSTER BY a", "CLUSTER BY"),
])
def test_spark_clauses_the_planner_does_not_run_are_refused(sql, construct):
    with pytest.raises(SqlError, match="unsupported SQL") as raised:
        plan_sql(sql, CATALOG, dialect="spark")
    assert construct in str(raised.value)


def test_hints_and_plain_aggregates_still_plan():
    plan_sql("SELECT /*+ BROADCAST(t) */ max(a), min(b), count(*) FROM t", CATALOG, dialect="spark")
    plan_sql("SELECT s, max(a) FILTER (WHERE b > 1) FROM t GROUP BY s ORDER BY s LIMIT 2", CATALOG)


@pytest.mark.parametrize("sql, operator", [  # (the bit operators are planned over integers since b816ea3)
    ("SELECT b << 2 FROM t", "'<<'"),
    ("SELECT b >> 2 FROM t", "'>>'"),
    ("SELECT b & 2 FROM t", "'&'"),
])
def test_operators_refused_for_their_operands_are_named_as_sql_spells_them(sql, operator):
    with pytest.raises(SqlError, match="needs integers") as raised:
        plan_sql(sql, CATALOG)
    assert operator in str(raised.value) and raised.value.line == 1


PARENTHESIZED = [
    "(SELECT a FROM t) LIMIT 1",
    "(SELECT a, s FROM t) ORDER BY a DESC NULLS LAST",
    "SELECT count(*) AS n FROM ((SELECT a FROM t) LIMIT 2) d",
    "((SELECT a, b FROM t ORDER BY b DESC) LIMIT 2)",
    "(SELECT a FROM t ORDER BY a LIMIT 3) ORDER BY a DESC LIMIT 1 OFFSET 1",
    "SELECT count(*) AS n FROM t WHERE a IN ((SELECT a FROM t ORDER BY a) LIMIT 1)",
    "(SELECT s, count(*) AS n FROM t GROUP BY s) ORDER BY n DESC, s",
    # ORDER BY inside a subquery names the subquery's own output (it was taken for an outer column)
    "SELECT a FROM t WHERE a IN (SELECT a FROM t ORDER BY a DESC LIMIT 1)",
    "SELECT a, (SELECT max(b) FROM t ORDER BY 1 LIMIT 1) AS m FROM t",
    # GROUP BY (): one group of everything, as no GROUP BY
    "SELECT count(*) AS n, sum(a) AS s FROM t GROUP BY ()",
]


@pytest.mark.parametrize("sql", PARENTHESIZED)
def test_clauses_after_a_parenthesized_query_apply(sql, device_name):
    """``(SELECT a FROM t) LIMIT 1`` returned every row: unwrapping the parentheses dropped the LIMIT."""
    import duckdb

    from duckdb_reference import assert_same_rows, duckdb_table
    from gpu_engine import Session

    table = pa.table({"a": pa.array([3, 1, None, 2], pa.int32()), "b": [0.5, 2.5, 1.5, None],
                      "s": ["x", "y", "x", None]})
    session = Session(device=device_name)
    session.register("t", table)
    connection = duckdb.connect()
    connection.register("t", table)
    assert_same_rows(session.sql(sql), duckdb_table(connection, sql), ordered="ORDER BY" in sql)
