"""EXISTS / IN under OR, NOT and as values: typed predicates the decorrelation rule makes mark joins.

A :class:`~gpu_engine.plans.subqueries.Exists` or :class:`~gpu_engine.plans.subqueries.InSubquery` that is not a
conjunct of its Filter (under OR, under NOT, inside a CASE) or that stands in a Project's expressions becomes a
match flag per outer row (gpu_engine.optimizer.decorrelation ``_mark``: Velox's left semi project, DataFusion's
``LeftMark``): a left join to the subquery's distinct keys, IN NULL-aware (NULL where nothing matched and the
value or a subquery value of the key is NULL). Against DuckDB: NULLs on both sides of IN, an empty subquery input,
uncorrelated and correlated forms, NOT IN as a value, two levels, OR with a non-subquery disjunct; hand-built plans
and their JSON form, and the same queries through SQL.
"""

from __future__ import annotations

import pytest

from duckdb_reference import (assert_built_plans_match_duckdb, assert_same_rows, duckdb_table, duckdb_with_tables,
                              session_with_tables)
from gpu_engine.errors import PlanError
from gpu_engine.optimizer import required_rewrites
from gpu_engine.plans.expressions import BinaryOp, Case, ColumnRef, Literal, UnaryOp, walk
from gpu_engine.plans.nodes import FilterNode, HashJoinNode, NestedLoopJoinNode, ProjectNode, walk_plan
from gpu_engine.plans.plan_builder import PlanBuilder
from gpu_engine.plans.subqueries import Exists, InSubquery, OuterColumn, is_subquery_predicate
from subquery_tables import BOOL, HandPlans, I32, I64, TABLES


def _col(name, dtype=I64):
    return ColumnRef(name, dtype)


def _plans(catalog):
    """Return name -> (hand-built plan over t holding EXISTS / IN off the conjunct positions, DuckDB's SQL)."""
    shapes = HandPlans(catalog)
    scan, where, select = shapes.scan, shapes.where, shapes.select

    def keyed(outer="k", inner="k"):
        return BinaryOp("eq", _col(inner), OuterColumn(outer, I64), BOOL)

    def either(a, b):
        return BinaryOp("or", a, b, BOOL)

    def negated(a):
        return UnaryOp("not", a, BOOL)

    k_in_u = InSubquery(_col("k"), scan("u"), "k")  # u.k holds a NULL, t.k too
    k_in_u_not_null = InSubquery(_col("k"), scan("u", "k IS NOT NULL"), "k")
    return {
        "in_or_other": (where(either(InSubquery(_col("k"), scan("u"), "k"), BinaryOp("gt", _col("v"), Literal(50, I64),
                                                                                       BOOL))),
                        "SELECT k, v FROM t WHERE k IN (SELECT k FROM u) OR v > 50"),
        "not_in_null_inner": (where(negated(k_in_u)), "SELECT k, v FROM t WHERE NOT (k IN (SELECT k FROM u))"),
        "not_in_or": (where(either(negated(k_in_u_not_null), BinaryOp("eq", _col("v"), Literal(10, I64), BOOL))),
                      "SELECT k, v FROM t WHERE NOT (k IN (SELECT k FROM u WHERE k IS NOT NULL)) OR v = 10"),
        "in_as_value": (select(InSubquery(_col("k"), scan("u"), "k")),
                        "SELECT k, v, k IN (SELECT k FROM u) AS m FROM t"),
        "not_in_as_value_empty": (select(InSubquery(_col("k"), scan("e"), "k", negated=True)),
                                  "SELECT k, v, k NOT IN (SELECT k FROM e) AS m FROM t"),
        "correlated_in_value": (select(InSubquery(_col("v"), scan("u"), "w", keyed())),
                                "SELECT k, v, v IN (SELECT w FROM u WHERE u.k = t.k) AS m FROM t"),
        "correlated_not_in_value": (select(InSubquery(_col("v"), scan("u"), "w", keyed(), negated=True)),
                                    "SELECT k, v, v NOT IN (SELECT w FROM u WHERE u.k = t.k) AS m FROM t"),
        "exists_or_other": (where(either(Exists(scan("u", "w > 4"), keyed()),
                                         BinaryOp("gt", _col("v"), Literal(50, I64), BOOL))),
                            "SELECT k, v FROM t WHERE EXISTS (SELECT * FROM u WHERE w > 4 AND u.k = t.k) OR v > 50"),
        "not_exists_or_null": (where(either(Exists(scan("u"), keyed(), negated=True), UnaryOp("is_null", _col("v"),
                                                                                              BOOL))),
                               "SELECT k, v FROM t WHERE NOT EXISTS (SELECT * FROM u WHERE u.k = t.k) OR v IS NULL"),
        "exists_in_case": (select(Case(((Exists(scan("s"), BinaryOp("eq", _col("k", I32), OuterColumn("k", I64), BOOL)),
                                         Literal(1, I64)),), Literal(0, I64), I64)),
                           "SELECT k, v, CASE WHEN EXISTS (SELECT * FROM s WHERE s.k = t.k) THEN 1 ELSE 0 END AS m "
                           "FROM t"),
        "uncorrelated_exists_empty": (where(either(Exists(scan("e")),
                                                   BinaryOp("eq", _col("k"), Literal(1, I64), BOOL))),
                                      "SELECT k, v FROM t WHERE EXISTS (SELECT * FROM e) OR k = 1"),
        "uncorrelated_exists_value": (select(Exists(scan("u"), negated=True)),
                                      "SELECT k, v, NOT EXISTS (SELECT * FROM u) AS m FROM t"),
        # two levels: the EXISTS's subquery holds an IN under OR (int32 against int64, joined as one type)
        "two_levels": (where(either(Exists(scan("u", either(InSubquery(_col("w"), scan("s"), "w"),
                                                            BinaryOp("gt", _col("w"), Literal(40, I64), BOOL))),
                                           keyed()), BinaryOp("eq", _col("v"), Literal(70, I64), BOOL))),
                       "SELECT k, v FROM t WHERE EXISTS (SELECT * FROM u WHERE u.k = t.k AND (u.w IN (SELECT w FROM s)"
                       " OR u.w > 40)) OR v = 70"),
    }


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_hand_built_mark_joins_answer_as_duckdb(device):
    session = session_with_tables(TABLES, split_rows=3, device=device, drivers=2, compile_mode="lowest")
    plans = _plans(session.catalog)
    names = list(plans) if device == "cpu" else ["correlated_not_in_value", "exists_or_other"]
    assert_built_plans_match_duckdb(session, TABLES, plans, names, json_round_trip=device == "cpu")


def test_a_mark_join_keeps_every_outer_row_once_and_leaves_no_subquery():
    session = session_with_tables(TABLES, device="cpu")
    plan = required_rewrites(_plans(session.catalog)["correlated_in_value"][0])
    assert not any(is_subquery_predicate(e) for n in walk_plan(plan) if isinstance(n, (FilterNode, ProjectNode))
                   for expr in (n.expressions if isinstance(n, ProjectNode) else (n.predicate,)) for e in walk(expr))
    assert {j.join_type for j in walk_plan(plan) if isinstance(j, HashJoinNode)} == {"left"}
    assert session.execute(plan).num_rows == TABLES["t"].num_rows


def test_a_mark_correlation_that_is_not_key_equalities_is_refused_by_name():
    session = session_with_tables(TABLES, device="cpu")
    inner = PlanBuilder(session.catalog).table_scan("u").plan()
    exists = Exists(inner, BinaryOp("lt", _col("k"), OuterColumn("k", I64), BOOL))
    plan = PlanBuilder(session.catalog).table_scan("t").filter(UnaryOp("not", exists, BOOL)).plan()
    with pytest.raises(PlanError, match="under OR, NOT or inside an expression whose correlation is not equalities"):
        required_rewrites(plan)


SQL = [
    "SELECT k, v FROM t WHERE k IN (SELECT k FROM u) OR v > 50",
    "SELECT k, v FROM t WHERE EXISTS (SELECT * FROM u WHERE u.k = t.k AND u.w > 4) OR v > 50",
    "SELECT k, v FROM t WHERE EXISTS (SELECT * FROM u WHERE u.k = t.k) OR EXISTS (SELECT * FROM s WHERE s.k = t.k)",
    "SELECT k, v FROM t WHERE v IN (SELECT w FROM u WHERE u.k = t.k) OR k IN (SELECT k FROM e) OR v IS NULL",
    "SELECT k, v FROM t WHERE (k IN (SELECT k FROM u WHERE w < 10) AND v < 30) OR v > 60",
    # three under one OR chain (left-deep: each bound to its own subquery, not to another's by tree order)
    "SELECT k, v FROM t WHERE (EXISTS (SELECT * FROM e WHERE e.k = t.k) AND v > 0) OR EXISTS (SELECT * FROM u WHERE "
    "u.k = t.k AND u.w > 40) OR (EXISTS (SELECT * FROM s WHERE s.k = t.k) AND v < 25)",
    # under NOT: IN's NULL is not FALSE (a NULL in u.k, in t.k; a correlated NOT IN with NULL values of a key)
    "SELECT k, v FROM t WHERE NOT (k IN (SELECT k FROM u)) OR v > 50",
    "SELECT k, v FROM t WHERE k NOT IN (SELECT k FROM u WHERE k IS NOT NULL) OR v = 10",
    "SELECT k, v FROM t WHERE v NOT IN (SELECT w FROM u WHERE u.k = t.k) OR k = 1",
    "SELECT k, v FROM t WHERE NOT EXISTS (SELECT * FROM u WHERE u.k = t.k) OR v < 15",
    "SELECT k, v FROM t WHERE NOT (EXISTS (SELECT * FROM u WHERE u.k = t.k AND u.w > 10) OR k IN (SELECT k FROM s))",
    # a correlated NOT IN alone (no null-aware anti join keys it), also where the simplifier leaves one from a NOT
    "SELECT k, v FROM t WHERE v NOT IN (SELECT w FROM u WHERE u.k = t.k)",
    "SELECT k, v FROM t WHERE NOT (k IS NULL OR v IN (SELECT w FROM u WHERE u.k = t.k))",
]


@pytest.mark.parametrize("optimize", [True, False])
def test_sql_exists_and_in_under_or_answer_as_duckdb(optimize):
    # The lowest tier: what is checked is the planned subquery forms, not their fused kernels (compiled anew in a
    # fresh CI for every text; the tiers' equality has its own suites).
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, optimize=optimize,
                                  compile_mode="lowest")
    with duckdb_with_tables(TABLES) as reference:
        for sql in SQL:
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


def test_the_sql_plan_holds_the_predicates_under_or_and_the_rule_makes_mark_joins():
    session = session_with_tables(TABLES, device="cpu")
    plan = session.sql_plan(SQL[2])
    filters = [n for n in walk_plan(plan) if isinstance(n, FilterNode)
               and isinstance(n.predicate, BinaryOp) and n.predicate.op == "or"]
    assert len(filters) == 1 and all(isinstance(side, Exists) for side in (filters[0].predicate.left,
                                                                          filters[0].predicate.right))
    joins = [n for n in walk_plan(required_rewrites(plan)) if isinstance(n, HashJoinNode)]
    assert [j.join_type for j in joins] == ["left", "left"]
    for sql in SQL:  # each a typed predicate of a Filter, no join of the sqlglot tree's rewrites
        plan = session.sql_plan(sql)
        assert any(is_subquery_predicate(e) for n in walk_plan(plan) if isinstance(n, FilterNode)
                   for e in walk(n.predicate)), sql
        assert not any(isinstance(n, (HashJoinNode, NestedLoopJoinNode)) for n in walk_plan(plan)), sql
