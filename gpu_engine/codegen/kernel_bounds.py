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

The count is of the program's expression nodes as the kernel is generated
from them (:class:`~gpu_engine.codegen.fusion_program.FusionProgram`: its
predicates, keys, aggregate arguments and outputs, constants already
parameters): a subexpression used twice counts twice, an IN list that became
a parameter set is one node whatever its length (its values are a launch
parameter, :mod:`~gpu_engine.codegen.kernel_parameters`), one left as
comparisons counts each value, and a subexpression lifted out of the row code
(one over a string column's dictionary) is one node. It is taken without
recursion and stopped at the bound, so counting costs at most
:data:`MAX_KERNEL_NODES` steps.

Planning a program visits every node of its expressions (in time worse than
linear: a 2000-term chain took 7 s), so expressions of more than
:data:`MAX_PLANNED_NODES` nodes (an IN list's values not counted) are refused
before their program is planned (:func:`refuse_before_planning`); the margin
leaves room for what lifting shrinks (a long OR over one string column is one
lifted node).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from gpu_engine.codegen.row_lowering import Unsupported
from gpu_engine.plans.expressions import Expr, InList

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.codegen.fusion_program import FusionProgram

__all__ = ["MAX_KERNEL_NODES", "MAX_PLANNED_NODES", "expression_nodes", "refuse_before_planning",
           "refuse_oversized"]

#: The most expression nodes one generated kernel evaluates (its predicates, keys, aggregate arguments and
#: outputs together). TPC-H's largest (Q19's join filter) has 74: all of TPC-H stays fused.
MAX_KERNEL_NODES = 256


#: Expressions with more nodes than this are refused before their fusion program is planned.
MAX_PLANNED_NODES = 4 * MAX_KERNEL_NODES


def expression_nodes(expressions: Iterable[Expr], limit: int | None = None, in_list_values: bool = True) -> int:
    """Return how many expression nodes ``expressions`` hold; with ``limit``, stop counting once it is passed.

    ``in_list_values=False`` counts an IN list as one node and its operand's.
    """
    count, stack = 0, list(expressions)
    while stack:
        node = stack.pop()
        count += 1 + (len(node.values) if in_list_values and isinstance(node, InList) else 0)
        if limit is not None and count > limit:
            return limit + 1
        stack.extend(node.children())  # an IN list's children are its operand (its values counted above)
    return count


def refuse_before_planning(expressions: Iterable[Expr]) -> None:
    """Raise :class:`Unsupported` when ``expressions`` hold more than :data:`MAX_PLANNED_NODES` nodes (IN lists'
    values not counted): no program of them could pass :func:`refuse_oversized`, and planning one costs seconds."""
    nodes = expression_nodes(expressions, MAX_PLANNED_NODES, in_list_values=False)
    if nodes > MAX_PLANNED_NODES:
        raise Unsupported(f"the expressions have more than {MAX_PLANNED_NODES} nodes: too large for one generated "
                          "kernel (evaluated unfused)")


def refuse_oversized(program: "FusionProgram") -> None:
    """Raise :class:`Unsupported` when ``program``'s expressions hold more than :data:`MAX_KERNEL_NODES` nodes.

    Callers catch it as any other reason a stretch is not generated: it stays with the eager operators.
    """
    expressions = (*program.predicates, *program.keys, *(e for group in program.arguments for e in group),
                   *program.outputs)
    nodes = expression_nodes(expressions, MAX_KERNEL_NODES)
    if nodes > MAX_KERNEL_NODES:
        raise Unsupported(f"the expressions have more than {MAX_KERNEL_NODES} nodes: one generated kernel would "
                          "take too long to compile (evaluated unfused)")
