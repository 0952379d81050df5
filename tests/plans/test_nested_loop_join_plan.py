"""PlanBuilder.nested_loop_join, cross_join and enforce_single_row: nodes, explain, local exchanges, PlanErrors."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.errors import PlanError
from gpu_engine.planning.local_exchanges import add_local_exchanges
from gpu_engine.exec.local_planner import plan_pipelines
from gpu_engine.plans import EnforceSingleRowNode, NestedLoopJoinNode, PlanBuilder, PlanNodeIdGenerator, format_plan

CATALOG = {
    "t": pa.schema([("k", pa.int32()), ("s", pa.string()), ("v", pa.float64())]),
    "u": pa.schema([("uk", pa.int64()), ("us", pa.large_string()), ("v", pa.float64())]),
}


def join(output, filter=None, join_type="inner"):
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("u")
    return (PlanBuilder(CATALOG, id_generator=ids).table_scan("t")
            .nested_loop_join(build, output, filter=filter, join_type=join_type).plan())


def scalar_subquery_plan():
    """Return ``SELECT k FROM t WHERE k > (SELECT avg(uk) FROM u)``: aggregation, enforce_single_row, cross join."""
    ids = PlanNodeIdGenerator()
    average = (PlanBuilder(CATALOG, id_generator=ids).table_scan("u")
               .aggregation([], ["avg(uk) AS a"]).enforce_single_row())
    return (PlanBuilder(CATALOG, id_generator=ids).table_scan("t")
            .cross_join(average, ["k", "a"]).filter("k > a").project(["k"]).plan())


def test_node_and_explain():
    plan = join(["s", "us", "k"], filter="k * 2 > uk OR us IS NULL", join_type="left")
    assert isinstance(plan, NestedLoopJoinNode)
    assert (plan.join_type, plan.output_columns, plan.probe.id, plan.build.id) == ("left", ("s", "us", "k"), "1", "0")
    assert format_plan(plan) == """\
-- NestedLoopJoin[2][LEFT, filter: (((k * 2) > uk) OR (us IS NULL))] -> s:string, us:string, k:int32
  -- TableScan[1][table: t, columns: k, s, v] -> k:int32, s:string, v:double
  -- TableScan[0][table: u, columns: uk, us, v] -> uk:int64, us:string, v:double"""


def test_cross_join_is_an_inner_nested_loop_join_without_filter():
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("u")
    plan = PlanBuilder(CATALOG, id_generator=ids).table_scan("t").cross_join(build, ["k", "uk"]).plan()
    assert plan == join(["k", "uk"])
    assert (plan.join_type, plan.filter) == ("inner", None)


def test_scalar_subquery_explain_with_several_drivers():
    """The probe stays distributed; the subquery's global aggregation already gathers: no exchange above it."""
    assert format_plan(add_local_exchanges(scalar_subquery_plan(), 4)) == """\
-- Project[6][expressions: (k:k)] -> k:int32
  -- Filter[5][expression: (k > a)] -> k:int32, a:double
    -- NestedLoopJoin[4][INNER] -> k:int32, a:double
      -- TableScan[3][table: t, columns: k, s, v] -> k:int32, s:string, v:double
      -- EnforceSingleRow[2][] -> a:double
        -- Aggregation[1][FINAL [] a := avg(a)] -> a:double
          -- LocalPartition[1.exchange][GATHER] -> a:decimal128(38, 0), a$high:int64, a$count:int64
            -- Aggregation[1.partial][PARTIAL [] a := avg(uk)] -> a:decimal128(38, 0), a$high:int64, a$count:int64
              -- TableScan[0][table: u, columns: uk, us, v] -> uk:int64, us:string, v:double"""


def test_enforce_single_row_over_a_distributed_input_gets_a_gather():
    plan = PlanBuilder(CATALOG).table_scan("t").enforce_single_row().plan()
    assert isinstance(plan, EnforceSingleRowNode) and plan.output_schema == CATALOG["t"]
    assert add_local_exchanges(plan, 1) == plan
    assert format_plan(add_local_exchanges(plan, 4)) == """\
-- EnforceSingleRow[1][] -> k:int32, s:string, v:double
  -- LocalPartition[1.exchange][GATHER] -> k:int32, s:string, v:double
    -- TableScan[0][table: t, columns: k, s, v] -> k:int32, s:string, v:double"""


@pytest.mark.parametrize("join_type", ["inner", "left", "right", "full"])
def test_several_drivers_add_no_exchange_and_build_runs_as_its_own_pipeline(join_type):
    plan = join(["k", "uk"], "k < uk", join_type)
    assert add_local_exchanges(plan, 4) == plan
    pipelines = plan_pipelines(plan, 4)
    assert [[type(item).__name__ for item in p.items] for p in pipelines] == [
        ["TableScanNode", "NestedLoopJoinNode"], ["TableScanNode", "NestedLoopJoinBuildSink"]]
    assert [p.num_drivers for p in pipelines] == [4, 4]


def test_enforce_single_row_runs_in_one_driver():
    pipelines = plan_pipelines(add_local_exchanges(scalar_subquery_plan(), 4), 4)
    by_kind = {type(item).__name__: p.num_drivers for p in pipelines for item in p.items}
    assert by_kind["EnforceSingleRowNode"] == 1 and by_kind["NestedLoopJoinNode"] == 4


@pytest.mark.parametrize("arguments, message, column", [
    ((["k", "nope"],), "unknown output column", "nope"),
    ((["k", "v"],), "on both sides", "v"),
    ((["k", "k"],), "duplicate output column", "k"),
    ((["k"], "nope > 1"), "nope", "nope"),
    ((["k"], "k + uk"), "must be boolean", "k + uk"),
    ((["k"], "v > 1"), "on both sides", "v"),
    ((["k"], None, "left_semi"), "join_type must be one of", "left_semi"),
])
def test_plan_errors_name_the_node_and_column(arguments, message, column):
    with pytest.raises(PlanError, match=message) as error:
        join(*arguments)
    assert error.value.node == "NestedLoopJoin[2]"
    assert error.value.column is not None and column in error.value.column


def test_build_side_must_share_the_id_generator():
    build = PlanBuilder(CATALOG).table_scan("u")
    with pytest.raises(PlanError, match="PlanNodeIdGenerator"):
        PlanBuilder(CATALOG).table_scan("t").cross_join(build, ["k"])


def test_enforce_single_row_needs_an_input():
    with pytest.raises(PlanError, match="no input") as error:
        PlanBuilder(CATALOG).enforce_single_row()
    assert error.value.node == "EnforceSingleRow[0]"
