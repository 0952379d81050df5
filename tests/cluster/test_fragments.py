"""Cutting plans into fragments, and the boundaries the cluster adds to a single-node plan."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest

from gpu_engine import PlanError, Session
from gpu_engine.cluster import LocalCluster, add_remote_exchanges, chain_fragments, plan_fragments
from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.plans.explain import format_plan

CATALOG = {"t": pa.schema([("k", pa.int32()), ("v", pa.float64())])}


def test_single_aggregation_becomes_partial_shuffle_final_gather():
    plan = PlanBuilder(CATALOG).table_scan("t").aggregation(["k"], ["sum(v) AS s"]).order_by(["s DESC"]).plan()
    assert format_plan(add_remote_exchanges(plan)) == """\
-- OrderBy[2][s DESC NULLS LAST] -> k:int32, s:double
  -- Exchange[2.remote][] -> k:int32, s:double
    -- PartitionedOutput[2.output][PARTITIONED 1] -> k:int32, s:double
      -- Aggregation[1][FINAL [k] s := sum(s)] -> k:int32, s:double
        -- Exchange[1.remote][] -> k:int32, s:double
          -- PartitionedOutput[1.output][PARTITIONED [k] 1] -> k:int32, s:double
            -- Aggregation[1.partial][PARTIAL [k] s := sum(v)] -> k:int32, s:double
              -- TableScan[0][table: t, columns: k, v] -> k:int32, v:double"""


@pytest.mark.parametrize("grouping, shuffles", [
    (["key", "v"], False),   # every group sits in one partition: the leaf is partitioned by k, projected as key
    (["key"], False),
    (["v"], True),           # v is not the partitioning key
])
def test_an_aggregation_over_a_leaf_partitioned_by_its_keys_needs_no_shuffle(grouping, shuffles):
    catalog = {"t": pa.schema([("k", pa.int32()), ("j", pa.int32()), ("v", pa.float64())])}
    plan = (PlanBuilder(catalog).table_scan("t").filter("v > 0").project(["k AS key", "v"])
            .aggregation(grouping, ["count(*) AS c"]).plan())
    leaf = plan.source.source.source.id
    distributed = add_remote_exchanges(plan, {leaf: [("k", "j")]})  # k or j hold the key's value
    text = format_plan(distributed)
    assert ("PARTIAL" in text) is shuffles and text.count("Exchange") == (2 if shuffles else 1)  # + the gather
    assert format_plan(add_remote_exchanges(plan, {leaf: [("j",)]})).count("PARTIAL") == 1  # j is projected away
    assert format_plan(add_remote_exchanges(plan)).count("PARTIAL") == 1  # no partitioning known


def test_fragments_come_producers_first_and_single_stream_ones_run_one_task():
    plan = PlanBuilder(CATALOG).table_scan("t").aggregation([], ["count(*) AS c"]).plan()
    fragments = plan_fragments(add_remote_exchanges(plan))
    assert [f.root.label for f in fragments] == ["PartitionedOutput[1.output]", "Aggregation[1]"]
    assert fragments[1].producers == (("1.remote", 0),)
    assert [f.max_width for f in fragments] == [None, 1]  # a global aggregation meets in one Task
    assert fragments[1].root.source.sources == ()


def test_cluster_sizes_partitions_to_the_consuming_stage():
    session = Session(device="cpu", drivers=1)
    # k repeats: a grouping on a key proven unique is a projection (optimizer.unique_groupings), no shuffle.
    session.register("t", pa.table({"k": pa.array([1, 1], pa.int32()), "v": [1.0, 2.0]}))
    plan = PlanBuilder(session.catalog).table_scan("t").aggregation(["k"], ["sum(v) AS s"]).plan()
    text = LocalCluster(session, (3, 5, 1)).explain(plan)
    assert text.splitlines()[0] == "Stage 0: 3 task(s) x 1 driver(s)"
    assert "PartitionedOutput[1.output][PARTITIONED [k] 5]" in text
    assert "Stage 1: 5 task(s)" in text and "PartitionedOutput[1.gather][PARTITIONED 1]" in text


def test_chain_fragments_attaches_each_producer_to_the_next_exchange():
    ids = PlanNodeIdGenerator()
    leaf = PlanBuilder(CATALOG, id_generator=ids).table_scan("t").partitioned_output(["k"], 2).plan()
    output = PlanBuilder(id_generator=ids).exchange(leaf.output_schema).limit(3).plan()
    chained = chain_fragments(leaf, output)
    assert chained.source.sources == (leaf,)
    assert [f.root.id for f in plan_fragments(chained)] == [leaf.id, output.id]


def test_malformed_distributed_plans_fail_at_plan_time():
    ids = PlanNodeIdGenerator()
    leaf = PlanBuilder(CATALOG, id_generator=ids).table_scan("t").partitioned_output(["k"], 2).plan()
    with pytest.raises(PlanError, match="reach no one"):
        plan_fragments(leaf)
    orphan = PlanBuilder(id_generator=ids).exchange(leaf.output_schema).plan()
    with pytest.raises(PlanError, match="no producer"):
        plan_fragments(orphan)


def test_session_refuses_a_distributed_plan():
    session = Session(device="cpu")
    session.register("t", pa.table({"k": pa.array([1], pa.int32()), "v": [1.0]}))
    ids = PlanNodeIdGenerator()
    leaf = PlanBuilder(session.catalog, id_generator=ids).table_scan("t").partitioned_output(["k"], 2).plan()
    plan = chain_fragments(leaf, PlanBuilder(id_generator=ids).exchange(leaf.output_schema).plan())
    with pytest.raises(PlanError, match="LocalCluster"):
        session.execute(plan)


def test_an_exchange_of_several_producers_reads_the_union_of_their_fragments():
    from gpu_engine.plans.nodes import ExchangeNode, PartitionedOutputNode

    branches = [PlanBuilder(CATALOG, id_generator=PlanNodeIdGenerator(10 * i)).table_scan("t").filter(f"k > {i}").plan()
                for i in range(2)]
    schema = branches[0].output_schema
    outputs = tuple(PartitionedOutputNode(id=f"out{i}", output_schema=schema, sources=(branch,),
                                          partition_kind="arbitrary", num_partitions=1)
                    for i, branch in enumerate(branches))
    union = ExchangeNode(id="union", output_schema=schema, sources=outputs)
    fragments = plan_fragments(union)
    assert [f.root.id for f in fragments] == ["out0", "out1", "union"]
    assert fragments[2].producers == (("union", 0), ("union", 1)) and fragments[2].max_width is None
    gathered = replace(outputs[1], partition_kind="partitioned")  # a keyless branch is a gather: one Task
    assert plan_fragments(replace(union, sources=(outputs[0], gathered)))[2].max_width == 1
