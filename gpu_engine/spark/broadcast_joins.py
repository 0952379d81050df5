"""Add the shuffles, gathers and join broadcasts a single-node plan needs to run as Spark stages.

Why a pass of its own: :func:`gpu_engine.cluster.add_remote_exchanges` plans
aggregations, ORDER BY, TopN and Limit across Tasks but refuses joins (a node
with two inputs needs co-partitioned or broadcast inputs). On Spark the small
side of a join is cheap to broadcast: it is collected once on the driver and
shipped to every Task, while the probe side stays spread over the partitions.
So this pass detaches each join's build side, lets ``add_remote_exchanges``
plan the rest (the join then looks like any one-input node that keeps its
input's distribution), and re-attaches the build side behind a broadcast
boundary, ``Exchange(PartitionedOutput(broadcast))``; the build side itself
was planned the same way, recursively (its root, like the query's, is not
gathered first: the broadcast collects every partition anyway). The result is an ordinary distributed
plan that :func:`gpu_engine.cluster.plan_fragments` cuts into stages.

Right and full joins are refused: their unmatched build rows would come once
per Task that holds the broadcast. Shuffling both sides to the same partition
ids is not planned yet.

Inserted nodes are named after the join: ``<join id>.broadcast`` (the
PartitionedOutput) and ``<join id>.build`` (the Exchange).
"""

from __future__ import annotations

from dataclasses import replace

from gpu_engine.cluster import add_remote_exchanges, has_remote_exchanges
from gpu_engine.errors import PlanError
from gpu_engine.plans.nodes import ExchangeNode, HashJoinNode, NestedLoopJoinNode, PartitionedOutputNode, PlanNode

__all__ = ["add_spark_exchanges", "BROADCAST_JOIN_TYPES"]

#: Join types whose result is right when each Task joins its probe rows with the whole build side.
BROADCAST_JOIN_TYPES = ("inner", "left", "left_semi", "anti", "null_aware_anti")

_ROOT_GATHER_ID = "gather"  # what add_remote_exchanges names the gather it adds at a spread root


def add_spark_exchanges(root: PlanNode) -> PlanNode:
    """Return ``root`` as a distributed plan whose joins read their build side through a broadcast.

    Unlike a LocalCluster query, a Spark result needs no gather at the root:
    a DataFrame of many partitions is the result, and ``collect`` reads them in
    order. So the gather ``add_remote_exchanges`` puts over a spread root is
    left out, and the last stage runs on every partition.
    """
    if has_remote_exchanges(root):
        return root
    distributed = _distribute(root)
    if _is_root_gather(distributed, root):
        return distributed.source.source
    return distributed


def _distribute(root: PlanNode) -> PlanNode:
    builds: dict[str, ExchangeNode] = {}
    probe_only = _detach_builds(root, builds)
    return _attach_builds(add_remote_exchanges(probe_only), builds)


def _is_root_gather(distributed: PlanNode, root: PlanNode) -> bool:
    return (isinstance(distributed, ExchangeNode) and distributed.id == _ROOT_GATHER_ID
            and distributed.source.id == f"{root.id}.gather")


def _detach_builds(node: PlanNode, builds: dict[str, ExchangeNode]) -> PlanNode:
    if isinstance(node, (HashJoinNode, NestedLoopJoinNode)):
        if node.join_type not in BROADCAST_JOIN_TYPES:
            raise PlanError(f"a {node.join_type} join cannot run with a broadcast build side on Spark (its unmatched "
                            "build rows would repeat in every Task); swap its sides into a left join",
                            node=node.label)
        builds[node.id] = _broadcast(node.build, node.id)
        return replace(node, sources=(_detach_builds(node.probe, builds),))
    if not node.sources:
        return node
    return replace(node, sources=tuple(_detach_builds(source, builds) for source in node.sources))


def _broadcast(build: PlanNode, join_id: str) -> ExchangeNode:
    """Return the build side planned on its own, ending in a broadcast instead of a gather."""
    distributed = add_spark_exchanges(build)  # no gather at its root: broadcast straight from the spread Tasks
    output = PartitionedOutputNode(id=f"{join_id}.broadcast", output_schema=distributed.output_schema,
                                   sources=(distributed,), partition_kind="broadcast", num_partitions=1)
    return ExchangeNode(id=f"{join_id}.build", output_schema=distributed.output_schema, sources=(output,))


def _attach_builds(node: PlanNode, builds: dict[str, ExchangeNode]) -> PlanNode:
    if not node.sources:
        return node
    sources = tuple(_attach_builds(source, builds) for source in node.sources)
    if node.id in builds and isinstance(node, (HashJoinNode, NestedLoopJoinNode)):
        sources = sources + (builds[node.id],)
    return replace(node, sources=sources)
