"""Evaluate CAST between numbers, dates, timestamps and strings with DuckDB's rounding and range rules.

DuckDB rounds when a cast drops digits: decimal -> integer and decimal ->
smaller scale round half away from zero, float -> decimal scales in float64 and
rounds half away from zero, float -> integer rounds half to even (``nearbyint``).
A value that does not fit the target (integer width, decimal precision, NaN to
an integer) raises :class:`ExecutionError`, as DuckDB's cast does.

Casts into decimal(p > 18), and from wide decimals or uint64, run on 128-bit
words (:func:`_to_number_exact_wide`), so uint64 values from 2**63 up and
38-digit decimals convert exactly or raise, never wrap.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import (
    is_boolean, is_decimal, is_floating, is_integer, is_interval, is_numeric, is_string, is_time, physical_dtype,
)
from gpu_engine.device import Device
from gpu_engine.errors import PlanError
from gpu_engine.expressions import intervals, text
from gpu_engine.expressions.numeric import (
    POWERS_OF_TEN, as_float, as_scaled, as_words, divide_round_half_away, fit_to_type, fit_words, is_wide,
    narrowed, narrowed_to_infinity, needs_words, raise_at_first, round_half_away, scale_of, wide_result,
)
from gpu_engine.kernels.decimal128 import RESCALE
from gpu_engine.expressions.literals import literal_column
from gpu_engine.plans.expressions import Literal
from gpu_engine.plans.type_coercion import unimplemented_cast, unimplemented_cast_message
from gpu_engine.expressions.temporal import TICKS_PER_DAY, as_timestamp_micros, days_of, time_values

__all__ = ["cast", "can_cast"]

_TWO_TO_63 = float(2**63)


def can_cast(source: pa.DataType, target: pa.DataType) -> bool:
    """Return True when :func:`cast` supports ``source -> target`` (for checks at plan time)."""
    if source == target or (is_string(source) and is_string(target)):
        return True
    if is_interval(source) or is_interval(target):  # only to and from text (DuckDB casts no number to INTERVAL)
        return is_string(source) or is_string(target)
    if is_time(target):  # from text and TIMESTAMP (its time of day); DuckDB casts no DATE or TIMESTAMPTZ to TIME
        return is_string(source) or pa.types.is_timestamp(source) and source.tz is None
    if is_time(source):  # to text only (DuckDB casts TIME to no TIMESTAMP)
        return is_string(target)
    if is_string(target):
        return text.formats_to_string(source)
    if is_string(source):
        return text.parses_from_string(target)
    number = is_numeric(source) or is_boolean(source)
    if is_integer(target) or is_floating(target) or is_decimal(target) or is_boolean(target):
        return number
    if pa.types.is_date32(target) or pa.types.is_timestamp(target):
        return pa.types.is_date32(source) or pa.types.is_timestamp(source)
    return False


def _float_to_integer(device: Device, column: Column, dtype: pa.DataType, what: str) -> Any:
    xp = device.xp
    rounded = xp.rint(column.data.astype(xp.float64))
    bad = ~((rounded >= -_TWO_TO_63) & (rounded < _TWO_TO_63))  # also catches NaN
    raise_at_first(device, bad, column.validity, f"{what}: value is out of range")
    values = xp.where(bad, 0.0, rounded).astype(xp.int64)
    return fit_to_type(device, values, dtype, column.validity, what)


def _float_to_decimal(device: Device, column: Column, dtype: pa.DataType, what: str) -> Any:
    xp = device.xp
    scaled = round_half_away(xp, column.data.astype(xp.float64) * float(POWERS_OF_TEN[scale_of(dtype)]))
    limit = float(10**dtype.precision)
    bad = ~((scaled > -limit) & (scaled < limit))
    raise_at_first(device, bad, column.validity, f"{what}: value is out of range")
    scaled = xp.where(bad, 0.0, scaled)
    if dtype.precision <= 18:
        return scaled.astype(xp.int64)
    # Beyond 2**63 the integral float splits exactly into 64-bit words: high = floor(x / 2**64) (a power
    # of two), low = x - high * 2**64, which has no more significant bits than x and lies in [0, 2**64).
    high = xp.floor(scaled / float(2**64))
    low = scaled - high * float(2**64)
    words = xp.empty((scaled.shape[0], 2), dtype=xp.int64)
    words[:, 0] = low.astype(xp.uint64).view(xp.int64)
    words[:, 1] = high.astype(xp.int64)
    return narrowed(device, words, column.validity)


def _to_number_exact_wide(device: Device, column: Column, dtype: pa.DataType, what: str) -> Any:
    """Cast an integer, bool or decimal column to an integer or decimal type through 128-bit words."""
    xp = device.xp
    source_scale, target_scale = scale_of(column.dtype), scale_of(dtype)
    zero = xp.zeros((1, 2), dtype=xp.int64)
    words = wide_result(device, RESCALE, as_words(device, column), zero, column.validity, what,
                        left_up=max(0, target_scale - source_scale), down=max(0, source_scale - target_scale))
    return fit_words(device, words, dtype, column.validity, what)


def _to_number(device: Any, column: Column, dtype: pa.DataType, what: str) -> Any:
    xp = device.xp
    source = column.dtype
    if is_boolean(dtype):
        if is_wide(column):
            return (column.data[:, 0] != 0) | (column.data[:, 1] != 0)
        return column.data != 0
    if is_floating(dtype):
        values = as_float(xp, column).astype(physical_dtype(dtype), copy=False)
        if source == pa.float64() and dtype == pa.float32():
            raise_at_first(device, narrowed_to_infinity(xp, column.data, values), column.validity,
                           f"{what}: value is out of range")
        return values
    wide_target = is_decimal(dtype) and dtype.precision > 18 or dtype == pa.uint64()
    if not is_floating(source) and (needs_words(column) or wide_target):
        return _to_number_exact_wide(device, column, dtype, what)
    if is_integer(dtype):
        if is_floating(source):
            return _float_to_integer(device, column, dtype, what)
        values = column.data.astype(xp.int64, copy=False)
        if is_decimal(source):
            values = divide_round_half_away(xp, values, POWERS_OF_TEN[scale_of(source)])
        return fit_to_type(device, values, dtype, column.validity, what)
    if is_floating(source):
        return _float_to_decimal(device, column, dtype, what)
    return fit_to_type(device, as_scaled(device, column, scale_of(dtype), what), dtype, column.validity, what)


def _to_time(xp: Any, column: Column, dtype: pa.DataType) -> Any:
    if pa.types.is_date32(dtype):  # of a TIMESTAMP_NS the day of its rounded microseconds, as DuckDB
        return days_of(xp, as_timestamp_micros(xp, column)).astype(xp.int32)
    if pa.types.is_timestamp(column.dtype) and TICKS_PER_DAY[column.dtype.unit] > TICKS_PER_DAY[dtype.unit]:
        return _coarser_ticks(xp, column, dtype.unit)
    return time_values(xp, column, dtype.unit)


def finer_ticks_fit(xp: Any, column: Column, dtype: pa.DataType) -> Any:
    """Return where a date or timestamp column's values hold as ticks of the finer timestamp ``dtype`` (a DATE or
    TIMESTAMP as TIMESTAMP_NS: the years 1677-2262), or None when every value does (the unit is not finer).

    Why: the ticks are multiplied up in int64, which wrapped silently (``CAST(TIMESTAMP '2263-01-01' AS
    TIMESTAMP_NS)`` was a date in 1678); DuckDB raises there, and TRY_CAST gives NULL."""
    source = column.dtype
    if not pa.types.is_timestamp(dtype) or not (pa.types.is_date32(source) or pa.types.is_timestamp(source)):
        return None
    factor = TICKS_PER_DAY[dtype.unit] // (1 if pa.types.is_date32(source) else TICKS_PER_DAY[source.unit])
    if factor <= 1:
        return None
    limit = (2**63 - 1) // factor
    values = column.data.astype(xp.int64, copy=False)
    return (values <= limit) & (values >= -limit)


def _coarser_ticks(xp: Any, column: Column, unit: str) -> Any:
    """Return a timestamp column of a finer unit (TIMESTAMP_NS) as ticks of ``unit``, rounded half away from zero
    as DuckDB casts them (1500 ns is 2 us, -1500 ns -2 us; flooring gave 1 and -2, and a TIME of it was 0)."""
    values = column.data.astype(xp.int64)
    return divide_round_half_away(xp, values, TICKS_PER_DAY[column.dtype.unit] // TICKS_PER_DAY[unit])


def cast(device: Device, column: Column, dtype: pa.DataType) -> Column:
    """Return ``CAST(column AS dtype)``; NULL stays NULL."""
    source = column.dtype
    if source == dtype or (is_string(source) and is_string(dtype)):
        return column
    if unimplemented_cast(source, dtype):  # DuckDB binds it and raises for the first non-NULL row
        raise_at_first(device, device.xp.ones(len(column), dtype=bool), column.validity,
                       unimplemented_cast_message(source, dtype))
        return literal_column(device, Literal(None, dtype), len(column))
    if not can_cast(source, dtype):
        raise PlanError(f"casting {source} to {dtype} is not supported")
    if is_interval(source):
        return intervals.intervals_to_strings(device, column)
    if is_interval(dtype):
        return intervals.intervals_from_strings(device, column)
    if is_string(dtype):
        return text.to_string(device, column)
    if is_string(source):
        return text.from_string(device, column, dtype)
    xp = device.xp
    what = f"Conversion of {source} to {dtype}"
    if is_time(dtype):  # a TIMESTAMP's time of day
        micros = _coarser_ticks(xp, column, "us") if pa.types.is_timestamp(source) and \
            TICKS_PER_DAY[source.unit] > TICKS_PER_DAY["us"] else time_values(xp, column, "us")
        return Column(dtype, xp.remainder(micros, TICKS_PER_DAY["us"]), column.validity)
    if pa.types.is_date32(dtype) or pa.types.is_timestamp(dtype):
        fits = finer_ticks_fit(xp, column, dtype)
        if fits is not None:
            from gpu_engine.plans.function_translation import duckdb_type_name  # (it imports the planner's modules)

            kind = "DATE" if pa.types.is_date32(source) else "Timestamp"
            raise_at_first(device, ~fits, column.validity, f"Conversion Error: Could not convert {kind} to higher "
                           f"precision: the value is out of {duckdb_type_name(dtype) or dtype}'s range")
        return Column(dtype, _to_time(xp, column, dtype), column.validity)
    return Column(dtype, _to_number(device, column, dtype, what), column.validity)
