"""Cut a distributed plan into fragments at its PartitionedOutput/Exchange boundaries.

A distributed plan is one tree in which every boundary is an ExchangeNode whose
source is the PartitionedOutputNode of the fragment that feeds it (or several:
the Exchange reads the union of their rows, as Spark runs a set operation). Cutting
detaches each such producer into its own :class:`Fragment`; the Exchange stays
in the consumer fragment as a leaf, and the fragment records which fragment
feeds it, so the coordinator can send remote splits naming the producer Tasks.
Fragments come producers first; the last one is the output fragment.

Fragments built with separate PlanBuilders (as Velox's tests build them, an
``exchange(schema)`` starting the consumer) become a distributed plan with
:func:`chain_fragments`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpu_engine.errors import PlanError
from gpu_engine.plans.nodes import (
    AggregationNode,
    EnforceSingleRowNode,
    ExchangeNode,
    LimitNode,
    OrderByNode,
    PartitionedOutputNode,
    PlanNode,
    TopNNode,
    TopNRowNumberNode,
    WindowNode,
    ValuesNode,
    RangeNode,
    walk_plan,
)

__all__ = ["Fragment", "plan_fragments", "chain_fragments", "has_remote_exchanges"]


@dataclass(frozen=True)
class Fragment:
    """One stage's plan: its root, the producer fragment of each of its Exchanges, and its widest width.

    Attributes
    ----------
    fragment_id
        Position in producer-first order (also the stage number).
    root
        The fragment's plan; its Exchanges have no sources.
    producers
        ``(exchange node id, producer fragment id)`` pairs.
    max_width
        1 when the fragment must run as a single Task (its rows must meet in
        one place: a final ORDER BY, TopN or Limit, a global aggregation, a
        Values, an EnforceSingleRow, an Exchange fed by a keyless gather); else None.
    """

    fragment_id: int
    root: PlanNode
    producers: tuple[tuple[str, int], ...] = ()
    max_width: int | None = None

    @property
    def output(self) -> PartitionedOutputNode | None:
        """Return the fragment's PartitionedOutput (None for the output fragment)."""
        return self.root if isinstance(self.root, PartitionedOutputNode) else None


def has_remote_exchanges(root: PlanNode) -> bool:
    """Return True when the plan already holds PartitionedOutput/Exchange boundaries."""
    return any(isinstance(node, (ExchangeNode, PartitionedOutputNode)) for node in walk_plan(root))


def plan_fragments(root: PlanNode) -> tuple[Fragment, ...]:
    """Return the fragments of a distributed plan, producers first, the output fragment last."""
    if isinstance(root, PartitionedOutputNode):
        raise PlanError("the plan's root is a PartitionedOutput: its rows would reach no one; "
                        "end the plan with the output fragment", node=root.label)
    fragments: list[Fragment] = []

    def build(fragment_root: PlanNode) -> int:
        producers: list[tuple[str, int]] = []
        feeds_gather = []

        def cut(node: PlanNode) -> PlanNode:
            if isinstance(node, ExchangeNode):
                if not node.sources:
                    raise PlanError("an Exchange has no producer; attach it with chain_fragments", node=node.label)
                for producer in node.sources:  # several: a union of their rows (a set operation on Spark)
                    if not isinstance(producer, PartitionedOutputNode):
                        raise PlanError(f"an Exchange's source must be a PartitionedOutput, got {producer.label}",
                                        node=node.label)
                    if producer.output_schema.names != node.output_schema.names:
                        raise PlanError(f"columns {producer.output_schema.names} of {producer.label} do not match "
                                        f"the Exchange's {node.output_schema.names}", node=node.label)
                    producers.append((node.id, build(producer)))
                    if producer.partition_kind == "partitioned" and not producer.keys:
                        feeds_gather.append(node.id)
                return replace(node, sources=())
            if isinstance(node, PartitionedOutputNode) and node is not fragment_root:
                raise PlanError("a PartitionedOutput must sit directly under an Exchange", node=node.label)
            if not node.sources:
                return node
            return replace(node, sources=tuple(cut(source) for source in node.sources))

        stripped = cut(fragment_root)
        single = bool(feeds_gather) or any(_needs_one_task(node) for node in walk_plan(stripped))
        fragments.append(Fragment(len(fragments), stripped, tuple(producers), 1 if single else None))
        return len(fragments) - 1

    build(root)
    return tuple(fragments)


def _needs_one_task(node: PlanNode) -> bool:
    if isinstance(node, (ValuesNode, RangeNode, EnforceSingleRowNode)):  # a Range in each Task would repeat it
        return True
    if isinstance(node, (OrderByNode, TopNNode, LimitNode)):
        return not node.is_partial
    if isinstance(node, AggregationNode):
        return not node.grouping_keys and node.step.output_is_final
    if isinstance(node, WindowNode):
        return not node.partition_keys
    if isinstance(node, TopNRowNumberNode):
        return not node.partition_keys and not node.is_partial
    return False


def chain_fragments(*fragments: PlanNode) -> PlanNode:
    """Join fragments built apart into one distributed plan, each feeding the next one's Exchange.

    Every fragment but the last must end in a PartitionedOutput; every fragment
    but the first must hold exactly one Exchange without a source.
    """
    if not fragments:
        raise ValueError("chain_fragments needs at least one fragment")
    producer = fragments[0]
    for consumer in fragments[1:]:
        if not isinstance(producer, PartitionedOutputNode):
            raise PlanError("every fragment but the last must end in a PartitionedOutput", node=producer.label)
        open_exchanges = [n for n in walk_plan(consumer) if isinstance(n, ExchangeNode) and not n.sources]
        if len(open_exchanges) != 1:
            raise PlanError(f"a consumer fragment needs one Exchange without a source, found {len(open_exchanges)}",
                            node=consumer.label)
        producer = _attach(consumer, open_exchanges[0].id, producer)
    return producer


def _attach(node: PlanNode, exchange_id: str, producer: PlanNode) -> PlanNode:
    if node.id == exchange_id and isinstance(node, ExchangeNode):
        return replace(node, sources=(producer,))
    if not node.sources:
        return node
    return replace(node, sources=tuple(_attach(source, exchange_id, producer) for source in node.sources))
