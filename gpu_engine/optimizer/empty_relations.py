"""Replace what can only output nothing by an empty VALUES (DataFusion's ``PropagateEmptyRelation``).

Why: a filter that is never true (``WHERE 1 = 0``, a folded parameter, a
conjunct :mod:`~gpu_engine.optimizer.constant_folding` made FALSE or NULL),
``LIMIT 0`` or an empty VALUES list empties everything above it that only
passes, joins to, sorts or groups its rows; without this the scans below still
read every row, and the joins above still build their tables. Each such node
becomes a :class:`~gpu_engine.plans.nodes.ValuesNode` of no rows, with the
node's id and output schema:

* Filter, Project, OrderBy, TopN, Limit, Window, TopNRowNumber and a one-input
  LocalPartition over an empty input; a UNION ALL drops its empty branches
  (all empty: it is empty);
* a join whose output rows all need a row of an empty side: an inner join with
  either side empty, a left / semi / anti join with an empty probe, a right /
  right semi / right anti join with an empty build, a semi join with an empty
  build, a full join with both empty;
* an aggregation with group keys (and no grouping sets) over an empty input.

A global aggregate (no keys, or grouping sets with a grand total) keeps SQL's
one row over no input, so it stays, over the empty VALUES; so does
EnforceSingleRow (its empty input is a row of NULLs) and an anti join with an
empty build (it outputs its probe). Exchanges and outputs to other Tasks stay:
the Tasks at their other end expect them.
"""

from __future__ import annotations

from dataclasses import replace

from gpu_engine.columnar.arrow_numpy import empty_table
from gpu_engine.optimizer.constant_folding import folded
from gpu_engine.plans.expressions import Literal
from gpu_engine.plans.nodes import (
    AggregationNode, FilterNode, HashJoinNode, LimitNode, LocalPartitionNode, NestedLoopJoinNode, OrderByNode,
    PlanNode, ProjectNode, TopNNode, TopNRowNumberNode, ValuesNode, WindowNode,
)

__all__ = ["propagate_empty_relations"]

#: Nodes whose output is empty whenever their one input is.
_EMPTY_OVER_EMPTY = (FilterNode, ProjectNode, OrderByNode, TopNNode, LimitNode, WindowNode, TopNRowNumberNode)
#: Join types, the sides (0 probe, 1 build) any of which empty empties the join, and those both of which do.
_EMPTY_IF_ANY = {"inner": (0, 1), "left": (0,), "right": (1,), "left_semi": (0, 1), "anti": (0,),
                 "null_aware_anti": (0,), "right_semi": (0, 1), "right_anti": (1,), "full": ()}


def _empty(node: PlanNode) -> bool:
    return isinstance(node, ValuesNode) and node.data.num_rows == 0


def _emptied(node: PlanNode) -> ValuesNode:
    return ValuesNode(id=node.id, output_schema=node.output_schema, data=empty_table(node.output_schema))


def propagate_empty_relations(plan: PlanNode) -> PlanNode:
    """Return ``plan`` with every node that can only output nothing an empty VALUES (the same object if none)."""
    sources = tuple(propagate_empty_relations(source) for source in plan.sources)
    if any(new is not old for new, old in zip(sources, plan.sources)):
        plan = replace(plan, sources=sources)
    if isinstance(plan, FilterNode):
        predicate = folded(plan.predicate)  # again: pushdown may have merged a FALSE into a filter's conjuncts
        if isinstance(predicate, Literal) and (predicate.value is None or predicate.value is False):
            return _emptied(plan)
    if isinstance(plan, LimitNode | TopNNode) and plan.count == 0:
        return _emptied(plan)
    if isinstance(plan, _EMPTY_OVER_EMPTY) and _empty(plan.source):
        return _emptied(plan)
    if isinstance(plan, LocalPartitionNode):
        kept = tuple(source for source in plan.sources if not _empty(source))
        if not kept:
            return _emptied(plan)
        if len(kept) < len(plan.sources):
            return replace(plan, sources=kept)
    if isinstance(plan, HashJoinNode | NestedLoopJoinNode):
        empty = [_empty(source) for source in plan.sources]
        if any(empty[side] for side in _EMPTY_IF_ANY[plan.join_type]) or all(empty):
            return _emptied(plan)
    if (isinstance(plan, AggregationNode) and plan.grouping_keys and not plan.global_grouping_sets
            and _empty(plan.source)):
        return _emptied(plan)
    return plan
