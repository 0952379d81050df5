"""EXISTS / ``x IN (SELECT …)`` used as values (SELECT list, CASE, ORDER BY; inside a CASE, a comparison or a
function in WHERE) from SQL: typed predicates of the Project or Filter, which the decorrelation rule makes mark
joins' flags (IN's NULL-aware), not joins of the sqlglot tree.

Against DuckDB with the optimizer on and off: NULLs on both sides of IN (t.k, u.k, a NULL value of a correlated
key), an empty subquery input, NOT forms, int32 keys against int64, an outer expression as IN's value, grouping
keys of an aggregating query; and the plan the SQL planner emits holds the predicates in its Project, no join.
"""

from __future__ import annotations

import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.optimizer import required_rewrites
from gpu_engine.plans.expressions import walk
from gpu_engine.plans.nodes import FilterNode, HashJoinNode, NestedLoopJoinNode, ProjectNode, walk_plan
from gpu_engine.plans.subqueries import is_subquery_predicate
from subquery_tables import TABLES

SQL = [
    "SELECT k, v, EXISTS (SELECT * FROM u WHERE u.k = t.k) AS f FROM t",
    "SELECT k, v, NOT EXISTS (SELECT * FROM u WHERE u.k = t.k AND u.w > 4) AS f FROM t",
    "SELECT k, v, k IN (SELECT k FROM u) AS f FROM t",
    "SELECT k, v, k NOT IN (SELECT k FROM u) AS f FROM t",
    "SELECT k, v, k IN (SELECT k FROM u WHERE k IS NOT NULL) AS f, k NOT IN (SELECT k FROM e) AS g FROM t",
    "SELECT k, v, v IN (SELECT w FROM u WHERE u.k = t.k) AS f FROM t",
    "SELECT k, v, CASE WHEN EXISTS (SELECT * FROM e WHERE e.k = t.k) THEN 1 ELSE 0 END AS f FROM t",
    "SELECT k, v, CASE WHEN k IN (SELECT k FROM s) THEN 'a' WHEN k IS NULL THEN 'n' ELSE 'b' END AS f FROM t",
    "SELECT k, v, k + 1 IN (SELECT k FROM u) AS f FROM t",
    "SELECT k, v FROM t ORDER BY EXISTS (SELECT * FROM s WHERE s.k = t.k), k, v",
    "SELECT k, EXISTS (SELECT * FROM u WHERE u.k = t.k) AS f, count(*) AS c FROM t GROUP BY k",
    # in WHERE, inside an expression: the flag NULL-aware (a NULL IN is neither TRUE nor FALSE for the CASE)
    "SELECT k, v FROM t WHERE CASE WHEN EXISTS (SELECT * FROM u WHERE u.k = t.k) THEN v > 15 ELSE v < 50 END",
    "SELECT k, v FROM t WHERE CASE WHEN k IN (SELECT k FROM u) THEN 1 WHEN k IS NULL THEN 2 ELSE 0 END = 0",
    "SELECT k, v FROM t WHERE coalesce(k NOT IN (SELECT k FROM u WHERE w > 2), true)",
    "SELECT k, v FROM t WHERE (v IN (SELECT w FROM u WHERE u.k = t.k)) IS NULL",
    "SELECT k, v FROM t WHERE CASE WHEN NOT EXISTS (SELECT * FROM e WHERE e.k = t.k) THEN k IN (SELECT k FROM s) END",
    # an uncorrelated EXISTS under OR or as a value: the rule's row count (over an empty table; filtered)
    "SELECT k, v FROM t WHERE EXISTS (SELECT * FROM e) OR v > 50",
    "SELECT k, v FROM t WHERE NOT EXISTS (SELECT * FROM u WHERE w > 40) OR k = 1",
    "SELECT k, v, EXISTS (SELECT * FROM u WHERE w > 40) OR k = 1 AS f, EXISTS (SELECT * FROM e) AS g FROM t",
]


@pytest.mark.parametrize("optimize", [True, False])
def test_exists_and_in_as_values_answer_as_duckdb(optimize):
    # The lowest tier: what is checked is the planned subquery forms, not their fused kernels (compiled anew in a
    # fresh CI for every text; the tiers' equality has its own suites).
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, optimize=optimize,
                                  compile_mode="lowest")
    with duckdb_with_tables(TABLES) as reference:
        for sql in SQL if optimize else SQL[3:6] + SQL[11:14]:  # (off: the rule runs all the same; a few)
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


def test_exists_and_in_as_values_on_cuda_sim():
    session = session_with_tables(TABLES, device="cuda-sim")
    with duckdb_with_tables(TABLES) as reference:
        for sql in (SQL[3], SQL[5]):
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


def test_the_sql_plan_holds_the_predicates_and_the_rule_makes_mark_joins():
    session = session_with_tables(TABLES, device="cpu")
    for sql in SQL:
        plan = session.sql_plan(sql)
        expressions = [e for n in walk_plan(plan) for e in (
            n.expressions if isinstance(n, ProjectNode) else (n.predicate,) if isinstance(n, FilterNode) else ())]
        assert any(is_subquery_predicate(e) for expr in expressions for e in walk(expr)), sql
        assert not any(isinstance(n, (HashJoinNode, NestedLoopJoinNode)) for n in walk_plan(plan)), sql
        assert any(isinstance(n, HashJoinNode) and n.join_type == "left" or isinstance(n, NestedLoopJoinNode)
                   for n in walk_plan(required_rewrites(plan))), sql  # (uncorrelated EXISTS: a count, one row)
