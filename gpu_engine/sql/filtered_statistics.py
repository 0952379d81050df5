"""Lower the distinct counts of the columns a filter pins: ``d_year = 2001`` leaves one year.

Why: a Filter's estimate lowered its rows and capped every column's distinct
count at them, so date_dim under ``d_year = 2001`` kept ~180 distinct years
(its 365 rows' cap). Grouping estimates multiply key counts
(:func:`~gpu_engine.sql.eager_aggregation.grouped_rows`): TPC-DS q4, q11 and
q74's ``year_total`` (store/web sales ⋈ date_dim ⋈ customer grouped by seven
customer columns and ``d_year``) saw sales ⋈ date_dim grouped by
``(ss_customer_sk, d_year)`` as no reduction, so eager aggregation was
declined, and 533k joined rows were grouped by seven strings instead of 42k.

A conjunct that reads one column of the relation — an equality with a
constant, an IN list of constants, a BETWEEN — keeps that column's values in
the share the estimate gives it (:func:`~gpu_engine.sql.statistics.selectivity`,
uniform values): one value for an equality, the list's length for IN, that
share of the distinct values for a range. Negated forms and other conjuncts
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
        while isinstance(conjunct, exp.Paren):
            conjunct = conjunct.this
        if not isinstance(conjunct, _PINNING) or conjunct.args.get("negate") or conjunct.args.get("query"):
            continue
        columns = {(c.table, c.name) for c in conjunct.find_all(exp.Column)}
        if len(columns) != 1:
            continue
        if isinstance(conjunct, exp.EQ) and not any(
                isinstance(side, exp.Column) and not any(True for _ in other.find_all(exp.Column))
                for side, other in ((conjunct.this, conjunct.expression), (conjunct.expression, conjunct.this))):
            continue  # not the column against a constant (an expression of it pins the expression, not the column)
        internal = relation.columns.get(next(iter(columns)))
        column = relation.stats.get(internal) if internal is not None else None
        if column is None or not column.ndv:
            continue
        pinned = max(1.0, column.ndv * selectivity(conjunct, column_stats))
        stats[internal] = column.capped(min(pinned, stats[internal].ndv))
    return stats
