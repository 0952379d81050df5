"""Typed uncorrelated scalar subqueries (gpu_engine.plans.subqueries.ScalarSubquery) and their decorrelation.

A Filter reading ``(SELECT …)`` as a value — planned from SQL (a WHERE comparison), built by hand with
PlanBuilder, or read from JSON — becomes an inner nested-loop join with the subquery's one row (EnforceSingleRow),
the predicate its filter (gpu_engine.optimizer.decorrelation). SQL's semantics against DuckDB: an empty scalar
subquery is NULL, one of several rows fails the query; also with the optimizer off (required_rewrites).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import (assert_built_plans_match_duckdb, assert_same_rows, duckdb_table, duckdb_with_tables,
                              session_with_tables)
from gpu_engine.errors import PlanError
from gpu_engine.optimizer import optimize_plan, required_rewrites
from gpu_engine.optimizer.decorrelation import decorrelate_subqueries
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Literal, UnaryOp
from gpu_engine.plans.nodes import EnforceSingleRowNode, FilterNode, NestedLoopJoinNode, walk_plan
from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.plans.subqueries import ScalarSubquery

BOOL = pa.bool_()
I64 = pa.int64()
TABLES = {
    "t": pa.table({"k": pa.array([1, 1, 2, None, 3, 5, 6], I64), "v": pa.array([10, 20, 30, 40, None, 60, 70], I64)}),
    "u": pa.table({"k": pa.array([1, 3, 3, 4, None, 6], I64), "w": pa.array([15, 5, 50, 1, 2, None], I64)}),
    "e": pa.table({"k": pa.array([], I64), "w": pa.array([], I64)}),
}


def _col(name):
    return ColumnRef(name, I64)


def _plans(catalog):
    """Return name -> (hand-built plan over t, the SQL DuckDB answers it with)."""
    ids = PlanNodeIdGenerator()

    def scalar(table, aggregate=None, where=None, one_row=False):
        builder = PlanBuilder(catalog, id_generator=ids).table_scan(table)
        if where is not None:
            builder = builder.filter(where)
        builder = builder.aggregation([], [f"{aggregate} AS x"]) if aggregate else builder.project(["w AS x"])
        if one_row:
            builder = builder.enforce_single_row()
        return ScalarSubquery(builder.plan(), "x", I64)

    def over_t(predicate):
        return PlanBuilder(catalog, id_generator=ids).table_scan("t").filter(predicate).plan()

    return {
        "greater_than_max": (over_t(BinaryOp("gt", _col("v"), scalar("u", "max(w)"), BOOL)),
                             "SELECT * FROM t WHERE v > (SELECT max(w) FROM u)"),
        "an_empty_subquery_is_null": (over_t(UnaryOp("is_null", scalar("u", where="w > 100"), BOOL)),
                                      "SELECT * FROM t WHERE (SELECT w FROM u WHERE w > 100) IS NULL"),
        "compared_with_an_empty_subquery": (over_t(BinaryOp("lt", _col("k"), scalar("e"), BOOL)),
                                            "SELECT * FROM t WHERE k < (SELECT w FROM e)"),
        "under_or": (over_t(BinaryOp("or", BinaryOp("eq", _col("k"), scalar("u", "min(k)", one_row=True), BOOL),
                                     UnaryOp("is_null", _col("v"), BOOL), BOOL)),
                     "SELECT * FROM t WHERE k = (SELECT min(k) FROM u) OR v IS NULL"),
        "two_in_one_conjunct": (
            over_t(BinaryOp("and", BinaryOp("gt", _col("v"), scalar("u", "min(w)"), BOOL),
                            BinaryOp("lt", _col("v"), BinaryOp("add", scalar("u", "max(w)"), Literal(1, I64), I64),
                                     BOOL), BOOL)),
            "SELECT * FROM t WHERE v > (SELECT min(w) FROM u) AND v < (SELECT max(w) FROM u) + 1"),
    }


def test_a_scalar_subquery_becomes_a_nested_loop_join_with_its_one_row():
    session = session_with_tables(TABLES, device="cpu")
    plans = _plans(session.catalog)
    for name, (plan, _) in plans.items():
        out = decorrelate_subqueries(plan)
        joins = [n for n in walk_plan(out) if isinstance(n, NestedLoopJoinNode)]
        assert joins and all(j.join_type == "inner" and isinstance(j.build, EnforceSingleRowNode) for j in joins)
        assert out.id == plan.id and out.output_schema == plan.output_schema, name
        assert not any(isinstance(n, FilterNode) and n.id == plan.id for n in walk_plan(out)), name
        assert out.filter is not None and "x" in out.filter.sql(), name
    # one join per subquery; a subquery plan that ends in EnforceSingleRow is not wrapped again
    assert len([n for n in walk_plan(decorrelate_subqueries(plans["two_in_one_conjunct"][0]))
                if isinstance(n, NestedLoopJoinNode)]) == 2
    under_or = decorrelate_subqueries(plans["under_or"][0])
    assert not isinstance(under_or.build.source, EnforceSingleRowNode)


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_hand_built_scalar_subquery_plans_answer_as_duckdb(device):
    session = session_with_tables(TABLES, split_rows=3, device=device, drivers=2, compile_mode="lowest")
    plans = _plans(session.catalog)
    names = list(plans) if device == "cpu" else ["an_empty_subquery_is_null", "under_or"]
    # the JSON form carries the subquery; the rule serves it as the built plan
    assert_built_plans_match_duckdb(session, TABLES, plans, names, json_round_trip=device == "cpu")


SQL = [
    "SELECT * FROM t WHERE v > (SELECT avg(w) FROM u)",
    "SELECT * FROM t WHERE k < (SELECT w FROM u WHERE w > 100)",  # empty: NULL, no row passes
    "SELECT * FROM t WHERE (SELECT count(*) FROM u) > 3",  # reads no outer column
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM e)",  # an uncorrelated EXISTS: a count compared
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE w > 100)",
    "SELECT a.k, b.v FROM t a JOIN t b ON a.k = b.k WHERE a.v + b.v > (SELECT max(w) FROM u)",  # after the join
    "SELECT t.k, u.w FROM t LEFT JOIN u ON t.k = u.k WHERE u.w < (SELECT avg(v) FROM t)",  # a NULL-extended side
    "SELECT k FROM t WHERE k = (SELECT min(k) FROM u) AND v < (SELECT max(w) FROM u)",
    # a table function reading another item is planned after the joins: filtered there (the condition was lost)
    "SELECT k, g FROM t, generate_series(1, t.k) AS s(g) WHERE g > (SELECT min(k) FROM u)",
    "SELECT k, g FROM t, generate_series(1, t.k) AS s(g) WHERE (SELECT count(*) FROM u) > 3",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING sum(v) > (SELECT avg(w) FROM u)",  # HAVING, as WHERE
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING sum(v) > (SELECT w FROM e)",  # empty: no group passes
    "SELECT k, v FROM t QUALIFY row_number() OVER (PARTITION BY k ORDER BY v) <= (SELECT count(*) FROM e) + 1",
]


@pytest.mark.parametrize("optimize", [True, False])
def test_sql_scalar_subqueries_answer_as_duckdb_with_and_without_the_optimizer(optimize):
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, optimize=optimize)
    with duckdb_with_tables(TABLES) as reference:
        for sql in SQL:
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


def test_a_scalar_subquery_of_several_rows_fails_the_query_as_in_duckdb():
    session = session_with_tables(TABLES, device="cpu")
    sql = "SELECT * FROM t WHERE k = (SELECT k FROM u)"
    with duckdb_with_tables(TABLES) as reference:
        with pytest.raises(Exception, match="(?i)more than one row"):
            duckdb_table(reference, sql)
    with pytest.raises(Exception, match="more than one row"):
        session.sql(sql)


def test_the_sql_plan_holds_a_typed_scalar_subquery_and_the_rule_joins_it():
    session = session_with_tables(TABLES, device="cpu")
    plan = session.sql_plan("SELECT * FROM t WHERE v > (SELECT avg(w) FROM u)")
    filters = [n for n in walk_plan(plan) if isinstance(n, FilterNode)
               and isinstance(n.predicate, BinaryOp) and isinstance(n.predicate.right, ScalarSubquery)]
    assert len(filters) == 1 and isinstance(filters[0].predicate.right.subquery, EnforceSingleRowNode)
    assert not any(isinstance(n, NestedLoopJoinNode) for n in walk_plan(plan))
    for decorrelated in (optimize_plan(plan), required_rewrites(plan)):
        joins = [n for n in walk_plan(decorrelated) if isinstance(n, NestedLoopJoinNode)]
        assert len(joins) == 1 and joins[0].id == filters[0].id
        assert not any(isinstance(n, EnforceSingleRowNode) and isinstance(s, EnforceSingleRowNode)
                       for n in walk_plan(decorrelated) for s in n.sources)


def test_a_scalar_subquery_is_validated_where_it_is_built():
    session = session_with_tables(TABLES, device="cpu")
    u = PlanBuilder(session.catalog).table_scan("u").plan()
    with pytest.raises(PlanError, match="not an output of its subquery"):
        PlanBuilder(session.catalog).table_scan("t").filter(
            BinaryOp("gt", _col("v"), ScalarSubquery(u, "nope", I64), BOOL))
    with pytest.raises(PlanError, match="typed"):
        PlanBuilder(session.catalog).table_scan("t").filter(
            BinaryOp("gt", _col("v"), ScalarSubquery(u, "w", pa.string()), BOOL))


def test_having_holds_a_typed_scalar_subquery_as_where_does():
    session = session_with_tables(TABLES, device="cpu")
    plan = session.sql_plan("SELECT k, sum(v) AS s FROM t GROUP BY k HAVING sum(v) > (SELECT avg(w) FROM u)")
    assert not any(isinstance(n, NestedLoopJoinNode) for n in walk_plan(plan))
    joins = [n for n in walk_plan(required_rewrites(plan)) if isinstance(n, NestedLoopJoinNode)]
    assert len(joins) == 1 and joins[0].filter is not None and isinstance(joins[0].build, EnforceSingleRowNode)
