"""Subqueries in HAVING (and QUALIFY) as typed predicates of the Filter above the aggregation, and their joins.

The SQL planner builds ``HAVING k IN (SELECT ...)``, ``HAVING [NOT] EXISTS (... u.k = t.k)`` and ``HAVING sum(v) >
(SELECT max(w) FROM u WHERE u.k = t.k)`` as a Filter over the Aggregation holding an
:class:`~gpu_engine.plans.subqueries.InSubquery` / ``Exists`` / ``ScalarSubquery`` (an uncorrelated EXISTS a count
compared with 0); the optimizer's decorrelation rule (also with the optimizer off) joins the groups: semi, anti,
null-aware anti (NOT IN) and hash joins on the grouping keys. ``IN (subquery)`` in HAVING was refused before, the
correlated forms were LEFT-joined derived tables of the sqlglot tree. Against DuckDB: NULL keys and a NULL in a NOT
IN list, an empty subquery input, an empty outer input, COUNT over no rows, duplicate keys, ROLLUP, an aggregate
on the left of IN; hand-built plans and their JSON form too.
"""

from __future__ import annotations

import pytest

from duckdb_reference import (assert_built_plans_match_duckdb, assert_same_rows, duckdb_table, duckdb_with_tables,
                              session_with_tables)
from gpu_engine.optimizer import optimize_plan, required_rewrites
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, walk
from gpu_engine.plans.nodes import AggregationNode, FilterNode, HashJoinNode, walk_plan
from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.plans.subqueries import Exists, InSubquery, OuterColumn, ScalarSubquery, is_subquery
from subquery_tables import BOOL, I64, TABLES

SQL = [
    # IN / NOT IN over an uncorrelated subquery: u.k holds a NULL (NOT IN keeps no group), e is empty
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING k IN (SELECT k FROM u)",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING k NOT IN (SELECT k FROM u)",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING k NOT IN (SELECT k FROM u WHERE k IS NOT NULL)",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING k IN (SELECT k FROM e)",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING k NOT IN (SELECT k FROM e)",
    # an aggregate (and an output name) on the left of IN; a global aggregate, over an empty input too
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING sum(v) IN (SELECT w FROM u)",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING s + 1 NOT IN (SELECT w + 1 FROM u WHERE w IS NOT NULL)",
    "SELECT count(*) AS c FROM t HAVING count(*) IN (SELECT w + 2 FROM u)",
    "SELECT count(*) AS c FROM e HAVING count(*) NOT IN (SELECT w FROM u WHERE w > 1)",
    # EXISTS: uncorrelated (a count), correlated on a grouping key, beside other conjuncts; correlated IN
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING EXISTS (SELECT 1 FROM u WHERE u.w > 40)",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING NOT EXISTS (SELECT 1 FROM e)",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING EXISTS (SELECT 1 FROM u WHERE u.k = t.k)",
    "SELECT k, sum(v) AS s FROM t GROUP BY k "
    "HAVING sum(v) > 20 AND k IN (SELECT k FROM u) AND NOT EXISTS (SELECT 1 FROM s WHERE s.k = t.k)",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING k IN (SELECT k FROM u WHERE u.w > 4 AND u.k = t.k)",
    "SELECT k, sum(v) AS s FROM t GROUP BY ROLLUP (k) HAVING k IN (SELECT k FROM u)",
    # a scalar aggregate correlated on a grouping key: COUNT over no rows is 0, what arithmetic makes of it
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING sum(v) > (SELECT max(w) FROM u WHERE u.k = t.k)",
    "SELECT k, count(*) AS c FROM t GROUP BY k HAVING count(*) < (SELECT count(*) FROM u WHERE u.k = t.k)",
    "SELECT k, count(*) AS c FROM t GROUP BY k HAVING count(*) <= (SELECT count(*) FROM e WHERE e.k = t.k) + 1",
    # QUALIFY's correlated aggregate
    "SELECT k, v, row_number() OVER (ORDER BY v) AS r FROM t QUALIFY v > (SELECT max(w) FROM u WHERE u.k = t.k)",
]


@pytest.mark.parametrize("optimize", [True, False])
def test_sql_having_subqueries_answer_as_duckdb(optimize):
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, optimize=optimize)
    with duckdb_with_tables(TABLES) as reference:
        for sql in SQL:
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


def test_sql_having_in_answers_as_duckdb_on_cuda_sim():
    session = session_with_tables(TABLES, split_rows=3, device="cuda-sim", drivers=1, compile_mode="lowest")
    with duckdb_with_tables(TABLES) as reference:
        for sql in (SQL[1], SQL[13]):
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


def _filter_subqueries(plan):
    """Return (the typed subqueries of Filters standing above an Aggregation, whether any Filter holds one)."""
    found = []
    for node in walk_plan(plan):
        if isinstance(node, FilterNode) and any(isinstance(n, AggregationNode) for n in walk_plan(node.source)):
            found.extend(e for e in walk(node.predicate) if is_subquery(e))
    return found


def test_the_sql_plan_holds_typed_predicates_above_the_aggregation_and_the_rule_joins_them():
    session = session_with_tables(TABLES, device="cpu")
    for sql, kind, join_types in ((SQL[0], InSubquery, {"left_semi"}), (SQL[1], InSubquery, {"null_aware_anti"}),
                                  (SQL[11], Exists, {"left_semi"}), (SQL[15], ScalarSubquery, {"inner", "left"})):
        plan = session.sql_plan(sql)
        found = _filter_subqueries(plan)
        assert [type(e) for e in found] == [kind], sql
        for decorrelated in (optimize_plan(plan), required_rewrites(plan)):
            assert not _filter_subqueries(decorrelated), sql
            types = {n.join_type.replace("right_", "left_").replace("right", "left")
                     for n in walk_plan(decorrelated) if isinstance(n, HashJoinNode)}
            assert types & join_types, (sql, types)


def _plans(catalog):
    """Return name -> (hand-built Filter over an Aggregation of t holding a typed subquery, DuckDB's SQL)."""
    ids = PlanNodeIdGenerator()

    def grouped(predicate):
        return (PlanBuilder(catalog, id_generator=ids).table_scan("t").aggregation(["k"], ["max(v) AS s"])
                .filter(predicate).plan())

    keys = PlanBuilder(catalog, id_generator=ids).table_scan("u").project([("uk", ColumnRef("k", I64))]).plan()
    keyed = BinaryOp("eq", ColumnRef("uk", I64), OuterColumn("k", I64), BOOL)
    counts = (PlanBuilder(catalog, id_generator=ids).table_scan("u").aggregation(["k"], ["count(*) AS n"])
              .project([("uk", ColumnRef("k", I64)), ("n", ColumnRef("n", I64))]).plan())
    return {
        "not_in": (grouped(InSubquery(ColumnRef("k", I64), keys, "uk", negated=True)),
                   "SELECT k, max(v) AS s FROM t GROUP BY k HAVING k NOT IN (SELECT k FROM u)"),
        "in": (grouped(InSubquery(ColumnRef("k", I64), keys, "uk")),
               "SELECT k, max(v) AS s FROM t GROUP BY k HAVING k IN (SELECT k FROM u)"),
        "not_exists": (grouped(Exists(keys, keyed, negated=True)),
                       "SELECT k, max(v) AS s FROM t GROUP BY k HAVING NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k)"),
        "count_per_key": (grouped(BinaryOp("lt", ColumnRef("s", I64), BinaryOp(
            "mul", ScalarSubquery(counts, "n", I64, keyed), ColumnRef("s", I64), I64), BOOL)),
            "SELECT k, max(v) AS s FROM t GROUP BY k "
            "HAVING max(v) < (SELECT count(*) FROM u WHERE u.k = t.k) * max(v)"),
    }


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_hand_built_having_subqueries_answer_as_duckdb(device):
    session = session_with_tables(TABLES, split_rows=3, device=device, drivers=2, compile_mode="lowest")
    plans = _plans(session.catalog)
    names = list(plans) if device == "cpu" else ["not_in"]
    assert_built_plans_match_duckdb(session, TABLES, plans, names, json_round_trip=device == "cpu")
