"""A filter's single-column conjuncts tested inside the Parquet scan, before its other columns are decoded.

Why: a filter directly above a scan (TPC-H q12's ``l_receiptdate`` year and
``l_shipmode IN ('MAIL', 'SHIP')``, q6's date, discount and quantity ranges)
saw every row of every column it read decoded and converted, then dropped
most of them: q12 decoded 6M lineitem rows x 5 columns to keep 31K (DuckDB's
scan hands on 885K). Read as join-key filters are
(:mod:`~gpu_engine.connectors.late_materialization`), the columns such a
conjunct tests are decoded and tested first, the others only at the rows
kept, and Parquet row groups whose statistics rule a conjunct out are not
read at all (:func:`~gpu_engine.connectors.runtime_filters.prune_row_groups`).

What is taken, at Task set-up (:func:`plan_scan_predicates`): the
conjuncts of the Filters (and of a fused aggregation's predicates) at the
start of a pipeline whose source is a scan, through column renames, that
test one scan column against constants: ``=``, ``<``, ``<=``, ``>``, ``>=``,
``BETWEEN``, ``IN`` lists, and ORs of those on one column; over integers
(not unsigned 64-bit), dates, decimals of up to 18 digits (tested on their
unscaled integers) and strings (equality and IN lists, or ranges bounded on
both sides; dictionary pages test each distinct value once). Constants are
literals or arithmetic over them (evaluated once on the host as the
evaluator would). Float constants and columns, ``<>``, NOT, LIKE and
timestamps are left to the filter.

Exactness: the filter stays in the plan and still tests every row the scan
hands on, so a :class:`ScanPredicate` only has to keep every row the
filter keeps. It keeps the rows its conjuncts (all of them on its column,
intersected) could keep: bounds are exact on the column's own scale (a
decimal constant finer than the column rounds towards keeping; a strict
string bound is kept inclusive), and NULL, which no comparison or IN list
keeps, is dropped. The same scan stops testing rows once its filters have
dropped under a tenth of the rows tested (``ADAPTIVE_FILTER_*`` in
:mod:`~gpu_engine.operators.table_scan`): q1's ``l_shipdate <= ...`` keeps
98% and is then only used for row groups.

Only Parquet pieces are tested: an Arrow table's rows are not decoded, so
there is nothing to save before the filter. Rows are tested only where a
predicate keeps at most half of them (:meth:`ScanPredicate.worth_testing_rows`)
and only in scans without a join-key filter; elsewhere the predicates only
skip row groups (:meth:`~gpu_engine.operators.table_scan.TableScan._reads`).
Results: ``bench/results/2026-11-29-scanfilter-s54.md``.
"""

from __future__ import annotations

import datetime
import decimal
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.exec.dynamic_filters import JoinKeyFilter
from gpu_engine.plans.expressions import BinaryOp, Cast, ColumnRef, Expr, InList, Literal

__all__ = ["ScanPredicate", "plan_scan_predicates", "scan_predicates"]

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_EPOCH = datetime.date(1970, 1, 1)
_FLIPPED = {"eq": "eq", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


class ScanPredicate(JoinKeyFilter):
    """What a filter's conjuncts on one scan column keep: an integer range and set (dates as days, decimals as
    their unscaled integers at ``scale``), or a string set or closed range; tested as a join-key filter is.

    """

    static = True  # the scan applies it to Parquet pieces only

    def __init__(self, column: str, kind: str, low: Any, high: Any, values: Any, scale: int = 0):
        super().__init__(column, kind, low, high, values, join_id="")
        self.scale = scale

    def describe(self) -> str:
        return "scan " + super().describe()

    def may_match(self, minimum: Any, maximum: Any) -> bool:
        if self.scale and not self.is_empty:
            minimum, maximum = _unscaled_statistic(minimum, self.scale), _unscaled_statistic(maximum, self.scale)
        return super().may_match(minimum, maximum)

    def worth_testing_rows(self, split: Any, shares: dict[str, float]) -> bool:
        """Say whether a scan should test this predicate's rows in ``split``, not only skip its row groups: when it
        keeps at most :data:`~gpu_engine.connectors.late_materialization.LATE_CUT_SHARE` of the rows, the share its
        column kept in the scan's earlier pieces (``shares``) or, before any, the split's statistics estimate.

        Why: above that share the scan's other columns are decoded whole anyway, and testing the rows first only
        moves the Filter's test into the scan and hands on gather maps: TPC-H q22's ``c_acctbal > 0.00`` (91% kept)
        cost its customer scan +10% CPU (loaded A/B), q1's ``l_shipdate <= ...`` (98%) +2% until the scan's
        adaptive stop.
        """
        from gpu_engine.connectors.late_materialization import LATE_CUT_SHARE

        share = shares.get(self.column)
        if share is None:
            share = self.estimated_share(split)
        return share is None or share <= LATE_CUT_SHARE

    def estimated_share(self, split: Any) -> float | None:
        """Return the share of a Parquet split's rows this predicate keeps by its row groups' statistics, values
        taken as spread evenly over each group's range and NULLs dropped; None when no row group tells (strings,
        no statistics)."""
        from gpu_engine.connectors.parquet_footer import read_footer
        from gpu_engine.exec.dynamic_filters import _as_int
        from gpu_engine.exec.split import ParquetSplit

        if self.is_empty:
            return 0.0
        if self.kind != "int" or not isinstance(split, ParquetSplit):
            return None
        footer = read_footer(split.path)
        leaf = next((index for index, leaf in enumerate(footer.leaves) if leaf.top_level and leaf.path == self.column),
                    None)
        if leaf is None:
            return None
        kept = rows = 0.0
        for group in split.row_groups or range(len(footer.row_groups)):
            if not 0 <= group < len(footer.row_groups) or not footer.row_groups[group].num_rows:
                continue
            row_group = footer.row_groups[group]
            statistics = row_group.columns[leaf].statistics
            if statistics is None or statistics.minimum is None or statistics.maximum is None:
                continue
            convert = (lambda value: _unscaled_statistic(value, self.scale)) if self.scale else _as_int
            low, high = convert(statistics.minimum), convert(statistics.maximum)
            if low is None or high is None or high < low:
                continue
            span = high - low + 1
            if self.values is not None:
                inside = int(np.count_nonzero((self.values >= low) & (self.values <= high)))
            else:
                inside = max(0, min(high, self.high) - max(low, self.low) + 1)
            nulls = statistics.null_count or 0
            kept += min(1.0, inside / span) * max(0, row_group.num_rows - nulls)
            rows += row_group.num_rows
        return kept / rows if rows else None

    def keep_into(self, array: pa.Array | pa.ChunkedArray, keep: np.ndarray, first: bool) -> int:
        unscaled = self._unscaled(array)
        if unscaled is None:  # a file's decimals at another scale than the plan's: left to the filter
            if first:
                keep[:] = True
            return 0
        return super().keep_into(unscaled, keep, first)

    def mask(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        unscaled = self._unscaled(array)
        return np.ones(len(array), dtype=np.bool_) if unscaled is None else super().mask(unscaled)

    def _unscaled(self, array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray | None:
        """Return a decimal column as its unscaled ``int64`` values (None: not at this predicate's scale, or of more
        than 18 digits), any other column as it is."""
        if not pa.types.is_decimal(array.type):
            return array
        if array.type.scale != self.scale or array.type.precision > 18:
            return None
        if isinstance(array, pa.ChunkedArray):
            return pa.chunked_array([_unscaled_array(chunk) for chunk in array.chunks], pa.int64())
        return _unscaled_array(array)


def _unscaled_statistic(value: Any, scale: int) -> Any:
    """Return a decimal column's statistics value as its unscaled integer (None when it is not a decimal)."""
    if isinstance(value, decimal.Decimal) and value.is_finite():
        scaled = value.scaleb(scale)
        return int(scaled) if scaled == scaled.to_integral_value() else None
    return None


def _unscaled_array(array: pa.Array) -> pa.Array:
    """Return a decimal array of up to 18 digits as its unscaled ``int64`` values (no copy for decimal64; the low
    words of decimal128, which hold such a value whole)."""
    dtype = array.type
    if dtype.bit_width not in (64, 128):  # decimal32 / decimal256: through Arrow's cast, exact for 18 digits
        array = array.cast(pa.decimal128(max(dtype.precision, 18), dtype.scale))
        dtype = array.type
    validity, data = array.buffers()[:2]
    if dtype.bit_width == 64:
        return pa.Array.from_buffers(pa.int64(), len(array), [validity, data], array.null_count, array.offset)
    words = np.frombuffer(data, dtype=np.int64, count=2 * (array.offset + len(array)))[0::2]
    return pa.Array.from_buffers(pa.int64(), len(array), [validity, pa.py_buffer(np.ascontiguousarray(words))],
                                 array.null_count, array.offset)


@dataclass(frozen=True)
class _Keeps:
    """The values a set of tests on one column can keep: ``low <= v <= high`` (None: unbounded) and, unless
    ``values`` is None, ``v`` in ``values``."""

    low: Any = None
    high: Any = None
    values: frozenset | None = None

    def both(self, other: "_Keeps") -> "_Keeps":
        low = self.low if other.low is None else other.low if self.low is None else max(self.low, other.low)
        high = self.high if other.high is None else other.high if self.high is None else min(self.high, other.high)
        values = self.values if other.values is None else other.values if self.values is None else \
            self.values & other.values
        return _Keeps(low, high, values)

    def either(self, other: "_Keeps") -> "_Keeps":
        low = None if self.low is None or other.low is None else min(self.low, other.low)
        high = None if self.high is None or other.high is None else max(self.high, other.high)
        values = None if self.values is None or other.values is None else self.values | other.values
        return _Keeps(low, high, values)

    def within(self, value: Any) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@dataclass(frozen=True)
class _Column:
    """A scan column a conjunct may test: its name in the scan, how its values compare, a decimal's scale."""

    name: str
    kind: str  # "int" (integers, dates as days, decimals unscaled) or "string"
    scale: int = 0
    is_date: bool = False


def scan_predicates(predicates: Iterable[Expr], columns: dict[str, tuple[str, pa.DataType]]) -> list[ScanPredicate]:
    """Return one :class:`ScanPredicate` per scan column that conjuncts of ``predicates`` test (see the module's
    docstring), ``columns`` mapping each name the predicates read to its scan column and that column's type."""
    keeps: dict[_Column, _Keeps] = {}
    for predicate in predicates:
        for column, keep in _tests(predicate, columns).items():
            keeps[column] = keeps[column].both(keep) if column in keeps else keep
    return [_predicate(column, keep) for column, keep in keeps.items()
            if column.kind == "int" or keep.values is not None or None not in (keep.low, keep.high)]


def _predicate(column: _Column, keep: _Keeps) -> ScanPredicate:
    if column.kind == "int":
        low = _INT64_MIN if keep.low is None else max(keep.low, _INT64_MIN)
        high = _INT64_MAX if keep.high is None else min(keep.high, _INT64_MAX)
        if keep.values is not None:
            values = np.array(sorted(v for v in keep.values if low <= v <= high), dtype=np.int64)
            if len(values):
                return ScanPredicate(column.name, "int", int(values[0]), int(values[-1]), values, column.scale)
        elif low <= high:
            return ScanPredicate(column.name, "int", low, high, None, column.scale)
        return ScanPredicate(column.name, "int", None, None, None, column.scale)
    if keep.values is not None:
        values = sorted(v for v in keep.values if keep.within(v))
        if values:
            return ScanPredicate(column.name, "string", values[0], values[-1], values)
    elif keep.low <= keep.high:
        return ScanPredicate(column.name, "string", keep.low, keep.high, None)
    return ScanPredicate(column.name, "string", None, None, None)


def _tests(expr: Expr, columns: dict[str, tuple[str, pa.DataType]]) -> dict[_Column, _Keeps]:
    """Return per scan column the values a row must hold there for ``expr`` to be true (columns it does not bound
    left out): an AND keeps what each side keeps, an OR what either side keeps, of the columns both bound."""
    if isinstance(expr, BinaryOp) and expr.op in ("and", "or"):
        left, right = _tests(expr.left, columns), _tests(expr.right, columns)
        if expr.op == "or":
            return {column: keep.either(right[column]) for column, keep in left.items() if column in right}
        both = dict(left)
        for column, keep in right.items():
            both[column] = both[column].both(keep) if column in both else keep
        return both
    if isinstance(expr, InList) and not expr.negated:
        column = _column(expr.operand, columns)
        if column is None:
            return {}
        values = [_value(value, column) for value in expr.values if value.value is not None]
        if any(value is _REFUSED for value in values):
            return {}
        return {column: _Keeps(values=frozenset(value for value in values if value is not _NEVER))}
    if isinstance(expr, BinaryOp) and expr.op in _FLIPPED:
        op, column, constant = expr.op, _column(expr.left, columns), expr.right
        if column is None:
            op, column, constant = _FLIPPED[op], _column(expr.right, columns), expr.left
        if column is None:
            return {}
        keep = _bound(op, _constant(constant), column)
        return {} if keep is None else {column: keep}
    return {}


def _column(expr: Expr, columns: dict[str, tuple[str, pa.DataType]]) -> _Column | None:
    """Return the scan column ``expr`` reads unchanged in value (through value-keeping casts), or None."""
    while isinstance(expr, Cast) and _keeps_values(expr.operand.dtype, expr.dtype):
        expr = expr.operand
    if not isinstance(expr, ColumnRef) or expr.name not in columns:
        return None
    name, dtype = columns[expr.name]
    if pa.types.is_date32(dtype):
        return _Column(name, "int", is_date=True)
    if pa.types.is_integer(dtype) and not pa.types.is_uint64(dtype):
        return _Column(name, "int")
    if pa.types.is_decimal(dtype) and dtype.precision <= 18 and dtype.scale >= 0:
        return _Column(name, "int", scale=dtype.scale)
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return _Column(name, "string")
    return None


def _keeps_values(source: pa.DataType, target: pa.DataType) -> bool:
    """Return True when casting ``source`` to ``target`` keeps every value (and so every comparison) as it is."""
    if pa.types.is_integer(source) and pa.types.is_integer(target):
        return target.bit_width > source.bit_width and pa.types.is_signed_integer(target) or (
            target.bit_width >= source.bit_width and pa.types.is_signed_integer(source) == pa.types.is_signed_integer(target))
    if pa.types.is_integer(source) and pa.types.is_decimal(target):
        return target.precision - target.scale >= len(str(2 ** source.bit_width))
    if pa.types.is_decimal(source) and pa.types.is_decimal(target):
        return target.scale >= source.scale and target.precision - target.scale >= source.precision - source.scale
    strings = (pa.string(), pa.large_string())
    return source in strings and target in strings


_REFUSED = object()  # a constant the column's values are not compared with exactly here
_NEVER = object()  # a constant no value of the column equals


def _constant(expr: Expr) -> Any:
    """Return a constant's value (a literal, or arithmetic and casts over literals, evaluated once on the host as
    the evaluator does), or :data:`_REFUSED`."""
    if pa.types.is_floating(expr.dtype):  # compared as floats: an int64 past 2^53 rounds into a bound
        return _REFUSED
    if isinstance(expr, Literal):
        return _REFUSED if expr.value is None else expr.value
    from gpu_engine.device import get_device
    from gpu_engine.expressions.evaluate import _host_constant

    column = _host_constant(expr)
    if column is None:
        return _REFUSED
    value = column.to_arrow(get_device("cpu"))[0].as_py()
    return _REFUSED if value is None else value


def _value(literal: Any, column: _Column) -> Any:
    """Return a constant in the column's terms: days, an unscaled integer (:data:`_NEVER` for a decimal finer than
    the column), a string; :data:`_REFUSED` for a constant of another kind (floats among them)."""
    value = _constant(literal) if isinstance(literal, Literal) else literal
    if value is _REFUSED or isinstance(value, bool):
        return _REFUSED
    if column.kind == "string":
        return value if isinstance(value, str) else _REFUSED
    if column.is_date:
        if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
            return (value - _EPOCH).days
        return _REFUSED
    exact = _exact(value)
    if exact is None:
        return _REFUSED
    scaled = exact * 10 ** column.scale
    return int(scaled) if scaled.denominator == 1 else _NEVER


def _exact(value: Any) -> Fraction | None:
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, decimal.Decimal) and value.is_finite():
        return Fraction(value)
    return None


def _bound(op: str, constant: Any, column: _Column) -> _Keeps | None:
    """Return what ``column op constant`` can keep, or None when it is not tested here."""
    if column.kind == "int" and not column.is_date:
        exact = None if constant is _REFUSED or isinstance(constant, bool) else _exact(constant)
        if exact is None:
            return None
        scaled = exact * 10 ** column.scale
        floor, ceiling = scaled.numerator // scaled.denominator, -(-scaled.numerator // scaled.denominator)
        if op == "eq":
            return _Keeps(floor, floor) if floor == ceiling else _Keeps(1, 0)
        return {"lt": _Keeps(high=ceiling - 1), "le": _Keeps(high=floor),
                "gt": _Keeps(low=floor + 1), "ge": _Keeps(low=ceiling)}[op]
    value = _value(constant, column)
    if value is _REFUSED:
        return None
    if op == "eq":
        return _Keeps(value, value, frozenset((value,)) if column.kind == "string" else None)
    if column.kind == "string":  # strict bounds kept inclusive: the filter tests them exactly
        return _Keeps(high=value) if op in ("lt", "le") else _Keeps(low=value)
    return {"lt": _Keeps(high=value - 1), "le": _Keeps(high=value),
            "gt": _Keeps(low=value + 1), "ge": _Keeps(low=value)}[op]


def plan_scan_predicates(items: Sequence) -> list[tuple[str, ScanPredicate]]:
    """Return the scan predicates of a pipeline (``items`` source first) whose source is a TableScan: the
    conjuncts of the Filters right after it (through Projects that rename its columns) and of a fused
    aggregation's predicates there, as ``(scan node id, predicate)``."""
    from gpu_engine.exec.local_planner import FusedFilterProject
    from gpu_engine.plans.nodes import FusedAggregationNode, TableScanNode

    if not items or not isinstance(items[0], TableScanNode):
        return []
    scan = items[0]
    schema = scan.output_schema
    columns = {name: (name, schema.field(name).type) for name in schema.names if name in scan.columns}
    predicates: list[Expr] = []
    read: list[dict[str, tuple[str, pa.DataType]]] = []
    for item in items[1:]:
        if not columns:
            break
        if isinstance(item, FusedFilterProject):
            if item.filter is not None:
                predicates.append(item.filter.predicate)
                read.append(columns)
            if item.project is not None:
                project = item.project
                columns = {name: columns[expr.name] for name, expr in zip(project.names, project.expressions)
                           if isinstance(expr, ColumnRef) and expr.name in columns}
        elif isinstance(item, FusedAggregationNode):
            predicates.extend(item.predicates)
            read.extend(columns for _ in item.predicates)
            break
        else:
            break
    found: dict[str, list[ScanPredicate]] = {}
    for predicate, names in zip(predicates, read):
        for scan_predicate in scan_predicates((predicate,), names):
            found.setdefault(scan_predicate.column, []).append(scan_predicate)
    return [(scan.id, predicate) for tested in found.values() for predicate in tested]
