"""Evaluate EXTRACT and convert dates and timestamps with vectorized calendar arithmetic.

Dates are int32 days since 1970-01-01 and timestamps int64 ticks of their unit.
The calendar fields come from Howard Hinnant's ``civil_from_days``, written in
array arithmetic so it runs on any device without a kernel. Time zones are not
applied: a zoned timestamp's fields are those of its UTC instant.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.errors import PlanError

__all__ = [
    "EXTRACT_FIELDS", "TICKS_PER_DAY", "civil_from_days", "days_of", "micros_of", "shifted_ticks", "as_timestamp_micros", "extract",
    "time_values", "common_time_values",
]

EXTRACT_FIELDS = ("year", "month", "day")

#: Timestamp ticks per day, by Arrow unit.
TICKS_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def civil_from_days(xp: Any, days: Any) -> tuple[Any, Any, Any]:
    """Return ``(year, month, day)`` int64 arrays of the proleptic Gregorian dates ``days`` after 1970-01-01."""
    z = days.astype(xp.int64) + 719468
    era = xp.floor_divide(z, 146097)
    day_of_era = z - era * 146097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = xp.where(shifted_month < 10, shifted_month + 3, shifted_month - 9)
    year = year_of_era + era * 400 + (month <= 2)
    return year, month, day


def days_of(xp: Any, column: Column) -> Any:
    """Return the int64 day numbers of a date32 or timestamp column (timestamps floor to their day)."""
    if pa.types.is_date32(column.dtype):
        return column.data.astype(xp.int64)
    if pa.types.is_timestamp(column.dtype):
        return xp.floor_divide(column.data, TICKS_PER_DAY[column.dtype.unit])
    raise PlanError(f"expected a date or timestamp, got {column.dtype}")


def micros_of(xp: Any, column: Column) -> Any:
    """Return a date or timestamp column as int64 microseconds since 1970.

    Why here: the date functions (``date_trunc``, ``+ INTERVAL``) and the interval functions (``age``,
    differences, shifts by interval columns) both work in microseconds; one conversion serves both.
    """
    micros_per_day = TICKS_PER_DAY["us"]
    if pa.types.is_date32(column.dtype):
        return column.data.astype(xp.int64) * micros_per_day
    ticks = TICKS_PER_DAY[column.dtype.unit]
    data = column.data.astype(xp.int64)
    return data * (micros_per_day // ticks) if ticks <= micros_per_day else xp.floor_divide(
        data, ticks // micros_per_day)


def as_timestamp_micros(xp: Any, column: Column) -> Column:
    """Return a naive TIMESTAMP_NS column as DuckDB's implicit cast to TIMESTAMP reads it (microseconds, rounded
    half away from zero: 59.9999999995 s is the next minute); any other column as it is.

    Why: DuckDB has no TIMESTAMP_NS form of date_trunc, date_diff, date_sub, time_bucket, last_day, ``-``, age or
    CAST AS DATE: it casts the argument to TIMESTAMP first, so those answer of the rounded instant, where
    :func:`micros_of` floors (extract, epoch and TIMESTAMPTZ_NS forms do floor, as DuckDB's own ns forms do).
    """
    if not (pa.types.is_timestamp(column.dtype) and column.dtype.unit == "ns" and column.dtype.tz is None):
        return column
    from gpu_engine.expressions.numeric import divide_round_half_away

    return Column(pa.timestamp("us"), divide_round_half_away(xp, column.data.astype(xp.int64), 1000), column.validity)


def shifted_ticks(device: Any, instant: Column, shifted_micros: Any, validity: Any) -> Any:
    """Return ``instant`` shifted to ``shifted_micros`` (the shift computed on :func:`micros_of`'s microseconds) in
    the ticks of ``gpu_engine.plans.intervals.shifted_dtype``: nanosecond instants keep their nanoseconds past the microsecond (the shift
    is whole microseconds), and one shifted past the nanosecond range (years 1677-2262) raises as DuckDB's
    "Cannot add interval to timestamp_ns" instead of wrapping."""
    if not (pa.types.is_timestamp(instant.dtype) and instant.dtype.unit == "ns"):
        return shifted_micros
    from gpu_engine.expressions.numeric import raise_at_first

    xp = device.xp
    limit = (2**63 - 1) // 1000 - 1
    outside = (shifted_micros > limit) | (shifted_micros < -limit)
    raise_at_first(device, outside, validity, "Cannot add interval to timestamp_ns")
    delta = xp.where(outside, 0, shifted_micros - micros_of(xp, instant))
    return instant.data.astype(xp.int64) + delta * 1000


def extract(xp: Any, field: str, column: Column) -> Any:
    """Return ``EXTRACT(field FROM column)`` as int64 values for ``field`` in :data:`EXTRACT_FIELDS`."""
    if field not in EXTRACT_FIELDS:
        raise PlanError(f"EXTRACT supports {', '.join(EXTRACT_FIELDS)}, not {field!r}")
    year, month, day = civil_from_days(xp, days_of(xp, column))
    return {"year": year, "month": month, "day": day}[field]


def time_values(xp: Any, column: Column, unit: str | None) -> Any:
    """Return a date or timestamp column as int64 days (``unit`` None) or ticks of ``unit``."""
    if unit is None:
        return days_of(xp, column)
    if pa.types.is_date32(column.dtype):
        return column.data.astype(xp.int64) * TICKS_PER_DAY[unit]
    return column.data.astype(xp.int64) * (TICKS_PER_DAY[unit] // TICKS_PER_DAY[column.dtype.unit])


def common_time_values(xp: Any, left: Column, right: Column) -> tuple[Any, Any]:
    """Return both sides in one unit: days for two dates, else ticks of the finer timestamp unit (as DuckDB casts)."""
    units = [c.dtype.unit for c in (left, right) if pa.types.is_timestamp(c.dtype)]
    unit = max(units, key=TICKS_PER_DAY.get) if units else None
    return time_values(xp, left, unit), time_values(xp, right, unit)
