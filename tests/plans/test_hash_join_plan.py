"""PlanBuilder.hash_join: the node it builds, its explain text, and PlanErrors naming the node and column."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.errors import PlanError
from gpu_engine.planning.local_exchanges import add_local_exchanges
from gpu_engine.plans import HashJoinNode, PlanBuilder, PlanNodeIdGenerator, format_plan

CATALOG = {
    "t": pa.schema([("k", pa.int32()), ("s", pa.string()), ("d", pa.decimal128(12, 2)), ("v", pa.float64())]),
    "u": pa.schema([("uk", pa.int64()), ("us", pa.large_string()), ("ud", pa.decimal128(12, 3)),
                    ("uv", pa.float32()), ("v", pa.float64())]),
}


def join(left_keys, right_keys, output, join_type="inner", filter=None):
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("u")
    return (PlanBuilder(CATALOG, id_generator=ids).table_scan("t")
            .hash_join(left_keys, right_keys, build, output, join_type, filter=filter).plan())


def test_node_and_explain():
    plan = join(["k", "s"], ["uk", "us"], ["s", "uv", "k"], "left", filter="k * 2 > uv")
    assert isinstance(plan, HashJoinNode)
    assert (plan.left_keys, plan.right_keys, plan.output_columns) == (("k", "s"), ("uk", "us"), ("s", "uv", "k"))
    assert format_plan(plan) == """\
-- HashJoin[2][LEFT k = uk, s = us, filter: (CAST((k * 2) AS float) > uv)] -> s:string, uv:float, k:int32
  -- TableScan[1][table: t, columns: k, s, d, v] -> k:int32, s:string, d:decimal128(12, 2), v:double
  -- TableScan[0][table: u, columns: uk, us, ud, uv, v] -> uk:int64, us:string, ud:decimal128(12, 3), uv:float, v:double"""


def test_several_drivers_add_no_exchange_and_keep_the_join():
    plan = join(["k"], ["uk"], ["k", "uv"], "full")
    assert add_local_exchanges(plan, 4) == plan


@pytest.mark.parametrize("arguments, message, column", [
    ((["k"], ["nope"], ["k"]), "unknown column", "nope"),
    ((["k"], ["us"], ["k"]), "incompatible types", "k = us"),
    ((["d"], ["ud"], ["k"]), "incompatible types", "d = ud"),
    ((["k", "s"], ["uk"], ["k"]), "as many right keys", None),
    ((["k"], ["uk"], ["v"]), "on both sides", "v"),
    ((["k"], ["uk"], ["k", "uv"], "left_semi"), "outputs columns of the probe", "uv"),
    ((["k"], ["uk"], ["uk", "k"], "right_semi"), "outputs columns of the build", "k"),
    ((["k"], ["uk"], ["k"], "outer"), "join_type must be one of", "outer"),
    ((["k"], ["uk"], ["k"], "inner", "v > 1"), "on both sides", "v"),
    ((["k"], ["uk"], ["k"], "inner", "k + uk"), "must be boolean", "k + uk"),
    ((["k", "s"], ["uk", "us"], ["k"], "null_aware_anti"), "exactly one key", None),
])
def test_plan_errors_name_the_node_and_column(arguments, message, column):
    with pytest.raises(PlanError, match=message) as error:
        join(*arguments)
    assert error.value.node == "HashJoin[2]"
    assert error.value.column == column


def test_integer_widths_and_float_widths_join():
    assert join(["k"], ["uk"], ["k"]).right_keys == ("uk",)
    assert join(["v"], ["uv"], ["k"]).left_keys == ("v",)


def test_build_side_must_share_the_id_generator():
    build = PlanBuilder(CATALOG).table_scan("u")
    with pytest.raises(PlanError, match="PlanNodeIdGenerator"):
        PlanBuilder(CATALOG).table_scan("t").hash_join(["k"], ["uk"], build, ["k"])
