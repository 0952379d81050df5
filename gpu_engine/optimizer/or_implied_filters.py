"""Derive from an OR that must stay above a node the filter it implies on each of the node's inputs.

Why: ``(a.x = 1 AND b.y = 2) OR (a.x = 3 AND b.y = 4)`` above a join reads both
sides, so :mod:`~gpu_engine.optimizer.predicate_pushdown` keeps it above the
join, and every row of ``a`` is joined. Yet a row that passes it passed one
branch, so its ``a`` columns passed that branch's conditions on ``a``: the OR
of those, ``a.x = 1 OR a.x = 3``, may filter ``a`` below the join while the OR
itself stays above. The same holds for every node the pushdown moves
conjuncts through: below an aggregation the branches' conditions on group keys
(TPC-DS q11 reads its ``year_total`` CTE, a UNION ALL of two yearly groupings,
for ``(dyear = 2002 AND ...) OR (dyear = 2001 AND year_total > 0 AND ...)``, so
``dyear = 2002 OR dyear = 2001`` filters date_dim below the grouping although
``year_total`` is an aggregate), below a window its partition keys, through a
projection its columns' definitions. Spark's ``PushExtraPredicateThroughJoin``
and DataFusion's ``extract_or_clauses_for_join`` do this for joins. The SQL planner's copies over sqlglot trees
went once the rules reading their filtered estimates ran after this pass (``sql/predicates.implied_filters`` for
joins with build sides, ``sql/derived_pushdown`` for derived tables and CTEs with eager aggregation). An implied
filter equal to one already where it lands is not added twice. An OR in an inner join's own condition implies filters on
the join's sides as one in a Filter above it does.

A branch that folds to FALSE (a UNION ALL branch's constant ``'s'`` compared
with ``'w'`` once the projection is inlined) is left out of the OR (one branch
left: its conditions on the input are implied as they are); a branch with
nothing for an input gives that input nothing (it keeps every row).
"""

from __future__ import annotations

from typing import Callable, Sequence

from gpu_engine.optimizer.conjuncts import conjunction, conjuncts, disjunction, disjuncts
from gpu_engine.optimizer.constant_folding import folded
from gpu_engine.plans.expressions import Expr, Literal

__all__ = ["implied_filters"]

#: Splits conjuncts as the pushdown would at one node: the conjuncts each input would receive, and those kept.
Split = Callable[[list[Expr]], tuple[Sequence[list[Expr]], list[Expr]]]


def implied_filters(part: Expr, split: Split, inputs: int) -> list[Expr | None]:
    """Return, per input of a node, the filter the OR ``part`` (kept above the node) implies on it, or None.

    ``split`` places conjuncts as the pushdown does at that node (so a condition reaches an input only where
    the node lets it: not the NULL-extended side of an outer join, only group keys below an aggregation).
    """
    branches = disjuncts(folded(part))  # one branch left: the others folded to FALSE
    per_branch = [split(conjuncts(branch))[0] for branch in branches]
    out: list[Expr | None] = []
    for position in range(inputs):
        if any(not below[position] for below in per_branch):
            out.append(None)  # a branch says nothing of this input: it keeps all of its rows
            continue
        implied = folded(disjunction([conjunction(below[position]) for below in per_branch]))
        out.append(None if isinstance(implied, Literal) and implied.value is True else implied)
    return out
