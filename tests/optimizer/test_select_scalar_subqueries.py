"""Scalar subqueries in SELECT and ORDER BY as typed expressions of a Project, and their decorrelation.

The SQL planner builds ``SELECT a, (SELECT agg(...) FROM u WHERE u.k = t.k) FROM t`` (or over a grouping key of an
aggregating query, or uncorrelated) as a Project holding a
:class:`~gpu_engine.plans.subqueries.ScalarSubquery`; the optimizer rule (gpu_engine.optimizer.decorrelation, also
with the optimizer off) joins it under the Project: a left hash join on the correlation keys, an outer row meeting
no row reading the value over no rows (COUNT's 0 for an aggregation grouped by the keys, through the arithmetic
above it; NULL otherwise), or a nested-loop join with an uncorrelated subquery's EnforceSingleRow side. Against
DuckDB: NULL keys, an empty subquery input, COUNT over no rows, duplicate outer keys, keys of two integer widths;
hand-built plans and their JSON form too.
"""

from __future__ import annotations

import pytest

from duckdb_reference import (assert_built_plans_match_duckdb, assert_same_rows, duckdb_table, duckdb_with_tables,
                              session_with_tables)
from gpu_engine.errors import PlanError
from gpu_engine.optimizer import optimize_plan, required_rewrites
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Literal, walk
from gpu_engine.plans.nodes import HashJoinNode, NestedLoopJoinNode, ProjectNode, walk_plan
from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.plans.subqueries import Exists, OuterColumn, ScalarSubquery
from subquery_tables import BOOL, I64, TABLES

SQL = [
    "SELECT k, v, (SELECT max(w) FROM u WHERE u.k = t.k) AS m FROM t",
    # COUNT over no rows is 0 (keys 2, 5 and NULL), and what the arithmetic around it makes of it
    "SELECT k, (SELECT count(*) FROM u WHERE u.k = t.k) AS c, (SELECT count(w) + 1 FROM u WHERE u.k = t.k) AS d "
    "FROM t",
    "SELECT k, v + (SELECT sum(w) FROM u WHERE u.k = t.k AND u.w > 4) AS x FROM t",
    # an empty subquery input: every key without rows
    "SELECT k, (SELECT count(*) FROM e WHERE e.k = t.k) AS c, (SELECT max(w) FROM e WHERE e.k = t.k) AS m FROM t",
    # keys of two integer widths; two correlation keys
    "SELECT k, (SELECT sum(w) FROM s WHERE s.k = t.k) AS x FROM t",
    "SELECT k, v, (SELECT count(*) FROM u WHERE u.k = t.k AND u.w = t.v - 5) AS c FROM t",
    # an aggregating query: the subquery reads a grouping key, after the aggregation
    "SELECT k, sum(v) AS s, (SELECT count(*) FROM u WHERE u.k = t.k) AS c FROM t GROUP BY k",
    "SELECT k, count(*) + (SELECT max(w) FROM u WHERE u.k = t.k) AS x FROM t GROUP BY k",
    # ORDER BY a subquery, the same one in SELECT (computed once), and uncorrelated ones
    "SELECT k, v FROM t ORDER BY (SELECT count(*) FROM u WHERE u.k = t.k) DESC, v NULLS FIRST",
    "SELECT v, (SELECT max(w) FROM u WHERE u.k = t.k) AS m FROM t "
    "ORDER BY (SELECT max(w) FROM u WHERE u.k = t.k) NULLS FIRST, v NULLS FIRST",
    "SELECT k, (SELECT max(w) FROM u) AS m, (SELECT count(*) FROM e) AS c, (SELECT max(w) FROM e) AS n FROM t",
    "SELECT k, v + (SELECT max(w) FROM e) AS x, (SELECT min(w) FROM u) AS y FROM t",
]


@pytest.mark.parametrize("optimize", [True, False])
def test_sql_scalar_subqueries_in_select_answer_as_duckdb(optimize):
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, optimize=optimize)
    with duckdb_with_tables(TABLES) as reference:
        for sql in SQL:
            ordered = "ORDER BY" in sql
            expected = duckdb_table(reference, sql)
            got = session.sql(sql)
            if ordered:
                assert got.to_pylist() == expected.to_pylist(), sql
            else:
                assert_same_rows(got, expected)


def _project_subqueries(plan):
    return [e for n in walk_plan(plan) if isinstance(n, ProjectNode) for x in n.expressions for e in walk(x)
            if isinstance(e, ScalarSubquery)]


def test_the_sql_plan_holds_the_subquery_in_a_project_and_the_rule_joins_it():
    session = session_with_tables(TABLES, device="cpu")
    for sql, correlated, join in ((SQL[1], True, HashJoinNode), (SQL[6], True, HashJoinNode),
                                  (SQL[-1], False, NestedLoopJoinNode)):
        plan = session.sql_plan(sql)
        found = _project_subqueries(plan)
        assert found and all((s.correlation is not None) == correlated for s in found), sql
        assert not any(isinstance(n, (HashJoinNode, NestedLoopJoinNode)) for n in walk_plan(plan)), sql
        for decorrelated in (optimize_plan(plan), required_rewrites(plan)):
            assert not _project_subqueries(decorrelated), sql
            joins = [n for n in walk_plan(decorrelated) if isinstance(n, join)]
            assert len(joins) == len(found), sql
            if correlated:
                assert {j.join_type for j in joins} == {"left"}, sql


def _col(name, dtype=I64):
    return ColumnRef(name, dtype)


def _plans(catalog):
    """Return name -> (hand-built plan over t projecting a ScalarSubquery, the SQL DuckDB answers it with)."""
    ids = PlanNodeIdGenerator()

    def over_t(*values):
        return PlanBuilder(catalog, id_generator=ids).table_scan("t").project(
            ["k", *[(f"x{n}", value) for n, value in enumerate(values)]]).plan()

    def per_key(table, aggregate):
        return (PlanBuilder(catalog, id_generator=ids).table_scan(table)
                .aggregation(["k"], [f"{aggregate} AS x"]).plan())

    keyed = BinaryOp("eq", _col("k"), OuterColumn("k", I64), BOOL)
    count = ScalarSubquery(per_key("u", "count(*)"), "x", I64, keyed)
    top = PlanBuilder(catalog, id_generator=ids).table_scan("u").aggregation([], ["max(w) AS x"]).plan()
    rows = PlanBuilder(catalog, id_generator=ids).table_scan("u").filter("w > 10").plan()  # one row a key here
    return {
        "count_and_count_plus_one": (
            over_t(count, BinaryOp("add", count, Literal(1, I64), I64)),
            "SELECT k, (SELECT count(*) FROM u WHERE u.k = t.k) AS x0, "
            "(SELECT count(*) FROM u WHERE u.k = t.k) + 1 AS x1 FROM t"),
        "max_over_empty": (over_t(ScalarSubquery(per_key("e", "max(w)"), "x", I64, keyed)),
                           "SELECT k, (SELECT max(w) FROM e WHERE e.k = t.k) AS x0 FROM t"),
        "uncorrelated": (over_t(BinaryOp("add", _col("v"), ScalarSubquery(top, "x", I64), I64)),
                         "SELECT k, v + (SELECT max(w) FROM u) AS x0 FROM t"),
        "rows_of_a_scan": (over_t(ScalarSubquery(rows, "w", I64, keyed)),
                           "SELECT k, (SELECT w FROM u WHERE w > 10 AND u.k = t.k) AS x0 FROM t"),
    }


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_hand_built_projected_scalar_subqueries_answer_as_duckdb(device):
    session = session_with_tables(TABLES, split_rows=3, device=device, drivers=2, compile_mode="lowest")
    plans = _plans(session.catalog)
    names = list(plans) if device == "cpu" else ["count_and_count_plus_one"]
    assert_built_plans_match_duckdb(session, TABLES, plans, names, json_round_trip=device == "cpu")
