"""Plan a correlated scalar subquery that does not aggregate as its rows per correlation key, for a typed
:class:`~gpu_engine.plans.subqueries.ScalarSubquery`.

Why: ``(SELECT w FROM u WHERE u.k = t.k)`` and ``(SELECT w FROM u WHERE u.k = t.k ORDER BY w LIMIT 1 [OFFSET n])``
in a SELECT list, ORDER BY, HAVING or an aggregate's argument are one value per outer row: the subquery's row
meeting it (the first, n+1-th in that order), NULL without one, DuckDB's "More than one row returned by a subquery
used as an expression" for an outer row meeting several (checked on every joined row, as DuckDB checks at its
join: a CASE branch no row takes fails too). The optimizer's decorrelation rule answers a ScalarSubquery so: over a
plan not known to give one row a key it groups the rows by the keys (``any_value`` and the row count, the check
projected right after the join); a row_number() bounded to one number per key it knows is one row a key. This
module plans the subquery's rows — LIMIT / OFFSET first computed per correlation key (a row_number() per key,
:func:`~gpu_engine.sql.correlated_row_clauses.rows_per_correlation_key`), then its correlation columns ``k<n>``
beside its value ``v`` — and the equalities that become the ScalarSubquery's correlation. They were LEFT-joined
derived tables of the sqlglot tree (:mod:`~gpu_engine.sql.subquery_values`), which keeps the forms this module does
not type: a correlation other than column equalities, GROUP BY / DISTINCT / a window as the value, and WHERE's
comparisons.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.correlated_row_clauses import has_row_clauses, rows_per_correlation_key
from gpu_engine.sql.decorrelation import (
    correlated_by_equalities, correlation, own_aggregates, select_over, split_correlated,
)
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.planning_context import Relation

if TYPE_CHECKING:
    from gpu_engine.sql.planner import QueryPlanner

__all__ = ["is_correlated_scalar_rows", "correlated_rows_relation"]

#: Clauses that make a correlated subquery other than its rows per key (left to the sqlglot-tree path).
_SHAPING = ("group", "having", "distinct", "windows")


def _value(select: exp.Select) -> exp.Expression:
    value = select.expressions[0]
    return value.this if isinstance(value, exp.Alias) else value


def is_correlated_scalar_rows(select: exp.Expression, outer_aliases: set[str]) -> bool:
    """Return whether ``select`` is one value that does not aggregate (no GROUP BY, HAVING, DISTINCT, window),
    correlated by column equalities only, its LIMIT / OFFSET constant: what :func:`correlated_rows_relation`
    plans."""
    if not isinstance(select, exp.Select) or len(select.expressions) != 1 or isinstance(select.expressions[0],
                                                                                         exp.Star):
        return False
    if any(select.args.get(key) for key in _SHAPING) or own_aggregates(select):
        return False
    value = _value(select)
    if value.find(*SQL_AGGREGATES) is not None or value.find(exp.Window) is not None:
        return False
    limit = select.args.get("limit")
    count = limit.expression if isinstance(limit, exp.Limit) else None
    if limit is not None and not (isinstance(count, exp.Literal) and not count.is_string):
        return False
    offset = select.args.get("offset")
    count = offset.expression if isinstance(offset, exp.Offset) else None
    if offset is not None and not (isinstance(count, exp.Literal) and not count.is_string):
        return False
    return correlated_by_equalities(select, outer_aliases)


def correlated_rows_relation(planner: QueryPlanner, subquery: exp.Expression, select: exp.Select,
                             outer_aliases: set[str], ctes) -> tuple[Relation, exp.Column, list[exp.Expression]]:
    """Plan a subquery :func:`is_correlated_scalar_rows` accepts as its rows (columns ``k<n>`` and ``v`` under a
    new alias); return the relation, its value column and the equalities ``outer = alias.k<n>`` that become the
    typed ScalarSubquery's correlation."""
    if not is_correlated_scalar_rows(select, outer_aliases):
        raise unsupported("a correlated scalar subquery other than one value correlated by column equalities", subquery)
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
