"""Make a single-node plan distributed by adding PartitionedOutput/Exchange boundaries.

The coordinator's planner does this in Presto (AddExchanges); here it is a free
function the LocalCluster runs on a plan that has no boundaries yet. Leaf Tasks
each scan an arbitrary part of the tables, so:

* a single-step aggregation becomes partial -> PartitionedOutput(keys) |
  Exchange -> final; the next stage's Tasks each own some keys (a keyless one
  gathers into a single Task);
* an ORDER BY, TopN, Limit or EnforceSingleRow finishes in a single Task:
  TopN and Limit run a partial step first, then everything goes through a
  gather (a keyless PartitionedOutput into one destination);
* a join (HashJoin, NestedLoopJoin) is refused: it needs co-partitioned or
  broadcast inputs, which are not planned yet; build such a plan with explicit
  PartitionedOutput/Exchange boundaries instead;
* whatever is still spread over several Tasks at the root is gathered into the
  single output Task.

Boundary partition counts are set to 1 here; the cluster sets them to the width
of the consuming stage once it knows it. Inserted nodes take the id of the node
they serve plus ``.partial`` (the partial step), ``.output`` (the
PartitionedOutput) and ``.remote`` (the Exchange); the root's gather uses
``<root id>.gather`` and ``gather``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import singledispatch

from gpu_engine.errors import PlanError
from gpu_engine.plans.aggregates import aggregation_output_schema, final_step_aggregates
from gpu_engine.plans.nodes import (
    AggregationNode,
    AggregationStep,
    EnforceSingleRowNode,
    ExchangeNode,
    FilterNode,
    LimitNode,
    OrderByNode,
    PartitionedOutputNode,
    PlanNode,
    TopNNode,
    ValuesNode,
)

__all__ = ["add_remote_exchanges"]

SINGLE = ("single",)
SPREAD = ("spread",)


def add_remote_exchanges(root: PlanNode) -> PlanNode:
    """Return ``root`` with the shuffles and gathers that running it on several Tasks per stage needs."""
    rewritten, distribution = _distribute(root)
    if distribution != SINGLE:
        rewritten = remote_boundary(rewritten, f"{root.id}.gather", "gather", ())
    return rewritten


def remote_boundary(source: PlanNode, output_id: str, exchange_id: str, keys: tuple[str, ...]) -> ExchangeNode:
    """Return Exchange(PartitionedOutput(keys)(source)): a shuffle on ``keys``, or a gather without keys."""
    output = PartitionedOutputNode(id=output_id, output_schema=source.output_schema, sources=(source,),
                                   partition_kind="partitioned", keys=tuple(keys), num_partitions=1)
    return ExchangeNode(id=exchange_id, output_schema=source.output_schema, sources=(output,))


def _hashed(keys) -> tuple:
    return ("hash", frozenset(keys))


@singledispatch
def _distribute(node: PlanNode) -> tuple[PlanNode, tuple]:
    """Return the rewritten node and how its rows are spread over a stage's Tasks."""
    if not node.sources:
        return node, SPREAD
    if len(node.sources) > 1:  # a join needs co-partitioned or broadcast inputs: not planned yet
        raise PlanError("the cluster cannot yet add remote exchanges around a node with several sources; "
                        "build the plan with PartitionedOutput/Exchange boundaries", node=node.label)
    sources, distributions = zip(*(_distribute(s) for s in node.sources))
    distribution = distributions[0] if distributions[0] == SINGLE else SPREAD
    return replace(node, sources=tuple(sources)), distribution


@_distribute.register
def _(node: ValuesNode):
    return node, SINGLE


@_distribute.register
def _(node: FilterNode):
    source, distribution = _distribute(node.source)
    return replace(node, sources=(source,)), distribution


@_distribute.register
def _(node: AggregationNode):
    source, distribution = _distribute(node.source)
    keys = node.grouping_keys
    done = _hashed(keys) if keys else SINGLE
    if node.step is AggregationStep.PARTIAL:
        return replace(node, sources=(source,)), SPREAD if distribution != SINGLE else SINGLE
    if distribution == SINGLE or (keys and distribution == _hashed(keys)):
        return replace(node, sources=(source,)), done
    if node.step is AggregationStep.SINGLE:
        key_fields = [node.output_schema.field(k) for k in keys]
        partial_schema = aggregation_output_schema(AggregationStep.PARTIAL, key_fields, node.aggregate_names,
                                                   node.aggregates)
        partial = AggregationNode(id=f"{node.id}.partial", output_schema=partial_schema, sources=(source,),
                                  step=AggregationStep.PARTIAL, grouping_keys=keys,
                                  aggregate_names=node.aggregate_names, aggregates=node.aggregates)
        exchange = remote_boundary(partial, f"{node.id}.output", f"{node.id}.remote", keys)
        return replace(node, sources=(exchange,), step=AggregationStep.FINAL,
                       aggregates=final_step_aggregates(node.aggregates, node.aggregate_names)), done
    exchange = remote_boundary(source, f"{node.id}.output", f"{node.id}.remote", keys)
    return replace(node, sources=(exchange,)), done


@_distribute.register
def _(node: OrderByNode):
    source, distribution = _distribute(node.source)
    if node.is_partial or distribution == SINGLE:
        return replace(node, sources=(source,)), distribution
    return replace(node, sources=(remote_boundary(source, f"{node.id}.output", f"{node.id}.remote", ()),)), SINGLE


@_distribute.register
def _(node: TopNNode):
    source, distribution = _distribute(node.source)
    if node.is_partial or distribution == SINGLE:
        return replace(node, sources=(source,)), distribution
    partial = replace(node, id=f"{node.id}.partial", sources=(source,), is_partial=True)
    return replace(node, sources=(remote_boundary(partial, f"{node.id}.output", f"{node.id}.remote", ()),)), SINGLE


@_distribute.register
def _(node: LimitNode):
    source, distribution = _distribute(node.source)
    if node.is_partial or distribution == SINGLE:
        return replace(node, sources=(source,)), distribution
    partial = replace(node, id=f"{node.id}.partial", sources=(source,), is_partial=True,
                      count=node.count + node.offset, offset=0)
    return replace(node, sources=(remote_boundary(partial, f"{node.id}.output", f"{node.id}.remote", ()),)), SINGLE


@_distribute.register
def _(node: EnforceSingleRowNode):
    source, distribution = _distribute(node.source)
    if distribution != SINGLE:
        source = remote_boundary(source, f"{node.id}.output", f"{node.id}.remote", ())
    return replace(node, sources=(source,)), SINGLE
