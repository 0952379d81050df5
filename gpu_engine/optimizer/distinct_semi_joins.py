"""Turn an inner join under a DISTINCT that reads one side only into a semi join of that side.

Why: ``SELECT DISTINCT l.a FROM l JOIN r ON l.k = r.k AND <condition>`` needs
from each ``l`` row only whether some ``r`` row matches it: every further match
repeats the row, and the DISTINCT removes the repeat again. Joined in full, a
key shared by many rows on both sides multiplies them: TPC-DS q95's ``ws_wh``
(web_sales joined with itself on the order number, warehouses differing, read
only through ``IN``, so computed as its distinct order numbers:
:mod:`gpu_engine.sql.cte_set_readers`) paired 719K lines into 6.6M rows to
keep 60K order numbers. A semi join (``l.a`` where EXISTS a matching ``r``
row, the condition tested on candidate pairs) outputs each ``l`` row at most
once. DuckDB and Hyper plan the same rewrite (a "distinct-elimination" of the
join's duplicates); Velox runs it as a left semi filter join.

The rule: an :class:`~gpu_engine.plans.nodes.AggregationNode` (SINGLE step, no
aggregates, no grouping sets: a DISTINCT or a GROUP BY of keys only) over
Projects and Filters down to an inner :class:`~gpu_engine.plans.nodes.HashJoinNode`
whose output columns are all one side's: the join becomes ``left_semi`` (the
probe's columns) or ``right_semi`` (the build's), keys, condition and output
unchanged. Why it is correct: the groups are a set of rows computed row by row
from the join's output (Projects map a row to a row, Filters keep or drop it),
and a semi join outputs exactly the rows of that side that the inner join
outputs at least once, so the set is the same; NULL keys match nothing either
way. Not applied through a volatile expression (``random()``: a row repeated
by the join draws again), aggregates of any kind (``count`` sees the repeats),
or other nodes between (a LIMIT, a window or a sort counts rows).
"""

from __future__ import annotations

from dataclasses import replace

from gpu_engine.plans.functions import is_volatile
from gpu_engine.plans.nodes import AggregationNode, AggregationStep, FilterNode, HashJoinNode, PlanNode, ProjectNode

__all__ = ["semi_joins_under_distinct", "computes_volatile"]


def semi_joins_under_distinct(plan: PlanNode) -> PlanNode:
    """Return ``plan`` with each inner join under a one-sided DISTINCT a semi join (the same object where none)."""
    sources = tuple(semi_joins_under_distinct(source) for source in plan.sources)
    if any(new is not old for new, old in zip(sources, plan.sources)):
        plan = replace(plan, sources=sources)
    if (isinstance(plan, AggregationNode) and plan.step is AggregationStep.SINGLE and not plan.aggregates
            and plan.grouping_keys and not plan.global_grouping_sets and plan.group_id_key is None):
        source = _semi_joined(plan.source)
        if source is not plan.source:
            return replace(plan, sources=(source,))
    return plan


def computes_volatile(node: PlanNode) -> bool:
    """Whether ``node`` is a Project or a Filter computing a volatile expression (``random()``, ...): a rule that
    changes the rows under it changes how many values it draws, so the DISTINCT rules stop there."""
    if isinstance(node, ProjectNode):
        return any(is_volatile(e) for e in node.expressions)
    return isinstance(node, FilterNode) and is_volatile(node.predicate)


def _semi_joined(node: PlanNode) -> PlanNode:
    """Return ``node`` (Projects and Filters over an inner hash join) with the join a semi join where it may be."""
    if isinstance(node, HashJoinNode):
        return _as_semi_join(node)
    if not isinstance(node, ProjectNode | FilterNode) or computes_volatile(node):
        return node
    source = _semi_joined(node.source)
    return node if source is node.source else replace(node, sources=(source,))


def _as_semi_join(join: HashJoinNode) -> HashJoinNode:
    if join.join_type != "inner" or (join.filter is not None and is_volatile(join.filter)):
        return join
    outputs = set(join.output_columns)
    if outputs <= set(join.probe.output_schema.names):
        return replace(join, join_type="left_semi")
    if outputs <= set(join.build.output_schema.names):
        return replace(join, join_type="right_semi")
    return join
