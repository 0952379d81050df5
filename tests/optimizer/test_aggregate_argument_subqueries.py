"""Scalar subqueries inside an aggregate's arguments, computed per input row below the aggregation.

``sum(CASE WHEN v > (SELECT avg(w) FROM u) THEN 1 ELSE 0 END)`` (or a subquery correlated by column equalities,
``(SELECT max(w) FROM u WHERE u.k = t.k)``) reads the subquery's value for every row it aggregates: the SQL
planner projects each such subquery beside the input's columns as a typed
:class:`~gpu_engine.plans.subqueries.ScalarSubquery` of a Project under the Aggregation, which the optimizer's
decorrelation rule joins there (a nested-loop join with an uncorrelated one's single row, a left hash join on a
correlated one's keys, COUNT's 0 for a key without rows). The uncorrelated form was refused ("an aggregate inside an
aggregate"), the correlated one a LEFT-joined derived table of the sqlglot tree. Against DuckDB: NULL keys, an
empty subquery input, an empty outer input, duplicate keys, DISTINCT and FILTER, the same aggregate in SELECT,
HAVING and ORDER BY, and DuckDB's error for a subquery of several rows.
"""

from __future__ import annotations

import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.errors import ExecutionError
from gpu_engine.optimizer import optimize_plan, required_rewrites
from gpu_engine.plans.expressions import walk
from gpu_engine.plans.nodes import (AggregationNode, HashJoinNode, NestedLoopJoinNode, ProjectNode, walk_plan)
from gpu_engine.plans.subqueries import ScalarSubquery
from subquery_tables import TABLES

SQL = [
    "SELECT k, sum(CASE WHEN v > (SELECT avg(w) FROM u) THEN 1 ELSE 0 END) AS s FROM t GROUP BY k",
    "SELECT k, sum(CASE WHEN v > (SELECT max(w) FROM u WHERE u.k = t.k) THEN 1 ELSE 0 END) AS s FROM t GROUP BY k",
    # COUNT over no rows is 0 per input row; an empty subquery input; a global aggregate, over an empty input too
    "SELECT k, count(*) AS c, sum(v + (SELECT count(*) FROM u WHERE u.k = t.k)) AS s FROM t GROUP BY k",
    "SELECT sum(v * (SELECT count(*) FROM e WHERE e.k = t.k)) AS s, max((SELECT max(w) FROM u)) AS m FROM t",
    "SELECT sum((SELECT max(w) FROM u)) AS m, count(*) AS c FROM e",
    # the same aggregate in SELECT and HAVING, in ORDER BY; DISTINCT and FILTER
    "SELECT k, sum(CASE WHEN v > (SELECT avg(w) FROM u) THEN 1 ELSE 0 END) AS s FROM t GROUP BY k "
    "HAVING sum(CASE WHEN v > (SELECT avg(w) FROM u) THEN 1 ELSE 0 END) > 0",
    "SELECT k, count(DISTINCT v + (SELECT max(w) FROM u WHERE u.k = t.k)) AS c FROM t GROUP BY k",
    "SELECT k, sum(v) FILTER (WHERE v > (SELECT avg(w) FROM u)) AS s FROM t GROUP BY k",
]
ORDERED = ("SELECT k FROM t GROUP BY k ORDER BY sum(CASE WHEN v > (SELECT max(w) FROM u WHERE u.k = t.k) THEN v END) "
           "NULLS FIRST, k NULLS FIRST")


@pytest.mark.parametrize("optimize", [True, False])
def test_subqueries_inside_aggregates_answer_as_duckdb(optimize):
    # The lowest tier: what is checked is the planned subquery forms, not their fused kernels (compiled anew in a
    # fresh CI for every text; the tiers' equality has its own suites).
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, optimize=optimize,
                                  compile_mode="lowest")
    with duckdb_with_tables(TABLES) as reference:
        for sql in SQL:
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
        assert session.sql(ORDERED).to_pylist() == duckdb_table(reference, ORDERED).to_pylist()


def test_a_subquery_of_several_rows_inside_an_aggregate_fails_as_in_duckdb():
    session = session_with_tables(TABLES, device="cpu")
    sql = "SELECT sum((SELECT w FROM u)) AS m FROM t"
    with duckdb_with_tables(TABLES) as reference:
        with pytest.raises(Exception, match="More than one row"):
            duckdb_table(reference, sql)
    with pytest.raises(ExecutionError, match="more than one row"):
        session.sql(sql)


def test_a_subquery_inside_an_aggregate_answers_as_duckdb_on_cuda_sim():
    session = session_with_tables(TABLES, split_rows=3, device="cuda-sim", drivers=1, compile_mode="lowest")
    with duckdb_with_tables(TABLES) as reference:
        assert_same_rows(session.sql(SQL[2]), duckdb_table(reference, SQL[2]))


def _below_aggregation(plan, kind):
    """Return the nodes of ``kind`` under an Aggregation of ``plan``."""
    return [n for a in walk_plan(plan) if isinstance(a, AggregationNode) for n in walk_plan(a.source)
            if isinstance(n, kind)]


def test_the_subquery_is_a_project_below_the_aggregation_and_the_rule_joins_it_there():
    session = session_with_tables(TABLES, device="cpu")
    for sql, join in ((SQL[0], NestedLoopJoinNode), (SQL[2], HashJoinNode)):
        plan = session.sql_plan(sql)
        held = [e for p in _below_aggregation(plan, ProjectNode) for x in p.expressions for e in walk(x)
                if isinstance(e, ScalarSubquery)]
        assert len(held) == 1, sql
        for decorrelated in (optimize_plan(plan), required_rewrites(plan)):
            assert _below_aggregation(decorrelated, join), sql
