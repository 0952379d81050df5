"""Make a plan correct and parallel for several drivers by adding local exchanges.

Velox leaves this to the coordinator's planner (Presto's AddLocalExchanges);
here it is a free function the Session runs before a Task is made. With one
driver the plan is unchanged. With several, every driver of a scan pipeline
sees an arbitrary part of the rows, so:

* a single-step aggregation becomes partial -> LocalPartition(keys) -> final
  (a gather instead of a repartition when there are no keys); one with a
  holistic aggregate (median, mode, string_agg...) stays single behind a
  LocalPartition(keys): its partial step could not reduce the rows;
* so does one the optimizer marks ``partial_step=False`` (its estimates say
  a partial step would keep about a group per row: :mod:`gpu_engine.optimizer.partial_steps`);
* a final aggregation whose input is not already partitioned on its keys gets
  a LocalPartition(keys) in front; on its ``exchange_keys`` where the optimizer
  chose a subset (:mod:`gpu_engine.optimizer.exchange_keys`: one fixed-width key of
  many distinct values instead of long strings; a group's rows agree on any subset);
* TopN and Limit become partial -> gather -> final; OrderBy gets a gather,
  and so does EnforceSingleRow (it must count all the Task's rows);
* a Window needs each partition's rows on one driver: a LocalPartition by its
  partition keys (a gather without keys) unless its input is already so partitioned;
* a TopNRowNumber does too, after a partial step per driver (as Velox plans
  it), so only each driver's top rows per partition cross the exchange.

A HashJoin needs no exchange: all build drivers merge into one table that every
probe driver reads (broadcast-style), so the probe side may stay distributed
however it is. Right and full joins also emit the build rows nobody matched;
the last probe driver to finish emits them (as Velox does), so their output is
arbitrarily distributed. A NestedLoopJoin is planned the same way: its build
rows are broadcast to every probe driver.

An Exchange's output counts as arbitrarily distributed over drivers: its drivers
read pages from a shared queue in whatever order they arrive, so a final
aggregation over an Exchange gets a LocalPartition(keys) in front even when the
producers partitioned the rows by the same keys across Tasks.

Inserted nodes take the id of the node they serve plus ``.partial`` or
``.exchange``, so explain shows where they came from.
"""

from __future__ import annotations

from dataclasses import replace
from functools import singledispatch


from gpu_engine.plans.aggregates import HOLISTIC_AGGREGATES, aggregation_output_schema, final_step_aggregates
from gpu_engine.plans.expressions import ColumnRef
from gpu_engine.plans.nodes import (
    AggregationNode,
    AggregationStep,
    EnforceSingleRowNode,
    ExchangeNode,
    FilterNode,
    GroupIdNode,
    HashJoinNode,
    LimitNode,
    LocalPartitionNode,
    NestedLoopJoinNode,
    OrderByNode,
    PlanNode,
    ProjectNode,
    TopNNode,
    TopNRowNumberNode,
    ValuesNode,
    WindowNode,
)

__all__ = ["add_local_exchanges"]

SINGLE = ("single",)
ANY = ("any",)


def add_local_exchanges(root: PlanNode, max_drivers: int) -> PlanNode:
    """Return ``root`` rewritten so that ``max_drivers`` drivers per pipeline give the same result."""
    if max_drivers <= 1:
        return root
    rewritten, _ = _rewrite(root)
    return rewritten


def _hashed(keys) -> tuple:
    return ("hash", frozenset(keys))


def _exchange(source: PlanNode, node_id: str, keys: tuple[str, ...]) -> LocalPartitionNode:
    kind = "repartition" if keys else "gather"
    return LocalPartitionNode(id=f"{node_id}.exchange", output_schema=source.output_schema, sources=(source,),
                              partition_kind=kind, keys=tuple(keys))


@singledispatch
def _rewrite(node: PlanNode) -> tuple[PlanNode, tuple]:
    """Return the rewritten node and how its output is distributed over drivers."""
    if not node.sources:
        return node, ANY
    sources, distributions = zip(*(_rewrite(s) for s in node.sources))
    return replace(node, sources=tuple(sources)), distributions[0]


@_rewrite.register
def _(node: ValuesNode):
    return node, SINGLE


@_rewrite.register
def _(node: ExchangeNode):
    return node, ANY


@_rewrite.register(HashJoinNode)
@_rewrite.register(NestedLoopJoinNode)
def _(node):
    probe, distribution = _rewrite(node.probe)
    build, _ = _rewrite(node.build)
    if node.join_type in ("right", "full") and distribution != SINGLE:
        distribution = ANY
    elif distribution[0] == "hash" and not distribution[1] <= set(node.output_columns):
        distribution = ANY
    return replace(node, sources=(probe, build)), distribution


@_rewrite.register
def _(node: FilterNode):
    source, distribution = _rewrite(node.source)
    return replace(node, sources=(source,)), distribution


@_rewrite.register
def _(node: ProjectNode):
    source, distribution = _rewrite(node.source)
    if distribution[0] == "hash":
        # A key passed on under a new name (a derived table's ``c_key#2``) still co-locates equal values: rows
        # hashed by the source's columns are hashed by their output names (the first, where one is passed twice).
        renamed: dict[str, str] = {}
        for name, expression in zip(node.names, node.expressions):
            if isinstance(expression, ColumnRef):
                renamed.setdefault(expression.name, name)
        distribution = _hashed(renamed[k] for k in distribution[1]) if distribution[1] <= renamed.keys() else ANY
    return replace(node, sources=(source,)), distribution


@_rewrite.register
def _(node: GroupIdNode):
    source, distribution = _rewrite(node.source)
    # A key's NULLed copies of one input row differ from it, so no hash partitioning survives; one driver stays one.
    return replace(node, sources=(source,)), (SINGLE if distribution == SINGLE else ANY)


@_rewrite.register
def _(node: LocalPartitionNode):
    sources = tuple(_rewrite(s)[0] for s in node.sources)
    distribution = {"repartition": _hashed(node.keys), "gather": SINGLE}.get(node.partition_kind, ANY)
    return replace(node, sources=sources), distribution


@_rewrite.register
def _(node: AggregationNode):
    return _aggregation(node, ())


def distinct_partition_keys(node: AggregationNode) -> tuple[str, ...]:
    """Return the keys ``node``'s source should repartition its rows by, where that source is a DISTINCT
    under ``node`` (a SINGLE aggregation without aggregates, grouped by ``node``'s keys and more: the
    rewrite of ``count(DISTINCT x) GROUP BY keys``, or a GROUP BY over a SELECT DISTINCT); else ().

    Why: hashed by ``node``'s keys alone, every row of one of ``node``'s groups reaches the same driver's
    DISTINCT step, so ``node`` groups that driver's distinct rows in place, as a single step with no
    exchange: its partial step, exchange and final step go (TPC-H Q16's outer count over ~120K distinct
    (brand, type, size, supplier) rows). Spark and Presto plan a DISTINCT aggregation's partitioning the
    same way. The cost: ``node``'s keys must spread over the drivers as the DISTINCT's would.
    """
    source = node.source
    if (node.step is not AggregationStep.SINGLE or not node.grouping_keys or node.global_grouping_sets
            or not isinstance(source, AggregationNode) or source.step is not AggregationStep.SINGLE
            or source.aggregates or source.global_grouping_sets
            or not set(node.grouping_keys) < set(source.grouping_keys)):
        return ()
    return node.grouping_keys


def _aggregation(node: AggregationNode, partition_keys: tuple[str, ...]) -> tuple[PlanNode, tuple]:
    """Rewrite an aggregation; ``partition_keys`` (a subset of its keys, or ()) are those its exchange
    hashes by, as the aggregation above asks (:func:`distinct_partition_keys`)."""
    below = distinct_partition_keys(node)
    source, distribution = _aggregation(node.source, below) if below else _rewrite(node.source)
    keys = node.grouping_keys
    done = SINGLE if not keys else _hashed(keys)
    exchange_keys = keys
    if keys and not partition_keys and node.exchange_keys:
        partition_keys = node.exchange_keys  # the optimizer's choice (optimizer/exchange_keys.py)
    if keys and partition_keys and set(partition_keys) <= set(keys):
        exchange_keys, done = tuple(partition_keys), _hashed(partition_keys)
    # PARTIAL and INTERMEDIATE steps merge where their input is; the FINAL step above gets the exchange.
    merges_in_place = node.step in (AggregationStep.PARTIAL, AggregationStep.INTERMEDIATE)
    if distribution == SINGLE or (keys and distribution in (_hashed(keys), done)) or merges_in_place:
        # Rows hashed by all the keys already are not hashed by ``partition_keys`` (fewer): say how they are,
        # so the aggregation above exchanges them (a count by c8 over DISTINCT (c7, c8) rows hashed so).
        kept = distribution if merges_in_place or distribution != SINGLE else done
        return replace(node, sources=(source,)), kept
    if node.step is AggregationStep.SINGLE and (_keeps_every_value(node) or _partial_step_refused(node)):
        return replace(node, sources=(_exchange(source, node.id, exchange_keys),)), done
    if node.step is AggregationStep.SINGLE:
        key_fields = [node.output_schema.field(k) for k in keys]
        partial_schema = aggregation_output_schema(AggregationStep.PARTIAL, key_fields, node.aggregate_names, node.aggregates)
        partial = AggregationNode(id=f"{node.id}.partial", output_schema=partial_schema, sources=(source,),
                                  step=AggregationStep.PARTIAL, grouping_keys=keys,
                                  aggregate_names=node.aggregate_names, aggregates=node.aggregates,
                                  global_grouping_sets=node.global_grouping_sets, group_id_key=node.group_id_key)
        final = replace(node, sources=(_exchange(partial, node.id, exchange_keys),), step=AggregationStep.FINAL,
                        aggregates=final_step_aggregates(node.aggregates, node.aggregate_names))
        return final, done
    return replace(node, sources=(_exchange(source, node.id, exchange_keys),)), done


def _partial_step_refused(node: AggregationNode) -> bool:
    """Return True when the planner refused ``node`` a partial step (``partial_step=False``): its estimates
    say the partial step would keep about a group per row, so it would only add a hash insert per row and a
    second interning of every string key before the exchange (see :mod:`gpu_engine.optimizer.partial_steps`).
    Not under grouping sets with a set without keys, for :func:`_keeps_every_value`'s reason."""
    return not node.partial_step and not node.global_grouping_sets


def _keeps_every_value(node: AggregationNode) -> bool:
    """Return True when a partial step of ``node`` could not reduce its input: a holistic aggregate keeps
    every value, so its partial step emits each value as a row of its own (keys repeated).

    Why the raw rows cross the exchange instead, to one single step per driver: the values cross either
    way, and a partial step before them only adds a hash insert per row and the spreading of its value
    lists (db-benchmark's median and stddev by two keys, 1M rows in 10,000 groups on 2 drivers: 343 -> 194
    ms of CPU). Not under grouping sets with a
    set without keys: every raw step adds that set's row, so only one step may see raw rows.
    """
    return not node.global_grouping_sets and any(call.function in HOLISTIC_AGGREGATES for call in node.aggregates)


@_rewrite.register
def _(node: OrderByNode):
    source, distribution = _rewrite(node.source)
    if node.is_partial or distribution == SINGLE:
        return replace(node, sources=(source,)), distribution
    return replace(node, sources=(_exchange(source, node.id, ()),)), SINGLE


@_rewrite.register
def _(node: TopNNode):
    source, distribution = _rewrite(node.source)
    if node.is_partial or distribution == SINGLE:
        return replace(node, sources=(source,)), distribution
    partial = replace(node, id=f"{node.id}.partial", sources=(source,), is_partial=True)
    return replace(node, sources=(_exchange(partial, node.id, ()),)), SINGLE


@_rewrite.register
def _(node: LimitNode):
    source, distribution = _rewrite(node.source)
    if node.is_partial or distribution == SINGLE:
        return replace(node, sources=(source,)), distribution
    partial = replace(node, id=f"{node.id}.partial", sources=(source,), is_partial=True,
                      count=node.count + node.offset, offset=0)
    return replace(node, sources=(_exchange(partial, node.id, ()),)), SINGLE


@_rewrite.register
def _(node: EnforceSingleRowNode):
    source, distribution = _rewrite(node.source)
    if distribution != SINGLE:
        source = _exchange(source, node.id, ())
    return replace(node, sources=(source,)), SINGLE


@_rewrite.register
def _(node: WindowNode):
    source, distribution = _rewrite(node.source)
    keys = node.partition_keys
    if distribution == SINGLE or (keys and distribution[0] == "hash" and distribution[1] <= set(keys)):
        return replace(node, sources=(source,)), distribution  # rows of equal keys already share a driver
    return replace(node, sources=(_exchange(source, node.id, keys),)), (_hashed(keys) if keys else SINGLE)


@_rewrite.register
def _(node: TopNRowNumberNode):
    source, distribution = _rewrite(node.source)
    keys = node.partition_keys
    if node.is_partial or distribution == SINGLE or (keys and distribution[0] == "hash"
                                                      and distribution[1] <= set(keys)):
        return replace(node, sources=(source,)), distribution
    partial = replace(node, id=f"{node.id}.partial", output_schema=source.output_schema, sources=(source,),
                      row_number_name=None, is_partial=True)
    return replace(node, sources=(_exchange(partial, node.id, keys),)), (_hashed(keys) if keys else SINGLE)
