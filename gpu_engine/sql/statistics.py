"""Estimate table and column sizes for join ordering, from Parquet metadata and simple selectivity rules.

Why metadata only: the planner must not read data to plan a query. A Parquet
footer gives each file's row count and, per row group, each column's min and
max; an in-memory Arrow table gives its row count and an O(n) min/max per
column (cheap next to running a query on it). From those the planner guesses:

* the number of distinct values (NDV) of an integer or date column as
  ``min(rows, max - min + 1)`` (exact for dense keys such as TPC-H's), else
  unknown (strings: as every column's count, Parquet dictionary page headers'
  counts moved join orders and lost, bench/results/
  2026-11-28-joincost-runtime-filter-costs-cpu-sf1.md) — refined to
  ``min(ndv, rows)`` after each filter or join;
* a predicate's selectivity with fixed rules: ``col = const`` is ``1 / NDV``
  (a string column's dictionary count where :data:`STRING_DICTIONARY_COUNTS`
  is on, equality and IN only; off by default: bench/results/
  2026-11-28-stringndv-string-equality-cpu-sf1.md),
  a range against a constant is the fraction of ``[min, max]`` it keeps (1/3
  without min/max), LIKE 1/10, IN the sum of its equalities, AND the product
  (but conjuncts restricting one column to constants intersect their value
  sets: :func:`intersected_value_sets`), OR ``a + b - ab``, NOT ``1 - s``, a
  comparison of two constants what it folds to (1 or 0), anything else 1/2.

Estimates only order joins and pick build sides; a wrong guess costs time,
never correctness. The statistics types and the numbers of the rules (1/NDV,
the range share, 1/3, 1/10, 1/2) are :mod:`gpu_engine.optimizer.statistics`'s,
which the typed plan's estimates (:mod:`gpu_engine.optimizer.cardinality`)
call too; this module reads sqlglot trees into their arguments. The table
statistics themselves (:func:`table_statistics`, :class:`RegisteredStatistics`)
are read there too, re-exported here: the optimizer's passes get a session's
statistics without importing the SQL front end.
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from gpu_engine.optimizer.statistics import (  # noqa: F401 - table_statistics and its kin re-exported here
    DEFAULT_SELECTIVITY, DEFAULT_TABLE_ROWS, LIKE_SELECTIVITY, ColumnStatistics, RegisteredStatistics, TableStatistics,
    as_number, equality_selectivity, range_selectivity, table_statistics,
)
from gpu_engine.plans.sql_literal_lists import lifted_values
from gpu_engine.plans.sql_literals import parse_date_text

__all__ = ["ColumnStatistics", "TableStatistics", "RegisteredStatistics", "table_statistics", "selectivity",
           "DEFAULT_TABLE_ROWS"]

_ARITHMETIC = {exp.Add: lambda a, b: a + b, exp.Sub: lambda a, b: a - b, exp.Mul: lambda a, b: a * b,
               exp.Div: lambda a, b: a / b if b else None}


def constant_arithmetic(tree: exp.Binary) -> float | None:
    """Return the value of arithmetic over numeric constants (``2001 + 1``), None for anything else.

    Why: the planner keeps constant arithmetic as written (the engine types it,
    :mod:`gpu_engine.sql.simplification`), so TPC-DS's ``d_year = 2001 + 1``,
    ``d_month_seq BETWEEN 1200 AND 1200 + 11`` and a CTE reader's ``dyear = 2001 + 1``
    reached the estimates as a column against an expression: an equality kept 1/10 of
    ``date_dim`` for a year's 1/201 and pinned no distinct count, and a range's bound
    counted as unknown. An estimate needs no exact type: the value as a float will do
    (a division by zero is no constant: the query's own error, if any, is the engine's).
    """
    left, right = _constant(tree.this), _constant(tree.expression)
    if not isinstance(left, float) or not isinstance(right, float):
        return None
    return _ARITHMETIC[type(tree)](left, right)


def _constant(tree: exp.Expression) -> object:
    """Return the value of a literal (numbers, strings, DATE casts), or None for anything else."""
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if isinstance(tree, exp.Literal):
        if tree.is_string:
            return tree.this
        try:
            return float(tree.this)
        except ValueError:
            return None
    if isinstance(tree, exp.Neg):
        inner = _constant(tree.this)
        return -inner if isinstance(inner, float) else None
    if type(tree) in _ARITHMETIC:
        return constant_arithmetic(tree)
    if isinstance(tree, exp.Cast) and isinstance(tree.this, exp.Literal) and tree.to.is_type("date"):
        try:
            return float(parse_date_text(tree.this.this).toordinal())  # '2002-3-01' too, as DuckDB reads it
        except ValueError:
            return None
    return None


_FLIPPED = {exp.LT: exp.GT, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.GTE: exp.LTE, exp.EQ: exp.EQ, exp.NEQ: exp.NEQ}


def selectivity(tree: exp.Expression, column_stats: Callable[[exp.Column], ColumnStatistics | None]) -> float:
    """Return the estimated fraction of rows a boolean expression keeps (see the module docstring)."""
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if tree.args.get("negate"):  # sqlglot writes NOT LIKE / NOT IN / NOT BETWEEN as the predicate with negate=True
        positive = tree.copy()
        positive.set("negate", False)
        return 1 - selectivity(positive, column_stats)
    if isinstance(tree, exp.And):
        fraction, rest = intersected_value_sets(list(tree.flatten()), column_stats)
        for conjunct in rest:
            fraction *= selectivity(conjunct, column_stats)
        return fraction
    if isinstance(tree, exp.Or):
        left, right = selectivity(tree.this, column_stats), selectivity(tree.expression, column_stats)
        return left + right - left * right
    if isinstance(tree, exp.Not):
        return 1 - selectivity(tree.this, column_stats)
    if isinstance(tree, exp.Like):
        return LIKE_SELECTIVITY
    if isinstance(tree, exp.In) and not tree.args.get("query"):
        one = _equality_selectivity(tree.this, column_stats)
        return min(1.0, one * max(1, len(lifted_values(tree.expressions))))
    if isinstance(tree, exp.Between):
        low = selectivity(exp.GTE(this=tree.this, expression=tree.args["low"]), column_stats)
        high = selectivity(exp.LTE(this=tree.this, expression=tree.args["high"]), column_stats)
        return max(0.01, low + high - 1)
    if isinstance(tree, exp.Is):
        return 0.1
    folded = _folded(tree)
    if folded is not None:
        return folded
    if type(tree) in _FLIPPED:
        column, other, kind = tree.this, tree.expression, type(tree)
        if not isinstance(column, exp.Column):
            column, other, kind = other, column, _FLIPPED[kind]
        if not isinstance(column, exp.Column):
            return DEFAULT_SELECTIVITY
        if kind is exp.EQ:
            return _equality_selectivity(column, column_stats) if _constant(other) is not None else 0.1
        if kind is exp.NEQ:
            return 1 - _equality_selectivity(column, column_stats)
        return _range_selectivity(column, kind, _constant(other), column_stats)
    return DEFAULT_SELECTIVITY


_COMPARE = {exp.EQ: lambda a, b: a == b, exp.NEQ: lambda a, b: a != b, exp.LT: lambda a, b: a < b,
            exp.LTE: lambda a, b: a <= b, exp.GT: lambda a, b: a > b, exp.GTE: lambda a, b: a >= b}


def _folded(tree: exp.Expression) -> float | None:
    """Return 1.0 or 0.0 for TRUE, FALSE or a comparison of two constants (``'s' = 'w'``), None for anything else.

    Why: a CTE's constant column compared with a literal (TPC-DS q74's ``sale_type = 's'`` in its ``'w'``
    branch) folds to FALSE later, in the optimizer; estimated 1/2 until then, it halved a branch that is
    empty, or kept half of one that keeps every row.
    """
    if isinstance(tree, exp.Boolean):
        return 1.0 if tree.this else 0.0
    if type(tree) not in _COMPARE:
        return None
    left, right = _constant(tree.this), _constant(tree.expression)
    if left is None or right is None or isinstance(left, str) != isinstance(right, str):
        return None
    return 1.0 if _COMPARE[type(tree)](left, right) else 0.0


def _value_set(tree: exp.Expression) -> tuple[exp.Column, frozenset] | None:
    """Return the column and constants of ``col = c``, ``col IN (c, ...)`` or an OR of those on one column."""
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if tree.args.get("negate"):
        return None
    if isinstance(tree, exp.EQ):
        for column, other in ((tree.this, tree.expression), (tree.expression, tree.this)):
            value = _constant(other)
            if isinstance(column, exp.Column) and value is not None:
                return column, frozenset([value])
        return None
    if isinstance(tree, exp.In) and not tree.args.get("query") and isinstance(tree.this, exp.Column):
        values = [_constant(v) for v in lifted_values(tree.expressions)]
        return (tree.this, frozenset(values)) if values and None not in values else None
    if isinstance(tree, exp.Or):
        left, right = _value_set(tree.this), _value_set(tree.expression)
        if left is None or right is None or _key(left[0]) != _key(right[0]):
            return None
        return left[0], left[1] | right[1]
    return None


def _key(column: exp.Column) -> tuple[str, str]:
    return column.table, column.name


def intersected_value_sets(conjuncts: list[exp.Expression], column_stats) -> tuple[float, list[exp.Expression]]:
    """Return the share kept by the conjuncts that restrict one column to constants, and the other conjuncts.

    Why: ``(d_year = 2001 OR d_year = 2002) AND d_year = 2002`` (TPC-DS q74's derived filter beside its CTE's
    own) keeps one year, not the product of the two shares (1/NDV²·2); two that share no value keep no rows.
    Where two or more conjuncts restrict one column their value sets intersect: the share is the
    intersection's size times ``1 / NDV`` (0.0 for an empty one); a column restricted once, and every other
    conjunct, is returned for the caller to estimate as before.
    """
    groups: dict[tuple[str, str], list[tuple[exp.Expression, exp.Column, frozenset]]] = {}
    rest: list[exp.Expression] = []
    for conjunct in conjuncts:
        found = _value_set(conjunct)
        if found is None:
            rest.append(conjunct)
        else:
            groups.setdefault(_key(found[0]), []).append((conjunct, *found))
    fraction = 1.0
    for members in groups.values():
        kinds = {isinstance(v, str) for _, _, values in members for v in values}
        if len(members) == 1 or len(kinds) > 1:  # once, or strings beside numbers/dates: estimated as before
            rest.extend(conjunct for conjunct, _, _ in members)
            continue
        common = frozenset.intersection(*(values for _, _, values in members))
        fraction *= min(1.0, len(common) * _equality_selectivity(members[0][1], column_stats))
    return fraction, rest


#: Whether ``col = 'x'`` and ``col IN (...)`` on a string column keep one Parquet dictionary value's share per
#: constant (:attr:`~gpu_engine.optimizer.statistics.ColumnStatistics.dictionary_ndv`) rather than 1/10 each: see
#: :func:`~gpu_engine.optimizer.statistics.equality_selectivity`. A switch of its own (``bench/ab.py
#: string-equality-sql``): the typed estimates opt in separately. Off: measured on alone, TPC-DS SF1 q18 lost
#: (+29.8%, +12.4% alone): the SQL planner orders customer_address's join by ``ca_state IN (7 states)`` at 7/51
#: and the typed join order (1/10 a value) reorders it again; with both consumers on q18 is neutral but the
#: typed one loses q72/q80 (bench/results/2026-11-28-stringndv-string-equality-cpu-sf1.md).
STRING_DICTIONARY_COUNTS = False


def _equality_selectivity(column: exp.Expression, column_stats) -> float:
    stats = column_stats(column) if isinstance(column, exp.Column) else None
    return equality_selectivity(stats, dictionary=STRING_DICTIONARY_COUNTS)


def _range_selectivity(column: exp.Column, kind: type, value: object, column_stats) -> float:
    return range_selectivity(column_stats(column), kind in (exp.LT, exp.LTE), value)
