"""Split a predicate into its AND-ed conjuncts and join them again: the unit every optimizer rule moves."""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from gpu_engine.plans.expressions import BinaryOp, Expr

__all__ = ["conjuncts", "conjunction"]


def conjuncts(predicate: Expr) -> list[Expr]:
    """Return the conjuncts of ``predicate`` left to right (``a AND (b AND c)`` gives a, b, c)."""
    out, stack = [], [predicate]
    while stack:
        node = stack.pop()
        if isinstance(node, BinaryOp) and node.op == "and":
            stack.append(node.right)
            stack.append(node.left)
        else:
            out.append(node)
    return out


def conjunction(parts: Sequence[Expr]) -> Expr:
    """Return ``parts`` AND-ed left to right; the filter operator evaluates them in this order."""
    result = parts[0]
    for part in parts[1:]:
        result = BinaryOp("and", result, part, pa.bool_())
    return result
