"""Add the shuffles, gathers and join boundaries (broadcast or shuffled) a single-node plan needs as Spark stages.

Why a pass of its own: :func:`gpu_engine.cluster.add_remote_exchanges` plans
aggregations, ORDER BY, TopN and Limit across Tasks but refuses joins (a node
with two inputs needs co-partitioned or broadcast inputs). Each join is given
one of two strategies (``strategy(join)``; the runner picks by the build
side's estimated size, like Spark's ``spark.sql.autoBroadcastJoinThreshold``):

``broadcast``
    The build side is collected once on the driver and shipped to every Task,
    while the probe side stays spread over the partitions. The pass detaches
    the build side, lets ``add_remote_exchanges`` plan the rest (the join then
    looks like any one-input node that keeps its input's distribution), and
    re-attaches the build side behind ``Exchange(PartitionedOutput(broadcast))``.
    Only join types whose result is right when every Task holds the whole
    build side can (:data:`BROADCAST_JOIN_TYPES`): a right, full, right semi
    or right anti join would emit its unmatched build rows once per Task.
``shuffle``
    Both sides are planned on their own and end in a keyed shuffle,
    ``Exchange(PartitionedOutput(keys))``, the probe side on the left keys and
    the build side on the right keys; the engine's partition ids (the same
    hash of the same values on both sides) send equal keys to the same
    partition, where the join runs on co-partitioned inputs. Every join type
    can, including right and full joins (a build row's only possible matches
    are in its own partition). A NestedLoopJoin has no keys: its shuffle is a
    gather of both sides into one partition. A null-aware anti join (``NOT
    IN``) also needs to know, in every partition, whether the whole build side
    has a NULL key and whether it is empty; the runner's build-side stage sends
    its rows with a NULL key, and one other row of each Task, to every
    partition (Velox's ``replicateNullsAndAny``). A copied row cannot match a
    probe row outside its home partition, so the copies change nothing else.

During ``add_remote_exchanges`` a shuffled join stands in as a leaf of its
own id, hash-partitioned by its keys (:func:`join_output_partitioning`), and
comes back with its two keyed inputs afterwards; an aggregation above it on
those keys then runs in the join's stage without a second shuffle (TPC-H Q3,
Q10, Q13 group by the key they joined on). Each side and each broadcast build
side is planned the same way, recursively; like the query's root, a side is
not gathered first (a broadcast collects every partition, a shuffle routes them).

A join whose build side is too big to broadcast but whose probe side is
small enough may have its sides swapped first (``strategy.swaps(join)``, as
Spark's broadcast joins build either side of an inner join): inner stays
inner, right becomes left, right semi left semi, right anti anti, and the
small side is broadcast (TPC-H Q15 broadcasts its suppliers to the revenue
per supplier instead of shuffling both).

Inserted nodes are named after the join: ``<join id>.broadcast`` (the
PartitionedOutput) and ``<join id>.build`` (the Exchange) of a broadcast;
``<join id>.probe.output`` / ``<join id>.build.output`` and ``<join id>.probe`` /
``<join id>.build`` for a shuffled join.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from gpu_engine.cluster import add_remote_exchanges, has_remote_exchanges
from gpu_engine.errors import PlanError
from gpu_engine.plans.expressions import ColumnRef
from gpu_engine.plans.nodes import (
    AggregationNode,
    ExchangeNode,
    FilterNode,
    HashJoinNode,
    LocalPartitionNode,
    NestedLoopJoinNode,
    PartitionedOutputNode,
    PlanNode,
    ProjectNode,
    TableScanNode,
)

__all__ = ["add_spark_exchanges", "BROADCAST_JOIN_TYPES", "JOIN_STRATEGIES", "SWAPPED_JOIN_TYPES",
           "default_join_strategy", "join_sides", "swapped_join", "join_output_partitioning", "routed_by",
           "aggregation_under"]

#: Join types whose result is right when each Task joins its probe rows with the whole build side.
BROADCAST_JOIN_TYPES = ("inner", "left", "left_semi", "anti", "null_aware_anti")
JOIN_STRATEGIES = ("broadcast", "shuffle")

_ROOT_GATHER_ID = "gather"  # what add_remote_exchanges names the gather it adds at a spread root

JoinStrategy = Callable[[PlanNode], str]


def default_join_strategy(join: PlanNode) -> str:
    """Broadcast every join that can be broadcast; shuffle the others (right, full, right semi, right anti)."""
    return "broadcast" if join.join_type in BROADCAST_JOIN_TYPES else "shuffle"


#: The join type a hash join becomes with its probe and build sides swapped, for those that can be broadcast then.
SWAPPED_JOIN_TYPES = {"inner": "inner", "right": "left", "right_semi": "left_semi", "right_anti": "anti"}


def swapped_join(join: HashJoinNode) -> HashJoinNode:
    """Return ``join`` with probe and build sides (and keys) swapped, the same rows out (see SWAPPED_JOIN_TYPES)."""
    return replace(join, sources=(join.build, join.probe), join_type=SWAPPED_JOIN_TYPES[join.join_type],
                   left_keys=join.right_keys, right_keys=join.left_keys)


def join_sides(join: PlanNode) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return the probe and build keys a shuffled join routes its sides by (none for a NestedLoopJoin: a gather)."""
    if isinstance(join, HashJoinNode):
        return tuple(join.left_keys), tuple(join.right_keys)
    return (), ()


#: Per join type, which sides' key columns hold the partitioning key in every output row (the other side's
#: are NULL in an unmatched row, and such rows sit in the partition of the preserved side's key).
_KEYS_KEPT = {"inner": ("probe", "build"), "left": ("probe",), "left_semi": ("probe",), "anti": ("probe",),
              "null_aware_anti": ("probe",), "right": ("build",), "right_semi": ("build",),
              "right_anti": ("build",), "full": ()}


def join_output_partitioning(join: PlanNode) -> list[tuple[str, ...]] | None:
    """Return how a shuffled hash join's output is partitioned: per key, the output columns holding its value.

    Both sides are routed by the hash of their keys, so every output row sits
    in the partition of its key values; a key is held by its probe column, its
    build column, or both (inner), where the join outputs them and they are
    never NULL-extended. None when some key is held by no output column (or
    the join has no keys, or is full).
    """
    if not isinstance(join, HashJoinNode) or not join.left_keys:
        return None
    sides = _KEYS_KEPT.get(join.join_type, ())
    output = set(join.output_schema.names)
    keys = []
    for probe_key, build_key in zip(join.left_keys, join.right_keys):
        names = tuple(name for side, name in (("probe", probe_key), ("build", build_key))
                      if side in sides and name in output)
        if not names:
            return None
        keys.append(names)
    return keys


def add_spark_exchanges(root: PlanNode, strategy: JoinStrategy | None = None) -> PlanNode:
    """Return ``root`` as a distributed plan whose joins read their inputs through broadcasts or shuffles.

    ``strategy(join)`` says ``broadcast`` or ``shuffle`` for each join (default
    :func:`default_join_strategy`); asking to broadcast a join that cannot be
    broadcast raises :class:`~gpu_engine.errors.PlanError`. Unlike a
    LocalCluster query, a Spark result needs no gather at the root: a
    DataFrame of many partitions is the result, and ``collect`` reads them in
    order. So the gather ``add_remote_exchanges`` puts over a spread root is
    left out, and the last stage runs on every partition.
    """
    if has_remote_exchanges(root):
        return root
    strategy = strategy or default_join_strategy
    builds: dict[str, ExchangeNode] = {}
    shuffled: dict[str, PlanNode] = {}
    probe_only = _detach_joins(root, builds, shuffled, strategy)
    partitioned = {join_id: keys for join_id, join in shuffled.items()
                   if (keys := join_output_partitioning(join) if not isinstance(join, LocalPartitionNode)
                       else [(key,) for key in join.keys] or None) is not None}
    distributed = _attach_joins(add_remote_exchanges(probe_only, partitioned), builds, shuffled)
    if _is_root_gather(distributed, root):
        return distributed.source.source
    return distributed


def _is_root_gather(distributed: PlanNode, root: PlanNode) -> bool:
    return (isinstance(distributed, ExchangeNode) and distributed.id == _ROOT_GATHER_ID
            and distributed.source.id == f"{root.id}.gather")


def _detach_joins(node: PlanNode, builds: dict[str, ExchangeNode], shuffled: dict[str, PlanNode],
                  strategy: JoinStrategy) -> PlanNode:
    if isinstance(node, (HashJoinNode, NestedLoopJoinNode)):
        swaps = getattr(strategy, "swaps", None)
        if swaps is not None and swaps(node):
            node = swapped_join(node)
        how = strategy(node)
        if how not in JOIN_STRATEGIES:
            raise PlanError(f"join strategy {how!r} is not one of {', '.join(JOIN_STRATEGIES)}", node=node.label)
        if how == "broadcast":
            if node.join_type not in BROADCAST_JOIN_TYPES:
                raise PlanError(f"a {node.join_type} join cannot run with a broadcast build side on Spark (its "
                                "unmatched build rows would repeat in every Task); shuffle it (the default for "
                                f"this join type) or swap its sides into one of {', '.join(BROADCAST_JOIN_TYPES)}",
                                node=node.label)
            builds[node.id] = _broadcast(node.build, node.id, strategy)
            return replace(node, sources=(_detach_joins(node.probe, builds, shuffled, strategy),))
        probe_keys, build_keys = join_sides(node)
        probe = _keyed_side(node.probe, probe_keys, f"{node.id}.probe", strategy)
        build = _keyed_side(node.build, build_keys, f"{node.id}.build", strategy, node.join_type)
        shuffled[node.id] = replace(node, sources=(probe, build))
        # Stands in for the join while add_remote_exchanges plans around it: a leaf spread over the partitions.
        return TableScanNode(id=node.id, output_schema=node.output_schema, table_name=f"shuffled join {node.id}",
                             columns=tuple(node.output_schema.names))
    if isinstance(node, LocalPartitionNode) and len(node.sources) > 1:  # a set operation's branches
        shuffled[node.id] = _spark_union(node, strategy)
        # Stands in for the union while add_remote_exchanges plans around it: a leaf spread over the
        # partitions, hash-partitioned by the union's keys where it repartitions (UNION, INTERSECT, EXCEPT).
        return TableScanNode(id=node.id, output_schema=node.output_schema, table_name=f"union {node.id}",
                             columns=tuple(node.output_schema.names))
    if not node.sources:
        return node
    return replace(node, sources=tuple(_detach_joins(source, builds, shuffled, strategy) for source in node.sources))


def _spark_union(union: LocalPartitionNode, strategy: JoinStrategy) -> LocalPartitionNode:
    """Return a LocalPartition of several sources (UNION ALL, and under the other set operations) as Spark stages.

    Each branch is planned on its own, as a join side is, and ends in a
    PartitionedOutput: a shuffle on the union's keys where the LocalPartition
    repartitions (the grouping above it then runs in the union's stage), else
    ``arbitrary`` (the rows stay in the partitions that produced them). One
    Exchange reads them all (Presto's ExchangeNode of a UNION ALL has a source
    per branch); the runner feeds the consuming stage the union of the
    branches' DataFrames. A branch whose column names differ from the union's
    (the first branch's) is renamed by a Project, since an Exchange's
    producers must name its columns alike.
    """
    keys = tuple(union.keys) if union.partition_kind == "repartition" else ()
    outputs = []
    for position, branch in enumerate(union.sources):
        distributed = add_spark_exchanges(branch, strategy)
        names = union.output_schema.names
        if distributed.output_schema.names != names:
            distributed = ProjectNode(id=f"{union.id}.names{position}", output_schema=union.output_schema,
                                      sources=(distributed,), names=tuple(names),
                                      expressions=tuple(ColumnRef(field.name, field.type)
                                                        for field in distributed.output_schema))
        outputs.append(PartitionedOutputNode(id=f"{union.id}.output{position}", output_schema=union.output_schema,
                                             sources=(distributed,), partition_kind="partitioned" if keys else
                                             "arbitrary", keys=keys, num_partitions=1))
    exchange = ExchangeNode(id=f"{union.id}.remote", output_schema=union.output_schema, sources=tuple(outputs))
    return replace(union, sources=(exchange,))


def _broadcast(build: PlanNode, join_id: str, strategy: JoinStrategy) -> ExchangeNode:
    """Return the build side planned on its own, ending in a broadcast instead of a gather."""
    distributed = add_spark_exchanges(build, strategy)  # no gather at its root: broadcast from the spread Tasks
    output = PartitionedOutputNode(id=f"{join_id}.broadcast", output_schema=distributed.output_schema,
                                   sources=(distributed,), partition_kind="broadcast", num_partitions=1)
    return ExchangeNode(id=f"{join_id}.build", output_schema=distributed.output_schema, sources=(output,))


def _keyed_side(side: PlanNode, keys: tuple[str, ...], exchange_id: str, strategy: JoinStrategy,
                join_type: str = "inner") -> PlanNode:
    """Return one side of a shuffled join planned on its own, ending in a shuffle on ``keys`` (a gather without).

    A side that ends in an aggregation whose shuffle already routes by
    exactly these keys (grouped by the join keys, in their order) is left as
    it is: its final step runs in the join's stage, reading the partial
    results routed by the same partition ids as the other side, instead of
    finishing in a stage of its own and being shuffled again by the same
    keys (TPC-H Q18 joins orders to lineitem summed per order, Q20 partsupp
    to lineitem summed per part and supplier). Not for a null-aware anti
    join's build side, whose producer must copy its NULL-key rows everywhere.
    """
    distributed = add_spark_exchanges(side, strategy)
    if keys and join_type != "null_aware_anti" and routed_by(distributed) == tuple(keys):
        return distributed
    output = PartitionedOutputNode(id=f"{exchange_id}.output", output_schema=distributed.output_schema,
                                   sources=(distributed,), partition_kind="partitioned", keys=keys, num_partitions=1)
    return ExchangeNode(id=exchange_id, output_schema=distributed.output_schema, sources=(output,))


def aggregation_under(side: PlanNode) -> tuple[list[PlanNode], AggregationNode | None]:
    """Return the Filters and Projects at the top of ``side`` (top first) and the aggregation under them, if any."""
    chain = []
    while isinstance(side, (FilterNode, ProjectNode)):
        chain.append(side)
        side = side.sources[0]
    return chain, side if isinstance(side, AggregationNode) else None


def routed_by(side: PlanNode) -> tuple[str, ...] | None:
    """Return the keys (as ``side`` names them) a keyed shuffle just below ``side``'s last aggregation routes by.

    Only Filters and column-renaming Projects may stand above the aggregation,
    and its input must be an Exchange whose PartitionedOutput routes by its
    grouping keys, in order; None otherwise.
    """
    chain, node = aggregation_under(side)
    if not (node is not None and node.grouping_keys and isinstance(node.source, ExchangeNode)):
        return None
    output = node.source.source if node.source.sources else None
    if not (isinstance(output, PartitionedOutputNode) and output.partition_kind == "partitioned"
            and tuple(output.keys) == tuple(node.grouping_keys)):
        return None
    names = {key: key for key in node.grouping_keys}
    for above in reversed(chain):
        if isinstance(above, ProjectNode):
            renamed = {}
            for name, expression in zip(above.names, above.expressions):
                if isinstance(expression, ColumnRef):
                    for key, current in names.items():
                        if current == expression.name and key not in renamed:
                            renamed[key] = name
            if len(renamed) != len(names):
                return None
            names = renamed
    return tuple(names[key] for key in node.grouping_keys)


def _attach_joins(node: PlanNode, builds: dict[str, ExchangeNode], shuffled: dict[str, PlanNode]) -> PlanNode:
    if node.id in shuffled and isinstance(node, TableScanNode):
        return shuffled[node.id]
    if not node.sources:
        return node
    sources = tuple(_attach_joins(source, builds, shuffled) for source in node.sources)
    if node.id in builds and isinstance(node, (HashJoinNode, NestedLoopJoinNode)):
        sources = sources + (builds[node.id],)
    return replace(node, sources=sources)
