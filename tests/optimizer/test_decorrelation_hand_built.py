"""Hand-built subquery predicates the way a PlanBuilder user writes them, through the decorrelation rule.

Two things the SQL planner never makes but a hand-built or JSON plan does (review of stop 47):

* a subquery plan built by a PlanBuilder of its own numbers its nodes from the same start as the outer plan:
  joined in, two scans had id ``0`` and the task handed one the other's splits ('split for node 0 after
  no_more_splits'); the rule now gives a repeated subquery node a new id (the outer plan's ids are kept);
* a subquery over a table with the outer table's column names (``k IN (SELECT k FROM u)``): a correlation
  reading both ``v`` columns was refused ('rename one'), and a semi / anti join that build_sides swapped emitted
  the kept side's ``k`` as NULLs; the rule now renames the subquery's clashing columns apart.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_rows, session_with_tables
from gpu_engine.optimizer.decorrelation import decorrelate_subqueries
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.expressions import BinaryOp, ColumnRef
from gpu_engine.plans.nodes import walk_plan
from gpu_engine.plans.serialization import plan_from_json, plan_to_json
from gpu_engine.plans.subqueries import Exists, InSubquery, OuterColumn

I64, BOOL = pa.int64(), pa.bool_()
TABLES = {  # u is larger than t: build_sides swaps the semi and anti joins to build t
    "t": pa.table({"k": pa.array([1, 1, 2, None, 3, 5, 6], I64), "v": pa.array([10, 20, 30, 40, None, 60, 70], I64)}),
    "u": pa.table({"k": pa.array([1, 3, 3, 4, None, 6, 8, 9, 10, 11, 12, 13], I64),
                   "v": pa.array([15, 5, 50, 1, 2, None, 3, 4, 5, 6, 7, 8], I64)}),
}


def _cases(catalog):
    """Return name -> (plan over t, each subquery from a PlanBuilder of its own, DuckDB's text)."""
    col, outer = (lambda n: ColumnRef(n, I64)), (lambda n: OuterColumn(n, I64))  # noqa: E731

    def over_t(predicate):
        return PlanBuilder(catalog).table_scan("t").filter(predicate).project(["k"]).plan()

    def u():
        return PlanBuilder(catalog).table_scan("u").plan()

    both_v = BinaryOp("and", BinaryOp("eq", col("k"), outer("k"), BOOL), BinaryOp("lt", col("v"), outer("v"), BOOL),
                      BOOL)
    return {
        "in": (over_t(InSubquery(col("k"), u(), "k")), "SELECT k FROM t WHERE k IN (SELECT k FROM u)"),
        "not_exists": (over_t(Exists(u(), BinaryOp("eq", col("v"), outer("v"), BOOL), negated=True)),
                       "SELECT k FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.v = t.v)"),
        "not_in": (over_t(InSubquery(col("k"), u(), "k", negated=True)),
                   "SELECT k FROM t WHERE k NOT IN (SELECT k FROM u)"),
        "both_columns_in_the_condition": (over_t(Exists(u(), both_v)),
                                          "SELECT k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.v < t.v)"),
        "two_subqueries": (over_t(BinaryOp("and", InSubquery(col("k"), u(), "k"),
                                           Exists(u(), BinaryOp("eq", col("v"), outer("v"), BOOL), negated=True), BOOL)),
                           "SELECT k FROM t WHERE k IN (SELECT k FROM u) AND NOT EXISTS (SELECT 1 FROM u WHERE u.v = t.v)"),
    }


def test_the_decorrelated_plan_keeps_the_outer_ids_and_gives_repeated_ones_new_ids():
    session = session_with_tables(TABLES, device="cpu")
    for name, (plan, _) in _cases(session.catalog).items():
        out = decorrelate_subqueries(plan)
        ids = [node.id for node in walk_plan(out)]
        assert len(ids) == len(set(ids)), name
        assert {node.id for node in walk_plan(plan)} <= set(ids), name  # the outer plan's own ids stay


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_hand_built_subqueries_of_their_own_builders_and_names_answer_as_duckdb(device):
    session = session_with_tables(TABLES, split_rows=3, device=device, drivers=2, compile_mode="lowest")
    cases = _cases(session.catalog)
    for name in (list(cases) if device == "cpu" else ["two_subqueries"]):
        plan, sql = cases[name]
        expected = duckdb_rows(sql, **TABLES)
        assert_same_rows(session.execute(plan), expected)
        if device == "cpu":
            assert_same_rows(session.execute(plan_from_json(plan_to_json(plan))), expected)
