"""Typed subquery predicates and the decorrelation rule (gpu_engine.optimizer.decorrelation).

A Filter holding ``[NOT] EXISTS`` / ``x [NOT] IN (SELECT …)`` (gpu_engine.plans.subqueries) — planned from SQL or
built by hand with PlanBuilder, or read from JSON — becomes a semi, anti or null-aware anti join on its
correlation's equalities, the other correlated conditions its filter; a key side that is an expression is
projected first. Answers against DuckDB with NULLs on both sides (NOT IN's three-valued logic: a NULL in the
subquery empties it, a NULL outer value is kept only over an empty subquery), also with the optimizer off.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import (assert_built_plans_match_duckdb, assert_same_rows, duckdb_table, duckdb_with_tables,
                              session_with_tables)
from gpu_engine.errors import PlanError
from gpu_engine.optimizer import optimize_plan, required_rewrites
from gpu_engine.optimizer.decorrelation import decorrelate_subqueries
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Literal
from gpu_engine.plans.nodes import FilterNode, HashJoinNode, ProjectNode, walk_plan
from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.plans.subqueries import Exists, InSubquery, OuterColumn

BOOL = pa.bool_()
TABLES = {
    # the last row repeats the one before: with ``v`` unique, a domain over it was a projection (unique_groupings)
    "t": pa.table({"k": pa.array([1, 1, 2, None, 3, 5, 6, 6], pa.int64()),
                   "v": pa.array([10, 20, 30, 40, None, 60, 70, 70], pa.int64())}),
    "u": pa.table({"k": pa.array([1, 3, 3, 4, None, 6], pa.int64()),
                   "w": pa.array([15, 5, 50, 1, 2, None], pa.int64())}),
    "n": pa.table({"k": pa.array([1, 2, None], pa.int64())}),  # NOT IN over it: no row (a NULL in the subquery)
    "e": pa.table({"k": pa.array([], pa.int64()), "w": pa.array([], pa.int64())}),
}


def _eq(a, b):
    return BinaryOp("eq", a, b, BOOL)


def _plans(catalog):
    """Return name -> (hand-built plan over t, the SQL DuckDB answers it with)."""
    ids = PlanNodeIdGenerator()
    col = lambda name: ColumnRef(name, pa.int64())  # noqa: E731
    outer = lambda name: OuterColumn(name, pa.int64())  # noqa: E731

    def sub(table):
        return PlanBuilder(catalog, id_generator=ids).table_scan(table).plan()

    def over_t(predicate):
        return PlanBuilder(catalog, id_generator=ids).table_scan("t").filter(predicate).plan()

    lt = BinaryOp("lt", col("w"), outer("v"), BOOL)
    return {
        "exists_with_a_condition": (over_t(Exists(sub("u"), BinaryOp("and", _eq(col("k"), outer("k")), lt, BOOL))),
                                    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w < t.v)"),
        "not_exists_with_a_condition": (
            over_t(Exists(sub("u"), BinaryOp("and", _eq(outer("k"), col("k")), lt, BOOL), negated=True)),
            "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w < t.v)"),
        "in": (over_t(InSubquery(col("k"), sub("u"), "k")), "SELECT * FROM t WHERE k IN (SELECT k FROM u)"),
        "not_in_nulls_on_both_sides": (over_t(InSubquery(col("k"), sub("u"), "k", negated=True)),
                                       "SELECT * FROM t WHERE k NOT IN (SELECT k FROM u)"),
        "not_in_a_null_in_the_subquery": (over_t(InSubquery(col("k"), sub("n"), "k", negated=True)),
                                          "SELECT * FROM t WHERE k NOT IN (SELECT k FROM n)"),
        "not_in_an_empty_subquery": (over_t(InSubquery(col("k"), sub("e"), "k", negated=True)),
                                     "SELECT * FROM t WHERE k NOT IN (SELECT k FROM e)"),
        "expression_keys": (  # outer.k + 1 = u.k: both sides become join keys, the outer one projected
            over_t(Exists(sub("u"), _eq(BinaryOp("add", outer("k"), Literal(1, pa.int64()), pa.int64()), col("k")))),
            "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE t.k + 1 = u.k)"),
        "beside_another_conjunct": (
            over_t(BinaryOp("and", BinaryOp("gt", col("v"), Literal(15, pa.int64()), BOOL),
                            InSubquery(col("k"), sub("u"), "k"), BOOL)),
            "SELECT * FROM t WHERE v > 15 AND k IN (SELECT k FROM u)"),
    }


def test_each_subquery_predicate_becomes_its_join():
    session = session_with_tables(TABLES, device="cpu")
    plans = _plans(session.catalog)
    expected = {"exists_with_a_condition": "left_semi", "not_exists_with_a_condition": "anti", "in": "left_semi",
                "not_in_nulls_on_both_sides": "null_aware_anti", "not_in_a_null_in_the_subquery": "null_aware_anti",
                "not_in_an_empty_subquery": "null_aware_anti", "expression_keys": "left_semi",
                "beside_another_conjunct": "left_semi"}
    for name, (plan, _) in plans.items():
        out = decorrelate_subqueries(plan)
        joins = [n for n in walk_plan(out) if isinstance(n, HashJoinNode)]
        assert [j.join_type for j in joins] == [expected[name]], name
        assert out.output_schema == plan.output_schema, name
        assert out.id == plan.id, name  # the join takes the Filter's id
    exists = decorrelate_subqueries(plans["exists_with_a_condition"][0])
    # u's k is renamed apart from t's: a join's inputs never share a name (see the rule's _apart)
    assert (exists.left_keys, exists.right_keys) == (("k",), (f"$subquery.{exists.id}.k",))
    assert exists.filter is not None and "w" in exists.filter.sql() and "v" in exists.filter.sql()
    keyed = decorrelate_subqueries(plans["expression_keys"][0])
    assert isinstance(keyed.probe, ProjectNode) and keyed.filter is None
    rest = decorrelate_subqueries(plans["beside_another_conjunct"][0])
    assert isinstance(rest.probe, FilterNode) and rest.probe.predicate.sql() == "(v > 15)"


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_hand_built_subquery_plans_answer_as_duckdb(device):
    session = session_with_tables(TABLES, split_rows=3, device=device, drivers=2, compile_mode="lowest")
    plans = _plans(session.catalog)
    names = list(plans) if device == "cpu" else ["not_exists_with_a_condition", "not_in_nulls_on_both_sides"]
    # the JSON form carries the subquery; the rule serves it as the built plan
    assert_built_plans_match_duckdb(session, TABLES, plans, names, json_round_trip=device == "cpu")


SQL = [
    "SELECT * FROM t WHERE k NOT IN (SELECT k FROM u)",
    "SELECT * FROM t WHERE k NOT IN (SELECT k FROM u WHERE k IS NOT NULL)",
    "SELECT * FROM t WHERE k NOT IN (SELECT k FROM e)",
    "SELECT * FROM t WHERE v NOT IN (SELECT w FROM u WHERE w > 100)",
    "SELECT * FROM t WHERE k IN (SELECT k FROM u WHERE w > 4) AND v > 10",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w < t.v)",
    "SELECT t.k, count(*) AS c FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k) GROUP BY t.k",
    "SELECT * FROM t WHERE k IN (SELECT u.k FROM u WHERE u.w > t.v)",
    "SELECT * FROM t WHERE k + 1 IN (SELECT k FROM u)",
    "SELECT a.k, b.v FROM t a JOIN t b ON a.k = b.k WHERE EXISTS (SELECT 1 FROM u WHERE u.k = b.k AND u.w <> a.v)",
]


@pytest.mark.parametrize("optimize", [True, False])
def test_sql_subqueries_answer_as_duckdb_with_and_without_the_optimizer(optimize):
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, optimize=optimize)
    with duckdb_with_tables(TABLES) as reference:
        for sql in SQL:
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


def test_the_sql_plan_holds_typed_predicates_and_the_rule_joins_them():
    session = session_with_tables(TABLES, device="cpu")
    plan = session.sql_plan("SELECT * FROM t WHERE k NOT IN (SELECT k FROM u) "
                            "AND EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w < t.v)")
    predicates = [n.predicate for n in walk_plan(plan) if isinstance(n, FilterNode)]
    assert any(isinstance(p, InSubquery) and p.negated for p in predicates)
    assert any(isinstance(p, Exists) and p.correlation is not None for p in predicates)
    for decorrelated in (optimize_plan(plan), required_rewrites(plan)):
        types = sorted(n.join_type for n in walk_plan(decorrelated) if isinstance(n, HashJoinNode))
        assert types in (["left_semi", "null_aware_anti"], ["null_aware_anti", "right_semi"]), types
        assert not any(isinstance(n, FilterNode) and isinstance(n.predicate, (Exists, InSubquery))
                       for n in walk_plan(decorrelated))


def test_what_cannot_be_a_join_is_refused_by_name():
    session = session_with_tables(TABLES, device="cpu")
    ids = PlanNodeIdGenerator()
    u = PlanBuilder(session.catalog, id_generator=ids).table_scan("u").plan()
    t = PlanBuilder(session.catalog, id_generator=ids).table_scan("t")
    col = lambda name: ColumnRef(name, pa.int64())  # noqa: E731
    under_or = t.filter(BinaryOp("or", BinaryOp("gt", col("v"), Literal(1, pa.int64()), BOOL),
                                 Exists(u, BinaryOp("lt", col("w"), OuterColumn("v", pa.int64()), BOOL)), BOOL)).plan()
    with pytest.raises(PlanError, match="under OR, NOT or inside an expression whose correlation is not equalities"):
        decorrelate_subqueries(under_or)  # (one by equalities is a mark join: test_mark_join_flags.py)
    no_equality = PlanBuilder(session.catalog, id_generator=ids).table_scan("t").filter(
        Exists(u, BinaryOp("lt", col("w"), OuterColumn("v", pa.int64()), BOOL))).plan()
    with pytest.raises(PlanError, match="no equality"):
        decorrelate_subqueries(no_equality)
    with pytest.raises(PlanError, match="unknown column 'nope'"):  # the correlation is checked where it is built
        PlanBuilder(session.catalog).table_scan("t").filter(Exists(u, _eq(col("k"), OuterColumn("nope", pa.int64()))))
