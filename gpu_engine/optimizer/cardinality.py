"""Row and distinct-value estimates over the typed plan: the statistics join ordering as a pass will read.

Why: :func:`~gpu_engine.optimizer.optimize_plan` had no statistics — the
estimates that order joins (:mod:`gpu_engine.sql.statistics`,
:mod:`gpu_engine.sql.join_ordering`) read sqlglot trees, so a plan built with
:class:`~gpu_engine.plans.plan_builder.PlanBuilder`, read from JSON or planned
by Spark had none. Issue 30 item 0's join ordering over the typed plan
(:mod:`~gpu_engine.optimizer.join_graph`) needs each relation's rows first.

This is the first slice: :func:`estimate` answers for TableScan (the table's
statistics from :func:`~gpu_engine.sql.statistics.table_statistics`, the same
Parquet footers and in-memory min/max the SQL planner reads, through the same
cache), Filter, Project (renamed columns keep their statistics; computed ones
have none), Limit / TopN, Values, hash and nested-loop joins (the SQL side's
:func:`~gpu_engine.optimizer.statistics.key_set_divisor`; each condition
beside the keys of an inner join halves the rows; a LEFT or RIGHT join keeps at
least its preserved side), semi and anti joins (half the kept side),
EnforceSingleRow (one row, as the SQL planner's scalar subquery relation),
Aggregation (the product of the keys' distinct counts, a tenth of the rows for
a key without one, at most the input rows: the SQL planner's GROUP BY rule) and
UNION ALL (rows added, each column's largest count and widest range), windows (their input's rows
and columns: a row out per row in), a rank's top rows per partition (the limit times the partitions),
and None (unknown) for every other node (grouping sets, ...).
A Filter's estimate uses the SQL side's formulas on the typed conjuncts, so
the two agree while both exist: each top-level conjunct's selectivity
multiplies (``col = const`` 1/NDV — a string column's Parquet dictionary
count where :data:`STRING_DICTIONARY_COUNTS` is on, off by default —, a range the share of ``[min, max]`` it
keeps, 1/3 without one, IN the sum of its equalities, LIKE 1/10, IS NULL 1/10
(IS NOT NULL 9/10), OR ``a + b - ab``, NOT ``1 - s``, a comparison of two
constants 1 or 0, anything else 1/2), except that a lower and an upper bound
of one column keep the range between them (``a + b - 1``, at least 0.001) as
:func:`gpu_engine.sql.predicates.filter_estimate` does, and an OR whose
implied filters were applied below it keeps its share over theirs (the rows
reaching it passed them: :func:`filter_selectivity`); the columns a conjunct
fixes keep that share of their distinct values, as
:mod:`gpu_engine.sql.filtered_statistics` pins them, the others are capped at
the filtered rows. The numbers (the 1/3,
1/10, 1/2 and the range arithmetic) are :mod:`gpu_engine.optimizer.statistics`'s,
which the SQL side's estimates call too: one copy, no private import across
packages.

Known differences from the SQL side (both are estimates): a scan's key-like
integer column counts the distinct values its Parquet dictionary says
(:attr:`~gpu_engine.optimizer.statistics.ColumnStatistics.sampled_ndv`: TPC-H's
``l_orderkey`` 1.5M, where the SQL side reads 6M from its range); a typed plan has no BETWEEN (the builder writes ``x >= a AND x <=
b``, whose two bounds pair as above, where the SQL side's BETWEEN inside an OR
is ``max(0.01, a + b - 1)``, and a pair of bounds pins the column's distinct
count as a BETWEEN does, where two written-out bounds pin nothing there); a
constant the SQL side could not read (``DATE '1998-12-01' - INTERVAL 90 DAY``)
would be one Literal after planning, with a range share where the SQL side
takes 1/3; a comparison with an uncorrelated scalar subquery's one row
(EnforceSingleRow) halves the rows as a join condition here, where the SQL
side filters the pair by it as a column compared with a column (1/10: TPC-H
q15's supplier join, 50 rows here, 10 there); several value sets of one
column in one Filter (``x IN (1, 2) AND x = 2``) intersect, as on the SQL
side (:func:`_intersected_value_sets`); an Aggregation eager aggregation placed below a join is
estimated by the GROUP BY rule here, where the rule counted its groups with
:func:`~gpu_engine.optimizer.eager_aggregation.grouped_rows` (TPC-H q10: 573.8 here,
362.7 there). Over the 22 TPC-H texts at SF 0.01, 88 filters and 44 of 46
joins the SQL planner estimated get the same rows here (the other two: q10's
eager aggregation and the join above it, when the SQL planner placed it);
``tests/optimizer/test_cardinality.py`` checks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from gpu_engine.optimizer.conjuncts import conjuncts, disjuncts
from gpu_engine.plans.expressions import (BinaryOp, Cast, ColumnRef, Expr, InList, Like, Literal, UnaryOp,
                                         referenced_columns)
from gpu_engine.plans.nodes import (AggregationNode, EnforceSingleRowNode, FilterNode, HashJoinNode, LimitNode,
                                    LocalPartitionNode, NestedLoopJoinNode, PlanNode, ProjectNode, TableScanNode,
                                    TopNNode, TopNRowNumberNode, ValuesNode, WindowNode)
from gpu_engine.optimizer.statistics import (
    DEFAULT_SELECTIVITY, LIKE_SELECTIVITY, ColumnStatistics, TableStatistics, as_number, equality_selectivity,
    key_like, key_set_divisor, range_selectivity,
)

__all__ = ["Estimate", "estimate", "filter_selectivity", "implies", "measured_divisor", "selectivity", "union_columns",
           "STRING_DICTIONARY_COUNTS"]

#: Whether ``col = 'x'`` and ``col IN (...)`` on a string column keep one dictionary value's share per constant
#: (:attr:`~gpu_engine.optimizer.statistics.ColumnStatistics.dictionary_ndv`) rather than 1/10 each: see
#: :func:`~gpu_engine.optimizer.statistics.equality_selectivity`. A switch of its own (``bench/ab.py
#: string-equality-typed``): the SQL planner's estimates opt in separately. **On** since the typed join order
#: alone orders joins (stop 51): TPC-DS q17's ``d_quarter_name IN (3 values)`` is 274 dates for 274, not 21,915,
#: so its date joins are seen to cut the fact tables (bench/results/2026-11-29-joinorder2.md). Measured on with
#: the SQL ordering's plans, the typed passes' changed plans had lost (TPC-DS SF1 q80 +17.5% and +25.8%, q72
#: +15.5% and +13.9%, q8 +15.6%; bench/results/2026-11-28-stringndv-string-equality-cpu-sf1.md); with the typed
#: order alone q80 -8.7%, q72 -9.4%, q8 -7.2% (2026-11-29-joinorder2.md, 2026-11-29-joinorder3-s51.md).
STRING_DICTIONARY_COUNTS = True

#: Whether a join on several key columns divides by the matches measured from its tables' rows
#: (:func:`measured_divisor`) rather than by per-column distinct counts alone (kept for the bench's A/B:
#: ``bench/ab.py measured-key-matches``). **On** (stop 52): TPC-H q9's lineitem x partsupp on part and supplier was
#: estimated at 2,400 rows for 6M (bench/results/2026-11-29-joinest-s52.md).
MEASURED_KEY_MATCHES = True


@dataclass(frozen=True)
class Estimate:
    """A node's estimated output rows, its output columns' statistics (absent: unknown) and the filter
    conjuncts applied below it, each with the share of rows it kept there (read by :func:`filter_selectivity`:
    an OR above the filters it implied is not counted twice)."""

    rows: float
    columns: Mapping[str, ColumnStatistics]
    applied: Mapping[Expr, float] = field(default_factory=dict, compare=False)


#: Range comparisons, each -> whether it keeps the rows below its constant.
_RANGE_KINDS = {"lt": True, "le": True, "gt": False, "ge": False}
_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
_COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
            "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def estimate(plan: PlanNode, tables: Mapping[str, TableStatistics]) -> Estimate | None:
    """Return ``plan``'s estimated rows and column statistics, or None where a node below is not estimated yet.

    ``tables`` maps a scanned table's name to its statistics
    (:class:`~gpu_engine.sql.statistics.RegisteredStatistics` over a session's tables); a table missing from
    it is unknown (None).
    """
    if isinstance(plan, TableScanNode):
        table = tables.get(plan.table_name)
        if table is None:
            return None
        return Estimate(table.rows, {name: replace(_per_value(table.columns[name].sampled().capped(table.rows),
                                                              table.rows), origin=(plan.table_name, name))
                                     for name in plan.columns if name in table.columns})
    if isinstance(plan, ValuesNode):
        rows = float(plan.data.num_rows)
        return Estimate(rows, {})
    if isinstance(plan, EnforceSingleRowNode):  # an uncorrelated scalar subquery: one row (or an error)
        return Estimate(1.0, {})
    below = [estimate(source, tables) for source in plan.sources]
    if any(b is None for b in below):
        return None
    if isinstance(plan, FilterNode):
        child = below[0]
        rows = (max(1.0, child.rows * filter_selectivity(plan.predicate, child.columns, child.applied))
                if child.rows else 0.0)
        return Estimate(rows, _pinned(plan.predicate, child.columns, rows),
                        _applied(plan.predicate, child.columns, child.applied))
    if isinstance(plan, ProjectNode):
        child = below[0]
        columns = {}
        for name, expression in zip(plan.names, plan.expressions):
            column = _column(expression)
            if column is not None and column in child.columns:
                columns[name] = child.columns[column]
        return Estimate(child.rows, columns, _renamed(plan, child.applied))
    if isinstance(plan, (LimitNode, TopNNode)):
        child = below[0]
        rows = min(max(0.0, child.rows - getattr(plan, "offset", 0)), max(0.0, float(plan.count)))
        return Estimate(rows, _capped(child.columns, rows), child.applied)
    if isinstance(plan, (HashJoinNode, NestedLoopJoinNode)):
        return _joined(plan, *below, tables)
    if isinstance(plan, AggregationNode) and not plan.global_grouping_sets and plan.group_id_key is None:
        return _aggregated(plan, below[0])
    if isinstance(plan, LocalPartitionNode):
        return below[0] if len(below) == 1 else _union(plan, below)
    if isinstance(plan, WindowNode):  # a row out per row in: its input's rows and columns, the functions' unknown
        return below[0]
    if isinstance(plan, TopNRowNumberNode):
        return _top_per_partition(plan, below[0])
    return None


def _per_value(column: ColumnStatistics, rows: float) -> ColumnStatistics:
    """A table's column with its table's rows per distinct value (read by
    :func:`~gpu_engine.optimizer.statistics.key_set_divisor`: may it identify the rows of a key set)."""
    return replace(column, rows_per_value=rows / column.ndv) if column.ndv and rows else column


def _capped(columns: Mapping[str, ColumnStatistics], rows: float) -> dict[str, ColumnStatistics]:
    return {name: stats.capped(rows) for name, stats in columns.items()}


def _pinned(predicate: Expr, columns: Mapping[str, ColumnStatistics], rows: float) -> dict[str, ColumnStatistics]:
    """Return the columns' statistics under a Filter of ``rows`` rows: each capped at the rows, and a column a
    conjunct fixes — ``col = const``, ``col IN (consts)``, an OR of those on one column, a lower and an upper
    bound (the typed form of SQL's BETWEEN) — keeps the share of its distinct values the conjunct's selectivity
    gives, as :func:`gpu_engine.sql.filtered_statistics.pinned_statistics` does (``d_year = 2001`` leaves one
    year). Why the OR: a shared CTE's filter from its readers (``sql/cte_reader_filters``) is one, and TPC-DS
    q11's ``d_year = 2002 OR d_year = 2001`` left all 201 years, so eager aggregation saw web_sales x date_dim's
    285K rows in about as many ``(d_year, customer)`` groups (23K) and grouped them by seven strings instead."""
    out = _capped(columns, rows)
    bounds: dict[str, list[float]] = {}
    for conjunct in conjuncts(predicate):
        name, share = None, None
        found = _value_set(conjunct)
        if found is not None:
            name, share = found[0], selectivity(conjunct, columns)
        elif (isinstance(conjunct, BinaryOp) and conjunct.op in _RANGE_KINDS and isinstance(conjunct.left, ColumnRef)
              and _constant(conjunct.right) is not None):
            bounds.setdefault(conjunct.left.name, []).append(selectivity(conjunct, columns))
        if name is not None:
            _pin(out, columns, name, share)
    for name, kept in bounds.items():
        if len(kept) == 2:  # as statistics.selectivity estimates a BETWEEN
            _pin(out, columns, name, max(0.01, sum(kept) - 1))
    return out


def _pin(out: dict[str, ColumnStatistics], columns: Mapping[str, ColumnStatistics], name: str, share: float
         ) -> None:
    column = columns.get(name)
    if column is None or not column.ndv:
        return
    out[name] = column.pinned(min(max(1.0, column.ndv * share), out[name].ndv))


def filter_selectivity(predicate: Expr, columns: Mapping[str, ColumnStatistics],
                       applied: Mapping[Expr, float] | None = None) -> float:
    """Return the share of rows a Filter's ``predicate`` keeps: its conjuncts' shares multiplied, except that a
    lower and an upper bound of one column keep the range between them (as the SQL planner's filter estimate).

    ``applied``: the conjuncts filtered below (:attr:`Estimate.applied`). An OR whose implied filters were
    pushed below it (:mod:`~gpu_engine.optimizer.or_implied_filters`, or the SQL planner's copy) keeps only
    the share those left: its own share over theirs, at most 1. Why: the rows reaching it passed them
    already; counted again, TPC-DS q13's OR above store_sales x customer_demographics read 57,050 rows as 568
    and built store_sales against customer_address's 3,285.
    """
    fraction, rest = _intersected_value_sets(conjuncts(predicate), columns)
    bounds: dict[str, list[float]] = {}
    for conjunct in rest:
        keeps = selectivity(conjunct, columns)
        if applied and isinstance(conjunct, BinaryOp) and conjunct.op == "or":
            keeps = _given(conjunct, keeps, applied)
        if isinstance(conjunct, BinaryOp) and conjunct.op in _RANGE_KINDS and _column(conjunct.left) is not None:
            bounds.setdefault(_column(conjunct.left), []).append(keeps)
            continue
        fraction *= keeps
    for kept in bounds.values():
        fraction *= max(0.001, sum(kept) - (len(kept) - 1)) if len(kept) == 2 else min(kept)
    return fraction


def _value_set(predicate: Expr) -> tuple[str, frozenset] | None:
    """Return the column and constants of ``col = c``, ``col IN (c, ...)`` or an OR of those on one column."""
    if isinstance(predicate, BinaryOp) and predicate.op == "eq":
        for column, other in ((predicate.left, predicate.right), (predicate.right, predicate.left)):
            value = _constant(other)
            if isinstance(column, ColumnRef) and value is not None:
                return column.name, frozenset([value])
        return None
    if isinstance(predicate, InList) and not predicate.negated and isinstance(predicate.operand, ColumnRef):
        values = [_constant(v) for v in predicate.values]
        return (predicate.operand.name, frozenset(values)) if values and None not in values else None
    if isinstance(predicate, BinaryOp) and predicate.op == "or":
        left, right = _value_set(predicate.left), _value_set(predicate.right)
        if left is None or right is None or left[0] != right[0]:
            return None
        return left[0], left[1] | right[1]
    return None


def _intersected_value_sets(parts: list[Expr], columns: Mapping[str, ColumnStatistics]) -> tuple[float, list[Expr]]:
    """Return the share kept by the conjuncts that restrict one column to constants two or more times, and the
    other conjuncts (the SQL side's :func:`~gpu_engine.sql.statistics.intersected_value_sets`).

    Why: ``(d_year = 2001 OR d_year = 2002) AND d_year = 2002`` (TPC-DS q74's CTE filter beside the one its
    reader's filter pushed into it) keeps one year, not the product of the two shares (2/201 x 1/201): so
    multiplied, web_sales joined to that date_dim was estimated at 1,420 rows (about 180K), and eager
    aggregation saw nothing to save. Their value sets intersect: the share is the intersection's size times
    one value's (0 for an empty one); a column restricted once is estimated as before.
    """
    groups: dict[str, list[tuple[Expr, frozenset]]] = {}
    rest: list[Expr] = []
    for part in parts:
        found = _value_set(part)
        if found is None:
            rest.append(part)
        else:
            groups.setdefault(found[0], []).append((part, found[1]))
    fraction = 1.0
    for name, members in groups.items():
        kinds = {isinstance(v, str) for _, values in members for v in values}
        if len(members) == 1 or len(kinds) > 1:  # once, or strings beside numbers/dates: estimated as before
            rest.extend(part for part, _ in members)
            continue
        common = frozenset.intersection(*(values for _, values in members))
        fraction *= min(1.0, len(common) * equality_selectivity(columns.get(name),
                                                                dictionary=STRING_DICTIONARY_COUNTS))
    return fraction, rest


def _given(part: BinaryOp, keeps: float, applied: Mapping[Expr, float]) -> float:
    """Return the share an OR ``part`` keeps of rows that passed the ``applied`` conjuncts it implies: a conjunct
    is implied when each branch of ``part`` holds every condition of one of its branches (``a.x = 1 OR a.x =
    3`` under ``(a.x = 1 AND b.y = 2) OR (a.x = 3 AND b.y = 4)``)."""
    passed = 1.0
    for below, share in applied.items():  # the OR itself below: it keeps every row here
        if _value_set(below) is not None:
            continue  # it pinned its column's distinct values (_pinned): ``keeps`` read them, the share is in
        if implies(part, below):
            passed *= share
    return min(1.0, keeps / passed) if passed > 0 else keeps


def implies(whole: Expr, part: Expr) -> bool:
    """Return whether every row ``whole`` keeps passes ``part`` as the conditions are written: each branch of the
    OR ``whole`` holds every condition of one branch of ``part`` (``a.x = 1 OR a.x = 3`` under ``(a.x = 1 AND
    b.y = 2) OR (a.x = 3 AND b.y = 4)``: what :mod:`~gpu_engine.optimizer.or_implied_filters` derives)."""
    branches = [set(_hashable(conjuncts(branch))) for branch in disjuncts(whole)]
    options = [set(_hashable(conjuncts(branch))) for branch in disjuncts(part)]
    return all(any(option and option <= branch for option in options) for branch in branches)


def _hashable(expressions: list[Expr]) -> list[Expr]:
    out = []
    for expression in expressions:
        try:
            hash(expression)
        except TypeError:  # a literal holding a list: never matched
            continue
        out.append(expression)
    return out


def _applied(predicate: Expr, columns: Mapping[str, ColumnStatistics], below: Mapping[Expr, float]
             ) -> Mapping[Expr, float]:
    """Return the conjuncts applied at and below a Filter of ``predicate``, each with the share it keeps."""
    out = dict(below)
    for conjunct in _hashable(conjuncts(predicate)):
        out.setdefault(conjunct, selectivity(conjunct, columns))
    return out


def _renamed(plan: ProjectNode, applied: Mapping[Expr, float]) -> Mapping[Expr, float]:
    """Return the ``applied`` conjuncts over a Project's output names (``v AS v2``: a conjunct on ``v`` below
    reads ``v2`` above); those reading a column the Project does not pass on are left out."""
    if not applied:
        return applied
    from gpu_engine.planning.fusion import inline_columns

    names: dict[str, Expr] = {}
    for name, expression in zip(plan.names, plan.expressions):
        if isinstance(expression, ColumnRef):
            names.setdefault(expression.name, ColumnRef(name, expression.dtype))
    out = {}
    for conjunct, share in applied.items():
        if all(column in names for column in referenced_columns(conjunct)):
            out.setdefault(inline_columns(conjunct, names), share)
    return out


def selectivity(predicate: Expr, columns: Mapping[str, ColumnStatistics]) -> float:
    """Return the estimated share of rows a boolean expression keeps (the SQL side's rules: see the module
    docstring)."""
    if isinstance(predicate, BinaryOp) and predicate.op == "and":
        fraction = 1.0
        for conjunct in conjuncts(predicate):
            fraction *= selectivity(conjunct, columns)
        return fraction
    if isinstance(predicate, BinaryOp) and predicate.op == "or":
        parts = disjuncts(predicate)
        fraction = selectivity(parts[0], columns)
        for part in parts[1:]:
            other = selectivity(part, columns)
            fraction = fraction + other - fraction * other
        return fraction
    if isinstance(predicate, UnaryOp) and predicate.op == "not":
        return 1 - selectivity(predicate.operand, columns)
    if isinstance(predicate, UnaryOp) and predicate.op in ("is_null", "is_not_null"):
        return 0.1 if predicate.op == "is_null" else 0.9  # the SQL side's NOT (x IS NULL)
    if isinstance(predicate, Like):
        return 1 - LIKE_SELECTIVITY if predicate.negated else LIKE_SELECTIVITY
    if isinstance(predicate, InList):
        one = _equality(predicate.operand, columns)
        kept = min(1.0, one * max(1, len(predicate.values)))
        return 1 - kept if predicate.negated else kept
    if isinstance(predicate, Literal) and predicate.value is not None and isinstance(predicate.value, bool):
        return 1.0 if predicate.value else 0.0
    if isinstance(predicate, BinaryOp) and predicate.op in _COMPARE:
        return _comparison(predicate, columns)
    return DEFAULT_SELECTIVITY


def _comparison(predicate: BinaryOp, columns: Mapping[str, ColumnStatistics]) -> float:
    op, column, other = predicate.op, predicate.left, predicate.right
    if isinstance(column, Literal) and isinstance(other, Literal):
        left, right = _number_or_text(column.value), _number_or_text(other.value)
        if left is None or right is None or isinstance(left, str) != isinstance(right, str):
            return DEFAULT_SELECTIVITY
        return 1.0 if _COMPARE[op](left, right) else 0.0
    if _column(column) is None:
        column, other, op = other, column, _FLIPPED[op]
    name = _column(column)
    if name is None:
        return DEFAULT_SELECTIVITY
    if op == "eq":
        return _equality(column, columns) if _constant(other) is not None else 0.1
    if op == "ne":
        return 1 - _equality(column, columns)
    value = _constant(other)
    stats = columns.get(name)
    return range_selectivity(stats, _RANGE_KINDS[op], value if isinstance(value, float) else None)


def _equality(column: Expr, columns: Mapping[str, ColumnStatistics]) -> float:
    name = _column(column)
    stats = columns.get(name) if name is not None else None
    return equality_selectivity(stats, dictionary=STRING_DICTIONARY_COUNTS)


def _column(expression: Expr) -> str | None:
    """Return the column an expression reads as itself (through casts, which keep order), else None."""
    while isinstance(expression, Cast):
        expression = expression.operand
    return expression.name if isinstance(expression, ColumnRef) else None


_ARITHMETIC = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
               "div": lambda a, b: a / b if b else None}


def _constant(expression: Expr) -> float | str | None:
    """Return a constant's value as the SQL side's ``_constant`` does: numbers and dates as floats, text as is."""
    while isinstance(expression, Cast):
        expression = expression.operand
    if isinstance(expression, UnaryOp) and expression.op == "negate":
        inner = _constant(expression.operand)
        return -inner if isinstance(inner, float) else None
    if isinstance(expression, BinaryOp) and expression.op in _ARITHMETIC:  # ``2001 + 1``, as the SQL side folds it
        left, right = _constant(expression.left), _constant(expression.right)
        if not isinstance(left, float) or not isinstance(right, float):
            return None
        return _ARITHMETIC[expression.op](left, right)
    if not isinstance(expression, Literal) or expression.value is None:
        return None
    return _number_or_text(expression.value)


def _number_or_text(value: object) -> float | str | None:
    if isinstance(value, str):
        return value
    return as_number(value)


@dataclass(frozen=True)
class _Side:
    """What :func:`~gpu_engine.optimizer.statistics.key_set_divisor` reads of a join input (as the SQL
    planner's Relation has them), so both sides estimate a join with one function."""

    rows: float
    stats: Mapping[str, ColumnStatistics]


def measured_divisor(pairs, left: Mapping[str, ColumnStatistics], right: Mapping[str, ColumnStatistics], tables
                     ) -> float | None:
    """Return the divisor of a join on several key columns measured from the tables they were read from
    (:meth:`~gpu_engine.optimizer.statistics.RegisteredStatistics.key_match_divisor`), or None: one key, a key
    column that identifies its table's rows (:func:`~gpu_engine.optimizer.statistics.key_like`: containment), a
    column computed or aggregated (no :attr:`~gpu_engine.optimizer.statistics.ColumnStatistics.origin`), a
    side's keys from two tables, or statistics that read no rows (a mapping of table statistics). ``left`` and
    ``right``: the two sides' column statistics, ``pairs`` (left column, right column). Every join estimate of
    the typed passes reads it (this module's, the join order's, eager aggregation's)."""
    measure = getattr(tables, "key_match_divisor", None)
    if len(pairs) < 2 or measure is None or not MEASURED_KEY_MATCHES:
        return None
    if any(key_like(left.get(x)) or key_like(right.get(y)) for x, y in pairs):
        return None  # containment (key_set_divisor): nothing to read
    sides = []
    for columns, names in ((left, [x for x, _ in pairs]), (right, [y for _, y in pairs])):
        origins = [columns[n].origin if n in columns else () for n in names]
        if not all(origins) or len({table for table, _ in origins}) != 1:
            return None
        sides.append((origins[0][0], [column for _, column in origins]))
    return measure(sides[0][0], sides[0][1], sides[1][0], sides[1][1])


def _joined(plan: HashJoinNode | NestedLoopJoinNode, probe: Estimate, build: Estimate, tables=None
            ) -> Estimate | None:
    """An inner join: ``rows(a) * rows(b)`` over the key set's distinct values (the SQL join ordering's
    :func:`~gpu_engine.sql.join_ordering.join_estimate`; no keys: the product), halved by each conjunct of its
    filter; a LEFT (RIGHT) join at least its probe (build) side's rows and a FULL join the inner estimate,
    unhalved (as :func:`~gpu_engine.sql.join_ordering.join_in_order` and ``join_pair``); a semi or anti join
    half its kept side's rows (the SQL decorrelation's guess)."""
    if plan.join_type in ("inner", "left", "right", "full"):
        if not probe.rows or not build.rows:
            rows = {"left": probe.rows, "right": build.rows, "full": probe.rows + build.rows}.get(plan.join_type, 0.0)
        else:
            pairs = list(zip(plan.left_keys, plan.right_keys)) if isinstance(plan, HashJoinNode) else []
            divisor = key_set_divisor(_Side(probe.rows, probe.columns), _Side(build.rows, build.columns), pairs,
                                      measured=measured_divisor(pairs, probe.columns, build.columns, tables))
            rows = max(1.0, probe.rows * build.rows / divisor)
            if plan.filter is not None and plan.join_type == "inner":  # each condition beside the keys halves it
                rows = max(1.0, rows * 0.5 ** len(conjuncts(plan.filter)))
            rows = max(rows, {"left": probe.rows, "right": build.rows}.get(plan.join_type, 0.0))
        columns = {**build.columns, **probe.columns}
        return Estimate(rows, {name: columns[name].capped(rows) for name in plan.output_columns if name in columns},
                        {**build.applied, **probe.applied})
    kept = {"left_semi": probe, "anti": probe, "null_aware_anti": probe, "right_semi": build,
            "right_anti": build}.get(plan.join_type)
    if kept is None:
        return None
    rows = max(1.0, kept.rows * 0.5) if kept.rows else 0.0
    return Estimate(rows, {name: kept.columns[name].capped(rows) for name in plan.output_columns
                           if name in kept.columns}, kept.applied)


def _groups(keys, child: Estimate) -> float:
    """Return the groups of ``keys`` over ``child``'s rows: the product of their distinct counts (a tenth of the
    rows for a key without one), at least one, at most the rows."""
    groups = 1.0
    for key in keys:
        known = child.columns[key].ndv if key in child.columns else 0
        groups *= known or max(1.0, child.rows / 10)
    return max(1.0, min(child.rows, groups))


def _top_per_partition(plan: TopNRowNumberNode, child: Estimate) -> Estimate:
    """``rank() <= n`` per partition (a window's filter made one node): ``n`` rows a partition, the partitions
    counted as an aggregation's groups (:func:`_aggregated`), at most the input rows (ties may keep more: a
    bound, as for a LIMIT)."""
    groups = _groups(plan.partition_keys, child) if plan.partition_keys and child.rows else 1.0
    rows = min(child.rows, groups * max(1, plan.limit))
    return Estimate(rows, _capped(child.columns, rows), child.applied)


def _aggregated(plan: AggregationNode, child: Estimate) -> Estimate:
    """Groups: the product of the keys' distinct counts (a key without one counts a tenth of the rows), at most
    the input rows; one row without keys (the SQL planner's :func:`~gpu_engine.sql.aggregate_planning` rule)."""
    if not plan.grouping_keys:
        return Estimate(1.0, {})
    if not child.rows:
        return Estimate(0.0, {k: child.columns[k].capped(0.0) for k in plan.grouping_keys if k in child.columns})
    rows = _groups(plan.grouping_keys, child)
    return Estimate(rows, {k: replace(child.columns[k].capped(rows), rows_per_value=0.0, origin=())
                           for k in plan.grouping_keys if k in child.columns})


def _union(plan: LocalPartitionNode, branches: list[Estimate]) -> Estimate:
    """UNION ALL: the branches' rows added, the columns as :func:`union_columns` says."""
    return Estimate(sum(b.rows for b in branches),
                    union_columns(plan.output_schema.names, [b.columns for b in branches]))


def union_columns(names, branches: list[Mapping[str, ColumnStatistics]]) -> dict[str, ColumnStatistics]:
    """Return a UNION ALL's column statistics from its branches' (each keyed by the union's column names): a
    column known in every branch takes the largest distinct count and the widest range (unknown where the
    branches' values do not compare: a branch cast to text beside numbers).

    One rule for both planners: the typed plan's estimate (:func:`estimate`) and the SQL planner's set operations
    (:mod:`gpu_engine.sql.set_operations`, for its join ordering).
    """
    columns = {}
    for name in names:
        known = [b.get(name) for b in branches]
        if any(c is None or not c.ndv for c in known):
            continue
        try:
            low = None if any(c.minimum is None for c in known) else min(c.minimum for c in known)
            high = None if any(c.maximum is None for c in known) else max(c.maximum for c in known)
        except TypeError:
            low = high = None
        columns[name] = ColumnStatistics(max(c.ndv for c in known), low, high)
    return columns
