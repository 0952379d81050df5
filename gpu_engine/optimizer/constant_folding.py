"""Fold constants in filter predicates: ``x > 1 AND TRUE`` is ``x > 1``, ``1 = 2 OR FALSE`` is FALSE.

Why: predicates reach the plan with constant parts — a parameter bound to a
literal, a generated query's ``WHERE 1 = 1``, a branch the SQL planner made
constant — and a constant conjunct costs a column per batch, hides a filter
that keeps nothing from :mod:`~gpu_engine.optimizer.empty_relations`, and
keeps a filter that keeps everything. Only what is exact on every device is
folded: AND / OR / NOT over boolean constants (Kleene logic, NULL as unknown),
IS [NOT] NULL of a constant and comparisons of two constants of one type.
Arithmetic is left to the evaluator (overflow, decimal scales and division by
zero are its to decide).
"""

from __future__ import annotations

import operator
from dataclasses import replace

import pyarrow as pa

from gpu_engine.plans.expressions import BinaryOp, COMPARISON_OPS, Expr, Literal, UnaryOp
from gpu_engine.plans.nodes import FilterNode, PlanNode

__all__ = ["fold_constants", "folded"]

_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
            "ge": operator.ge}
_TRUE, _FALSE, _UNKNOWN = Literal(True, pa.bool_()), Literal(False, pa.bool_()), Literal(None, pa.bool_())


def fold_constants(plan: PlanNode) -> PlanNode:
    """Return ``plan`` with its filter predicates folded and every filter that is always true removed."""
    sources = tuple(fold_constants(source) for source in plan.sources)
    if any(new is not old for new, old in zip(sources, plan.sources)):
        plan = replace(plan, sources=sources)
    if isinstance(plan, FilterNode):
        predicate = folded(plan.predicate)
        if isinstance(predicate, Literal) and predicate.value is True:
            return plan.source
        if predicate is not plan.predicate:
            return replace(plan, predicate=predicate)
    return plan


def _boolean(expr: Expr) -> bool | None | str:
    """Return True, False or None (NULL) for a boolean constant, ``"?"`` for anything else."""
    if isinstance(expr, Literal) and (expr.value is None or isinstance(expr.value, bool)):
        return expr.value
    return "?"


def folded(expr: Expr) -> Expr:
    """Return ``expr`` with its constant boolean parts folded (the same object when nothing folds)."""
    if isinstance(expr, BinaryOp) and expr.op in ("and", "or"):
        left, right = folded(expr.left), folded(expr.right)
        a, b = _boolean(left), _boolean(right)
        absorbing = expr.op == "or"  # TRUE absorbs OR, FALSE absorbs AND
        if a is absorbing or b is absorbing:
            return _TRUE if absorbing else _FALSE
        if a is (not absorbing):  # the neutral constant: the other side decides
            return right
        if b is (not absorbing):
            return left
        if a is None and b is None:
            return _UNKNOWN
        if left is expr.left and right is expr.right:
            return expr
        return replace(expr, left=left, right=right)
    if isinstance(expr, UnaryOp) and expr.op == "not":
        operand = folded(expr.operand)
        value = _boolean(operand)
        if value != "?":
            return _UNKNOWN if value is None else (_FALSE if value else _TRUE)
        return expr if operand is expr.operand else replace(expr, operand=operand)
    if isinstance(expr, UnaryOp) and expr.op in ("is_null", "is_not_null") and isinstance(expr.operand, Literal):
        return _TRUE if (expr.operand.value is None) == (expr.op == "is_null") else _FALSE
    if (isinstance(expr, BinaryOp) and expr.op in COMPARISON_OPS and isinstance(expr.left, Literal)
            and isinstance(expr.right, Literal) and expr.left.dtype == expr.right.dtype
            and type(expr.left.value) is type(expr.right.value)):
        if expr.left.value is None or expr.right.value is None:
            return _UNKNOWN
        if isinstance(expr.left.value, (bool, int, str)):  # exact everywhere; floats/decimals/dates left alone
            return _TRUE if _COMPARE[expr.op](expr.left.value, expr.right.value) else _FALSE
    return expr
