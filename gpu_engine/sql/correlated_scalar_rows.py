"""Bind a scalar subquery correlated by column equalities, of any shape, into the typed
:class:`~gpu_engine.plans.subqueries.ScalarSubquery` the optimizer's decorrelation rule joins.

Why: ``(SELECT w FROM u WHERE u.k = t.k)``, ``(SELECT w FROM u WHERE u.k = t.k ORDER BY w LIMIT 1 [OFFSET n])``,
``(SELECT sum(b) FROM u WHERE u.k = t.k GROUP BY u.c ORDER BY 1 LIMIT 1)``, ``(SELECT DISTINCT w ...)``, ``(SELECT
count(*) ... HAVING count(*) > 2)`` and ``(SELECT sum(x) OVER (ORDER BY y) FROM u WHERE u.k = t.k)`` are each one
value per outer row: the subquery's row meeting it, NULL without one (an aggregate without GROUP BY: its value over
no rows, COUNT's 0), DuckDB's "More than one row returned by a subquery used as an expression" for an outer row
meeting several (checked on every joined row, as DuckDB checks at its join: a CASE branch no row takes fails too).
This module binds each of them once, as DuckDB's general decorrelation computes a correlated subquery once for
every correlation key, into a plan of the subquery's rows per key — columns ``k<n>`` (the inner correlation
columns) beside the value ``v`` — and the equalities ``outer = alias.k<n>`` that become the ScalarSubquery's
correlation; the optimizer rule then joins it (:func:`~gpu_engine.optimizer.decorrelation.decorrelate_subqueries`:
over a plan not known to give one row a key it groups the rows by the keys, ``any_value`` and the row count, the
check projected right after the join; a row_number() bounded to one number per key it knows is one row a key; an
aggregation grouped by exactly the keys gives a key without rows its value over no rows, through the projections).

The forms, as rows per key (:func:`bind_correlated_scalar`):

* one aggregate (no GROUP BY): the aggregate grouped by the correlation columns
  (:func:`~gpu_engine.sql.decorrelation.correlated_scalar_relation`); its HAVING is a CASE over the one row (NULL
  where it fails: "no inner rows" and "HAVING failed" stay apart), DISTINCT and ``LIMIT n`` (n > 0) change
  nothing of one row;
* a value that is a window (``sum(x) OVER (...)``): each window also partitioned by the correlation columns (one
  outer row sees one key's rows: :func:`windows_per_key`), then its rows;
* GROUP BY, HAVING, DISTINCT, ``LIMIT n`` over an aggregate, ``LIMIT 0`` or an OFFSET over one aggregate row: the
  subquery per correlation key (:func:`~gpu_engine.sql.shaped_subqueries.rows_per_key`), then its rows;
* rows without aggregate: LIMIT / OFFSET / QUALIFY computed per correlation key first (a row_number() per key,
  :func:`~gpu_engine.sql.correlated_row_clauses.rows_per_correlation_key`), then the rows.

Only a correlation of column equalities binds here (:func:`binds`): the rows an outer row sees are then a
partition of the inner rows. Another correlation (``u.d < t.d``) was first rewritten into one of column equalities
over its domain, the distinct outer values (:mod:`~gpu_engine.sql.correlation_domains`, DuckDB's general
decorrelation), so it binds here too; one that may hold where the outer value is NULL (``IS NOT DISTINCT FROM``)
was split on that column into two subqueries there (``CASE WHEN t.a IS NULL THEN ... ELSE ... END``), each binding
here (in a WHERE conjunct both: :func:`conjunct_scalars`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.correlated_row_clauses import has_row_clauses, rows_per_correlation_key, windows_partitioned_per_key
from gpu_engine.sql.decorrelation import (
    correlated_by_equalities, correlated_scalar_relation, correlation, own_aggregates, select_over, split_correlated,
)
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.planning_context import Relation, TreeKey
from gpu_engine.sql.predicates import defined_aliases, free_columns, own_scope_nodes
from gpu_engine.sql.shaped_subqueries import is_shaped, rows_per_key

if TYPE_CHECKING:
    from gpu_engine.sql.planner import QueryPlanner

__all__ = ["binds", "bind_correlated_scalar", "conjunct_scalars", "scalar_groups", "windowed_value", "windows_per_key"]


def _value(select: exp.Select) -> exp.Expression:
    value = select.expressions[0]
    return value.this if isinstance(value, exp.Alias) else value


def windowed_value(select: exp.Select) -> bool:
    """Return whether a scalar subquery's value holds a window function of its own scope (``sum(x) OVER``)."""
    return bool(select.expressions) and bool(own_scope_nodes(select.expressions[0], (exp.Window,)))


def binds(select: exp.Expression, outer_aliases: set[str]) -> bool:
    """Return whether ``select`` is one value correlated by column equalities only: what
    :func:`bind_correlated_scalar` binds (or refuses by name: a window over an aggregate, ROLLUP, ...)."""
    if not isinstance(select, exp.Select) or len(select.expressions) != 1 or isinstance(select.expressions[0],
                                                                                         exp.Star):
        return False
    return correlated_by_equalities(select, outer_aliases)


def _uncorrelated(query: exp.Expression) -> bool:
    """Return whether ``query`` (a SELECT or a set operation) reads no column from outside itself."""
    if isinstance(query, exp.SetOperation):
        return not any(c.table for c in free_columns(query))
    return isinstance(query, exp.Select) and not ({c.table for c in free_columns(query)} - {""}
                                                  - defined_aliases(query))


def conjunct_scalars(conjunct: exp.Expression, outer_aliases: set[str]) -> list[list[exp.Subquery]] | None:
    """Return the scalar subqueries of a WHERE conjunct, each as the places it is written (``coalesce(x, 0)`` is
    desugared to a CASE naming ``x`` twice), where every one either :func:`binds` or is uncorrelated, at least one
    binds, and the conjunct holds no EXISTS / IN / ANY / ALL (anywhere: under OR, NOT, in a CASE or arithmetic);
    else None. The same subquery written twice is one (a :class:`~gpu_engine.sql.planning_context.TreeKey`).

    Why: ``a = 1 OR a < (SELECT b FROM u WHERE u.d = t.d)`` is a typed ScalarSubquery in the WHERE Filter, which the
    decorrelation rule joins (left where the conjunct may hold for an outer row meeting no row) — it was a
    LEFT-joined derived table of the sqlglot tree; so is a conjunct of several (``(SELECT max(c) FROM u WHERE u.k
    = t.k) > (SELECT min(c) FROM v WHERE v.k = t.k)``, a null-safe correlation split into ``CASE WHEN t.a IS NULL
    THEN <one> ELSE <another> END``), each subquery joined by the rule in turn.
    """
    found = [node for node in own_scope_nodes(conjunct, (exp.Subquery, exp.Exists, exp.In, exp.Any, exp.All))
             if not isinstance(node, exp.In) or node.args.get("query") is not None]
    if not found or not all(isinstance(node, exp.Subquery) and node.find_ancestor(exp.Any, exp.All) is None
                            for node in found):
        return None
    grouped = _scalar_groups(found, outer_aliases)
    return grouped[0] if grouped is not None and grouped[1] else None


def scalar_groups(conjunct: exp.Expression, outer_aliases: set[str]) -> list[list[exp.Subquery]] | None:
    """Return the scalar subqueries of ``conjunct``'s own scope (not those inside its EXISTS / IN / ANY / ALL),
    each as the places it is written (one :class:`~gpu_engine.sql.planning_context.TreeKey`), where every one
    either :func:`binds` or is uncorrelated (a typed ScalarSubquery each); else None (correlated otherwise: the
    tree path computes or refuses it). An empty list where it holds none."""
    grouped = _scalar_groups(own_scope_nodes(conjunct, (exp.Subquery, exp.Exists, exp.In, exp.Any, exp.All)),
                             outer_aliases)
    return grouped[0] if grouped is not None else None


def _scalar_groups(found: list[exp.Expression], outer_aliases: set[str]
                   ) -> tuple[list[list[exp.Subquery]], bool] | None:
    """Return :func:`scalar_groups` of the nodes ``found`` in a conjunct's own scope, and whether one binds."""
    groups: dict[TreeKey, list[exp.Subquery]] = {}
    for node in found:
        if isinstance(node, exp.Subquery):
            groups.setdefault(TreeKey(node), []).append(node)
    bound = False
    for copies in groups.values():
        select = copies[0].this
        if isinstance(select, exp.Select) and binds(select, outer_aliases):
            bound = True
        elif not _uncorrelated(select):
            return None
    return list(groups.values()), bound


def windows_per_key(query: exp.Select, outer_aliases: set[str], node: exp.Expression) -> exp.Select:
    """Return a correlated subquery whose value is a window as its rows per correlation key (each window
    also partitioned by the key: one outer row sees one key's rows), a subquery without a window.

    Why: ``(SELECT sum(u.i) OVER (ORDER BY u.id) FROM u WHERE u.k = t.k)`` read its windowed ``sum`` as
    the subquery's aggregate and was refused ("column u.i is not available here"); DuckDB computes the
    window over the rows of each outer row, and more than one row is its run-time error, as for any value.
    """
    query = query.copy()
    inner, local, correlated = split_correlated(query, outer_aliases)
    keys, others = correlation(correlated, inner)
    if others or not keys or own_aggregates(query) or any(query.args.get(key) for key in (
            "group", "having", "distinct")):
        raise unsupported("a window as the value of a subquery correlated by other than column equalities "
                          "(u.k = t.k), or over an aggregate", node)
    windows_partitioned_per_key(query, keys)  # the value too (rows_per_correlation_key copies it)
    return rows_per_correlation_key(query, local, keys, others, _value(query))


def _one_aggregate_row(select: exp.Select, count) -> exp.Select | None:
    """Return ``select`` — one aggregate row per outer row (an aggregate or HAVING, no GROUP BY) — without the
    clauses that change nothing of one row (DISTINCT, ORDER BY, ``LIMIT n`` with n > 0) and its HAVING as a CASE
    over the value; None where it is not such a row or its LIMIT 0 / OFFSET cuts the row (rows per key then)."""
    if select.args.get("group") is not None or not (own_aggregates(select) or select.args.get("having")):
        return None
    if count(select.args.get("limit"), "LIMIT") == 0 or count(select.args.get("offset"), "OFFSET"):
        return None
    if any(select.args.get(key) for key in ("qualify", "windows")) or windowed_value(select):
        return None
    one = select.copy()
    for key in ("distinct", "order", "limit", "offset", "having"):
        one.set(key, None)
    having = select.args.get("having")
    if having is not None:
        one.set("expressions", [exp.alias_(exp.Case(ifs=[exp.If(this=having.this.copy(), true=_value(select).copy())]),
                                           select.expressions[0].alias_or_name or "v")])
    return one


def bind_correlated_scalar(planner: QueryPlanner, subquery: exp.Expression, select: exp.Select,
                           outer_aliases: set[str], ctes, restricted: bool = False
                           ) -> tuple[Relation, exp.Column, list[exp.Expression]]:
    """Plan a subquery :func:`binds` accepts as its rows per correlation key (columns ``k<n>`` and ``v`` under a
    new alias); return the relation, its value column and the equalities ``outer = alias.k<n>`` that become the
    typed ScalarSubquery's correlation.

    ``restricted``: an aggregate's input restricted to the keys of the outer table's filtered rows (a WHERE
    comparison's magic set, :func:`~gpu_engine.sql.decorrelation.correlated_scalar_relation`).
    """
    if not binds(select, outer_aliases):
        raise unsupported("a correlated scalar subquery other than one value correlated by column equalities", subquery)
    if windowed_value(select):
        select = windows_per_key(select, outer_aliases, subquery)
    one = _one_aggregate_row(select, planner._count)
    if one is not None:
        select = one
    elif is_shaped(select, planner._count) and (any(select.args.get(key) for key in ("group", "having", "distinct"))
                                                or _value(select).find(*SQL_AGGREGATES) is not None):
        # GROUP BY, HAVING, DISTINCT; LIMIT 0 / OFFSET over one aggregate row
        select, _empty = rows_per_key(select, outer_aliases, planner._synthetic_alias(), planner._count)
    aggregate = _value(select).find(*SQL_AGGREGATES) is not None
    for key, name in (("group", "GROUP BY"), ("having", "HAVING"), ("distinct", "DISTINCT"), ("windows", "WINDOW"),
                      ("qualify", "QUALIFY")):
        if select.args.get(key) and (aggregate or key != "qualify"):
            raise unsupported(f"{name} in a correlated scalar subquery", select.args[key]
                              if isinstance(select.args[key], exp.Expression) else subquery)
    if aggregate:
        inner, local, correlated = split_correlated(select, outer_aliases)
        return correlated_scalar_relation(planner, subquery, select, inner, local, correlated, ctes, restricted)
    if has_row_clauses(select):  # LIMIT / OFFSET / QUALIFY: its rows per correlation key first
        inner, local, correlated = split_correlated(select, outer_aliases)
        keys, others = correlation(correlated, inner)
        select = rows_per_correlation_key(select, local, keys, others, _value(select))
    inner, local, correlated = split_correlated(select, outer_aliases)
    keys, _others = correlation(correlated, inner)
    rows = select_over(select, [exp.alias_(i.copy(), f"k{n}") for n, (_, i) in enumerate(keys)]
                       + [exp.alias_(_value(select).copy(), "v")], local)
    relation, outputs = planner._plan_query(rows, ctes)
    alias = planner._synthetic_alias()
    relation = Relation(relation.node, {(alias, n): i for n, i in outputs}, frozenset([alias]), relation.rows,
                        relation.stats)
    equalities = [exp.EQ(this=outer.copy(), expression=exp.column(f"k{n}", table=alias))
                  for n, (outer, _) in enumerate(keys)]
    return relation, exp.column("v", table=alias), equalities
