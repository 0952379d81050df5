"""Bound the size of a generated kernel: expressions over a node budget stay with the eager evaluator.

Why: numba compiles a generated kernel in time that grows faster than its
source (its control-flow and type-inference passes are super-linear in the
branches of a row's code): a 400-term AND chain compiled for 211 s and a
2000-term chain or an IN list of 100,000 values never finished, so the query
hung before its first row. The eager evaluator runs such an expression in
time linear in its size (one vectorized pass per node; an IN list as one
sorted-set lookup, :func:`~gpu_engine.expressions.comparison.in_list`), so a
kernel is only generated for expressions of at most :data:`MAX_KERNEL_NODES`
nodes in all, which keeps every kernel's compile time under a fixed bound
however large a query's expressions grow, and the number of kernels a query
compiles at most one per operator, as without the bound.

The count is of expression nodes as written (a subexpression used twice
counts twice; each value of an IN list is a node, as the generated code
compares with each), taken without recursion and stopped at the bound, so
counting costs at most :data:`MAX_KERNEL_NODES` steps per expression.
"""

from __future__ import annotations

from typing import Iterable

from gpu_engine.codegen.row_lowering import Unsupported
from gpu_engine.plans.expressions import Expr

__all__ = ["MAX_KERNEL_NODES", "expression_nodes", "refuse_oversized"]

#: The most expression nodes one generated kernel evaluates (its predicates, keys, aggregate arguments and
#: outputs together). TPC-H's largest (Q19's join filter) has 74: all of TPC-H stays fused.
MAX_KERNEL_NODES = 256


def expression_nodes(expressions: Iterable[Expr], limit: int | None = None) -> int:
    """Return how many expression nodes ``expressions`` hold; with ``limit``, stop counting once it is passed."""
    count, stack = 0, list(expressions)
    while stack:
        node = stack.pop()
        count += 1
        if limit is not None and count > limit:
            return count
        stack.extend(node.children())
    return count


def refuse_oversized(expressions: Iterable[Expr]) -> None:
    """Raise :class:`Unsupported` when ``expressions`` hold more than :data:`MAX_KERNEL_NODES` nodes in all.

    Callers catch it as any other reason a stretch is not generated: it stays with the eager operators.
    """
    nodes = expression_nodes(expressions, MAX_KERNEL_NODES)
    if nodes > MAX_KERNEL_NODES:
        raise Unsupported(f"the expressions have more than {MAX_KERNEL_NODES} nodes: one generated kernel would "
                          "take too long to compile (evaluated unfused)")
