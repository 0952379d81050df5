"""Drop a DISTINCT whose rows reach only a grouping that ignores duplicates: a distinct set operation's
``SELECT DISTINCT`` branches, a ``SELECT DISTINCT`` under another one.

Why: ``UNION``, ``INTERSECT`` and ``EXCEPT`` (the distinct forms) group the rows of their branches by every column
(:mod:`gpu_engine.sql.set_operations`: a grouping aggregation over the LocalPartition of the branches, with
``min``/``max`` of a side tag for INTERSECT/EXCEPT), so a branch's own ``SELECT DISTINCT`` grouped the same rows by
the same columns once more: a partial step, a repartition and a final step per branch before the set operation's
own three. TPC-DS q38 (three ``SELECT DISTINCT c_last_name, c_first_name, d_date`` branches under ``INTERSECT``) and
q87 (the same under ``EXCEPT``) grouped 540K store_sales rows by two strings and a date, then the 79K groups again
with their side tags; without the branches' DISTINCT the set operation's partial step groups the joined rows once
(SF1, CPU, one process: q38 249 -> 221 ms, bench/results/2026-11-28-q38-*.md). A rule over the typed plan (it was
a rewrite of the sqlglot tree, ``sql/distinct_branches.py``, until set operations reached the optimizer as plan
nodes) applies as well to plans built with PlanBuilder or read from JSON.

The rule: an :class:`~gpu_engine.plans.nodes.AggregationNode` (SINGLE step, no grouping sets) whose aggregates
are all *duplicate-insensitive* (none, ``min``/``max``, ``bool_and``/``bool_or``, ``bit_and``/``bit_or``,
``approx_count_distinct``, ``any_value`` or any ``DISTINCT`` aggregate) over Projects, Filters and LocalPartitions
down to a *DISTINCT* (a SINGLE aggregation without aggregates or grouping sets): that DISTINCT goes; its source,
projected onto its keys where it has other columns, takes its place. Why it is correct: the groups above and
their aggregates depend only on the *set* of rows that reach them, not on how many copies of each (Projects map a
row to a row, Filters keep or drop it, a LocalPartition moves it), and a DISTINCT changes only the copies. Kept
where something between counts copies or reads the rows in an order (a LIMIT, a window: INTERSECT ALL / EXCEPT
ALL number each row's copies, an ORDER BY), through a volatile expression (``random()``: each copy draws again),
under an aggregate that counts (``count``, ``sum``), and ``DISTINCT ON`` (a top row per key, not a grouping).
"""

from __future__ import annotations

from dataclasses import replace

from gpu_engine.optimizer.distinct_semi_joins import computes_volatile
from gpu_engine.plans.expressions import ColumnRef
from gpu_engine.plans.nodes import (
    AggregationNode, AggregationStep, FilterNode, LocalPartitionNode, PlanNode, ProjectNode,
)

__all__ = ["drop_redundant_distincts"]

#: Aggregates whose value over a multiset of rows is their value over its set (a copy more changes nothing).
_SET_AGGREGATES = frozenset({"min", "max", "bool_and", "bool_or", "bit_and", "bit_or", "approx_count_distinct",
                             "any_value"})


def drop_redundant_distincts(plan: PlanNode) -> PlanNode:
    """Return ``plan`` without the DISTINCTs whose duplicates only a duplicate-insensitive grouping reads (the same
    object where there is none)."""
    sources = tuple(drop_redundant_distincts(source) for source in plan.sources)
    if any(new is not old for new, old in zip(sources, plan.sources)):
        plan = replace(plan, sources=sources)
    if _ignores_copies(plan):
        source = _without_distinct(plan.sources[0])
        if source is not plan.sources[0]:
            return replace(plan, sources=(source,))
    return plan


def _plain_grouping(node: PlanNode) -> bool:
    return (isinstance(node, AggregationNode) and node.step is AggregationStep.SINGLE and bool(node.grouping_keys)
            and not node.global_grouping_sets and node.group_id_key is None)


def _ignores_copies(node: PlanNode) -> bool:
    """Whether ``node`` is a grouping whose output is the same for its input's rows as for their distinct rows."""
    return _plain_grouping(node) and all(
        call.distinct or call.function in _SET_AGGREGATES for call in node.aggregates)


def _is_distinct(node: PlanNode) -> bool:
    """Whether ``node`` is a DISTINCT: a grouping without aggregates whose output is its keys."""
    return (_plain_grouping(node) and not node.aggregates
            and tuple(node.output_schema.names) == tuple(node.grouping_keys))


def _without_distinct(node: PlanNode) -> PlanNode:
    """Return ``node`` (Projects, Filters and LocalPartitions over DISTINCTs) without those DISTINCTs."""
    if isinstance(node, AggregationNode):
        if not _is_distinct(node):
            return node
        return _without_distinct(_onto_keys(node))
    if not isinstance(node, ProjectNode | FilterNode | LocalPartitionNode) or computes_volatile(node):
        return node
    sources = tuple(_without_distinct(source) for source in node.sources)
    if all(new is old for new, old in zip(sources, node.sources)):
        return node
    return replace(node, sources=sources)


def _onto_keys(distinct: AggregationNode) -> PlanNode:
    """Return the DISTINCT's source with the DISTINCT's output columns: the source itself where it has exactly
    them, else a Project of them (under the DISTINCT's id, which leaves the plan)."""
    source = distinct.source
    schema = distinct.output_schema
    if source.output_schema.equals(schema, check_metadata=False):
        return source
    fields = [source.output_schema.field(name) for name in distinct.grouping_keys]
    return ProjectNode(id=distinct.id, output_schema=schema, sources=(source,), names=tuple(schema.names),
                       expressions=tuple(ColumnRef(f.name, f.type) for f in fields))
