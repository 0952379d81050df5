"""Evaluate INTERVAL values: constructors, arithmetic with dates and timestamps, ``age``, parts, order, text.

An INTERVAL column's data is ``(n, 3)`` int64 words — months, days,
microseconds (:mod:`gpu_engine.columnar.types`) — so gathers, concatenation
and Arrow conversion move it like any fixed-width column, and every function
here is array code on the device's ``xp`` (no kernels of its own; generated
kernels do not take intervals, so a pipeline holding one runs unfused).
Results follow DuckDB 2.0.1: fields never normalize in arithmetic
(``INTERVAL 36 HOUR`` stays 36 hours), a timestamp plus an interval adds the
months first (the day clamped to the month's end), then the days, then the
microseconds; ``a - b`` of timestamps is days and microseconds, ``age`` counts
calendar years, months and days as DuckDB's ``Interval::GetAge`` does;
comparisons and ordering follow the length with 30-day months (:func:`normalized_fields`).
Field overflow raises, as DuckDB's checked arithmetic does.
"""

from __future__ import annotations

import datetime
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import INTERVAL
from gpu_engine.device import Device
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.expressions.nulls import and_validity
from gpu_engine.expressions.numeric import narrow_values, raise_at_first
from gpu_engine.expressions.temporal import as_timestamp_micros, civil_from_days, micros_of, shifted_ticks
from gpu_engine.plans.intervals import (
    DAYS_PER_MONTH, MICROS_PER_DAY, UNIT_CONSTRUCTORS, IntervalValue, constructor_unit, format_interval,
    parse_interval, shifted_dtype,
)

__all__ = ["INTERVAL_FUNCTIONS", "evaluate_interval_function", "interval_literal_column", "interval_order",
           "intervals_to_strings", "intervals_from_strings", "interval_words", "normalized_fields"]

_MICROS_PER_HOUR = 3_600_000_000
_MICROS_PER_MINUTE = 60_000_000
_MICROS_PER_SECOND = 1_000_000
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_OUT_OF_RANGE = "Interval value is out of range"


def interval_words(xp: Any, months: Any, days: Any, micros: Any, rows: int) -> Any:
    """Return the ``(rows, 3)`` int64 words of an interval column from its fields (arrays or ints)."""
    data = xp.empty((rows, 3), dtype=xp.int64)
    data[:, 0], data[:, 1], data[:, 2] = months, days, micros
    return data


def interval_literal_column(device: Device, value: IntervalValue | None, rows: int) -> Column:
    """Return ``rows`` copies of an interval constant (NULL: an all-null column)."""
    xp = device.xp
    if value is None:
        return Column(INTERVAL, xp.zeros((rows, 3), dtype=xp.int64), xp.zeros(rows, dtype=xp.bool_))
    return Column(INTERVAL, interval_words(xp, value.months, value.days, value.micros, rows))


def _toward_zero(xp: Any, values: Any, size: int) -> Any:
    """Return ``values / size`` truncated toward zero (C++'s division, which DuckDB's results follow)."""
    return xp.where(values >= 0, values // size, -((-values) // size))


def _remainder(xp: Any, values: Any, size: int) -> Any:
    """Return C++'s ``values % size`` (the sign of ``values``)."""
    return values - _toward_zero(xp, values, size) * size


def normalized_fields(xp: Any, data: Any) -> tuple[Any, Any, Any]:
    """Return the months, days and microseconds DuckDB compares and orders intervals by.

    DuckDB orders intervals by their length with a month counted as 30 days and a day as 24 hours; that length
    may need more than 64 bits, so it is kept as three fields with whole days of the microseconds carried into
    days and whole 30-day months of the days into months, floored (each remainder non-negative): one form per
    length, whose fields compare in order as the lengths do.
    """
    carry_days = xp.floor_divide(data[:, 2], MICROS_PER_DAY)
    micros = data[:, 2] - carry_days * MICROS_PER_DAY
    days = data[:, 1] + carry_days
    carry_months = xp.floor_divide(days, DAYS_PER_MONTH)
    return data[:, 0] + carry_months, days - carry_months * DAYS_PER_MONTH, micros


def interval_order(xp: Any, left: Any, right: Any) -> tuple[Any, Any]:
    """Return the ``(less, equal)`` masks of two interval columns' words, compared normalized as DuckDB does."""
    (m1, d1, u1), (m2, d2, u2) = normalized_fields(xp, left), normalized_fields(xp, right)
    equal = (m1 == m2) & (d1 == d2) & (u1 == u2)
    less = (m1 < m2) | ((m1 == m2) & ((d1 < d2) | ((d1 == d2) & (u1 < u2))))
    return less, equal


# -- instants --------------------------------------------------------------------------------------------------


def _month_days(xp: Any, year: Any, month: Any) -> Any:
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    lengths = xp.asarray([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=xp.int64)
    return xp.take(lengths, xp.clip(month, 1, 12) - 1) + ((month == 2) & leap)


def _add(device: Device, instant: Column, interval: Column) -> Column:
    """Return ``instant + interval``: months first (day clamped to the month's end), then days, then micros."""
    from gpu_engine.expressions.date_functions import days_from_civil

    xp = device.xp
    micros = micros_of(xp, instant)
    day = xp.floor_divide(micros, MICROS_PER_DAY)
    time_of_day = micros - day * MICROS_PER_DAY
    months, days, extra = interval.data[:, 0], interval.data[:, 1], interval.data[:, 2]
    year, month, day_of_month = civil_from_days(xp, day)
    total = year * 12 + (month - 1) + months
    year, month = xp.floor_divide(total, 12), xp.remainder(total, 12) + 1
    day = days_from_civil(xp, year, month, xp.minimum(day_of_month, _month_days(xp, year, month)))
    validity = and_validity(instant.validity, interval.validity)
    result = (day + days) * MICROS_PER_DAY + time_of_day + extra
    return Column(shifted_dtype(instant.dtype), shifted_ticks(device, instant, result, validity), validity)


def _difference(device: Device, later: Column, earlier: Column) -> Column:
    """Return ``later - earlier`` of two instants: whole days and the microseconds left (DuckDB's FromMicro)."""
    xp = device.xp
    delta = micros_of(xp, later) - micros_of(xp, earlier)
    days = _toward_zero(xp, delta, MICROS_PER_DAY)
    validity = and_validity(later.validity, earlier.validity)
    return Column(INTERVAL, interval_words(xp, 0, days, delta - days * MICROS_PER_DAY, len(later)), validity)


def _components(xp: Any, micros: Any) -> list[Any]:
    day = xp.floor_divide(micros, MICROS_PER_DAY)
    time_of_day = micros - day * MICROS_PER_DAY
    year, month, day_of_month = civil_from_days(xp, day)
    return [year, month, day_of_month, time_of_day // _MICROS_PER_HOUR,
            time_of_day // _MICROS_PER_MINUTE % 60, time_of_day // _MICROS_PER_SECOND % 60,
            time_of_day % _MICROS_PER_SECOND]


def _age(device: Device, first: Column, second: Column) -> Column:
    """Return DuckDB's ``age(first, second)``: field differences, borrowed upward, in the sign of the span.

    Where ``first`` is earlier the differences are negated, borrowed and negated back; a borrowed month lends the
    days of the earlier instant's month (as ``Interval::GetAge``).
    """
    xp = device.xp
    a, b = micros_of(xp, first), micros_of(xp, second)
    negative = a < b
    one, two = _components(xp, a), _components(xp, b)
    sign = xp.where(negative, -1, 1)
    year, month, day, hour, minute, second_, micro = (sign * (x - y) for x, y in zip(one, two))
    # Each field borrows at most once from the next: its difference is above minus its range.
    borrow = micro < 0
    micro, second_ = micro + borrow * _MICROS_PER_SECOND, second_ - borrow
    borrow = second_ < 0
    second_, minute = second_ + borrow * 60, minute - borrow
    borrow = minute < 0
    minute, hour = minute + borrow * 60, hour - borrow
    borrow = hour < 0
    hour, day = hour + borrow * 24, day - borrow
    earlier_year, earlier_month = xp.where(negative, one[0], two[0]), xp.where(negative, one[1], two[1])
    borrow = day < 0
    day, month = day + borrow * _month_days(xp, earlier_year, earlier_month), month - borrow
    borrow = month < 0
    month, year = month + borrow * 12, year - borrow
    months = sign * (year * 12 + month)
    micros = sign * (((hour * 60 + minute) * 60 + second_) * _MICROS_PER_SECOND + micro)
    validity = and_validity(first.validity, second.validity)
    return Column(INTERVAL, interval_words(xp, months, sign * day, micros, len(first)), validity)


# -- arithmetic --------------------------------------------------------------------------------------------------


def _int32_fields(device: Device, fields: Sequence[Any], validity: Any) -> None:
    bad = None
    for values in fields:
        outside = (values < _INT32_MIN) | (values > _INT32_MAX)
        bad = outside if bad is None else bad | outside
    raise_at_first(device, bad, validity, _OUT_OF_RANGE)


def _added_micros(device: Device, left: Any, right: Any, validity: Any) -> Any:
    total = left + right  # wraps on overflow: then both operands share a sign the total lacks
    raise_at_first(device, ((left ^ total) & (right ^ total)) < 0, validity, _OUT_OF_RANGE)
    return total


def _multiplied(device: Device, values: Any, factor: Any, validity: Any) -> Any:
    xp = device.xp
    product = values * factor  # wraps on overflow: then dividing back does not return the value
    safe = xp.where(factor == 0, 1, factor)
    raise_at_first(device, (factor != 0) & (product // safe != values), validity, _OUT_OF_RANGE)
    return product


def _plus(device: Device, left: Column, right: Column, subtract: bool) -> Column:
    xp = device.xp
    validity = and_validity(left.validity, right.validity)
    step = -right.data if subtract else right.data
    months, days = left.data[:, 0] + step[:, 0], left.data[:, 1] + step[:, 1]
    _int32_fields(device, (months, days), validity)
    micros = _added_micros(device, left.data[:, 2], step[:, 2], validity)
    return Column(INTERVAL, interval_words(xp, months, days, micros, len(left)), validity)


def _times(device: Device, interval: Column, factor: Column) -> Column:
    xp = device.xp
    validity = and_validity(interval.validity, factor.validity)
    n = narrow_values(device, factor, "interval multiplication")
    fields = [_multiplied(device, interval.data[:, k], n, validity) for k in range(3)]
    _int32_fields(device, fields[:2], validity)
    return Column(INTERVAL, interval_words(xp, *fields, len(interval)), validity)


def _rounded_to_micros(xp: Any, values: Any) -> Any:
    """Return ``values`` (seconds or days) rounded to whole microseconds, halves to even (DuckDB's TSROUND)."""
    return xp.rint(values * _MICROS_PER_SECOND) / _MICROS_PER_SECOND


def _scaled(device: Device, interval: Column, factor: Column, divide: bool) -> Column:
    """Return ``interval * factor`` (or ``interval / factor``) for a DOUBLE factor, as DuckDB computes it.

    DuckDB follows PostgreSQL's ``interval_mul``: months and days are multiplied and truncated, the fraction of
    the months cascades into days (30 a month) and the fraction of the days into microseconds, each rounded to
    a microsecond; a division multiplies by ``1.0 / factor`` (zero raises). The operations run in the same
    order on float64 as DuckDB's C++, so the results agree to the microsecond.
    """
    xp = device.xp
    validity = and_validity(interval.validity, factor.validity)
    right = factor.data.astype(xp.float64)
    if divide:
        raise_at_first(device, right == 0, validity, "Division by zero in INTERVAL division")
        right = 1.0 / xp.where(right == 0, 1.0, right)
    months, days, micros = (interval.data[:, k] for k in range(3))
    overflow = f"Overflow in {'INTERVAL division' if divide else 'multiplication of INTERVAL'}"
    with np.errstate(invalid="ignore", over="ignore"):
        month_product, day_product = months * right, days * right
        for product in (month_product, day_product):
            raise_at_first(device, xp.isnan(product) | (product < _INT32_MIN) | (product > _INT32_MAX), validity,
                           overflow)
        whole_months = xp.trunc(xp.nan_to_num(month_product)).astype(xp.int64)
        whole_days = xp.trunc(xp.nan_to_num(day_product)).astype(xp.int64)
        month_remainder = _rounded_to_micros(xp, (month_product - whole_months) * DAYS_PER_MONTH)
        day_remainder = xp.trunc(month_remainder).astype(xp.int64)
        seconds = _rounded_to_micros(xp, (day_product - whole_days + month_remainder - day_remainder) * 86_400)
        carried = xp.where(xp.abs(seconds) >= 86_400, xp.trunc(seconds / 86_400), 0.0).astype(xp.int64)
        seconds = seconds - carried * 86_400
        result_days = whole_days + carried + day_remainder
        total = xp.rint(micros.astype(xp.float64) * right + seconds * _MICROS_PER_SECOND)
        raise_at_first(device, xp.isnan(total) | (total < -(2.0**63)) | (total >= 2.0**63), validity, overflow)
    _int32_fields(device, (result_days,), validity)
    result_micros = xp.nan_to_num(total).astype(xp.int64)
    return Column(INTERVAL, interval_words(xp, whole_months, result_days, result_micros, len(interval)), validity)


def _construct(device: Device, name: str, count: Column) -> Column:
    """Return ``to_<unit>(count)``: the count in the unit's field, scaled (weeks are 7 days, years 12 months)."""
    xp = device.xp
    field, scale = UNIT_CONSTRUCTORS[constructor_unit(name)]
    values = narrow_values(device, count, name)
    scaled = _multiplied(device, values, xp.int64(scale), count.validity)
    if field < 2:
        _int32_fields(device, (scaled,), count.validity)
    parts = [0, 0, 0]
    parts[field] = scaled
    return Column(INTERVAL, interval_words(xp, *parts, len(count)), count.validity)


def _part(xp: Any, part: str, interval: Column) -> Any:
    """Return ``date_part(part, interval)`` as DuckDB reads each field (C++'s truncating ``/`` and ``%``)."""
    months, days, micros = interval.data[:, 0], interval.data[:, 1], interval.data[:, 2]
    by_months = {"year": 12, "decade": 120, "century": 1200, "millennium": 12000}
    if part in by_months:
        return _toward_zero(xp, months, by_months[part])
    if part == "month":
        return _remainder(xp, months, 12)
    if part == "quarter":
        return _toward_zero(xp, _remainder(xp, months, 12), 3) + 1
    if part == "day":
        return days
    if part == "hour":
        return _toward_zero(xp, micros, _MICROS_PER_HOUR)
    if part == "minute":
        return _toward_zero(xp, _remainder(xp, micros, _MICROS_PER_HOUR), _MICROS_PER_MINUTE)
    within_minute = _remainder(xp, micros, _MICROS_PER_MINUTE)
    if part == "second":
        return _toward_zero(xp, within_minute, _MICROS_PER_SECOND)
    if part == "millisecond":
        return _toward_zero(xp, within_minute, 1000)
    if part == "microsecond":
        return within_minute
    if part == "epoch":  # DuckDB: 365 days and a quarter a year, 30 days a month
        years = _toward_zero(xp, months, 12)
        whole_days = years * 365 + _remainder(xp, months, 12) * DAYS_PER_MONTH + days
        seconds = whole_days * 86_400 + years * (86_400 // 4)
        return seconds.astype(xp.float64) + micros.astype(xp.float64) / _MICROS_PER_SECOND
    raise PlanError(f"date_part of an INTERVAL does not support {part!r}")


# -- text ---------------------------------------------------------------------------------------------------------


def intervals_to_strings(device: Device, column: Column) -> Column:
    """Return CAST(interval AS VARCHAR): each distinct interval formatted once on the host, a dictionary column."""
    xp = device.xp
    host = device.to_host(column.data).reshape(-1, 3)
    if column.validity is not None:
        host = np.where(device.to_host(column.validity)[:, None], host, 0)
    distinct, codes = np.unique(host, axis=0, return_inverse=True) if len(host) else (host, np.zeros(0, np.int64))
    texts = [format_interval(IntervalValue(*map(int, row))) for row in distinct.tolist()]
    dictionary = Column.from_strings(texts, device)
    return Column(pa.string(), xp.asarray(codes.reshape(-1).astype(np.int32)), column.validity, None, dictionary)


def intervals_from_strings(device: Device, column: Column, *, unread_as_null: bool = False) -> Column:
    """Return CAST(text AS INTERVAL), each distinct text parsed once on the host.

    Text no interval reads raises, or with ``unread_as_null`` (TRY_CAST) is NULL.
    """
    values = column.to_arrow(device).to_pylist()
    parsed: dict[str, tuple[int, int, int] | None] = {}
    rows = np.zeros((len(values), 3), dtype=np.int64)
    valid = np.array([v is not None for v in values], dtype=bool)
    for row, text in enumerate(values):
        if text is None:
            continue
        if text not in parsed:
            try:
                value = parse_interval(text)
                parsed[text] = (value.months, value.days, value.micros)
            except ValueError:
                if not unread_as_null:
                    raise ExecutionError(f"Conversion Error: Could not convert string '{text}' to INTERVAL") from None
                parsed[text] = None
        if parsed[text] is None:
            valid[row] = False
        else:
            rows[row] = parsed[text]
    return Column(INTERVAL, device.asarray(rows), None if valid.all() else device.asarray(valid))


# -- dispatch -------------------------------------------------------------------------------------------------


#: The functions this module evaluates (typing rules: gpu_engine.plans.intervals).
INTERVAL_FUNCTIONS = ("to_millennia", "to_centuries", "to_decades", "to_years", "to_quarters", "to_months",
                      "to_weeks", "to_days", "to_hours", "to_minutes", "to_seconds", "to_milliseconds",
                      "to_microseconds", "interval_add", "interval_sub", "interval_negate", "interval_multiply",
                      "interval_scale", "interval_divide", "timestamp_add_interval", "timestamp_difference", "age",
                      "interval_part", "time_add_interval")


def evaluate_interval_function(device: Device, name: str, args: Sequence[Any], columns: Sequence[Column],
                               dtype: pa.DataType) -> Column:
    """Return ``name(args)`` from the evaluated argument ``columns`` (``interval_part``'s part read from args)."""
    xp = device.xp
    if constructor_unit(name) is not None:
        return _construct(device, name, columns[0])
    if name in ("interval_add", "interval_sub"):
        return _plus(device, columns[0], columns[1], subtract=name == "interval_sub")
    if name == "interval_negate":
        data = columns[0].data
        _int32_fields(device, (-data[:, 0], -data[:, 1]), columns[0].validity)
        raise_at_first(device, data[:, 2] == -(2**63), columns[0].validity, _OUT_OF_RANGE)
        return Column(INTERVAL, -data, columns[0].validity)
    if name == "interval_multiply":
        return _times(device, columns[0], columns[1])
    if name in ("interval_scale", "interval_divide"):
        return _scaled(device, columns[0], columns[1], divide=name == "interval_divide")
    if name == "timestamp_add_interval":
        return _add(device, columns[0], columns[1])
    if name == "time_add_interval":  # the interval's microseconds, wrapped within the day (DuckDB's TIME + INTERVAL)
        time, interval = columns
        moved = xp.remainder(time.data + xp.remainder(interval.data[:, 2], MICROS_PER_DAY), MICROS_PER_DAY)
        return Column(dtype, moved, and_validity(time.validity, interval.validity))
    if name in ("timestamp_difference", "age"):  # of TIMESTAMP_NS cast to TIMESTAMP, as DuckDB
        columns = [as_timestamp_micros(xp, column) for column in columns]
    if name == "timestamp_difference":
        return _difference(device, columns[0], columns[1])
    if name == "age" and len(columns) == 1:  # from today's midnight, local time (DuckDB's current_date)
        today = (datetime.date.today() - datetime.date(1970, 1, 1)).days * MICROS_PER_DAY
        start = Column(pa.timestamp("us"), xp.full(len(columns[0]), today, dtype=xp.int64))
        return _age(device, start, columns[0])
    if name == "age":
        return _age(device, columns[0], columns[1])
    if name == "interval_part":
        part = args[0].value
        values = _part(xp, part, columns[1])
        return Column(dtype, values.astype(xp.float64 if part == "epoch" else xp.int64), columns[1].validity)
    raise PlanError(f"cannot evaluate interval function {name!r}")
