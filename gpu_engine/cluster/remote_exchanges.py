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
* a Window reads its partitions whole: a shuffle by its partition keys (a
  gather into a single Task without keys) unless its rows already sit so; a
  TopNRowNumber too, after a partial step in the producing stage;
* a join (HashJoin, NestedLoopJoin) is refused: it needs co-partitioned or
  broadcast inputs, which are not planned yet; build such a plan with explicit
  PartitionedOutput/Exchange boundaries instead;
* whatever is still spread over several Tasks at the root is gathered into the
  single output Task.

A stage's rows may already sit where an aggregation needs them: a leaf the
caller says is hash-partitioned (a shuffled join's output, partitioned by its
join keys) keeps that through Filters, Projects that pass the key columns on
and one-input joins (a broadcast join keeps its probe rows in place). An
aggregation whose grouping keys include, for every partitioning key, a
column holding its value then runs in that stage as it is, with no shuffle:
all rows of a group share those values and so one partition (Spark's
``EnsureRequirements`` skips the exchange on the same ground).

Boundary partition counts are set to 1 here; the cluster sets them to the width
of the consuming stage once it knows it. Inserted nodes take the id of the node
they serve plus ``.partial`` (the partial step), ``.output`` (the
PartitionedOutput) and ``.remote`` (the Exchange); the root's gather uses
``<root id>.gather`` and ``gather``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import singledispatch
from typing import Iterable, Mapping, Sequence

from gpu_engine.errors import PlanError
from gpu_engine.plans.aggregates import aggregation_output_schema, final_step_aggregates
from gpu_engine.plans.expressions import ColumnRef
from gpu_engine.plans.nodes import (
    AggregationNode,
    AggregationStep,
    EnforceSingleRowNode,
    ExchangeNode,
    FilterNode,
    HashJoinNode,
    LimitNode,
    LocalPartitionNode,
    OrderByNode,
    PartitionedOutputNode,
    PlanNode,
    ProjectNode,
    TopNNode,
    TopNRowNumberNode,
    ValuesNode,
    RangeNode,
    WindowNode,
)

__all__ = ["add_remote_exchanges", "hash_partitioned"]

SINGLE = ("single",)
SPREAD = ("spread",)


def add_remote_exchanges(root: PlanNode, partitioned_leaves: Mapping[str, Sequence[Iterable[str]]] | None = None
                         ) -> PlanNode:
    """Return ``root`` with the shuffles and gathers that running it on several Tasks per stage needs.

    ``partitioned_leaves``: leaf id -> its partitioning, one entry per key of
    the hash its rows are partitioned by: the names of the leaf's columns
    that hold that key's value (a join's probe and build key, say).
    """
    leaves = {leaf: hash_partitioned(keys) for leaf, keys in (partitioned_leaves or {}).items()}
    rewritten, distribution = _distribute(root, leaves)
    if distribution != SINGLE:
        rewritten = remote_boundary(rewritten, f"{root.id}.gather", "gather", ())
    return rewritten


def remote_boundary(source: PlanNode, output_id: str, exchange_id: str, keys: tuple[str, ...]) -> ExchangeNode:
    """Return Exchange(PartitionedOutput(keys)(source)): a shuffle on ``keys``, or a gather without keys."""
    output = PartitionedOutputNode(id=output_id, output_schema=source.output_schema, sources=(source,),
                                   partition_kind="partitioned", keys=tuple(keys), num_partitions=1)
    return ExchangeNode(id=exchange_id, output_schema=source.output_schema, sources=(output,))


def hash_partitioned(keys: Sequence[Iterable[str]]) -> tuple:
    """Return the distribution of rows partitioned by the hash of several keys, each held by any of some columns."""
    return ("hash", frozenset(frozenset(names) for names in keys))


def _hashed(keys) -> tuple:
    return hash_partitioned([(key,) for key in keys])


def _clusters(distribution: tuple, keys) -> bool:
    """Return True when rows so distributed put every group of ``keys`` in one partition.

    Hash partitioning on columns among the grouping keys does: rows equal on
    all grouping keys are equal on those, so they hash alike.
    """
    if distribution[0] != "hash" or not distribution[1]:
        return False
    wanted = set(keys)
    return all(names & wanted for names in distribution[1])


def _renamed(distribution: tuple, renames: Mapping[str, Iterable[str]]) -> tuple:
    """Return ``distribution`` seen through a node that outputs input column ``c`` as ``renames[c]`` (SPREAD if lost)."""
    if distribution[0] != "hash":
        return distribution
    keys = [frozenset(new for name in names for new in renames.get(name, ())) for names in distribution[1]]
    return ("hash", frozenset(keys)) if all(keys) else SPREAD


@singledispatch
def _distribute(node: PlanNode, leaves: Mapping[str, tuple]) -> tuple[PlanNode, tuple]:
    """Return the rewritten node and how its rows are spread over a stage's Tasks (``leaves``: leaf id -> distribution)."""
    if not node.sources:
        return node, leaves.get(node.id, SPREAD)
    if len(node.sources) > 1 and isinstance(node, LocalPartitionNode):  # the SQL planner's UNION ALL
        raise PlanError("set operations (UNION / INTERSECT / EXCEPT) do not run on a LocalCluster yet "
                        "(a LocalPartition with several sources); run the query with Session.sql or SparkRunner.sql",
                        node=node.label)
    if len(node.sources) > 1:  # a join needs co-partitioned or broadcast inputs: not planned yet
        raise PlanError("the cluster cannot yet add remote exchanges around a node with several sources; "
                        "build the plan with PartitionedOutput/Exchange boundaries", node=node.label)
    sources, distributions = zip(*(_distribute(s, leaves) for s in node.sources))
    distribution = distributions[0] if distributions[0] == SINGLE else SPREAD
    return replace(node, sources=tuple(sources)), distribution


@_distribute.register
def _(node: ProjectNode, leaves: Mapping[str, tuple]):
    source, distribution = _distribute(node.source, leaves)
    renames: dict[str, list[str]] = {}
    for name, expression in zip(node.names, node.expressions):
        if isinstance(expression, ColumnRef):
            renames.setdefault(expression.name, []).append(name)
    return replace(node, sources=(source,)), _renamed(distribution, renames)


@_distribute.register
def _(node: HashJoinNode, leaves: Mapping[str, tuple]):
    if len(node.sources) != 1:  # both sides: not planned here (see the default)
        return _distribute.dispatch(PlanNode)(node, leaves)
    source, distribution = _distribute(node.source, leaves)  # a broadcast join: its probe rows stay where they are
    kept = {name: [name] for name in node.output_schema.names}
    return replace(node, sources=(source,)), _renamed(distribution, kept)


@_distribute.register(ValuesNode)
@_distribute.register(RangeNode)
def _(node, leaves: Mapping[str, tuple]):
    return node, SINGLE


@_distribute.register
def _(node: FilterNode, leaves: Mapping[str, tuple]):
    source, distribution = _distribute(node.source, leaves)
    return replace(node, sources=(source,)), distribution


@_distribute.register
def _(node: AggregationNode, leaves: Mapping[str, tuple]):
    source, distribution = _distribute(node.source, leaves)
    keys = node.grouping_keys
    done = _hashed(keys) if keys else SINGLE
    if node.step in (AggregationStep.PARTIAL, AggregationStep.INTERMEDIATE):  # merge where the input is
        return replace(node, sources=(source,)), SPREAD if distribution != SINGLE else SINGLE
    if distribution == SINGLE or (keys and _clusters(distribution, keys)):
        return replace(node, sources=(source,)), done
    if node.step is AggregationStep.SINGLE:
        key_fields = [node.output_schema.field(k) for k in keys]
        partial_schema = aggregation_output_schema(AggregationStep.PARTIAL, key_fields, node.aggregate_names,
                                                   node.aggregates)
        partial = AggregationNode(id=f"{node.id}.partial", output_schema=partial_schema, sources=(source,),
                                  step=AggregationStep.PARTIAL, grouping_keys=keys,
                                  aggregate_names=node.aggregate_names, aggregates=node.aggregates,
                                  global_grouping_sets=node.global_grouping_sets, group_id_key=node.group_id_key)
        exchange = remote_boundary(partial, f"{node.id}.output", f"{node.id}.remote", keys)
        return replace(node, sources=(exchange,), step=AggregationStep.FINAL,
                       aggregates=final_step_aggregates(node.aggregates, node.aggregate_names)), done
    exchange = remote_boundary(source, f"{node.id}.output", f"{node.id}.remote", keys)
    return replace(node, sources=(exchange,)), done


@_distribute.register
def _(node: WindowNode, leaves: Mapping[str, tuple]):
    source, distribution = _distribute(node.source, leaves)
    keys = node.partition_keys
    if distribution == SINGLE or (keys and _clusters(distribution, keys)):
        return replace(node, sources=(source,)), distribution  # each partition's rows already share a Task
    exchange = remote_boundary(source, f"{node.id}.output", f"{node.id}.remote", keys)
    return replace(node, sources=(exchange,)), (_hashed(keys) if keys else SINGLE)


@_distribute.register
def _(node: TopNRowNumberNode, leaves: Mapping[str, tuple]):
    source, distribution = _distribute(node.source, leaves)
    keys = node.partition_keys
    if node.is_partial or distribution == SINGLE or (keys and _clusters(distribution, keys)):
        return replace(node, sources=(source,)), distribution
    partial = replace(node, id=f"{node.id}.partial", output_schema=source.output_schema, sources=(source,),
                      row_number_name=None, is_partial=True)
    exchange = remote_boundary(partial, f"{node.id}.output", f"{node.id}.remote", keys)
    return replace(node, sources=(exchange,)), (_hashed(keys) if keys else SINGLE)


@_distribute.register
def _(node: OrderByNode, leaves: Mapping[str, tuple]):
    source, distribution = _distribute(node.source, leaves)
    if node.is_partial or distribution == SINGLE:
        return replace(node, sources=(source,)), distribution
    return replace(node, sources=(remote_boundary(source, f"{node.id}.output", f"{node.id}.remote", ()),)), SINGLE


@_distribute.register
def _(node: TopNNode, leaves: Mapping[str, tuple]):
    source, distribution = _distribute(node.source, leaves)
    if node.is_partial or distribution == SINGLE:
        return replace(node, sources=(source,)), distribution
    partial = replace(node, id=f"{node.id}.partial", sources=(source,), is_partial=True)
    return replace(node, sources=(remote_boundary(partial, f"{node.id}.output", f"{node.id}.remote", ()),)), SINGLE


@_distribute.register
def _(node: LimitNode, leaves: Mapping[str, tuple]):
    source, distribution = _distribute(node.source, leaves)
    if node.is_partial or distribution == SINGLE:
        return replace(node, sources=(source,)), distribution
    partial = replace(node, id=f"{node.id}.partial", sources=(source,), is_partial=True,
                      count=node.count + node.offset, offset=0)
    return replace(node, sources=(remote_boundary(partial, f"{node.id}.output", f"{node.id}.remote", ()),)), SINGLE


@_distribute.register
def _(node: EnforceSingleRowNode, leaves: Mapping[str, tuple]):
    source, distribution = _distribute(node.source, leaves)
    if distribution != SINGLE:
        source = remote_boundary(source, f"{node.id}.output", f"{node.id}.remote", ())
    return replace(node, sources=(source,)), SINGLE
