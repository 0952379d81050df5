"""Split a predicate into its AND-ed conjuncts (or OR-ed disjuncts) and join them again: the unit every optimizer
rule moves."""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from gpu_engine.plans.expressions import BinaryOp, Expr

__all__ = ["conjuncts", "conjunction", "disjunction", "disjuncts"]


def conjuncts(predicate: Expr, op: str = "and") -> list[Expr]:
    """Return the conjuncts of ``predicate`` left to right (``a AND (b AND c)`` gives a, b, c); ``op="or"``: its
    disjuncts."""
    out, stack = [], [predicate]
    while stack:
        node = stack.pop()
        if isinstance(node, BinaryOp) and node.op == op:
            stack.append(node.right)
            stack.append(node.left)
        else:
            out.append(node)
    return out


def disjuncts(predicate: Expr) -> list[Expr]:
    """Return the disjuncts of ``predicate`` left to right (``(a OR b) OR c`` gives a, b, c)."""
    return conjuncts(predicate, "or")


def conjunction(parts: Sequence[Expr], op: str = "and") -> Expr:
    """Return ``parts`` AND-ed left to right (``op="or"``: OR-ed); the filter operator evaluates them in this order."""
    result = parts[0]
    for part in parts[1:]:
        result = BinaryOp(op, result, part, pa.bool_())
    return result


def disjunction(parts: Sequence[Expr]) -> Expr:
    """Return ``parts`` OR-ed left to right."""
    return conjunction(parts, "or")
