"""A hash join builds the input the typed estimates say is smaller (gpu_engine.optimizer.build_sides).

Each join type is written by hand with the larger table as its build side: with the session's statistics,
``optimize_plan`` (the pass in ``ESTIMATE_RULES``) swaps the sides where the type allows it — inner and full stay,
LEFT and RIGHT trade, the semi and anti joins become their build-side twins — and NOT IN's null-aware anti join
keeps its sides; the swapped plan answers as DuckDB (NULL keys, repeated keys, rows without a match on each side).
Without statistics, or with the smaller side already built, the plan comes back as the same object.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import gpu_engine.optimizer as optimizer
from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.optimizer import optimize_plan
from gpu_engine.optimizer.build_sides import build_smaller_sides
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import HashJoinNode, walk_plan
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

TABLES = {
    "small": pa.table({"k": pa.array([1, 2, None, 9], pa.int64()), "v": pa.array([10, 20, 30, None], pa.int64())}),
    "big": pa.table({"kb": pa.array([1, 1, 2, 3, 4, 5, 6, 7, 8, None, 2, 3], pa.int64()),
                     "w": pa.array(["a", "b", "c", None, "e", "f", "g", "h", "i", "j", "k", "l"])}),
}
CATALOG = {name: table.schema for name, table in TABLES.items()}

#: join type -> (the type after the swap, or None where it stays, and the same query for DuckDB)
JOINS = {
    "inner": ("inner", "SELECT k, v, kb, w FROM small JOIN big ON k = kb"),
    "left": ("right", "SELECT k, v, kb, w FROM small LEFT JOIN big ON k = kb"),
    "right": ("left", "SELECT k, v, kb, w FROM small RIGHT JOIN big ON k = kb"),
    "full": ("full", "SELECT k, v, kb, w FROM small FULL JOIN big ON k = kb"),
    "left_semi": ("right_semi", "SELECT k, v FROM small WHERE EXISTS (SELECT 1 FROM big WHERE kb = k)"),
    "anti": ("right_anti", "SELECT k, v FROM small WHERE NOT EXISTS (SELECT 1 FROM big WHERE kb = k)"),
    "right_semi": ("left_semi", "SELECT kb, w FROM big WHERE EXISTS (SELECT 1 FROM small WHERE kb = k)"),
    "right_anti": ("anti", "SELECT kb, w FROM big WHERE NOT EXISTS (SELECT 1 FROM small WHERE kb = k)"),
    "null_aware_anti": (None, "SELECT k, v FROM small WHERE k NOT IN (SELECT kb FROM big)"),
}


def _small_probes_big(join_type: str):
    """``small`` probing ``big`` (the larger table built), the output columns the type allows."""
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("big", ["kb", "w"]).plan()
    outputs = {"left_semi": ["k", "v"], "anti": ["k", "v"], "null_aware_anti": ["k", "v"],
               "right_semi": ["kb", "w"], "right_anti": ["kb", "w"]}.get(join_type, ["k", "v", "kb", "w"])
    return PlanBuilder(CATALOG, id_generator=ids).table_scan("small", ["k", "v"]).hash_join(
        ["k"], ["kb"], build, outputs, join_type).plan()


def _join(plan) -> HashJoinNode:
    return next(n for n in walk_plan(plan) if isinstance(n, HashJoinNode))


@pytest.fixture
def build_sides_on(monkeypatch):
    monkeypatch.setattr(optimizer, "ESTIMATE_RULES", (build_smaller_sides,))


@pytest.mark.parametrize("join_type", list(JOINS))
def test_the_larger_build_side_is_swapped_where_the_join_type_allows(join_type, build_sides_on):
    session = session_with_tables(TABLES, device="cpu")
    plan = _small_probes_big(join_type)
    join = _join(optimize_plan(plan, session.statistics()))
    swapped = JOINS[join_type][0]
    if swapped is None:
        assert (join.join_type, join.probe.table_name) == (join_type, "small")
    else:
        assert (join.join_type, join.probe.table_name, join.build.table_name) == (swapped, "big", "small")
        assert (join.left_keys, join.right_keys) == (("kb",), ("k",))
    assert join.output_schema == _join(plan).output_schema


def test_no_statistics_or_the_smaller_side_built_keeps_the_plan(build_sides_on):
    session = session_with_tables(TABLES, device="cpu")
    plan = _small_probes_big("inner")
    assert _join(optimize_plan(plan)).probe.table_name == "small"  # no statistics: the rules that estimate skip
    ids = PlanNodeIdGenerator()
    small = PlanBuilder(CATALOG, id_generator=ids).table_scan("small", ["k", "v"]).plan()
    built_small = PlanBuilder(CATALOG, id_generator=ids).table_scan("big", ["kb", "w"]).hash_join(
        ["kb"], ["k"], small, ["k", "v", "kb", "w"], "left").plan()
    assert build_smaller_sides(built_small, session.statistics()) is built_small


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_swapped_joins_answer_as_duckdb(device, build_sides_on):
    session = session_with_tables(TABLES, split_rows=3, device=device, drivers=2, compile_mode="lowest")
    types = list(JOINS) if device == "cpu" else ["left", "left_semi"]
    with duckdb_with_tables(TABLES) as reference:
        for join_type in types:
            plan = _small_probes_big(join_type)
            assert_same_rows(session.execute(plan), duckdb_table(reference, JOINS[join_type][1]))
