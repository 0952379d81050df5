"""A plan nested deeper than the planning passes can walk fails with a PlanError naming its depth, never a
bare RecursionError (planning/plan_depth.py); walking a plan (plans.nodes.walk_plan) never recurses."""

from __future__ import annotations

import functools
import sys

import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.errors import PlanError
from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.plans.nodes import walk_plan
from gpu_engine.planning.plan_depth import deepest_path

TABLE = pa.table({"a": pa.array([3, None, 1, 2], pa.int64())})


@functools.lru_cache(maxsize=None)
def _chain(depth: int):
    """A scan under ``depth`` alternating Projects and Filters, as a loop over PlanBuilder builds it."""
    builder = PlanBuilder({"t": TABLE.schema}).table_scan("t")
    for i in range(depth):
        builder = builder.filter("a >= 0") if i % 2 else builder.project(["a"])
    return builder.plan()


@pytest.mark.parametrize("settings", [{}, {"optimize": False, "fuse": False}])
def test_a_plan_too_deep_to_plan_is_refused_naming_its_depth_and_what_nests(device_name, settings):
    session = Session(device=device_name, **settings)
    session.register("t", TABLE)
    depth = 2 * (3 * sys.getrecursionlimit() // 2)  # every walk of the plan that recurses takes a frame per node
    with pytest.raises(PlanError, match=rf"the plan is {depth + 1} nodes deep \({depth // 2} Filter, {depth // 2} Project, "
                                        r"1 TableScan on its deepest path\)"):
        session.execute(_chain(depth))
    assert sorted(session.execute(_chain(40)).column("a").to_pylist()) == [1, 2, 3]  # the Session answers the next


def test_walking_and_measuring_a_plan_deeper_than_the_interpreters_stack():
    plan = _chain(5000)
    nodes = list(walk_plan(plan))
    assert len(nodes) == 5001 and nodes[0] is plan and type(nodes[-1]).__name__ == "TableScanNode"
    assert len(deepest_path(plan)) == 5001


def test_walk_plan_yields_parents_first_and_each_source_subtree_in_order():
    ids = PlanNodeIdGenerator()
    other = PlanBuilder({"t": TABLE.schema}, id_generator=ids).table_scan("t").project(["a"])
    plan = PlanBuilder({"t": TABLE.schema}, id_generator=ids).table_scan("t").filter("a > 1").union_all(other).plan()
    kinds = [type(node).__name__ for node in walk_plan(plan)]
    assert kinds[1:] == ["FilterNode", "TableScanNode", "ProjectNode", "TableScanNode"], kinds
