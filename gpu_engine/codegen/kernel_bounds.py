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
compiles at most one per operator, as without the bound. A fused aggregation
whose aggregates are split across kernels (:func:`aggregate_slices`) is bounded
per kernel (its key kernel, each slice), as each compiles alone.

The count is of the program's expression nodes as the kernel is generated
from them (:class:`~gpu_engine.codegen.fusion_program.FusionProgram`: its
predicates, keys, aggregate arguments and outputs, constants already
parameters): a subexpression used twice counts once where the generated row
code computes it once (:func:`kernel_nodes`: the row lowering's memo keeps each
distinct subexpression per block, a CASE branch being a block of its own), so
conditional aggregates repeating one condition (``sum(CASE WHEN c ...)``,
``count(CASE WHEN c ...)``) cost what they compile to; an IN list that became
a parameter set is one node whatever its length (its values are a launch
parameter, :mod:`~gpu_engine.codegen.kernel_parameters`), one left as
comparisons counts each value, and a subexpression lifted out of the row code
(one over a string column's dictionary) is one node. It is taken without
recursion and stopped at the bound: a tree of at most the bound is counted node
by node; one of up to :data:`SHARED_TREE_FACTOR` times the bound has its
repeats found (each node's shape numbered bottom-up, no recursive hashing);
a larger one is over the bound.

Planning a program visits every node of its expressions (in time worse than
linear: a 2000-term chain took 7 s), so expressions of more than
:data:`MAX_PLANNED_NODES` nodes (an IN list's values not counted) are refused
before their program is planned (:func:`refuse_before_planning`); the margin
leaves room for what lifting shrinks (a long OR over one string column is one
lifted node).
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Iterable

from gpu_engine.codegen.row_lowering import Unsupported
from gpu_engine.plans.expressions import Case, Expr, InList

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.codegen.fusion_program import FusionProgram

__all__ = ["MAX_KERNEL_NODES", "MAX_PLANNED_NODES", "SHARED_TREE_FACTOR", "MAX_AGGREGATION_SLICE_NODES",
           "STATE_UPDATE_NODES", "aggregate_nodes", "aggregate_slices", "expression_nodes", "kernel_nodes",
           "kernel_node_counts",
           "refuse_before_planning", "refuse_oversized"]

#: The most expression nodes one generated kernel evaluates (its predicates, keys, aggregate arguments and
#: outputs together). TPC-H's largest (Q19's join filter) has 74: all of TPC-H stays fused.
MAX_KERNEL_NODES = 256


#: The most nodes one kernel of a fused aggregation folds into its aggregates' states (their arguments' nodes
#: and :data:`STATE_UPDATE_NODES` per state word each): aggregates over it are split across kernels
#: (:func:`aggregate_slices`). Why a budget of its own, below :data:`MAX_KERNEL_NODES`: a sum of a decimal
#: product is a handful of nodes but a checked multiply, a 128-bit add and their error paths in the row code;
#: TPC-DS q66's 24-36 such sums in one kernel (under 256 nodes) compiled for up to 112 s each. Why not less:
#: each kernel also pays a fixed cost (typing its parameters, the inlined row helpers), so small slices cost
#: more in all than one kernel (a budget of 72: q66 in 23 kernels, 383 s in all against 375 s as 4); at 144
#: q66's largest took 17 s and all 15 160 s (bench/results/2026-11-28-aggsplit-compile-per-kernel.md). No
#: TPC-H aggregation splits (Q1's FINAL step, 112, is the largest); of TPC-DS's, q9, q28 and q66 do.
MAX_AGGREGATION_SLICE_NODES = 144

#: The nodes an aggregate's update of one state word counts for (an add, a flag, a compare-and-store).
STATE_UPDATE_NODES = 2

#: Expressions with more nodes than this are refused before their fusion program is planned.
MAX_PLANNED_NODES = 4 * MAX_KERNEL_NODES

#: A tree of up to this many times a bound's nodes (counted with repeats) is searched for repeated subexpressions;
#: a larger one is over the bound without being searched, so counting stays bounded by the limit.
SHARED_TREE_FACTOR = 8


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


def kernel_nodes(expressions: Iterable[Expr], limit: int, in_list_values: bool = True) -> int:
    """Return how many nodes the row code of ``expressions`` computes, or ``limit + 1`` once it is passed.

    Why: the generated row code computes each distinct subexpression once per block
    (:class:`~gpu_engine.codegen.source_writer.SourceWriter`'s scoped memo), so six conditional aggregates that
    repeat one condition compile to that condition once; counting every repeat refused such kernels (TPC-DS
    q28's merged subqueries: 24 aggregates over 6 conditions, evaluated unfused with ~110 launches a batch).
    The count follows the lowering's blocks: a CASE's first condition in the enclosing block, each result and
    the rest of the CASE in blocks of their own (:meth:`RowLowering._case_branches`).
    """
    roots = list(expressions)
    tree = expression_nodes(roots, SHARED_TREE_FACTOR * limit, in_list_values)
    if tree <= limit or tree > SHARED_TREE_FACTOR * limit:
        return min(tree, limit + 1)
    shapes = _shape_numbers(roots)
    count, scopes = 0, [set()]
    work: list = list(reversed(roots))
    while work:
        item = work.pop()
        if item is _OPEN:
            scopes.append(set())
            continue
        if item is _CLOSE:
            scopes.pop()
            continue
        shape = shapes[id(item)]
        if any(shape in scope for scope in scopes):
            continue  # computed already in this block or an enclosing one
        scopes[-1].add(shape)
        count += 1 + (len(item.values) if in_list_values and isinstance(item, InList) else 0)
        if count > limit:
            return limit + 1
        work.extend(reversed(_case_steps(item) if isinstance(item, Case) else item.children()))
    return count


#: Markers of :func:`kernel_nodes`'s walk: a block of the row code opens and closes.
_OPEN, _CLOSE = object(), object()


def _case_steps(case: Case) -> list:
    """Return a CASE's children in lowering order with the blocks they are computed in."""
    steps: list = []
    nested = 0
    for index, (condition, result) in enumerate(case.whens):
        steps += [condition, _OPEN, result, _CLOSE]
        if index + 1 < len(case.whens) or case.default is not None:
            steps.append(_OPEN)  # the else block holding the rest
            nested += 1
    if case.default is not None:
        steps.append(case.default)
    return steps + [_CLOSE] * nested


def _shape_numbers(roots: list[Expr]) -> dict[int, int]:
    """Number every node of ``roots`` by its shape (equal subexpressions, one number), bottom-up without recursion.

    A node's shape is its type, its own fields and its children's numbers, so no tree is hashed whole (a deep
    chain's dataclass hash recurses once per level).
    """
    numbers: dict[int, int] = {}
    table: dict = {}
    stack: list[tuple[Expr, bool]] = [(root, False) for root in roots]
    while stack:
        node, ready = stack.pop()
        if id(node) in numbers:
            continue
        if not ready:
            stack.append((node, True))
            stack.extend((child, False) for child in node.children())
            continue
        shape = (type(node), tuple(_field_shape(getattr(node, field.name), numbers) for field in fields(node)))
        try:
            numbers[id(node)] = table.setdefault(shape, len(table))
        except TypeError:  # an unhashable constant: a shape of its own
            numbers[id(node)] = len(table)
            table[("unhashable", id(node))] = len(table)
    return numbers


def _field_shape(value, numbers: dict[int, int]):
    if isinstance(value, Expr):
        number = numbers.get(id(value))
        return ("expr", number) if number is not None else value  # an IN list's values: constants, hashed as such
    if isinstance(value, tuple):
        return tuple(_field_shape(item, numbers) for item in value)
    return value


def refuse_before_planning(expressions: Iterable[Expr]) -> None:
    """Raise :class:`Unsupported` when ``expressions`` hold more than :data:`MAX_PLANNED_NODES` nodes (IN lists'
    values not counted): the bound on a program as a whole (planning one that large costs seconds), where
    :func:`refuse_oversized` bounds each of its kernels (a split aggregation's several)."""
    nodes = kernel_nodes(expressions, MAX_PLANNED_NODES, in_list_values=False)
    if nodes > MAX_PLANNED_NODES:
        raise Unsupported(f"the expressions have more than {MAX_PLANNED_NODES} nodes: too large for one generated "
                          "kernel (evaluated unfused)")


def refuse_oversized(program: "FusionProgram", aggregates=None) -> None:
    """Raise :class:`Unsupported` when one kernel of ``program`` would hold more than :data:`MAX_KERNEL_NODES`
    nodes.

    A projection, a predicate or an unsplit aggregation is one kernel: its predicates, keys, aggregate
    arguments and outputs together. A fused aggregation whose ``aggregates`` (its AggregateFunctions) split
    (:func:`aggregate_slices`) is a key kernel (predicates, keys) and a kernel per slice (its aggregates'
    arguments): each is bounded alone, as each compiles alone; the cap bounds a kernel's compile time, and
    slices already bound the per-kernel nodes of aggregates (the whole program was capped at 256 nodes, so an
    aggregation of many small aggregates stayed unfused though every kernel it would compile is small). The
    program's inputs (columns and lifted subexpressions, each a kernel parameter shared by its kernels) stay
    within :data:`MAX_KERNEL_NODES`, what one kernel of that many nodes could read, so the launch arguments
    are no more than before; and :func:`refuse_before_planning` still bounds the program as a whole.

    Callers catch it as any other reason a stretch is not generated: it stays with the eager operators.
    """
    if max(kernel_node_counts(program, aggregates, MAX_KERNEL_NODES)) > MAX_KERNEL_NODES:
        raise Unsupported(f"the expressions have more than {MAX_KERNEL_NODES} nodes: one generated kernel "
                          "would take too long to compile (evaluated unfused)")
    if len(program.columns) + len(program.lifted) > MAX_KERNEL_NODES:
        raise Unsupported(f"the expressions read more than {MAX_KERNEL_NODES} columns and lifted values: too many "
                          "kernel parameters (evaluated unfused)")


def kernel_node_counts(program: "FusionProgram", aggregates=None, limit: int = MAX_KERNEL_NODES) -> list[int]:
    """Return the nodes of each kernel generated for ``program`` (each at most ``limit + 1``): one kernel, or a
    split aggregation's key kernel then one per slice (see :func:`refuse_oversized`)."""
    arguments = [e for group in program.arguments for e in group]
    slices = aggregate_slices(program, aggregates) if aggregates is not None and arguments else ((),)
    if len(slices) == 1:
        kernels = [(*program.predicates, *program.keys, *arguments, *program.outputs)]
    else:
        kernels = [(*program.predicates, *program.keys, *program.outputs)]
        kernels += [tuple(e for a in chosen for e in program.arguments[a]) for chosen in slices]
    return [kernel_nodes(expressions, limit) for expressions in kernels]


def aggregate_nodes(arguments: tuple[Expr, ...], states: int) -> int:
    """Return the nodes one aggregate adds to a kernel: its arguments' row code and its state words' updates.

    Capped at :data:`MAX_AGGREGATION_SLICE_NODES` + 1 (a larger one is a slice of its own)."""
    limit = MAX_AGGREGATION_SLICE_NODES
    return min(kernel_nodes(arguments, limit) + STATE_UPDATE_NODES * states, limit + 1)


def aggregate_slices(program: "FusionProgram", aggregates) -> tuple[tuple[int, ...], ...]:
    """Return the aggregates each kernel of a fused aggregation updates: one slice (all of them) or several.

    Why: one kernel folding every aggregate of a GROUP BY compiles in time that grows faster than its
    aggregates' count (TPC-DS q66: 24-36 decimal sums, 59-81 KB of source, ~2 minutes), and a query runs
    on its lowest tier until it is compiled. Over :data:`MAX_AGGREGATION_SLICE_NODES`
    (:func:`aggregate_nodes` summed), the aggregates are packed in order into slices of at most that
    budget (an aggregate over it alone is a slice of its own); one key kernel then evaluates the
    predicates and finds each row's slot, and a kernel per slice folds that slice's aggregates into the
    same slot table (:mod:`~gpu_engine.codegen.fused_aggregation_kernel`). So source and compile time per
    kernel stay flat as aggregates are added, and a query's kernels grow with their total nodes. The
    choice depends on the program's shape and the aggregates only (never on a batch), so every layout
    of one operator splits alike. An aggregate's nodes are counted alone: a subexpression two aggregates
    share counts in each, as a slice kernel computes it again.
    """
    weights = [aggregate_nodes(arguments, len(function.state_arrays()))
               for arguments, function in zip(program.arguments, aggregates)]
    if sum(weights) <= MAX_AGGREGATION_SLICE_NODES:
        return (tuple(range(len(weights))),)
    slices: list[list[int]] = []
    total = 0
    for a, weight in enumerate(weights):
        if not slices or total + weight > MAX_AGGREGATION_SLICE_NODES:
            slices.append([])
            total = 0
        slices[-1].append(a)
        total += weight
    return tuple(tuple(s) for s in slices)
