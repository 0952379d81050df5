"""Lower the distinct counts of the columns a filter pins: ``d_year = 2001`` leaves one year.

Why: a Filter's estimate lowered its rows and capped every column's distinct
count at them, so date_dim under ``d_year = 2001`` kept ~180 distinct years
(its 365 rows' cap). Grouping estimates multiply key counts
(:func:`~gpu_engine.optimizer.eager_aggregation.grouped_rows`; the SQL planner's eager
aggregation read these pins until it moved to the typed plan, whose estimates,
:mod:`~gpu_engine.optimizer.cardinality`, pin the same way; the SQL join ordering still reads them): TPC-DS q4, q11 and
q74's ``year_total`` (store/web sales ⋈ date_dim ⋈ customer grouped by seven
customer columns and ``d_year``) saw sales ⋈ date_dim grouped by
``(ss_customer_sk, d_year)`` as no reduction, so eager aggregation was
declined, and 533k joined rows were grouped by seven strings instead of 42k.

A conjunct that reads one column of the relation — an equality with a
constant, an IN list of constants, a BETWEEN — keeps that column's values in
the share the estimate gives it (:func:`~gpu_engine.sql.statistics.selectivity`,
uniform values): one value for an equality, the list's length for IN, that
share of the distinct values for a range; an OR of those on one column, the
share the estimate gives the OR. Negated forms and other conjuncts
leave the counts as the row cap leaves them.
"""

from __future__ import annotations

from typing import Mapping

from sqlglot import exp

from gpu_engine.sql.planning_context import Relation
from gpu_engine.sql.statistics import ColumnStatistics, selectivity

__all__ = ["pinned_statistics"]

_PINNING = (exp.EQ, exp.In, exp.Between)


def pinned_statistics(relation: Relation, conjuncts: list[exp.Expression], rows: float
                      ) -> Mapping[str, ColumnStatistics]:
    """Return ``relation``'s column statistics under ``conjuncts`` for ``rows`` rows (see the module docstring)."""
    def column_stats(column: exp.Column) -> ColumnStatistics | None:
        return relation.stats.get(relation.columns.get((column.table, column.name), ""))

    stats = {k: v.capped(rows) for k, v in relation.stats.items()}
    for conjunct in conjuncts:
        columns = _pinned_columns(conjunct)
        if columns is None or len(columns) != 1:
            continue
        internal = relation.columns.get(next(iter(columns)))
        column = relation.stats.get(internal) if internal is not None else None
        if column is None or not column.ndv:
            continue
        pinned = max(1.0, column.ndv * selectivity(conjunct, column_stats))
        stats[internal] = column.pinned(min(pinned, stats[internal].ndv))
    return stats


def _pinned_columns(conjunct: exp.Expression) -> set[tuple[str, str]] | None:
    """Return the columns ``conjunct`` pins (one: it pins), None where it is no pinning form.

    An OR may pin too (:func:`_or_pinned_columns`).
    """
    while isinstance(conjunct, exp.Paren):
        conjunct = conjunct.this
    if isinstance(conjunct, exp.Or):
        return _or_pinned_columns(conjunct)
    if not isinstance(conjunct, _PINNING) or conjunct.args.get("negate") or conjunct.args.get("query"):
        return None
    if isinstance(conjunct, exp.EQ) and not any(
            isinstance(side, exp.Column) and not any(True for _ in other.find_all(exp.Column))
            for side, other in ((conjunct.this, conjunct.expression), (conjunct.expression, conjunct.this))):
        return None  # not the column against a constant (an expression of it pins the expression, not the column)
    return {(c.table, c.name) for c in conjunct.find_all(exp.Column)}


def _or_pinned_columns(conjunct: exp.Or) -> set[tuple[str, str]] | None:
    """Return the column both sides of an OR pin, None where they pin none or different ones.

    Why: a CTE's readers' conditions (:mod:`gpu_engine.sql.cte_reader_filters`) and the implied filters
    write two years as ``d_year = 2001 OR d_year = 2002``; left unpinned, date_dim's 730 rows kept ~200
    distinct years, and TPC-DS q11's ``year_total`` saw web_sales ⋈ date_dim grouped by
    ``(ws_bill_customer_sk, d_year)`` as no reduction (eager aggregation declined: 289K joined rows gathered
    seven customer strings and were grouped by them, for ~23K groups). Its share is what
    :func:`~gpu_engine.sql.statistics.selectivity` gives the OR: about one value per side.
    """
    sides = [_pinned_columns(side) for side in (conjunct.this, conjunct.expression)]
    return None if None in sides or sides[0] != sides[1] else sides[0]
