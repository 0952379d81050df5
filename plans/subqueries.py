"""Typed subqueries: ``[NOT] EXISTS``, ``x [NOT] IN (SELECT …)`` and a scalar ``(SELECT …)`` in a Filter or a
Project.

Why expressions and not joins: a subquery is what the query says (DataFusion's
``Expr::Exists`` / ``Expr::InSubquery`` of its logical plan); which join
answers it is a decision of the optimizer rule
:func:`~gpu_engine.optimizer.decorrelation.decorrelate_subqueries` (semi,
anti or null-aware anti join, keyed on the correlation's equalities), which
every plan goes through — planned from SQL, built with
:class:`~gpu_engine.plans.plan_builder.PlanBuilder` (``filter`` takes a typed
expression) or read from JSON — before it runs. No operator evaluates them.
A :class:`QuantifiedComparison` (``x > ALL (SELECT …)``) is answered from the
subquery's counts and bounds per correlation key, a mark join too. Under OR,
NOT, inside an expression or in a Project's expressions an EXISTS / IN is a
mark join (every outer row kept with a match flag, IN's NULL-aware); a
correlation the rule cannot join on is refused there by name.

A :class:`ScalarSubquery` (DataFusion's ``Expr::ScalarSubquery``) is the value
of an uncorrelated subquery's one row: NULL when it has no row, an error when
it has several (SQL's scalar subquery). It may stand anywhere in a Filter's
predicate (under OR, inside arithmetic); the rule makes the Filter a
nested-loop join with the subquery's EnforceSingleRow build side, the
predicate its filter. A correlated one (TPC-H Q2, Q17, Q20: the subquery's
rows per correlation key, its ``correlation`` the keys' equalities) becomes a
hash join on those keys: inner where the predicate drops a NULL value, else
left with COUNT's 0 for an outer row meeting no row. In a Project's
expressions (a SELECT list's value) the rule joins it under the Project,
keeping every outer row (a left join where correlated).

The subquery is a plan of its own (``subquery``); its ``correlation`` is a
boolean expression over the subquery's output columns (:class:`ColumnRef`) and
the outer row's columns (:class:`OuterColumn`, DataFusion's
``OuterReferenceColumn``): ``EXISTS (SELECT * FROM <subquery> WHERE
<correlation>)``. Uncorrelated ones have none.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Iterator

import pyarrow as pa

from gpu_engine.plans.expressions import ColumnRef, Expr
from gpu_engine.plans.nodes import PlanNode, walk_plan

__all__ = ["OuterColumn", "Exists", "InSubquery", "QuantifiedComparison", "ScalarSubquery", "is_subquery_predicate",
           "is_subquery", "transformed", "walk_plan_and_subqueries", "QUANTIFIED_OPS"]


@dataclass(frozen=True)
class OuterColumn(Expr):
    """A column of the outer query's row, read in a subquery's correlation (DataFusion's OuterReferenceColumn)."""

    name: str
    dtype: pa.DataType

    def sql(self) -> str:
        return f"outer.{self.name}"


@dataclass(frozen=True)
class Exists(Expr):
    """``[NOT] EXISTS (SELECT * FROM subquery WHERE correlation)``: true when some subquery row meets the
    correlation with the outer row (``negated``: when none does)."""

    subquery: PlanNode
    correlation: Expr | None = None
    negated: bool = False
    dtype: pa.DataType = field(default_factory=pa.bool_)

    def children(self) -> tuple[Expr, ...]:
        # What a pass over the Filter's input sees: the outer row's columns the correlation reads, as the input
        # columns they are (the subquery's own columns are not the input's).
        return _outer_inputs(self.correlation)

    def sql(self) -> str:
        where = f" WHERE {self.correlation.sql()}" if self.correlation is not None else ""
        return f"{'NOT ' if self.negated else ''}EXISTS ({self.subquery.label}{where})"


@dataclass(frozen=True)
class InSubquery(Expr):
    """``value [NOT] IN (SELECT column FROM subquery WHERE correlation)``, with SQL's NULL semantics: NOT IN is
    NULL (so the row is dropped) where ``value`` is NULL and the subquery is not empty, or where no row equals
    ``value`` and the subquery's ``column`` holds a NULL."""

    value: Expr
    subquery: PlanNode
    column: str
    correlation: Expr | None = None
    negated: bool = False
    dtype: pa.DataType = field(default_factory=pa.bool_)

    def children(self) -> tuple[Expr, ...]:
        return (self.value,) + _outer_inputs(self.correlation)  # over the outer row's columns, as a filter's operand

    def sql(self) -> str:
        where = f" WHERE {self.correlation.sql()}" if self.correlation is not None else ""
        return (f"{self.value.sql()} {'NOT ' if self.negated else ''}IN "
                f"({self.subquery.label}.{self.column}{where})")


#: The comparison operators of a :class:`QuantifiedComparison` and their SQL spelling.
QUANTIFIED_OPS = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@dataclass(frozen=True)
class QuantifiedComparison(Expr):
    """``value op ANY|SOME (SELECT column ...)`` (``every``: ``op ALL``), with SQL's three-valued logic.

    ANY is TRUE where ``value op v`` holds for some value ``v`` of ``column`` (meeting the correlation with the outer
    row); else FALSE over no rows, NULL where ``value`` is NULL or some ``v`` is NULL, FALSE otherwise. ALL is
    FALSE where ``value op v`` fails for some non-NULL ``v``; else TRUE over no rows, NULL where ``value`` or some
    ``v`` is NULL, TRUE otherwise (``x > ALL (empty)`` is TRUE, as DuckDB answers).

    Why a predicate of its own (Postgres's ANY/ALL ``SubLink``): ``= ANY`` is IN and ``<> ALL`` NOT IN, which
    :class:`InSubquery` says (the decorrelation rule reads them so); the ordered forms and ``<> ANY`` / ``= ALL``
    are answered from the subquery's ``count(*)``, ``count(column)``, ``min`` and ``max`` per correlation key,
    joined to each outer row (:func:`~gpu_engine.optimizer.decorrelation.decorrelate_subqueries`).
    """

    value: Expr
    subquery: PlanNode
    column: str
    op: str
    every: bool = False
    correlation: Expr | None = None
    negated: bool = False
    dtype: pa.DataType = field(default_factory=pa.bool_)

    def children(self) -> tuple[Expr, ...]:
        return (self.value,) + _outer_inputs(self.correlation)

    def sql(self) -> str:
        where = f" WHERE {self.correlation.sql()}" if self.correlation is not None else ""
        return (f"{'NOT ' if self.negated else ''}{self.value.sql()} {QUANTIFIED_OPS.get(self.op, self.op)} "
                f"{'ALL' if self.every else 'ANY'} ({self.subquery.label}.{self.column}{where})")


@dataclass(frozen=True)
class ScalarSubquery(Expr):
    """``(SELECT column FROM subquery [WHERE correlation])``: the value of the subquery's one row (meeting the
    correlation with the outer row), a query error where there are several (DuckDB's "More than one row returned
    by a subquery used as an expression"). ``dtype`` is ``column``'s type.

    Uncorrelated (``correlation`` None): no row is NULL. Correlated: ``correlation`` is equalities of subquery
    columns with expressions over the outer row (:class:`OuterColumn`); the subquery computes its rows per
    correlation key (an aggregate is grouped by its correlation columns, as DataFusion's
    ``scalar_subquery_to_join`` pulls the correlation up through it), and an outer row meeting no row gets the
    subquery's value over no rows: where ``subquery`` ends in an aggregation grouped by exactly the correlation's
    columns (through projections) COUNT's 0 — the "COUNT bug" of decorrelation — and what the projection above
    makes of it (``count(*) + 1`` is 1); NULL otherwise.
    """

    subquery: PlanNode
    column: str
    dtype: pa.DataType
    correlation: Expr | None = None

    def children(self) -> tuple[Expr, ...]:
        return _outer_inputs(self.correlation)  # the outer row's columns its correlation reads (none uncorrelated)

    def sql(self) -> str:
        where = f" WHERE {self.correlation.sql()}" if self.correlation is not None else ""
        return f"({self.subquery.label}.{self.column}{where})"


def _outer_inputs(correlation: Expr | None) -> tuple[Expr, ...]:
    """Return the outer row's columns ``correlation`` reads, each as the input column (ColumnRef) it is."""
    if correlation is None:
        return ()
    seen: dict[str, Expr] = {}
    stack = [correlation]
    while stack:
        node = stack.pop()
        if isinstance(node, OuterColumn):
            seen.setdefault(node.name, ColumnRef(node.name, node.dtype))
        elif not isinstance(node, ColumnRef):
            stack.extend(reversed(node.children()))
    return tuple(seen.values())


def is_subquery_predicate(expr: Expr) -> bool:
    """Return True for an :class:`Exists`, :class:`InSubquery` or :class:`QuantifiedComparison`."""
    return isinstance(expr, (Exists, InSubquery, QuantifiedComparison))


def is_subquery(expr: Expr) -> bool:
    """Return True for any typed subquery: an :class:`Exists`, :class:`InSubquery`, :class:`QuantifiedComparison`
    or :class:`ScalarSubquery`."""
    return isinstance(expr, (Exists, InSubquery, QuantifiedComparison, ScalarSubquery))


def transformed(expr: Expr, replace_node) -> Expr:
    """Return ``expr`` with each node ``replace_node`` maps to a new expression replaced (bottom-up: a node's
    children first); ``replace_node`` returns None to keep a node. The same object where nothing changes.

    A subquery nested in ``expr`` is a leaf here: its correlation belongs to its own subquery.
    """
    from dataclasses import fields, replace

    def visit(node: Expr) -> Expr:
        changes = {}
        if not is_subquery(node):
            for f in fields(node):
                value = getattr(node, f.name)
                if isinstance(value, Expr):
                    new = visit(value)
                    if new is not value:
                        changes[f.name] = new
                elif isinstance(value, tuple):
                    new_tuple = visit_tuple(value)
                    if new_tuple is not value:
                        changes[f.name] = new_tuple
        current = replace(node, **changes) if changes else node
        mapped = replace_node(current)
        return current if mapped is None else mapped

    def visit_tuple(value: tuple) -> tuple:
        items = tuple(visit(item) if isinstance(item, Expr) else visit_tuple(item) if isinstance(item, tuple)
                      else item for item in value)
        return items if any(a is not b for a, b in zip(items, value)) else value

    return visit(expr)


def walk_plan_and_subqueries(plan: PlanNode) -> Iterator[PlanNode]:
    """Yield every node of ``plan`` and of each subquery plan its nodes' expressions hold (nested ones too).

    Why: :func:`~gpu_engine.plans.nodes.walk_plan` follows ``sources`` only, and a typed subquery's plan is a field
    of an expression; a check of what a plan reads (its scans' tables and columns) must see those scans before
    the decorrelation rule joins them in. Explicit stacks: a handed-in plan or predicate may be deeper than the
    interpreter's stack. A subquery plan reached twice (one object) is walked once.
    """
    pending, seen = [plan], set()
    while pending:
        for node in walk_plan(pending.pop()):
            yield node
            values = [getattr(node, f.name) for f in fields(node) if f.name != "sources"]
            while values:
                value = values.pop()
                if isinstance(value, tuple):
                    values.extend(value)
                elif isinstance(value, Expr):
                    if is_subquery(value) and id(value.subquery) not in seen:
                        seen.add(id(value.subquery))
                        pending.append(value.subquery)
                    values.extend(value.children())
