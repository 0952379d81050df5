"""Drop the columns nobody above reads from scans, projections, joins and aggregations (DataFusion's
``OptimizeProjections``).

Why: a column a plan carries but never reads is still decoded from Parquet,
copied to the device, gathered through every filter and join, and hashed into
every exchange. The SQL planner scans only the columns a query names, but a
plan built by hand (``table_scan("t")`` reads every column), read from JSON or
left by a rule above another (an aggregate nobody selects) carries them.

One pass from the root down with the set of column names the node above
reads (the root's: all its outputs, so the plan's output never changes):

* **TableScan** reads only those columns; **Project** computes only those
  outputs; a **join** outputs only those and reads from each side those plus
  its keys and its filter's columns; a single-step **aggregation** without
  grouping sets computes only those aggregates (its keys always stay);
* a **Filter** passes the columns above plus its predicate's;
* a **LocalPartition** (a UNION ALL of several branches, a gather or a
  repartition) outputs only those columns plus its keys, and asks each source
  for the columns at those positions (a branch names them its own way; one
  that still yields others gets a Project of them): the columns only a
  branch's select list named leave every branch;
* every other node (windows, sorts, limits, remote exchanges, VALUES, GroupId)
  keeps all its input columns: its output is its input's, or its operator
  reads them by position.

A node left with no column keeps its first one, so it still counts its rows
(``count(*)`` above a join reads none of its columns). Node ids stay;
output schemas shrink only to columns in the order they had.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from gpu_engine.plans.expressions import ColumnRef, referenced_columns
from gpu_engine.plans.nodes import (
    AggregationNode, AggregationStep, FilterNode, HashJoinNode, LocalPartitionNode, NestedLoopJoinNode, PlanNode,
    ProjectNode, TableScanNode, walk_plan,
)

__all__ = ["prune_projections"]


def prune_projections(plan: PlanNode) -> PlanNode:
    """Return ``plan`` without the columns nobody reads (the same object where every column is read)."""
    return _pruned(plan, None)


def _kept(names, required: set[str] | None) -> list[int]:
    """Return the positions of ``names`` that ``required`` holds (all for None), at least the first one."""
    if required is None:
        return list(range(len(names)))
    positions = [i for i, name in enumerate(names) if name in required]
    return positions or [0][:len(names)]


def _subset(schema: pa.Schema, positions: list[int]) -> pa.Schema:
    return pa.schema([schema.field(i) for i in positions], metadata=schema.metadata)


def _with_sources(node: PlanNode, sources: tuple[PlanNode, ...], **changes) -> PlanNode:
    if not changes and all(new is old for new, old in zip(sources, node.sources)):
        return node
    return replace(node, sources=sources, **changes)


def _pruned(node: PlanNode, required: set[str] | None) -> PlanNode:
    names = node.output_schema.names
    if isinstance(node, TableScanNode):
        positions = _kept(names, required)
        if len(positions) == len(names):
            return node
        return replace(node, columns=tuple(node.columns[i] for i in positions),
                       output_schema=_subset(node.output_schema, positions))
    if isinstance(node, ProjectNode):
        positions = _kept(node.names, required)
        reads = {c for i in positions for c in referenced_columns(node.expressions[i])}
        source = _pruned(node.source, reads)
        if len(positions) == len(node.names):
            return _with_sources(node, (source,))
        return _with_sources(node, (source,), names=tuple(node.names[i] for i in positions),
                             expressions=tuple(node.expressions[i] for i in positions),
                             output_schema=_subset(node.output_schema, positions))
    if isinstance(node, FilterNode):
        reads = None if required is None else set(required) | set(referenced_columns(node.predicate))
        source = _pruned(node.source, reads)
        if source is node.source:
            return node
        return replace(node, sources=(source,), output_schema=source.output_schema)
    if isinstance(node, HashJoinNode | NestedLoopJoinNode):
        positions = _kept(node.output_columns, required)
        outputs = [node.output_columns[i] for i in positions]
        reads = set(outputs) | (set(referenced_columns(node.filter)) if node.filter is not None else set())
        if isinstance(node, HashJoinNode):
            reads |= set(node.left_keys) | set(node.right_keys)
        sources = tuple(_pruned(side, reads & set(side.output_schema.names)) for side in node.sources)
        if len(positions) == len(node.output_columns):
            return _with_sources(node, sources)
        return _with_sources(node, sources, output_columns=tuple(outputs),
                             output_schema=_subset(node.output_schema, positions))
    if (isinstance(node, AggregationNode) and node.step is AggregationStep.SINGLE and not node.global_grouping_sets
            and node.group_id_key is None):
        keys = len(node.grouping_keys)
        wanted = [i for i, name in enumerate(node.aggregate_names) if required is None or name in required]
        if not wanted and not keys:
            wanted = [0][:len(node.aggregates)]  # a global aggregate's one row needs a column
        reads = set(node.grouping_keys) | {c for i in wanted for e in node.aggregates[i].inputs()
                                           for c in referenced_columns(e)}
        source = _pruned(node.source, reads)
        if len(wanted) == len(node.aggregates):
            return _with_sources(node, (source,))
        return _with_sources(node, (source,), aggregate_names=tuple(node.aggregate_names[i] for i in wanted),
                             aggregates=tuple(node.aggregates[i] for i in wanted),
                             output_schema=_subset(node.output_schema, list(range(keys)) + [keys + i for i in wanted]))
    if isinstance(node, LocalPartitionNode):
        return _pruned_union(node, required)
    sources = tuple(_pruned(source, None) for source in node.sources)
    return _with_sources(node, sources)


def _pruned_union(node: LocalPartitionNode, required: set[str] | None) -> PlanNode:
    """Return a LocalPartition with only the columns above and its keys, each source asked for them by position."""
    names = node.output_schema.names
    positions = _kept(names, None if required is None else set(required) | set(node.keys))
    if len(positions) == len(names):
        return _with_sources(node, tuple(_pruned(source, None) for source in node.sources))
    schema = _subset(node.output_schema, positions)
    sources = []
    for number, source in enumerate(node.sources):
        wanted = [source.output_schema.names[i] for i in positions]
        pruned = _pruned(source, set(wanted))
        if list(pruned.output_schema.names) != wanted:  # the source keeps others (a window outputs its input's)
            fields = [pruned.output_schema.field(name) for name in wanted]
            pruned = ProjectNode(id=_unused_id(node, f"{node.id}.columns{number}"), sources=(pruned,),
                                 output_schema=pa.schema(fields, metadata=source.output_schema.metadata),
                                 names=tuple(wanted), expressions=tuple(ColumnRef(f.name, f.type) for f in fields))
        sources.append(pruned)
    return replace(node, sources=tuple(sources), output_schema=schema)


def _unused_id(plan: PlanNode, wanted: str) -> str:
    used = {n.id for n in walk_plan(plan)}
    candidate, n = wanted, 1
    while candidate in used:
        candidate, n = f"{wanted}.{n}", n + 1
    return candidate
