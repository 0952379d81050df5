"""Turn a filter bounding a window's ``row_number()``, ``rank()`` or ``dense_rank()`` into a TopNRowNumber.

Why: ``QUALIFY row_number() OVER (PARTITION BY k ORDER BY v DESC) <= 2``, or the same filter on a derived
table's row number, asks for the top rows of each partition. Planned as written, a Window sorts and numbers
every row and a Filter then drops all but a few per partition; a
:class:`~gpu_engine.plans.nodes.TopNRowNumberNode` keeps only the top rows as it reads them, and the
local and remote exchange passes put a partial step before the shuffle, so only each driver's (each
Task's) top rows cross it. Presto calls the rule WindowFilterPushDown; Velox runs its result.

The pass matches a Filter whose input is a Window computing one ranking function alone, possibly seen
through Projects that pass its column on (a derived table renames it), and one of whose conjuncts bounds
that column from above by a constant: ``n <= c``, ``n < c``, ``n = c`` (either side). The tightest bound is
the node's limit; conjuncts the limit implies (``<=``, ``<``, ``= 1``) go, the rest stay in a Filter above
it. The number column is produced only while something above still reads it: the remaining conjuncts, a
computing projection, or any consumer the pass cannot see through (the plan's root, an aggregation, a
join). A Window with other functions beside the ranking one stays as it is: they need whole partitions.

A free function over plan nodes, run by :func:`gpu_engine.sql.plan_sql` on every planned query (Session,
LocalCluster and Spark read the same plan).
"""

from __future__ import annotations

import decimal
import math
from dataclasses import replace
from functools import singledispatch

import pyarrow as pa

from gpu_engine.plans.expressions import BinaryOp, Cast, ColumnRef, Expr, Literal, referenced_columns
from gpu_engine.plans.nodes import (
    RANK_FUNCTIONS, FilterNode, LimitNode, OrderByNode, PlanNode, ProjectNode, TopNNode, TopNRowNumberNode,
    WindowNode,
)
from gpu_engine.plans.subqueries import is_subquery, transformed

__all__ = ["push_window_filters"]

#: A comparison with the number column on the right, as the same comparison with it on the left.
_MIRRORED = {"le": "ge", "lt": "gt", "eq": "eq", "ge": "le", "gt": "lt"}


def push_window_filters(root: PlanNode) -> PlanNode:
    """Return ``root`` with every Filter bounding a lone ranking window's column replaced by a TopNRowNumber."""
    return _rewrite(root, None)


# ``needed``: the columns the consumers above read of a node's output; None when the pass cannot tell (all).
@singledispatch
def _rewrite(node: PlanNode, needed: frozenset | None) -> PlanNode:
    if not node.sources:
        return node
    return replace(node, sources=tuple(_rewrite(source, None) for source in node.sources))


def _with(needed: frozenset | None, columns) -> frozenset | None:
    return None if needed is None else needed | frozenset(columns)


@_rewrite.register
def _(node: ProjectNode, needed: frozenset | None) -> PlanNode:
    used = frozenset(name for expression in node.expressions for name in referenced_columns(expression))
    return replace(node, sources=(_rewrite(node.source, used),))


@_rewrite.register(OrderByNode)
@_rewrite.register(TopNNode)
def _(node, needed: frozenset | None) -> PlanNode:
    return replace(node, sources=(_rewrite(node.source, _with(needed, (key.name for key in node.keys))),))


@_rewrite.register
def _(node: LimitNode, needed: frozenset | None) -> PlanNode:
    return replace(node, sources=(_rewrite(node.source, needed),))


@_rewrite.register
def _(node: FilterNode, needed: frozenset | None) -> PlanNode:
    predicate = transformed(node.predicate, lambda expr: replace(expr, subquery=push_window_filters(expr.subquery))
                            if is_subquery(expr) else None)  # an EXISTS / IN / scalar subquery's own plan
    if predicate is not node.predicate:
        node = replace(node, predicate=predicate)
    pushed = _pushed(node, needed)
    if pushed is not None:
        return pushed
    return replace(node, sources=(_rewrite(node.source, _with(needed, referenced_columns(node.predicate))),))


def _pushed(node: FilterNode, needed: frozenset | None) -> PlanNode | None:
    """Return the TopNRowNumber (with the Projects between and what is left of the filter) or None."""
    chain: list[ProjectNode] = []
    below = node.source
    while isinstance(below, ProjectNode):
        chain.append(below)
        below = below.source
    if not (isinstance(below, WindowNode) and len(below.functions) == 1
            and below.functions[0].function in RANK_FUNCTIONS):
        return None
    window = below
    names = {window.function_names[0]}  # the number column's names at each level, bottom up
    read_elsewhere = False  # a projection computes something from the number
    for project in reversed(chain):
        passed = set()
        for name, expression in zip(project.names, project.expressions):
            if isinstance(expression, ColumnRef) and expression.name in names:
                passed.add(name)
            elif names & set(referenced_columns(expression)):
                read_elsewhere = True
        names = passed
    if not names:
        return None
    limit, kept = None, []
    for conjunct in _conjuncts(node.predicate):
        bound = _upper_bound(conjunct, names)
        if bound is None:
            kept.append(conjunct)
            continue
        value, implied = bound
        limit = value if limit is None else min(limit, value)
        if not implied:
            kept.append(conjunct)
    if limit is None:
        return None
    numbered = (read_elsewhere or needed is None or bool(needed & names)
                or any(names & set(referenced_columns(conjunct)) for conjunct in kept))
    source = _rewrite(window.source, None)
    fields = list(source.output_schema)
    rewritten: PlanNode = TopNRowNumberNode(
        id=window.id, output_schema=pa.schema(fields + ([window.output_schema.field(window.function_names[0])]
                                                        if numbered else [])),
        sources=(source,), partition_keys=window.partition_keys, sort_keys=window.sort_keys, limit=max(limit, 0),
        function=window.functions[0].function, row_number_name=window.function_names[0] if numbered else None)
    lineage = {window.function_names[0]}
    for project in reversed(chain):
        pairs = list(zip(project.names, project.expressions))
        passed = {name for name, expression in pairs if isinstance(expression, ColumnRef) and expression.name in lineage}
        if not numbered:
            pairs = [(name, expression) for name, expression in pairs if name not in passed]
        schema = pa.schema([project.output_schema.field(name) for name, _ in pairs])
        rewritten = replace(project, output_schema=schema, sources=(rewritten,),
                            names=tuple(name for name, _ in pairs), expressions=tuple(e for _, e in pairs))
        lineage = passed
    if not kept:
        return rewritten
    predicate = kept[0]
    for conjunct in kept[1:]:
        predicate = BinaryOp("and", predicate, conjunct, pa.bool_())
    return replace(node, output_schema=rewritten.output_schema, sources=(rewritten,), predicate=predicate)


def _conjuncts(predicate: Expr) -> list[Expr]:
    if isinstance(predicate, BinaryOp) and predicate.op == "and":
        return _conjuncts(predicate.left) + _conjuncts(predicate.right)
    return [predicate]


def _constant(expression: Expr) -> float | int | decimal.Decimal | None:
    """Return a numeric constant's value, else None (through a cast only of an integer, which keeps its value)."""
    if isinstance(expression, Cast) and isinstance(expression.operand, Literal) \
            and isinstance(expression.operand.value, int) and pa.types.is_integer(expression.dtype):
        expression = expression.operand
    if not isinstance(expression, Literal) or isinstance(expression.value, bool):
        return None
    value = expression.value
    if isinstance(value, int):
        return value
    if isinstance(value, (float, decimal.Decimal)) and math.isfinite(value):
        return value
    return None


def _upper_bound(conjunct: Expr, names: set[str]) -> tuple[int, bool] | None:
    """Return ``(limit, implied)`` when ``conjunct`` bounds a number column from above, else None.

    ``implied``: the limit alone keeps exactly the rows the conjunct keeps (numbers start at 1).
    """
    if not isinstance(conjunct, BinaryOp) or conjunct.op not in _MIRRORED:
        return None
    op, column, constant = conjunct.op, conjunct.left, conjunct.right
    if not isinstance(column, ColumnRef):
        op, column, constant = _MIRRORED[op], conjunct.right, conjunct.left
    if not isinstance(column, ColumnRef) or column.name not in names:
        return None
    value = _constant(constant)
    if value is None:
        return None
    if op == "le":
        return math.floor(value), True
    if op == "lt":
        return math.ceil(value) - 1, True
    if op == "eq":
        return math.floor(value), value == 1
    return None
