"""GROUP BY keys, aggregate calls, ``grouping()`` arguments, OVER clauses and ORDER BY keys match by the
expression they are, not by the SQL text written: ``"A" + 1`` is the key ``a + 1``, ``(a + 1)`` is ``a + 1``,
``sum("B")`` is ``sum(b)`` (DuckDB's identifiers ignore case and quotes; parentheses are not part of the
expression). ``1 + a`` is not the key ``a + 1``: DuckDB's binder refuses it, and so does the planner.

The planner matched them by generated SQL text (``.sql()``), which told such forms apart and refused the query
("column t.a is not available here", "the argument of grouping() must be a grouping column"), or computed the
same aggregate or window twice; it now matches by :class:`~gpu_engine.sql.planning_context.TreeKey`.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.plans.nodes import AggregationNode, FilterNode, HashJoinNode, TableScanNode, WindowNode
from gpu_engine.sql.errors import SqlError

#: The last row repeats the one before: with ``b`` unique, ``GROUP BY "A", b`` was a projection (unique_groupings).
TABLES = {"t": pa.table({"a": pa.array([1, 1, 2, None, 2, 2], pa.int64()),
                         "b": pa.array([2, 3, None, 5, 7, 7], pa.int64())})}

#: Each refused before (the key or the grouping() argument written apart from the GROUP BY's).
QUERIES = [
    'SELECT "A" + 1 AS k, count(*) AS c, sum(b) AS s FROM t GROUP BY a + 1',
    "SELECT a + 1 AS k, count(b) AS c FROM t GROUP BY (a + 1)",
    'SELECT a, grouping("A") AS g, sum(b) AS s FROM t GROUP BY ROLLUP (a)',
    'SELECT "A" * 2 AS k, sum(b) AS s FROM t GROUP BY CUBE (a * 2) HAVING sum("B") > 0 OR grouping(A * 2) = 1',
]


def test_keys_written_apart_match_as_in_duckdb(device_name):
    queries = QUERIES if device_name == "cpu" else QUERIES[:1]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name, compile_mode="lowest"),
                                    connection, queries)


def test_a_commuted_key_is_refused_as_in_duckdb():
    session = session_with_tables(TABLES, device="cpu", compile_mode="lowest")
    with pytest.raises(SqlError, match="column t.a is not available here"):
        session.sql("SELECT 1 + a AS k, count(*) AS c FROM t GROUP BY a + 1")


def _nodes(plan, kind):
    found, stack = [], [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            found.append(node)
        stack.extend(node.sources)
    return found


def test_an_aggregate_written_twice_apart_is_computed_once():
    session = session_with_tables(TABLES, device="cpu", compile_mode="lowest")
    plan = session.sql_plan('SELECT a, sum(b) AS s FROM t GROUP BY a ORDER BY (sum("B"))')
    assert [len(node.aggregates) for node in _nodes(plan, AggregationNode)] == [1]


def test_a_window_written_twice_apart_is_computed_once():
    session = session_with_tables(TABLES, device="cpu", compile_mode="lowest")
    plan = session.sql_plan('SELECT sum(b) OVER (PARTITION BY "A") AS w, sum(B) OVER (PARTITION BY a) AS v FROM t')
    assert [len(node.functions) for node in _nodes(plan, WindowNode)] == [1]


# The rules the planner runs before it plans a SELECT compared parts of the tree by their SQL text too; the
# rewriter (qualify) leaves a quoted identifier quoted, so a name written "A" in one place and a in another told
# them apart. Each query below was planned otherwise before (refused, or a rule declined to apply).
RULE_TABLES = {**TABLES, "u": pa.table({"c": pa.array([1, 2, 2, 3, None], pa.int64()),
                                        "d": pa.array([10, 20, 30, 40, 50], pa.int64())})}
#: pruned_projections: a projection pruning drops, its column grouped as written apart (was "column t.a is not
#: available here" for both)
PRUNED = ['SELECT x.b FROM (SELECT a AS k, b FROM t GROUP BY "A", b) x',
          'SELECT x.b FROM (SELECT a + 1 AS k, b FROM t GROUP BY ("A" + 1), b) x']
#: one_row_aggregates: sibling one-row aggregates over a table and conditions written apart (were two scans)
SIBLINGS = ('SELECT * FROM (SELECT count(*) AS n, min(b) AS m FROM "T" WHERE "A" < 2 AND b > 2) x, '
            '(SELECT sum(b) AS s FROM t WHERE a >= 2 AND "B" > 2) y')
#: outer_join_filters: two ON equalities of one column written apart carry one filter (was the same filter twice)
LEFT_JOINED = 'SELECT t.b, u.d FROM t LEFT JOIN u ON u.c = t.a AND "U"."C" = t.b WHERE t.a = 2 AND t.b = 2'
#: window_subqueries: the subquery repeats the outer join with its table and filter written apart (was no window)
WINDOWED = ('SELECT u.c, t.b FROM u, t WHERE u.c = t.a AND t."B" > 1 AND t.b = '
            '(SELECT max(t2.b) FROM "T" t2 WHERE t2.a = u.c AND t2.b > 1) ORDER BY u.c')


def test_rules_match_parts_written_apart_as_in_duckdb(device_name):
    queries = PRUNED + [SIBLINGS, LEFT_JOINED, WINDOWED] if device_name == "cpu" else [SIBLINGS, WINDOWED]
    with duckdb_with_tables(RULE_TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(RULE_TABLES, device=device_name, compile_mode="lowest"),
                                    connection, queries)


def test_sibling_aggregates_written_apart_scan_their_table_once():
    session = session_with_tables(RULE_TABLES, device="cpu", compile_mode="lowest")
    assert [node.table_name for node in _nodes(session.sql_plan(SIBLINGS), TableScanNode)] == ["t"]


def test_a_filter_through_left_joins_written_apart_is_added_once():
    plan = session_with_tables(RULE_TABLES, device="cpu", compile_mode="lowest").sql_plan(LEFT_JOINED)
    [scan] = [node for node in _nodes(plan, TableScanNode) if node.table_name == "u"]
    [filtered] = [node for node in _nodes(plan, FilterNode) if scan in node.sources]
    assert str(filtered.predicate) == "(c = 2)"  # once (was "((c = 2) AND (c = 2))")


def test_a_subquery_repeating_the_join_written_apart_is_a_window():
    session = session_with_tables(RULE_TABLES, device="cpu", compile_mode="lowest")
    assert _nodes(session.sql_plan(WINDOWED), WindowNode)


#: predicates.factor_or: the equality every OR branch holds, written apart, is a join key (was a nested-loop join)
OR_JOINED = ('SELECT t.b, u.d FROM t, u WHERE (t."A" = u.c AND u.d > 20) OR (t.a = "U".c AND u.d < 15) '
             'ORDER BY t.b, u.d')


def test_an_equality_common_to_or_branches_written_apart_is_a_join_key():
    session = session_with_tables(RULE_TABLES, device="cpu", compile_mode="lowest")
    assert _nodes(session.sql_plan(OR_JOINED), HashJoinNode)
    with duckdb_with_tables(RULE_TABLES) as connection:
        assert_queries_match_duckdb(session, connection, [OR_JOINED])
