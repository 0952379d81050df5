"""Test a scan's own comparisons with constants beside its join-key filters, so late materialization reads less.

Why: a join-filtered scan reads its filter columns first and its other
columns only for the rows they keep
(:mod:`gpu_engine.connectors.late_materialization`). The Filter right above
the scan was not one of them: TPC-H Q3's lineitem scan kept 10% of its rows
by ``l_orderkey`` (the orders left), decoded ``l_extendedprice``,
``l_discount`` and ``l_shipdate`` for all of those, and only then
``l_shipdate > DATE '1995-03-15'`` kept 5% of them. DuckDB tests such
conjuncts in its Parquet reader. Here each conjunct of the pipeline's first
Filter that compares an integer or date scan column with a constant
(``=``, ``<``, ``<=``, ``>``, ``>=``, either side) becomes a range
:class:`~gpu_engine.exec.dynamic_filters.JoinKeyFilter` on that column
(conjuncts of one column intersected). A piece read late tests them after
its join-key filters, on the rows those kept, and only where those cut it to
the share whose other columns are read row by row (``refine`` of
:func:`~gpu_engine.connectors.late_materialization.read_filtered_piece`):
a range column is never decoded whole just to be tested (q3's orders scan,
whose key filter keeps a fifth, read that way, cost 20 ms more of CPU than it
saved). The Filter itself still runs above the scan: the ranges only drop
rows it would drop (a comparison with NULL is not true, and a range drops
NULLs).

A scan without join filters, or one decoded on a device, reads as before:
no host work is added on the GPU's device-decoder path and plans do not
change.
"""

from __future__ import annotations

import datetime

import pyarrow as pa

from gpu_engine.exec.dynamic_filters import JoinKeyFilter

__all__ = ["plan_range_filters"]

_LOWEST, _HIGHEST = -(1 << 63), (1 << 63) - 1
_EPOCH = datetime.date(1970, 1, 1)
#: A comparison seen from the column's side: ``constant op column`` is ``column FLIPPED[op] constant``.
_FLIPPED = {"eq": "eq", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def plan_range_filters(items: list) -> tuple[JoinKeyFilter, ...]:
    """Return the range filters of the Filter that directly follows a pipeline's TableScan (``items`` source first)."""
    from gpu_engine.exec.local_planner import FusedFilterProject
    from gpu_engine.plans.nodes import TableScanNode

    if len(items) < 2 or not isinstance(items[0], TableScanNode) or not isinstance(items[1], FusedFilterProject) \
            or items[1].filter is None:
        return ()
    scan = items[0]
    types = {name: scan.output_schema.field(name).type for name in scan.output_schema.names if name in scan.columns}
    bounds: dict[str, tuple[int, int]] = {}
    for conjunct in _conjuncts(items[1].filter.predicate):
        found = _column_bound(conjunct, types)
        if found is None:
            continue
        column, low, high = found
        old_low, old_high = bounds.get(column, (_LOWEST, _HIGHEST))
        bounds[column] = (max(old_low, low), min(old_high, high))
    return tuple(JoinKeyFilter(column, "int", low, high, None) if low <= high else
                 JoinKeyFilter(column, "int", None, None, None) for column, (low, high) in bounds.items())


def _conjuncts(predicate) -> list:
    from gpu_engine.plans.expressions import BinaryOp

    if isinstance(predicate, BinaryOp) and predicate.op == "and":
        return _conjuncts(predicate.left) + _conjuncts(predicate.right)
    return [predicate]


def _column_bound(conjunct, types: dict[str, pa.DataType]) -> tuple[str, int, int] | None:
    """Return ``(column, low, high)`` when ``conjunct`` keeps exactly the non-NULL values of a scan column in that
    inclusive range, else None."""
    from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Literal

    if not isinstance(conjunct, BinaryOp) or conjunct.op not in _FLIPPED:
        return None
    op, column, constant = conjunct.op, conjunct.left, conjunct.right
    if isinstance(constant, ColumnRef) and isinstance(column, Literal):
        op, column, constant = _FLIPPED[op], constant, column
    if not isinstance(column, ColumnRef) or not isinstance(constant, Literal) or column.name not in types:
        return None
    value = _as_integer(constant.value, types[column.name])
    if value is None:
        return None
    low, high = {"eq": (value, value), "lt": (_LOWEST, value - 1), "le": (_LOWEST, value),
                 "gt": (value + 1, _HIGHEST), "ge": (value, _HIGHEST)}[op]
    return column.name, low, high


def _as_integer(value, dtype: pa.DataType) -> int | None:
    """Return a constant as the integer a range over a column of ``dtype`` compares (a date as days), else None."""
    if isinstance(value, bool):
        return None
    if pa.types.is_date32(dtype):
        if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
            return (value - _EPOCH).days
        return None
    if pa.types.is_integer(dtype) and not pa.types.is_uint64(dtype) and isinstance(value, int):
        return value if _LOWEST < value < _HIGHEST else None
    return None
