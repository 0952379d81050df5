"""Decorrelate a WHERE clause's subqueries: typed EXISTS / IN predicates, one-row builds, grouped aggregates.

Why a module of its own: a subquery evaluated once per outer row would scan its
input again for every row; each form the planner accepts becomes a join
instead, planned once, and each form it does not is refused by name. ``x IN
(SELECT …)`` and ``[NOT] EXISTS`` are translated here into typed subquery
predicates of a Filter (:mod:`gpu_engine.plans.subqueries`: the subquery's
plan, its correlation over its own and the outer row's columns), which the
optimizer rule :func:`~gpu_engine.optimizer.decorrelation.decorrelate_subqueries`
makes semi, anti or null-aware anti (NOT IN) joins on the correlation's
equalities, the other correlated conditions their filter (DataFusion's
``decorrelate_predicate_subquery``; the rule runs on every plan, the
optimizer off too). This module binds them: it plans the subquery (the
columns its keys and conditions read; its QUALIFY, DISTINCT ON or
LIMIT/OFFSET computed per correlation key first, by
:mod:`~gpu_engine.sql.correlated_row_clauses`), projects an outer key
expression and casts keys of two numeric layouts to their common type, and
places the Filter: an uncorrelated IN of one table at that table's scan, the
others after the joins. A comparison with an uncorrelated scalar subquery
(and an uncorrelated EXISTS, as a count compared with 0) is a Filter holding
a typed :class:`~gpu_engine.plans.subqueries.ScalarSubquery` (its plan ends
in EnforceSingleRow), which the same rule makes a nested-loop join with that
one row (:func:`scalar_filter`: at the scan of the one table it reads, else
after the joins). A comparison with a correlated scalar aggregate (TPC-H Q20,
TPC-DS q1, q30, q41, q81; Q2 and Q17 are windows first,
:mod:`~gpu_engine.sql.window_subqueries`) is the same Filter, its
ScalarSubquery the aggregate grouped by the correlation columns — its input
first restricted to the keys of the outer table's filtered rows (a "magic set"
semi join) — correlated by those columns' equalities with the outer ones; the
rule joins it on them (inner where the comparison fails for a key without
rows, else left with the value over no rows: COUNT's 0). EXISTS / IN under
OR, NOT or inside an expression (a CASE; correlated by column equalities, or uncorrelated) are typed
predicates inside the Filter's predicate (:func:`mark_predicates`), which the rule
makes mark joins (a match flag per outer row), a scalar subquery beside them a
typed ScalarSubquery of the same Filter (``c > (S) OR EXISTS (...)``); the other subqueries
used as values (in SELECT, under NOT) are LEFT-joined derived tables
(:mod:`~gpu_engine.sql.subquery_values`): those are still planned as joins
here (issue 30 item 0).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp
from sqlglot.optimizer.simplify import simplify

from gpu_engine.errors import PlanError
from gpu_engine.plans.expressions import ColumnRef
from gpu_engine.plans.plan_builder import join_key_layout
from gpu_engine.plans.scalar_translation import membership_equality
from gpu_engine.plans.sql_dialects import planned_dialect
from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES, aggregate_function_name
from gpu_engine.sql.correlated_derived_tables import with_correlation_pulled_up
from gpu_engine.sql.correlated_row_clauses import has_row_clauses, rows_per_correlation_key
from gpu_engine.sql.errors import SqlError, unsupported
from gpu_engine.sql.magic_set_key_filters import key_filters_over_inner_keys
from gpu_engine.sql.planning_context import Relation, quoted
from gpu_engine.sql.predicates import (
    conjoined, conjuncts_of, defined_aliases, factor_or, filter_estimate, free_columns, has_subquery,
)
from gpu_engine.sql.renaming import aliased, conjunction

if TYPE_CHECKING:
    from gpu_engine.sql.planner import QueryPlanner

__all__ = ["PARENTHESIZED_QUERY_CLAUSES", "SemiJoin", "subquery_select", "split_correlated", "correlation",
           "plan_subquery_conjunct", "single_alias", "scalar_relation", "scalar_filter", "subquery_filter",
           "select_over", "own_aggregates", "empty_group_value", "strict_subquery",
           "NULL_STRICT", "correlated_scalar_relation", "subquery_predicate_of",
           "is_uncorrelated_exists", "counted_exists", "semi_join_of"]

#: Clauses a parenthesized query may carry after its parentheses: ``(SELECT …) ORDER BY a LIMIT 1``.
PARENTHESIZED_QUERY_CLAUSES = ("order", "limit", "offset")


def subquery_select(tree: exp.Expression) -> exp.Expression:
    """Return the query inside parentheses, with the ORDER BY / LIMIT / OFFSET written after them applied.

    Why: ``(SELECT a FROM t) LIMIT 1`` parses as a Subquery carrying the
    LIMIT; unwrapping it alone dropped the clause and returned every row.
    """
    while isinstance(tree, (exp.Subquery, exp.Paren)):
        clauses = {key: value for key, value in tree.args.items() if key not in ("this", "alias") and value}
        if clauses:
            return _with_clauses(tree, clauses)
        tree = tree.this
    return tree


def _with_clauses(tree: exp.Expression, clauses: dict) -> exp.Expression:
    """Return a SELECT computing the parenthesized query ``tree.this`` followed by ``clauses``."""
    for key, value in clauses.items():
        if key not in PARENTHESIZED_QUERY_CLAUSES:
            raise unsupported(f"{key.upper()} after a parenthesized query", value if isinstance(value, exp.Expression)
                              else tree)
    inner = subquery_select(tree.this)
    if not isinstance(inner, (exp.Select, exp.SetOperation)):
        raise unsupported(f"{inner.key.upper()} after a parenthesized query", inner)
    if not any(inner.args.get(key) for key in PARENTHESIZED_QUERY_CLAUSES):
        merged = inner.copy()  # (SELECT …) ORDER BY x LIMIT n is SELECT … ORDER BY x LIMIT n
    else:  # the inner query orders or limits too: SELECT <its columns> FROM (<it>) <clauses>
        alias = "$parenthesized"
        merged = exp.Select(expressions=[exp.alias_(exp.column(e.alias_or_name, table=alias, quoted=True),
                                                    e.alias_or_name, quoted=True) for e in inner.selects])
        merged.set("from_", exp.From(this=exp.Subquery(this=inner.copy(), alias=exp.TableAlias(
            this=exp.to_identifier(alias, quoted=True)))))
    for key, value in clauses.items():
        merged.set(key, value.copy())
    return merged


# Operations that are NULL when an operand is: a scalar subquery under them may be decorrelated into a join.
NULL_STRICT = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Paren, exp.Cast)


def strict_subquery(side: exp.Expression) -> exp.Subquery | None:
    """Return the scalar subquery ``side`` is, or holds under NULL-strict arithmetic only (``1.2 * (SELECT ...)``).

    Why: a comparison with such a side is NULL wherever the subquery's value is, so a correlated subquery
    planned as an inner join with its aggregate per key (missing keys dropped) keeps the rows it should
    (TPC-DS q6); under a function such as coalesce a missing value would count, and that stays refused.
    """
    while isinstance(side, NULL_STRICT) and not isinstance(side, exp.Subquery):
        operands = [operand for operand in (side.this, side.args.get("expression")) if operand is not None]
        holding = [operand for operand in operands if has_subquery(operand)]
        if len(holding) != 1:
            return None
        side = holding[0]
    return side if isinstance(side, exp.Subquery) else None


#: Aggregates whose value over no rows is 0, not NULL (DuckDB); every other one is NULL over no rows.
_ZERO_WHEN_EMPTY = ("count", "regr_count", "approx_count_distinct")


def empty_group_value(value: exp.Expression) -> exp.Expression:
    """Return ``value`` (a subquery's aggregating projection) as computed over no rows, folded to a constant.

    Why: a correlated aggregate planned as a join per key has no row for a key
    without inner rows; the value such a key must get is COUNT's 0 (the
    "COUNT bug" of decorrelation) or NULL for the other aggregates, through
    whatever arithmetic surrounds them (``count(*) + 1`` is 1).
    """
    empty = simplify(value.copy().transform(
        lambda node: (exp.Literal.number(0) if aggregate_function_name(node) in _ZERO_WHEN_EMPTY else exp.Null())
        if isinstance(node, SQL_AGGREGATES) else node))
    return exp.Null() if _null_through_strict(empty) else empty


def _null_through_strict(tree: exp.Expression) -> bool:
    """Return whether ``tree`` is NULL for a NULL reached through NULL-strict operations (simplify keeps NULL * 1.2)."""
    if isinstance(tree, exp.Null):
        return True
    if not isinstance(tree, NULL_STRICT):
        return False
    return any(_null_through_strict(operand) for operand in (tree.this, tree.args.get("expression"))
               if isinstance(operand, exp.Expression))


def _with_subquery_replaced(tree: exp.Expression, subquery: exp.Subquery, by: exp.Expression,
                            copies: list[exp.Subquery] | None = None) -> exp.Expression:
    """Return a copy of ``tree`` with ``subquery`` (a node of it; each of ``copies``, the same subquery written
    again, too) replaced by ``by``."""
    return _with_subqueries_replaced(tree, [([subquery] + list(copies or ()), by)])


def _with_subqueries_replaced(tree: exp.Expression,
                              replacements: list[tuple[list[exp.Subquery], exp.Expression]]) -> exp.Expression:
    """Return a copy of ``tree`` with each group of subqueries (nodes of it: one subquery and the places it is
    written again) replaced by its expression.

    The subqueries are swapped out while ``tree`` is copied and put back after, so neither they (the deep part of
    nested subqueries) are copied nor every nested subquery rendered to find them: comparing SQL texts made
    planning 200 nested subqueries cubic (minutes).
    """
    if len(replacements) == 1 and replacements[0][0][0] is tree:
        return replacements[0][1].copy()
    swapped = []
    for nodes, by in replacements:
        for node in {id(node): node for node in nodes}.values():
            stand_in = by.copy()
            node.replace(stand_in)
            swapped.append((node, stand_in))
    try:
        return tree.copy()
    finally:
        for node, stand_in in swapped:
            stand_in.replace(node)


#: sqlglot's comparison nodes and the typed operator of a quantified comparison over them.
QUANTIFIED_OPERATORS = {exp.EQ: "eq", exp.NEQ: "ne", exp.LT: "lt", exp.LTE: "le", exp.GT: "gt", exp.GTE: "ge"}


def quantified_parts(node: exp.Expression) -> tuple[exp.Expression, exp.Expression, str, bool] | None:
    """Return (value, subquery, operator, every) when ``node`` is ``value op ANY|SOME|ALL (SELECT ...)`` of one value
    (not a row: :mod:`~gpu_engine.sql.tuple_membership`'s), else None."""
    operator = QUANTIFIED_OPERATORS.get(type(node))
    if operator is None or not isinstance(node.expression, (exp.Any, exp.All)) or isinstance(node.this, exp.Tuple):
        return None
    query = node.expression.this
    if not isinstance(subquery_select(query), (exp.Select, exp.SetOperation)):
        return None  # x = ANY (1, 2): a list, refused by name
    return node.this, query, operator, isinstance(node.expression, exp.All)


@dataclass
class SemiJoin:
    """A pending [NOT] EXISTS / [NOT] IN: join ``relation`` on key pairs, with an optional filter."""

    join_type: str  # left_semi | anti | null_aware_anti
    relation: Relation
    keys: list[tuple[exp.Expression, exp.Column]]  # (outer column, subquery column)
    filters: list[exp.Expression]
    tree: exp.Expression
    early: bool = False  # an uncorrelated IN: applied at the scan of its one outer table, like a filter
    #: A quantified comparison ``x op ANY|ALL (S)`` (its first key pair its value and column): (operator, every).
    quantifier: tuple[str, bool] | None = None


def single_alias(semi: SemiJoin) -> str | None:
    """Return the one outer table an uncorrelated IN reads (applied at that table's scan), else None."""
    aliases = {c.table for outer, _ in semi.keys for c in free_columns(outer)}
    aliases |= {c.table for f in semi.filters for c in free_columns(f) if not c.table.startswith("$")}
    return next(iter(aliases)) if len(aliases) == 1 and not semi.filters else None


@dataclass
class MarkedConjunct:
    """A pending WHERE conjunct holding EXISTS / IN predicates under OR (``marks``, one pending semi join each):
    applied after the joins as one Filter whose typed predicate holds them (the optimizer rule's mark joins).
    ``keys`` and ``filters`` list what it reads of the outer row, as a :class:`SemiJoin`'s do."""

    tree: exp.Expression
    marks: list[SemiJoin]
    early: bool = False
    #: Its scalar subqueries (``c > (SELECT ...) OR EXISTS (...)``): each the places it is written, its planned
    #: relation (one row, or its rows per correlation key), its value column and its key equalities ``outer =
    #: alias.k<n>`` (:func:`plan_subquery_conjunct`); typed ScalarSubqueries of the same Filter.
    scalars: list[tuple[list[exp.Subquery], Relation, exp.Column, list[exp.Expression]]] = dataclasses.field(
        default_factory=list)

    @property
    def keys(self) -> list[tuple[exp.Expression, exp.Column]]:
        return [pair for mark in self.marks for pair in mark.keys]

    @property
    def filters(self) -> list[exp.Expression]:
        outside = self.tree.copy()  # the conjunct's own columns, outside its subqueries
        for node in list(outside.find_all(exp.Exists, exp.In, *QUANTIFIED_OPERATORS)):
            if isinstance(node, exp.Exists) or node.args.get("query") is not None or quantified_parts(node):
                node.replace(exp.true())
        return [outside] + [f for mark in self.marks for f in mark.filters]


def mark_predicates(conjunct: exp.Expression, outer_aliases: set[str]) -> list[exp.Expression] | None:
    """Return the EXISTS / IN predicates of a WHERE conjunct that combines them with other conditions by OR, AND and
    NOT or holds them inside an expression (:func:`_positive_marks`; not one [NOT] EXISTS / IN alone, a semi or
    anti join, but for ``x NOT IN (correlated subquery)``, which a null-aware anti join cannot key), when
    each is planned as a typed predicate the optimizer rule makes a mark join (IN's flag NULL-aware, so under NOT
    too); None otherwise (the conjunct is then planned as before: a subquery value, a refusal).

    Why: TPC-DS q10 and q35 filter ``EXISTS (web sales of c) OR EXISTS (catalog sales of c)``, q45 ``zip IN (...)
    OR i_item_id IN (SELECT ...)``: a semi join would drop the rows the other disjunct keeps. Planned: an EXISTS
    correlated by column equalities (no other correlated condition, no aggregate) or uncorrelated (its row count;
    not over GROUP BY, HAVING, QUALIFY, LIMIT / OFFSET, which count its rows as written), an uncorrelated IN of one
    column read as written, a correlated IN of a column (its QUALIFY, DISTINCT ON, LIMIT/OFFSET computed per
    correlation key first, as a semi join's).
    """
    stripped, negated = conjunct, False
    while isinstance(stripped, (exp.Paren, exp.Not)):
        negated ^= isinstance(stripped, exp.Not)
        stripped = stripped.this
    bare = isinstance(stripped, exp.Exists) or isinstance(stripped, exp.In) and stripped.args.get("query") is not None
    if bare and not (negated and isinstance(stripped, exp.In) and any(
            column.table for column in free_columns(subquery_select(stripped.args["query"])))):
        return None  # (x NOT IN (correlated subquery) alone: no null-aware anti join keys it; a mark join does)
    found = _positive_marks(stripped)
    if not found or not all(mark_planned(mark, outer_aliases) for mark in found):
        return None
    from gpu_engine.sql.correlated_scalar_rows import scalar_groups

    if scalar_groups(stripped, outer_aliases) is None:  # a scalar subquery beside them no ScalarSubquery types
        return None
    return found


def _positive_marks(tree: exp.Expression) -> list[exp.Expression] | None:
    """Return the EXISTS / IN-subquery predicates of ``tree`` (depth first, left to right): under AND/OR/NOT, or
    inside an expression (a CASE, a comparison: the rule's flag is NULL-aware there); None when it holds an ANY /
    ALL over a list, which the conjunct's other paths plan. A scalar subquery beside them is skipped: it is a
    typed ScalarSubquery of the same Filter where :func:`mark_predicates` finds it bound.

    Why inside a CASE too: ``CASE WHEN EXISTS (...) THEN ... END`` in WHERE was a LEFT-joined ``count(*)`` per key
    of the sqlglot tree (:mod:`~gpu_engine.sql.subquery_values`); typed, the rule plans it for every plan."""
    while isinstance(tree, (exp.Paren, exp.Not)):
        tree = tree.this
    if isinstance(tree, (exp.And, exp.Or)):
        left, right = _positive_marks(tree.this), _positive_marks(tree.expression)
        return None if left is None or right is None else left + right
    if isinstance(tree, exp.Exists) or (isinstance(tree, exp.In) and tree.args.get("query") is not None) or \
            quantified_parts(tree) is not None:
        return [tree]
    if not has_subquery(tree):
        return []
    found: list[exp.Expression] = []
    for child in tree.iter_expressions():
        if isinstance(child, exp.Subquery):
            continue
        if isinstance(child, (exp.Select, exp.SetOperation, exp.Any, exp.All)):
            return None
        inner = _positive_marks(child)
        if inner is None:
            return None
        found.extend(inner)
    return found


def mark_planned(mark: exp.Expression, outer_aliases: set[str]) -> bool:
    """Return whether one EXISTS / IN under OR is planned as a typed predicate (see :func:`mark_predicates`); a
    quantified comparison as an IN of its value (any expression without a subquery: projected first)."""
    if isinstance(mark, exp.In) and isinstance(mark.this, exp.Tuple):  # (a, b) IN (S) where only TRUE counts
        select = subquery_select(mark.args["query"])
        return isinstance(select, (exp.Select, exp.SetOperation)) and len(select.selects) == len(
            mark.this.expressions) and not any(column.table for column in free_columns(select)) and not any(
            has_subquery(value) for value in mark.this.expressions)
    quantified = quantified_parts(mark)
    if quantified is not None:
        if has_subquery(quantified[0]):
            return False
        mark = exp.In(this=exp.column("$value"), query=quantified[1].copy())
    if isinstance(mark, exp.Exists):
        select, value = subquery_select(mark.this), None
    else:
        select, value = subquery_select(mark.args["query"]), mark.this
        if not isinstance(value, exp.Column):
            return False
    try:
        select = with_correlation_pulled_up(select, outer_aliases)
        if value is not None and isinstance(select, (exp.Select, exp.SetOperation)) and len(select.selects) == 1 \
                and not any(column.table for column in free_columns(select)):
            return True  # uncorrelated: its values read as written
        if isinstance(select, exp.Select) and value is None and select.args.get("group") is not None:
            return grouped_exists_keys(select, outer_aliases) is not None  # EXISTS picking whole groups
        if not isinstance(select, exp.Select) or any(select.args.get(k) for k in ("group", "having", "windows")) \
                or own_aggregates(select):
            return False
        if value is not None and (len(select.expressions) != 1 or any(
                node.find(exp.AggFunc, exp.Window) for node in select.expressions)
                or not isinstance(_unaliased(select.expressions[0]), exp.Column)):
            return False
        inner, _local, correlated = split_correlated(select, outer_aliases)
    except SqlError:
        return False  # refused on the path that plans it, by name
    keys, others = correlation(correlated, inner)
    if value is None and not correlated:  # an uncorrelated EXISTS: the rule's row count, its rows as filtered
        return not any(select.args.get(k) for k in _COUNTED_AS_WRITTEN)
    return not others and bool(keys or value is not None)


def _unaliased(projection: exp.Expression) -> exp.Expression:
    return projection.this if isinstance(projection, exp.Alias) else projection


#: Clauses after which an uncorrelated EXISTS's rows are no longer its FROM's filtered rows (counted as written).
_COUNTED_AS_WRITTEN = ("group", "having", "qualify", "limit", "offset", "windows")


def own_aggregates(select: exp.Select) -> bool:
    """Return whether ``select`` aggregates: an aggregate call in its own scope, not one a window computes.

    Why not ``select.find_all``: that looks inside derived tables and subqueries (their aggregates make their
    own rows, not this SELECT's) and into ``sum(x) OVER (...)`` (a value per row); an aggregate inside a
    window's arguments (``sum(count(*)) OVER ()``) does count.
    """
    stack = [select]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Window):
            function = node.this
            stack.extend(child for child in node.iter_expressions() if child is not function)
            while isinstance(function, (exp.Filter, exp.IgnoreNulls, exp.RespectNulls)):
                stack.extend(child for child in function.iter_expressions() if child is not function.this)
                function = function.this
            stack.extend(function.iter_expressions())
            continue
        if isinstance(node, SQL_AGGREGATES):
            return True
        if isinstance(node, (exp.Select, exp.SetOperation, exp.Subquery)) and node is not select:
            continue
        stack.extend(node.iter_expressions())
    return False


def subquery_predicate_of(conjunct: exp.Expression) -> tuple[exp.Expression, bool]:
    """Return ``conjunct`` through its NOTs and parentheses, and whether an odd number of NOTs negates it."""
    tree, negated = conjunct, False
    while isinstance(tree, exp.Paren):
        tree = tree.this
    while isinstance(tree, exp.Not):
        negated, tree = not negated, tree.this
        while isinstance(tree, exp.Paren):
            tree = tree.this
    return tree, negated


def is_uncorrelated_exists(tree: exp.Expression) -> bool:
    """Return whether ``tree`` is an EXISTS over a SELECT reading no outer column."""
    if not isinstance(tree, exp.Exists):
        return False
    select = subquery_select(tree.this)
    return isinstance(select, exp.Select) and not ({c.table for c in free_columns(select)} - defined_aliases(select))


def counted_exists(tree: exp.Exists, negated: bool) -> tuple[exp.Expression, exp.Subquery]:
    """Return an uncorrelated ``[NOT] EXISTS (S)`` as the comparison ``(SELECT count(*) FROM S) > 0`` (``= 0``)
    and its scalar subquery: one count for the whole query, compared on a nested-loop join."""
    select = subquery_select(tree.this)
    if any(select.args.get(k) for k in _COUNTED_AS_WRITTEN) or own_aggregates(select):
        # the rows it returns are not its FROM's filtered rows: count them as written
        counted = exp.Select(expressions=[exp.alias_(exp.Count(this=exp.Star()), "n")]).from_(
            exp.Subquery(this=select.copy(), alias=exp.TableAlias(this=exp.to_identifier("$exists", quoted=True))))
    else:
        counted = select.copy()
        counted.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), "n")])
        for clause in ("order", "distinct"):
            counted.set(clause, None)
    subquery = exp.Subquery(this=counted)
    return (exp.EQ if negated else exp.GT)(this=subquery, expression=exp.Literal.number(0)), subquery


def semi_join_of(planner: QueryPlanner, tree: exp.Expression, negated: bool, outer_aliases, ctes,
                 conjunct) -> SemiJoin:
    """Return a correlated ``[NOT] EXISTS`` or a ``x [NOT] IN (SELECT …)`` as a pending semi (anti, null-aware
    anti) join: the subquery planned, its keys and conditions, which :func:`subquery_filter` types. A quantified
    comparison ``x op ANY|ALL (S)`` is planned as ``x IN (S)`` is, its operator kept (typed a
    :class:`~gpu_engine.plans.subqueries.QuantifiedComparison`, a mark join's flag)."""
    quantified = quantified_parts(tree)
    if quantified is not None:
        value, query, operator, every = quantified
        semi = _in_subquery(planner, exp.In(this=value.copy(), query=query.copy()), False, outer_aliases, ctes,
                            conjunct)
        return dataclasses.replace(semi, quantifier=(operator, every))
    if isinstance(tree, exp.Exists):
        return _exists(planner, tree, negated, outer_aliases, ctes, conjunct)
    return _in_subquery(planner, tree, negated, outer_aliases, ctes, conjunct)


def plan_subquery_conjunct(planner: QueryPlanner, conjunct, local_aliases, ctes, semi_joins, attach) -> None:
    """Turn one WHERE conjunct holding a subquery into a pending semi join or a scalar-subquery filter to attach."""
    marks = mark_predicates(conjunct, local_aliases)
    if marks is not None:  # EXISTS / IN under OR: typed predicates the optimizer rule makes mark joins
        semi_joins.append(MarkedConjunct(conjunct, [semi_join_of(planner, mark, False, local_aliases, ctes, mark)
                                                    for mark in marks],
                                         scalars=_bound_scalars(planner, conjunct, local_aliases, ctes)))
        return
    tree, negated = subquery_predicate_of(conjunct)
    if is_uncorrelated_exists(tree):
        comparison, subquery = counted_exists(tree, negated)
        _scalar_comparison(planner, comparison, subquery, local_aliases, ctes, attach)
        return
    if isinstance(tree, exp.Exists) or (isinstance(tree, exp.In) and tree.args.get("query") is not None):
        semi_joins.append(semi_join_of(planner, tree, negated, local_aliases, ctes, conjunct))
        return
    comparisons = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
    if not negated and isinstance(tree, comparisons):
        found = [(side, strict_subquery(side)) for side in (tree.this, tree.expression)]
        subqueries = [subquery for _, subquery in found if subquery is not None]
        other = tree.expression if found[0][1] is not None else tree.this
        if len(subqueries) == 1 and not has_subquery(other):
            _scalar_comparison(planner, tree, subqueries[0], local_aliases, ctes, attach)
            return
    from gpu_engine.sql.correlated_scalar_rows import conjunct_scalars

    groups = conjunct_scalars(conjunct, set(local_aliases))
    if groups is not None:  # under OR, NOT, in a CASE, several: the whole conjunct is the typed Filter's predicate
        _scalar_comparisons(planner, conjunct, groups, local_aliases, ctes, attach)
        return
    raise unsupported("a subquery inside OR, NOT or an expression (only [NOT] EXISTS, [NOT] IN and "
                      "comparisons with a scalar subquery are planned)", conjunct)


def _bound_scalars(planner: QueryPlanner, conjunct: exp.Expression, outer_aliases, ctes):
    """Return the scalar subqueries of a marked conjunct, planned (:attr:`MarkedConjunct.scalars`): uncorrelated,
    its one row (EnforceSingleRow); correlated by column equalities, its rows per correlation key
    (:func:`~gpu_engine.sql.correlated_scalar_rows.bind_correlated_scalar`), unrestricted (the conjunct may keep
    an outer row whatever its key)."""
    from gpu_engine.sql.correlated_scalar_rows import bind_correlated_scalar, scalar_groups

    bound = []
    for copies in scalar_groups(conjunct, set(outer_aliases)) or []:
        select = subquery_select(copies[0].this)
        if isinstance(select, exp.Select) and split_correlated(select, set(outer_aliases))[2]:
            relation, column, equalities = bind_correlated_scalar(planner, copies[0], select, set(outer_aliases),
                                                                  ctes)
        else:
            (relation, column), equalities = scalar_relation(planner, copies[0], ctes), []
        bound.append((copies, relation, column, equalities))
    return bound


def split_correlated(select: exp.Select, outer_aliases: set[str]):
    """Split a subquery's WHERE into local conjuncts and those that read the outer query's columns."""
    inner = defined_aliases(select)
    local, correlated = [], []
    where = select.args["where"].this if select.args.get("where") else None
    # (k = outer.k AND a) OR (k = outer.k AND b): the correlation shared by every branch comes out (TPC-DS q41)
    for conjunct in [part for conjunct in conjuncts_of(where) for part in factor_or(conjunct)]:
        free = {c.table for c in free_columns(conjunct)}
        if free - inner:
            if free - inner - outer_aliases:
                raise unsupported("a correlated reference to a query more than one level out", conjunct)
            correlated.append(conjunct)
        else:
            local.append(conjunct)
    for key in ("expressions", "group", "having", "order"):
        value = select.args.get(key)
        for tree in value if isinstance(value, list) else [value] if value is not None else []:
            tables = {c.table for c in free_columns(tree)}
            if key == "order":
                tables.discard("")  # ORDER BY an output name (the subquery's own, unqualified)
            if tables - inner:
                raise unsupported("an outer column outside the subquery's WHERE", tree)
    for join in select.args.get("joins") or []:
        if join.args.get("on") is not None and {c.table for c in free_columns(join.args["on"])} - inner:
            raise unsupported("an outer column in a subquery's JOIN condition", join)
    return inner, local, correlated


def correlation(correlated: list[exp.Expression], inner: set[str]):
    """Return (key pairs (outer, inner column), other correlated conjuncts) of a subquery's correlation."""
    keys, others = [], []
    for conjunct in correlated:
        if isinstance(conjunct, exp.EQ):
            for inner_side, outer_side in ((conjunct.this, conjunct.expression),
                                           (conjunct.expression, conjunct.this)):
                if (isinstance(inner_side, exp.Column) and inner_side.table in inner
                        and isinstance(outer_side, exp.Column) and outer_side.table not in inner):
                    keys.append((outer_side, inner_side))
                    break
            else:
                others.append(conjunct)
        else:
            others.append(conjunct)
    return keys, others


def correlated_by_equalities(select: exp.Select, outer_aliases: set[str]) -> bool:
    """Return whether ``select`` is correlated, by column equalities of an outer and an inner column only (the
    keys a subquery's rows per correlation key are grouped by); False where :func:`split_correlated` refuses it
    (refused again, by name, on the path that plans it)."""
    try:
        inner, _local, correlated = split_correlated(select, outer_aliases)
    except SqlError:
        return False
    keys, others = correlation(correlated, inner)
    return bool(correlated) and bool(keys) and not others


def select_over(select: exp.Select, projections: list[exp.Expression],
                conditions: list[exp.Expression]) -> exp.Select:
    """Return ``SELECT <projections> FROM <select's FROM and joins> WHERE <conditions, AND-ed>``.

    Why one function: decorrelation, mark joins, quantified comparisons and
    the merging of one-row aggregates each plan a new query over a
    subquery's sources with their own outputs and filters.
    """
    over = exp.Select(expressions=projections)
    over.set("from_", select.args["from_"].copy())
    if select.args.get("joins"):
        over.set("joins", [join.copy() for join in select.args["joins"]])
    if conditions:
        over.set("where", exp.Where(this=conjoined(conditions)))
    return over


def _inner_select(select: exp.Select, local: list[exp.Expression],
                  columns: list[exp.Column]) -> tuple[exp.Select, dict[tuple[str, str], str]]:
    """Return ``SELECT <columns> FROM <select's FROM> WHERE <local>`` and each column's output name."""
    names = {}
    projections = []
    for column in columns:
        key = (column.table, column.name)
        if key not in names:
            names[key] = f"c{len(names)}"
            projections.append(exp.alias_(column.copy(), names[key]))
    return select_over(select, projections or [exp.alias_(exp.Literal.number(1), "c0")], local), names


def _exists(planner: QueryPlanner, tree: exp.Exists, negated: bool, outer_aliases, ctes, conjunct) -> SemiJoin:
    """Return a correlated [NOT] EXISTS as a pending semi (anti) join on its correlation equalities."""
    select = subquery_select(tree.this)
    if not isinstance(select, exp.Select):
        raise unsupported("EXISTS over a set operation", tree)
    select = with_correlation_pulled_up(select, outer_aliases)  # FROM (SELECT ... WHERE u.k = t.k) w
    if select.args.get("group") or select.args.get("having") or own_aggregates(select):
        return _grouped_exists(planner, tree, select, negated, outer_aliases, ctes, conjunct)
    inner, local, correlated = split_correlated(select, outer_aliases)
    keys, others = correlation(correlated, inner)
    if has_row_clauses(select):  # QUALIFY, DISTINCT ON, LIMIT/OFFSET: computed per correlation key first
        select = rows_per_correlation_key(select, local, keys, others, None)
        inner, local, correlated = split_correlated(select, outer_aliases)
        keys, others = correlation(correlated, inner)
    if not keys and correlated:  # (uncorrelated: a mark join's row count, mark_predicates)
        raise unsupported("EXISTS without an equality between a subquery column and an outer column", tree)
    _refuse_nested_correlation(others)
    return _semi_relation(planner, "anti" if negated else "left_semi", select, inner, local, keys, others, ctes,
                               conjunct)


def _refuse_nested_correlation(others: list[exp.Expression]) -> None:
    """Refuse, naming it, a correlated condition of a subquery that holds a subquery of its own (``EXISTS (... AND
    EXISTS (SELECT ... WHERE v.w = t.a))``: a correlation two levels down), which no join of the middle query
    keys; it was 'a subquery in this position'."""
    for other in others:
        nested = next((node for node in other.walk() if isinstance(node, (exp.Subquery, exp.Exists, exp.Select))
                       ), None)
        if nested is not None:
            raise unsupported("a subquery inside a subquery's condition that reads the outer query's columns (a "
                              "correlation two levels down); correlate the inner subquery with the middle "
                              "query's columns, or join the outer table into the middle query", nested)


def grouped_exists_keys(select: exp.Select, outer_aliases: set[str]):
    """Return (local conjuncts, key pairs) of a correlated subquery that groups, when its correlation is only
    equalities of outer columns with its GROUP BY columns (and it has no LIMIT / OFFSET / QUALIFY), else None."""
    group = select.args.get("group")
    if group is None or any(select.args.get(k) for k in ("limit", "offset", "qualify", "windows")):
        return None
    inner, local, correlated = split_correlated(select, outer_aliases)
    keys, others = correlation(correlated, inner)
    grouping = {(c.table, c.name) for c in group.expressions if isinstance(c, exp.Column)}
    if others or not keys or any((column.table, column.name) not in grouping for _, column in keys):
        return None
    return local, keys


def _grouped_exists(planner: QueryPlanner, tree: exp.Exists, select: exp.Select, negated: bool, outer_aliases,
                    ctes, conjunct) -> SemiJoin:
    """Return a correlated ``[NOT] EXISTS`` over a subquery that groups as a semi (anti) join with its groups.

    Why it may: correlated by equalities with GROUP BY columns only, the correlation picks whole groups, so it
    holds as well above the grouping: ``EXISTS (SELECT k FROM u WHERE u.k = t.g GROUP BY k HAVING count(*) > 1)``
    is a semi join of t on ``g`` with ``SELECT k FROM u GROUP BY k HAVING count(*) > 1`` (DuckDB's answer).
    """
    found = grouped_exists_keys(select, outer_aliases)
    if found is None:
        raise unsupported("EXISTS over a subquery that groups or aggregates, correlated otherwise than by equalities "
                          "with its GROUP BY columns or with LIMIT / OFFSET / QUALIFY (correlate by a GROUP BY "
                          "column, or write x IN (SELECT key ... GROUP BY key HAVING ...))", tree)
    local, keys = found
    names: dict[tuple[str, str], str] = {}
    projections = []
    for _, column in keys:
        if (column.table, column.name) not in names:
            names[(column.table, column.name)] = f"c{len(names)}"
            projections.append(exp.alias_(column.copy(), names[(column.table, column.name)]))
    grouped = select.copy()
    grouped.set("expressions", projections)
    grouped.set("where", exp.Where(this=conjoined([c.copy() for c in local])) if local else None)
    for clause in ("order", "distinct"):
        grouped.set(clause, None)
    relation, outputs = planner._plan_query(grouped, ctes)
    alias = planner._synthetic_alias()
    by_name = dict(outputs)
    relation = Relation(relation.node, {(alias, n): by_name[n] for n in names.values()}, frozenset([alias]),
                        relation.rows, relation.stats)
    return SemiJoin("anti" if negated else "left_semi", relation, [
        (outer.copy(), exp.column(names[(column.table, column.name)], table=alias)) for outer, column in keys], [],
        conjunct)


def _semi_relation(planner: QueryPlanner, join_type, select, inner, local, keys, others, ctes, conjunct) -> SemiJoin:
    """Plan the inner side of a semi join (the columns its keys and filters read) and return the pending join."""
    inner_columns = [i for _, i in keys] + [c for o in others for c in free_columns(o) if c.table in inner]
    sub_select, names = _inner_select(select, local, inner_columns)
    relation, outputs = planner._plan_query(sub_select, ctes)
    alias = planner._synthetic_alias()
    by_name = dict(outputs)
    relation = Relation(relation.node, {(alias, n): by_name[n] for n in names.values()}, frozenset([alias]),
                        relation.rows, relation.stats)

    def to_sub(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and (node.table, node.name) in names:
            return exp.column(names[(node.table, node.name)], table=alias)
        return node

    return SemiJoin(join_type, relation,
                    [(outer.copy(), to_sub(inner_column.copy())) for outer, inner_column in keys],
                    [o.copy().transform(to_sub) for o in others], conjunct)


def _in_subquery(planner: QueryPlanner, tree: exp.In, negated: bool, outer_aliases, ctes, conjunct) -> SemiJoin:
    """Return ``x [NOT] IN (SELECT …)`` as a pending semi (null-aware anti) join on ``x`` and its correlation."""
    select = subquery_select(tree.args["query"])
    if isinstance(tree.this, exp.Tuple) and not negated:  # (a, b) IN (SELECT x, y ...): a semi join on every column
        return _row_in_subquery(planner, tree, select, ctes, conjunct)  # (sql/tuple_membership.py sends it here)
    if not isinstance(select, (exp.Select, exp.SetOperation)) or len(select.selects) != 1:
        raise unsupported("IN over a subquery that is not a one-column SELECT", tree)
    if has_subquery(tree.this):
        raise unsupported("a subquery on the left of IN", tree)
    if isinstance(select, exp.SetOperation):  # planned as a whole: only an uncorrelated one
        if any(c.table for c in free_columns(select)):
            raise unsupported("IN over a correlated set operation", tree)
        inner, local, correlated = set(), [], []
    else:
        select = with_correlation_pulled_up(select, outer_aliases)  # FROM (SELECT ... WHERE u.k = t.k) w
        inner, local, correlated = split_correlated(select, outer_aliases)
    if not correlated:
        relation, outputs = planner._plan_query(select, ctes)
        alias = planner._synthetic_alias()
        name, internal = outputs[0]
        relation = Relation(relation.node, {(alias, name): internal}, frozenset([alias]), relation.rows,
                            relation.stats)
        return SemiJoin("null_aware_anti" if negated else "left_semi", relation,
                        [(tree.this.copy(), exp.column(name, table=alias))], [], conjunct, early=True)
    if negated:
        raise unsupported("NOT IN over a correlated subquery (write NOT EXISTS)", tree)
    value = select.expressions[0]
    value = value.this if isinstance(value, exp.Alias) else value
    if select.args.get("group") or own_aggregates(select) or not isinstance(value, exp.Column):
        raise unsupported("IN over a correlated subquery that aggregates or selects an expression", tree)
    keys, others = correlation(correlated, inner)
    if has_row_clauses(select):  # QUALIFY, DISTINCT ON, LIMIT/OFFSET: computed per correlation key first
        select = rows_per_correlation_key(select, local, keys, others, value)
        inner, local, correlated = split_correlated(select, outer_aliases)
        keys, others = correlation(correlated, inner)
        value = select.expressions[0]
    return _semi_relation(planner, "left_semi", select, inner, local, [(tree.this, value)] + keys, others, ctes,
                               conjunct)


def _row_in_subquery(planner: QueryPlanner, tree: exp.In, select: exp.Expression, ctes, conjunct) -> SemiJoin:
    """Return an uncorrelated ``(a, b) IN (SELECT x, y …)`` WHERE conjunct as a semi join on all its columns.

    Only where NULL and FALSE filter alike (a WHERE conjunct, not negated): NOT IN is a value
    (:mod:`~gpu_engine.sql.tuple_membership`), since a NULL in one column of a row is not the null-aware
    anti join's NULL key.
    """
    values = list(tree.this.expressions)
    if not isinstance(select, (exp.Select, exp.SetOperation)) or len(select.selects) != len(values):
        raise unsupported(f"a row of {len(values)} values IN a subquery that is not a {len(values)}-column SELECT",
                          tree)
    if any(has_subquery(value) for value in values):
        raise unsupported("a subquery on the left of IN", tree)
    relation, outputs = planner._plan_query(select, ctes)
    alias = planner._synthetic_alias()
    relation = Relation(relation.node, {(alias, f"c{n}"): internal for n, (_, internal) in enumerate(outputs)},
                        frozenset([alias]), relation.rows, relation.stats)
    return SemiJoin("left_semi", relation, [(value.copy(), exp.column(f"c{n}", table=alias))
                                            for n, value in enumerate(values)], [], conjunct, early=True)


def scalar_relation(planner: QueryPlanner, subquery: exp.Subquery, ctes) -> tuple[Relation, exp.Column]:
    """Plan an uncorrelated scalar subquery as a one-row relation (EnforceSingleRow)."""
    relation, outputs = planner._plan_query(subquery.this, ctes)
    if len(outputs) != 1:
        raise unsupported(f"a scalar subquery with {len(outputs)} columns", subquery)
    try:
        node = planner._builder(relation.node).enforce_single_row().plan()
    except PlanError as error:
        raise planner._plan_error(error, subquery) from None
    alias = planner._synthetic_alias()
    name, internal = outputs[0]
    return Relation(node, {(alias, name): internal}, frozenset([alias]), 1.0, {}), exp.column(name, table=alias)


def _scalar_comparison(planner: QueryPlanner, tree, subquery, local_aliases, ctes, attach) -> None:
    """Plan a comparison with a scalar subquery as a typed ScalarSubquery filter to attach (:func:`_scalar_comparisons`
    of one subquery)."""
    _scalar_comparisons(planner, tree, [[subquery]], local_aliases, ctes, attach)


def _scalar_comparisons(planner: QueryPlanner, tree, groups: list[list[exp.Subquery]], local_aliases, ctes,
                        attach) -> None:
    """Plan a conjunct reading scalar subqueries (``groups``: each subquery with the places it is written again) as
    a typed filter to attach (at one FROM item or after the joins), one ScalarSubquery each: uncorrelated, its one
    row; correlated, its rows per correlation key
    (:func:`~gpu_engine.sql.correlated_scalar_rows.bind_correlated_scalar`: an aggregate grouped by its correlation
    columns, its input restricted to the keys the outer rows ask for, :func:`_magic_sets`), which the optimizer's
    decorrelation rule joins (inner where the comparison drops the NULL of a key without rows, else left with
    COUNT's 0; several in turn)."""
    from gpu_engine.sql.correlated_scalar_rows import bind_correlated_scalar

    relations, columns, replacements, equalities = [], [], [], []
    for copies in groups:
        subquery = copies[0]
        select = subquery_select(subquery.this)
        if isinstance(select, exp.SetOperation):  # planned as a whole: only an uncorrelated one
            if any(c.table for c in free_columns(select)):
                raise unsupported("a correlated scalar subquery over a set operation", subquery)
            correlated = []
        elif not isinstance(select, exp.Select):
            raise unsupported(f"a scalar subquery over {select.key.upper()}", subquery)
        else:
            _inner, _local, correlated = split_correlated(select, set(local_aliases))
        if not correlated:  # its one row (EnforceSingleRow)
            relation, column = scalar_relation(planner, subquery, ctes)
        else:
            relation, column, keys = bind_correlated_scalar(planner, subquery, select, set(local_aliases), ctes,
                                                            restricted=True)
            equalities += keys
        relations.append(relation)
        columns.append(column)
        replacements.append((copies, column))
    rewritten = _with_subqueries_replaced(tree, replacements)
    # the comparison AND the key equalities: scalar_filter splits them apart again (the equalities read the
    # k<n> columns); the outer columns they read are the columns the planner scans and places the filter by
    predicate = conjoined([rewritten] + equalities)
    attach.setdefault(_scalar_filter_place(planner, predicate, columns), []).append(
        (relations[0] if len(relations) == 1 else tuple(relations), predicate))


def correlated_scalar_relation(planner: QueryPlanner, subquery: exp.Expression, select: exp.Select, inner: set[str],
                               local: list[exp.Expression], correlated: list[exp.Expression], ctes,
                               restricted: bool) -> tuple[Relation, exp.Column, list[exp.Expression]]:
    """Plan a scalar aggregate correlated by column equalities as its rows per correlation key: the relation
    (columns ``k<n>`` and ``v`` under a new alias), its value column, and the equalities ``outer = alias.k<n>``
    that become the typed ScalarSubquery's correlation.

    ``restricted``: its input restricted to the keys of the outer table's filtered rows (:func:`_magic_sets`,
    a WHERE comparison's scope).
    """
    if len(select.expressions) != 1 or select.args.get("group") or select.args.get("having"):
        raise unsupported("a correlated scalar subquery other than one aggregate without GROUP BY", subquery)
    value = select.expressions[0]
    value = value.this if isinstance(value, exp.Alias) else value
    aggregates = list(value.find_all(*SQL_AGGREGATES))
    if not aggregates:
        raise unsupported("a correlated scalar subquery that does not aggregate", subquery)
    keys, others = correlation(correlated, inner)
    if others or not keys:
        raise unsupported("a correlated scalar subquery whose correlation is not column equalities", subquery)
    grouped = select_over(select, [exp.alias_(i.copy(), f"k{n}") for n, (_, i) in enumerate(keys)]
                          + [exp.alias_(value.copy(), "v")],
                          local + (_magic_sets(planner, keys, inner, select) if restricted else []))
    grouped.set("group", exp.Group(expressions=[i.copy() for _, i in keys]))
    relation, outputs = planner._plan_query(grouped, ctes)
    alias = planner._synthetic_alias()
    relation = Relation(relation.node, {(alias, n): i for n, i in outputs}, frozenset([alias]), relation.rows,
                        relation.stats)
    equalities = [exp.EQ(this=outer.copy(), expression=exp.column(f"k{n}", table=alias))
                  for n, (outer, _) in enumerate(keys)]
    return relation, exp.column("v", table=alias), equalities


def _scalar_filter_place(planner: QueryPlanner, rewritten: exp.Expression, columns: list[exp.Column]) -> str | None:
    """Return the FROM item whose rows a comparison with an uncorrelated scalar subquery filters, or None for
    after the joins.

    The one item the comparison reads, unless an outer join NULL-extends it or it is a table function reading
    another item (``generate_series(1, t.n)``: planned after the joins; filtered at its scan, the condition was
    lost); a comparison reading no item (an uncorrelated EXISTS's count) filters the first item no outer join
    NULL-extends (a WHERE condition that is the same for every row empties the result or keeps it, wherever it
    is applied among inner joins and on a preserved side); one reading several items waits for their join.
    """
    from gpu_engine.sql.series_sources import is_correlated_series

    items, _, null_supplying = planner._scopes[-1] if planner._scopes else ([], [], set())
    places = [item.alias_or_name for item, _ in items
              if item.alias_or_name not in null_supplying and not is_correlated_series(item)]
    outer = {c.table for c in free_columns(rewritten)} - {column.table for column in columns}
    if len(outer) == 1:
        alias = next(iter(outer))
        return alias if alias in places else None
    return places[0] if not outer and places else None


def _magic_sets(planner: QueryPlanner, keys: list[tuple[exp.Column, exp.Column]],
                inner_aliases: set[str], select: exp.Select | None = None) -> list[exp.Expression]:
    """Return ``EXISTS (SELECT * FROM t WHERE <t's filters> AND t.key = inner.key …)`` per filtered outer table.

    Why: a decorrelated scalar aggregate is computed for every group of
    the inner table (TPC-H Q17: all of lineitem by part), although only
    the groups the outer query's filtered rows ask for are joined back
    (Q17: 2 of 1000 parts). Restricting the inner rows to the keys of the
    outer table's qualifying rows (a "magic set") is a semi join before
    the aggregation, as the hand-written Q2 and Q17 plans do. The groups
    kept are exactly those an outer row can match, so results are equal.
    """
    if not planner._scopes:
        return []
    items, pool, null_supplying = planner._scopes[-1]
    tables = {item.alias_or_name: item for item, _ in items if item.alias_or_name not in null_supplying}
    by_alias: dict[str, list[tuple[exp.Column, exp.Column]]] = {}
    for outer, inner in keys:
        by_alias.setdefault(outer.table, []).append((outer, inner))
    out = []
    for alias, pairs in by_alias.items():
        table = tables.get(alias)
        if (not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier)
                or table.name not in planner.catalog or alias in inner_aliases):
            continue
        filters = [c for c in pool if {col.table for col in free_columns(c)} == {alias}
                   and not any(isinstance(n, exp.Subquery) and not isinstance(n.parent, exp.In)
                               for n in c.walk())]
        if not filters:
            continue
        moved = key_filters_over_inner_keys(planner, table, filters, pairs, select)
        if moved is not None:  # filters of the keys alone: read over the inner keys, no scan of the outer table
            out += moved
            continue
        restriction = exp.Select(expressions=[exp.Star()])
        restriction.set("from_", exp.From(this=table.copy()))
        equalities = [exp.EQ(this=outer.copy(), expression=inner.copy()) for outer, inner in pairs]
        restriction.set("where", exp.Where(this=conjoined(filters + equalities)))
        out.append(exp.Exists(this=restriction))
    return out


def scalar_filter(planner: QueryPlanner, relation: Relation, scalar: Relation | tuple[Relation, ...],
                  conjunct: exp.Expression) -> Relation:
    """Filter ``relation`` by ``conjunct``, a comparison reading the value column of ``scalar`` (a scalar subquery
    planned by :func:`scalar_relation`, or a correlated one's rows per key: then ``conjunct`` also holds the
    equalities of its key columns with outer expressions; several such relations for a conjunct of several
    subqueries), translated into a typed :class:`~gpu_engine.plans.subqueries.ScalarSubquery` of a Filter for each,
    which the optimizer rule :func:`~gpu_engine.optimizer.decorrelation.decorrelate_subqueries` makes a join with
    that row.
    """
    from gpu_engine.plans.sql_translator import parse_expression
    from gpu_engine.plans.subqueries import OuterColumn, ScalarSubquery, transformed

    scalars = scalar if isinstance(scalar, tuple) else (scalar,)
    columns = dict(relation.columns)
    outer_schema = relation.node.output_schema
    outer_names = set(outer_schema.names)
    fields = list(outer_schema)
    subqueries = []  # (the scalar's relation, its value column's internal name, its key equalities)
    parts = conjuncts_of(conjunct)
    taken: list[exp.Expression] = []
    for one in scalars:
        columns.update(one.columns)
        fields += [f for f in one.node.output_schema if f.name not in {g.name for g in fields}]
        (alias,) = one.aliases
        name = one.columns.get((alias, "v")) or next(iter(one.columns.values()))
        key_names = {sql_name for (_, sql_name), internal in one.columns.items() if internal != name}  # k<n>
        equalities = [part for part in parts if key_names
                      and {c.name for c in free_columns(part) if c.table == alias} & key_names]
        taken += equalities
        subqueries.append((one, name, equalities))
    comparison = conjoined([part for part in parts if not any(part is e for e in taken)]) \
        if taken else conjunct
    combined = pa.schema(fields)
    try:
        by_name = {}
        for one, name, equalities in subqueries:
            correlation = None
            if equalities:
                typed = parse_expression(conjunction([planner._renamed(e, columns) for e in equalities]), combined,
                                         "Filter")
                correlation = transformed(typed, lambda node: OuterColumn(node.name, node.dtype)
                                          if isinstance(node, ColumnRef) and node.name in outer_names else None)
            by_name[name] = (one, correlation)
        typed = parse_expression(planner._renamed(comparison, columns), combined, "Filter")
        predicate = transformed(typed, lambda node: ScalarSubquery(by_name[node.name][0].node, node.name, node.dtype,
                                                                   by_name[node.name][1])
                                if isinstance(node, ColumnRef) and node.name in by_name else None)
        node = planner._builder(relation.node).filter(predicate).plan()
    except PlanError as error:
        raise planner._plan_error(error, conjunct) from None
    rows = filter_estimate(relation, [comparison])
    return Relation(node, relation.columns, relation.aliases, rows,
                    {k: v.capped(rows) for k, v in relation.stats.items()})


def _keys_of_one_type(planner: QueryPlanner, relation: Relation, semi: SemiJoin,
                      keys: list[tuple[exp.Column, exp.Column]]) -> tuple[Relation, SemiJoin, list]:
    """Return the relations and key pairs with each pair of numeric keys of different layouts cast to their
    common type (``int_col IN (SELECT decimal_col ...)``, ``EXISTS (... WHERE y.double = x.int)``).

    Why: a hash join compares keys of one layout; such a pair was a join filter without a hash key (refused
    when no other key was left, and always under NOT IN), where DuckDB compares both sides as their common
    type: an integer with a decimal as the decimal, either with a double as the double. NULLs stay NULL, so
    NOT IN's null-aware anti join keeps its meaning.
    """
    from gpu_engine.plans.null_type import is_null_typed
    from gpu_engine.plans.type_coercion import common_type

    out = []
    for outer, inner in keys:
        outer_name = relation.columns.get((outer.table, outer.name))
        inner_name = semi.relation.columns.get((inner.table, inner.name))
        if outer_name is None or inner_name is None:
            out.append((outer, inner))
            continue
        outer_field = relation.node.output_schema.field(outer_name)
        inner_field = semi.relation.node.output_schema.field(inner_name)
        outer_type, inner_type = outer_field.type, inner_field.type
        if is_null_typed(outer_field) != is_null_typed(inner_field):
            # a column of SQL's NULL type (plans/null_type.py) takes the other key's type, as DuckDB casts it
            if is_null_typed(outer_field):
                relation, outer = _with_cast_key(planner, relation, outer, inner_type)
            else:
                inner_relation, inner = _with_cast_key(planner, semi.relation, inner, outer_type)
                semi = dataclasses.replace(semi, relation=inner_relation)
            out.append((outer, inner))
            continue
        text_target = _text_key_target(outer_type, inner_type)
        if text_target is not None and _is_exists(semi.tree) and planned_dialect() == "duckdb":
            # DuckDB binds an EXISTS' equality of a text column with a number, boolean or date by casting the text
            # to the other type (raising for text that is no such value), as in any WHERE (an IN subquery of
            # such a pair it refuses: so does the engine, below)
            if pa.types.is_string(outer_type) or pa.types.is_large_string(outer_type):
                relation, outer = _with_cast_key(planner, relation, outer, text_target)
            else:
                inner_relation, inner = _with_cast_key(planner, semi.relation, inner, text_target)
                semi = dataclasses.replace(semi, relation=inner_relation)
            out.append((outer, inner))
            continue
        numeric = all(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
                      for t in (outer_type, inner_type))
        if not numeric or join_key_layout(outer_type) == join_key_layout(inner_type):
            out.append((outer, inner))
            continue
        try:
            target = common_type(outer_type, inner_type)
        except Exception:  # noqa: BLE001 - no common type: the pair stays a filter as before
            out.append((outer, inner))
            continue
        if join_key_layout(outer_type) != join_key_layout(target):
            relation, outer = _with_cast_key(planner, relation, outer, target)
        if join_key_layout(inner_type) != join_key_layout(target):
            inner_relation, inner = _with_cast_key(planner, semi.relation, inner, target)
            semi = dataclasses.replace(semi, relation=inner_relation)
        out.append((outer, inner))
    return relation, semi, out


def _text_key_target(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """Return the type a text key is cast to beside a key of ``a`` / ``b`` (DuckDB's equality of VARCHAR with a
    number, boolean, date or timestamp), or None when the pair is not one text and one such key."""
    def text(t):
        return pa.types.is_string(t) or pa.types.is_large_string(t)

    def castable(t):
        return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_boolean(t)
                or pa.types.is_date32(t) or pa.types.is_timestamp(t) and t.tz is None)

    if text(a) and castable(b):
        return b
    if text(b) and castable(a):
        return a
    return None


def _is_exists(tree: exp.Expression) -> bool:
    """Return True when a semi join's conjunct is a [NOT] EXISTS (its keys are WHERE equalities, not IN's pair)."""
    while isinstance(tree, (exp.Not, exp.Paren)):
        tree = tree.this
    return isinstance(tree, exp.Exists)


def _in_value(tree: exp.Expression) -> bool:
    """Return True when a semi join's conjunct is ``x [NOT] IN (SELECT …)`` of one value (not a row of them)."""
    while isinstance(tree, (exp.Not, exp.Paren)):
        tree = tree.this
    return isinstance(tree, exp.In) and not isinstance(tree.this, exp.Tuple)


def _with_cast_key(planner: QueryPlanner, relation: Relation, column: exp.Column,
                   target: pa.DataType) -> tuple[Relation, exp.Column]:
    """Return ``relation`` with ``CAST(column AS target)`` projected as a new column, and that column."""
    from gpu_engine.sql.rewrite import _sql_type

    name = planner._fresh("$key_cast")
    cast = exp.Cast(this=column.copy(), to=exp.DataType.build(_sql_type(target), dialect="duckdb"))
    passthrough = [quoted(n) for n in relation.node.output_schema.names]
    try:
        node = planner._builder(relation.node).project(
            passthrough + [aliased(planner._renamed(cast, relation.columns), name)]).plan()
    except PlanError as error:
        raise planner._plan_error(error, column) from None
    relation = dataclasses.replace(relation, node=node, columns={**relation.columns, ("$key_cast", name): name})
    return relation, exp.column(name, table="$key_cast")


def subquery_filter(planner: QueryPlanner, relation: Relation, semi: SemiJoin | MarkedConjunct) -> Relation:
    """Filter ``relation`` by a pending [NOT] EXISTS / [NOT] IN (or a conjunct holding several under OR),
    translated into typed subquery predicates of one Filter (:func:`_typed_predicate`)."""
    from gpu_engine.plans.sql_translator import parse_expression
    from gpu_engine.plans.subqueries import OuterColumn, ScalarSubquery, transformed

    if isinstance(semi, SemiJoin):
        relation, predicate = _typed_predicate(planner, relation, semi)
        rows_factor = 0.5
    else:
        predicates = {}
        for n, mark in enumerate(semi.marks):
            relation, predicates[f"$mark{n}"] = _typed_predicate(planner, relation, mark)
        # its scalar subqueries read as their value columns (swapped out while the tree is copied)
        tree = _with_subqueries_replaced(semi.tree, [(copies, column) for copies, _, column, _ in semi.scalars]) \
            if semi.scalars else semi.tree.copy()
        # the same walk as mark_predicates's, so the n-th found is the n-th mark (find_all's breadth-first order
        # bound `(EXISTS a AND x) OR EXISTS b OR EXISTS c`'s predicates to one another's subqueries)
        for n, node in enumerate(_positive_marks(tree)):
            if node is tree:  # the conjunct itself (a quantified comparison alone: a mark join's flag)
                tree = exp.column(f"$mark{n}", table="$mark")
            else:
                node.replace(exp.column(f"$mark{n}", table="$mark"))
        fields = list(relation.node.output_schema) + [pa.field(name, pa.bool_()) for name in predicates]
        columns = {**relation.columns, **{("$mark", name): name for name in predicates}}
        for _, scalar, _, _ in semi.scalars:
            columns.update(scalar.columns)
            fields += [f for f in scalar.node.output_schema if f.name not in {g.name for g in fields}]
        schema = pa.schema(fields)
        outer_names = set(relation.node.output_schema.names)
        try:
            for _, scalar, column, equalities in semi.scalars:
                name = columns[(column.table, column.name)]
                correlation = None
                if equalities:
                    typed = parse_expression(conjunction([planner._renamed(e, columns) for e in equalities]),
                                             schema, "Filter")
                    correlation = transformed(typed, lambda node: OuterColumn(node.name, node.dtype)
                                              if isinstance(node, ColumnRef) and node.name in outer_names else None)
                predicates[name] = ScalarSubquery(scalar.node, name, schema.field(name).type, correlation)
            typed = parse_expression(planner._renamed(tree, columns), schema, "Filter")
            predicate = transformed(typed, lambda node: predicates.get(node.name) if isinstance(node, ColumnRef)
                                    else None)
        except PlanError as error:
            raise planner._plan_error(error, semi.tree) from None
        rows_factor = 0.75
    try:
        node = planner._builder(relation.node).filter(predicate).plan()
    except PlanError as error:
        raise planner._plan_error(error, semi.tree) from None
    rows = max(1.0, relation.rows * rows_factor)
    return Relation(node, relation.columns, relation.aliases, rows,
                    {k: v.capped(rows) for k, v in relation.stats.items()})


def _typed_predicate(planner: QueryPlanner, relation: Relation, semi: SemiJoin):
    """Return ``relation`` (with projected or cast keys) and a pending [NOT] EXISTS / [NOT] IN as a typed subquery
    predicate (:mod:`gpu_engine.plans.subqueries`), which the optimizer rule
    :func:`~gpu_engine.optimizer.decorrelation.decorrelate_subqueries` makes a semi, anti or null-aware anti join.

    Bound here, as a translator binds types: an expression on the outer side (``x + 1 IN (...)``) is projected
    and keys of two layouts are cast to their common type (:func:`_keys_of_one_type`); each key pair is an
    equality of the correlation (the IN's own pair the predicate's value and column), the subquery's other
    correlated conditions follow it. The Filter keeps the input's columns (projection pruning drops those
    nobody reads).
    """
    from gpu_engine.plans.sql_translator import parse_expression
    from gpu_engine.plans.subqueries import Exists, InSubquery, OuterColumn, QuantifiedComparison, transformed

    keys = []
    for outer, inner in semi.keys:  # an expression on the outer side (x + 1 IN (...)) is projected first
        if not isinstance(outer, exp.Column):
            name = planner._fresh("$in_key")
            passthrough = [quoted(n) for n in relation.node.output_schema.names]
            try:
                node = planner._builder(relation.node).project(
                    passthrough + [aliased(planner._renamed(outer, relation.columns), name)]).plan()
            except PlanError as error:
                raise planner._plan_error(error, outer) from None
            relation = dataclasses.replace(relation, node=node,
                                           columns={**relation.columns, ("$in_key", name): name})
            outer = exp.column(name, table="$in_key")
        keys.append((outer, inner))
    relation, semi, keys = _keys_of_one_type(planner, relation, semi, keys)
    columns = {**relation.columns, **semi.relation.columns}
    outer_schema, inner_schema = relation.node.output_schema, semi.relation.node.output_schema
    for outer, _ in keys:
        if columns.get((outer.table, outer.name)) is None:
            raise planner._plan_error(PlanError(f"column {outer.sql()} is not available"), outer)
    key_types = [(outer_schema.field(columns[(o.table, o.name)]).type,
                  inner_schema.field(columns[(i.table, i.name)]).type) for o, i in keys]
    if key_types and all(join_key_layout(a) != join_key_layout(b) for a, b in key_types):
        # no pair the rule could join on: refused before the equalities are typed, naming the types
        raise planner._plan_error(PlanError(
            "unsupported: a [NOT] EXISTS / IN whose every correlation equality compares different types ("
            + ", ".join(f"{a} with {b}" for a, b in key_types) + "); cast one side"), semi.tree)
    outer_names = set(outer_schema.names)
    combined = pa.schema(list(outer_schema) + [f for f in inner_schema if f.name not in outer_names])
    label = "Filter"
    # IN's own pair is the predicate's value and column, unless its sides still join on two layouts: then the
    # EXISTS of its equality, which the rule keeps as the join's filter (NOT IN: the rule refuses such a pair)
    in_pair = (semi.quantifier is not None or _in_value(semi.tree)) and (
        semi.join_type == "null_aware_anti" or semi.quantifier is not None or join_key_layout(
            outer_schema.field(columns[(keys[0][0].table, keys[0][0].name)]).type) == join_key_layout(
            inner_schema.field(columns[(keys[0][1].table, keys[0][1].name)]).type))
    pairs = keys[1:] if in_pair else keys
    parts = [membership_equality(outer.copy(), inner.copy()) for outer, inner in pairs] + list(semi.filters)
    try:
        correlation = None
        if parts:
            typed = parse_expression(conjunction([planner._renamed(p, columns) for p in parts]), combined, label)
            correlation = transformed(typed, lambda node: OuterColumn(node.name, node.dtype)
                                      if isinstance(node, ColumnRef) and node.name in outer_names else None)
        if in_pair:
            outer, inner = keys[0]
            value = parse_expression(planner._renamed(outer, relation.columns), outer_schema, label)
            if semi.quantifier is not None:
                column = columns[(inner.table, inner.name)]
                column_type = inner_schema.field(column).type
                if join_key_layout(value.dtype) != join_key_layout(column_type):
                    raise PlanError(f"{semi.tree.sql(dialect='duckdb')} compares {value.dtype} with {column_type}; "
                                    "cast one side")
                predicate = QuantifiedComparison(value, semi.relation.node, column, *semi.quantifier, correlation)
            else:
                predicate = InSubquery(value, semi.relation.node, columns[(inner.table, inner.name)], correlation,
                                       negated=semi.join_type == "null_aware_anti")
        else:
            predicate = Exists(semi.relation.node, correlation, negated=semi.join_type == "anti")
    except PlanError as error:
        raise planner._plan_error(error, semi.tree) from None
    return relation, predicate
