"""Turn a plan fragment into pipelines and driver factories (Velox's LocalPlanner).

A pipeline is a linear run of operators. A new pipeline starts at every
LocalPartition (its sources become producer pipelines ending in a LocalPartition
sink; the consumer side starts with a LocalExchange source) and, later, at every
non-first source of a node (a join's build side). A fragment's PartitionedOutput
is the sink of its output pipeline; an Exchange is a source (a leaf of the
fragment: its producers run in other Tasks). A Filter directly under a
Project, or alone, becomes one FilterProject operator.

The translation from node to operator is :func:`make_operator`, one
``singledispatch`` registration per node kind: adding an operator means adding
one registration here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import singledispatch
from typing import TYPE_CHECKING

from gpu_engine.errors import PlanError
from gpu_engine.exec.operator import Operator, OperatorCtx, ready_future
from gpu_engine.plans.nodes import (
    AggregationNode,
    EnforceSingleRowNode,
    ExchangeNode,
    FilterNode,
    FusedAggregationNode,
    GroupIdNode,
    HashJoinNode,
    LimitNode,
    LocalPartitionNode,
    NestedLoopJoinNode,
    OrderByNode,
    PartitionedOutputNode,
    PlanNode,
    ProjectNode,
    TableScanNode,
    TopNNode,
    TopNRowNumberNode,
    ValuesNode,
    RangeNode,
    UnnestNode,
    WindowNode,
    walk_plan,
)

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.exec.task import Task

__all__ = ["DriverFactory", "plan_pipelines", "make_operator", "FusedFilterProject", "GroupIdAggregationItem", "LocalExchangeSource", "LocalPartitionSink",
           "HashBuildSink", "NestedLoopJoinBuildSink"]


@dataclass(frozen=True)
class FusedFilterProject:
    """A pipeline item: a Filter and/or a Project run as one FilterProject operator."""

    filter: FilterNode | None
    project: ProjectNode | None

    @property
    def id(self) -> str:
        return (self.project or self.filter).id


@dataclass(frozen=True)
class GroupIdAggregationItem:
    """A pipeline item: a GroupId under an INTERMEDIATE step, run as one GroupIdAggregation operator
    (each grouping set merged from a finer one; :mod:`gpu_engine.operators.group_id_aggregation`)."""

    group_id: GroupIdNode
    aggregation: AggregationNode

    @property
    def id(self) -> str:
        return self.aggregation.id


@dataclass(frozen=True)
class LocalExchangeSource:
    """A pipeline item: the consumer side of a LocalPartitionNode."""

    node: LocalPartitionNode

    @property
    def id(self) -> str:
        return self.node.id


@dataclass(frozen=True)
class LocalPartitionSink:
    """A pipeline item: the producer side of a LocalPartitionNode."""

    node: LocalPartitionNode

    @property
    def id(self) -> str:
        return self.node.id


@dataclass(frozen=True)
class HashBuildSink:
    """A pipeline item: the build side of a HashJoinNode (its probe side is the node itself)."""

    node: HashJoinNode

    @property
    def id(self) -> str:
        return self.node.id


@dataclass(frozen=True)
class NestedLoopJoinBuildSink:
    """A pipeline item: the build side of a NestedLoopJoinNode (its probe side is the node itself)."""

    node: NestedLoopJoinNode

    @property
    def id(self) -> str:
        return self.node.id


@dataclass
class DriverFactory:
    """Make the operators of one pipeline for each of its drivers."""

    pipeline_id: int
    items: list
    num_drivers: int
    is_output: bool
    local_exchange_producers: dict[str, int] = field(default_factory=dict)

    def prepare_task(self, task: "Task") -> None:
        """Create the Task-level state this pipeline's operators share.

        LocalExchange queues; the Exchange queue its drivers read together; the
        Task's output buffer, which must know how many drivers produce into it
        to send end markers once all are done.
        """
        from gpu_engine.exec.exchange_queue import ExchangeQueue
        from gpu_engine.exec.local_exchange_queue import LocalExchangeQueue

        config = task.query_ctx.config
        for item in self.items:
            if isinstance(item, LocalExchangeSource):
                task.local_exchange_queues[item.id] = LocalExchangeQueue(
                    num_partitions=self.num_drivers,
                    num_producers=self.local_exchange_producers[item.id],
                    max_bytes=config.local_exchange_max_bytes,
                )
            elif isinstance(item, ExchangeNode):
                task.exchange_queues[item.id] = ExchangeQueue(task.query_ctx.output_buffer_manager,
                                                              config.exchange_max_bytes)
            elif isinstance(item, PartitionedOutputNode):
                task.query_ctx.output_buffer_manager.initialize_task(
                    task.task_id, item.partition_kind, item.num_partitions, self.num_drivers,
                    config.output_buffer_max_bytes)

        self._prepare_join_bridges(task)
        # A Filter's single-column conjuncts right above this pipeline's scan: tested in the scan too
        # (gpu_engine.connectors.scan_predicates), before the scan's other columns are decoded.
        from gpu_engine.connectors.scan_predicates import plan_scan_predicates

        for scan_id, predicate in plan_scan_predicates(self.items):
            task.dynamic_filters.add(scan_id, predicate)

    def _prepare_join_bridges(self, task: "Task") -> None:
        """Give each join's bridge the driver count of its build (or probe) pipeline, creating it once,
        and the key filters it pushes to this pipeline's scan (:func:`~gpu_engine.exec.dynamic_filters.plan_key_filters`)."""
        from gpu_engine.exec.dynamic_filters import plan_key_filters
        from gpu_engine.exec.join_bridge import HashJoinBridge

        for item in self.items:
            if isinstance(item, (HashBuildSink, NestedLoopJoinBuildSink)):
                task.bridges.setdefault(item.id, HashJoinBridge()).num_builders = self.num_drivers
            elif isinstance(item, (HashJoinNode, NestedLoopJoinNode)):
                task.bridges.setdefault(item.id, HashJoinBridge()).num_probers = self.num_drivers
        for target in plan_key_filters(self.items):
            bridge = task.bridges[target.join_id]
            bridge.key_filter_targets += (target,)
            bridge.dynamic_filters = task.dynamic_filters
            if target.waits:  # a scan of another pipeline, feeding this one through a local exchange
                task.dynamic_filters.expect(target.scan_id, bridge.table_or_future()[1] or ready_future())

    def create_operators(self, task: "Task", driver_id: int) -> list[Operator]:
        """Return fresh operators, source first, for one driver."""
        return [
            make_operator(item, OperatorCtx(task, self.pipeline_id, driver_id, operator_id, self.num_drivers))
            for operator_id, item in enumerate(self.items)
        ]


def _driver_limit(item) -> int | None:
    """Return the most drivers an item allows (None: no limit), as Velox's LocalPlanner does."""
    if isinstance(item, LocalExchangeSource) and item.node.partition_kind == "gather":
        return 1
    if isinstance(item, ValuesNode):
        return 1
    if isinstance(item, (OrderByNode, TopNNode, LimitNode)) and not item.is_partial:
        return 1
    if isinstance(item, (AggregationNode, FusedAggregationNode)) and not item.grouping_keys and item.step.output_is_final:
        return 1
    if isinstance(item, EnforceSingleRowNode):
        return 1
    if isinstance(item, WindowNode) and not item.partition_keys:
        return 1
    if isinstance(item, TopNRowNumberNode) and not item.partition_keys and not item.is_partial:
        return 1
    return None


def plan_pipelines(root: PlanNode, max_drivers: int) -> list[DriverFactory]:
    """Split ``root`` into pipelines; the first factory returned is the output pipeline."""
    pipelines: list[list] = []
    consumer_of: dict[str, int] = {}
    producers_of: dict[str, list[int]] = {}

    def visit(node: PlanNode, current: list) -> None:
        if isinstance(node, LocalPartitionNode):
            current.append(LocalExchangeSource(node))
            for source in node.sources:
                producer: list = [LocalPartitionSink(node)]
                visit(source, producer)
                pipelines.append(producer)
                producers_of.setdefault(node.id, []).append(id(producer))
            return
        if isinstance(node, ProjectNode) and isinstance(node.source, FilterNode):
            current.append(FusedFilterProject(node.source, node))
            visit(node.source.source, current)
            return
        if isinstance(node, AggregationNode) and isinstance(node.source, GroupIdNode):
            from gpu_engine.operators.group_id_aggregation import merges_grouping_sets

            if merges_grouping_sets(node.source, node):
                current.append(GroupIdAggregationItem(node.source, node))
                visit(node.source.source, current)
                return
        if isinstance(node, FilterNode):
            current.append(FusedFilterProject(node, None))
        elif isinstance(node, ProjectNode):
            current.append(FusedFilterProject(None, node))
        else:
            current.append(node)
        if node.sources:
            visit(node.sources[0], current)
        if isinstance(node, HashJoinNode):
            build: list = [HashBuildSink(node)]
            visit(node.build, build)
            pipelines.append(build)
        elif isinstance(node, NestedLoopJoinNode):
            build = [NestedLoopJoinBuildSink(node)]
            visit(node.build, build)
            pipelines.append(build)
        elif len(node.sources) > 1:
            raise NotImplementedError(f"{node.label}: nodes with several sources are not executable yet")

    for node in walk_plan(root):
        if isinstance(node, PartitionedOutputNode) and node is not root:
            raise PlanError("a PartitionedOutput must be the root of its fragment", node=node.label)
        if isinstance(node, ExchangeNode) and node.sources:
            raise PlanError("an Exchange with its producer attached is a distributed plan: run it on a "
                            "gpu_engine.cluster.LocalCluster, which cuts it into fragments", node=node.label)

    output: list = []
    try:
        visit(root, output)
    except RecursionError:  # a plan some hundreds of nodes deep (optimize and fuse off): name it, as prepare_plan does
        from gpu_engine.planning.plan_depth import too_deep_plan

        raise too_deep_plan(root) from None
    ordered = [output] + pipelines
    factories = []
    index_of = {id(p): i for i, p in enumerate(ordered)}
    for pipeline_id, items in enumerate(ordered):
        items = list(reversed(items))  # source first
        limits = [limit for limit in map(_driver_limit, items) if limit is not None]
        drivers = min([max_drivers, *limits])
        factories.append(DriverFactory(pipeline_id, items, drivers, pipeline_id == 0))
        for item in items:
            if isinstance(item, LocalExchangeSource):
                consumer_of[item.id] = pipeline_id
    for node_id, producer_ids in producers_of.items():
        total = sum(factories[index_of[p]].num_drivers for p in producer_ids)
        factories[consumer_of[node_id]].local_exchange_producers[node_id] = total
    return factories


@singledispatch
def make_operator(item, ctx: OperatorCtx) -> Operator:
    """Return the operator that executes one pipeline item."""
    raise NotImplementedError(f"no operator executes {type(item).__name__}")


@make_operator.register
def _(item: ValuesNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.values import Values

    return Values(ctx, item)


@make_operator.register
def _(item: RangeNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.range import Range

    return Range(ctx, item)


@make_operator.register
def _(item: UnnestNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.unnest import Unnest

    return Unnest(ctx, item)


@make_operator.register
def _(item: TableScanNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.table_scan import TableScan

    return TableScan(ctx, item)


@make_operator.register
def _(item: FusedFilterProject, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.filter_project import FilterProject

    return FilterProject(ctx, item.filter, item.project)


@make_operator.register
def _(item: AggregationNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.hash_aggregation import HashAggregation

    return HashAggregation(ctx, item)


@make_operator.register
def _(item: GroupIdAggregationItem, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.group_id_aggregation import GroupIdAggregation

    return GroupIdAggregation(ctx, item.group_id, item.aggregation)


@make_operator.register
def _(item: GroupIdNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.group_id import GroupId

    return GroupId(ctx, item)


@make_operator.register
def _(item: FusedAggregationNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.fused_aggregation import FusedAggregation

    return FusedAggregation(ctx, item)


@make_operator.register
def _(item: LocalExchangeSource, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.local_partition import LocalExchange

    return LocalExchange(ctx, item.node)


@make_operator.register
def _(item: LocalPartitionSink, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.local_partition import LocalPartition

    return LocalPartition(ctx, item.node)


@make_operator.register
def _(item: OrderByNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.order_by import OrderBy

    return OrderBy(ctx, item)


@make_operator.register
def _(item: TopNNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.top_n import TopN

    return TopN(ctx, item)


@make_operator.register
def _(item: WindowNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.window import Window

    return Window(ctx, item)


@make_operator.register
def _(item: TopNRowNumberNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.top_n_row_number import TopNRowNumber

    return TopNRowNumber(ctx, item)


@make_operator.register
def _(item: LimitNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.limit import Limit

    return Limit(ctx, item)


@make_operator.register
def _(item: PartitionedOutputNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.partitioned_output import PartitionedOutput

    return PartitionedOutput(ctx, item)


@make_operator.register
def _(item: ExchangeNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.exchange import Exchange

    return Exchange(ctx, item)


@make_operator.register
def _(item: HashJoinNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.hash_probe import HashProbe

    return HashProbe(ctx, item)


@make_operator.register
def _(item: HashBuildSink, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.hash_build import HashBuild

    return HashBuild(ctx, item.node)


@make_operator.register
def _(item: NestedLoopJoinNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.nested_loop_join_probe import NestedLoopJoinProbe

    return NestedLoopJoinProbe(ctx, item)


@make_operator.register
def _(item: NestedLoopJoinBuildSink, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.nested_loop_join_build import NestedLoopJoinBuild

    return NestedLoopJoinBuild(ctx, item.node)


@make_operator.register
def _(item: EnforceSingleRowNode, ctx: OperatorCtx) -> Operator:
    from gpu_engine.operators.enforce_single_row import EnforceSingleRow

    return EnforceSingleRow(ctx, item)
