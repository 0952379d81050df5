"""Evaluate ``TRY_CAST(x AS type)``: CAST, except that a value that does not convert becomes NULL.

How: first find the rows whose value converts (text that parses, a number
within the target's range), then run the ordinary :func:`~gpu_engine.expressions.cast.cast`
with the other rows marked NULL. CAST checks only valid rows, so it raises for
none of them, and every row that converts gets exactly CAST's value (DuckDB's
rounding and parsing rules included: ``TRY_CAST('2.5' AS INTEGER)`` is 3).
The masks are computed on the device from the same parse kernels CAST uses,
except for text to floats (parsed by pyarrow on the host, as CAST does),
128-bit sources (decimals wider than 18 digits, uint64), checked on the host
value by value, and text to decimals wider than 18 digits, parsed exactly on
the host (CAST's device parse holds 18 digits and raises past them). Between types with no conversion at all
(a number to DATE, DATE to a number) every row is NULL, as in DuckDB (its ``TryVectorNullCast``).
"""

from __future__ import annotations

import dataclasses
import decimal
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import (
    is_boolean, is_decimal, is_floating, is_integer, is_interval, is_string, is_time, physical_dtype,
)
from gpu_engine.device import Device
from gpu_engine.expressions.cast import can_cast, cast, finer_ticks_fit
from gpu_engine.expressions.intervals import intervals_from_strings
from gpu_engine.expressions.literals import literal_column
from gpu_engine.expressions.numeric import (
    POWERS_OF_TEN, divide_round_half_away, narrowed_to_infinity, needs_words, round_half_away, scale_of,
)
from gpu_engine.expressions.strings import string_validity
from gpu_engine.expressions.text import _parse_rows
from gpu_engine.expressions.text_on_host import (
    parse_booleans, parse_times, parse_timestamps, parse_unsigned_bigints, parse_wide_decimals,
)
from gpu_engine.kernels import strings as kernels
from gpu_engine.plans.expressions import Literal

__all__ = ["try_cast"]

#: Text CAST parses as a float (DuckDB's grammar: digits with ``_`` separators, a point, an exponent, inf/nan).
_FLOAT_TEXT = r"^\s*[+-]?(?:(?:\d+(?:_\d+)*\.?(?:\d+(?:_\d+)*)?|\.\d+(?:_\d+)*)(?:[eE][+-]?\d+)?|inf|infinity|nan)\s*$"


def try_cast(device: Device, column: Column, dtype: pa.DataType) -> Column:
    """Return ``TRY_CAST(column AS dtype)``: NULL where the value does not convert (and where it is NULL)."""
    source = column.dtype
    if not can_cast(source, dtype):  # no conversion between the types (a number to DATE): NULL, as DuckDB
        return literal_column(device, Literal(None, dtype), len(column))
    if is_string(source) and is_decimal(dtype) and dtype.precision > 18:
        return parse_wide_decimals(device, column, dtype)  # CAST's parse holds 18 digits (it raises past them)
    if is_string(source) and dtype == pa.uint64():
        return parse_unsigned_bigints(device, column, strict=False)  # the kernel's parse holds 63 bits
    if is_string(source) and is_interval(dtype):
        return intervals_from_strings(device, column, unread_as_null=True)  # parsed on the host, once
    validity = string_validity(device, column) if is_string(source) else column.validity
    ok = _converts(device, column, dtype)
    if ok is not None:
        validity = ok if validity is None else validity & ok
        column = dataclasses.replace(column, validity=validity)
    return cast(device, column, dtype)


def _converts(device: Device, column: Column, dtype: pa.DataType) -> Any:
    """Return a bool array: the rows whose value CAST converts to ``dtype``; None when every row does."""
    source = column.dtype
    xp = device.xp
    if is_string(source) and (is_boolean(dtype) or pa.types.is_timestamp(dtype) or is_time(dtype)):
        return (parse_booleans(device, column) if is_boolean(dtype) else parse_times(device, column)
                if is_time(dtype) else parse_timestamps(device, column, dtype))[1]
    if source == dtype or is_string(dtype) or is_boolean(dtype):
        return None
    if pa.types.is_timestamp(dtype) and not is_string(source):
        return finer_ticks_fit(xp, column, dtype)
    if is_string(source):
        if is_integer(dtype) or is_decimal(dtype):
            values, status = _parse_rows(device, column, lambda o, c: kernels.parse_decimal(
                device, o, c, scale_of(dtype), prefixed=is_integer(dtype)))
            return (status == kernels.PARSE_OK) & _fits(xp, values, dtype)
        if pa.types.is_date32(dtype):
            _, status = _parse_rows(device, column, lambda o, c: kernels.parse_date(device, o, c))
            return status == kernels.PARSE_OK
        if is_floating(dtype):
            text = column.to_arrow(device)
            matches = pc.match_substring_regex(text, _FLOAT_TEXT, ignore_case=True).fill_null(False)
            return device.asarray(np.asarray(matches.to_numpy(zero_copy_only=False), dtype=bool))
        return None
    if source == pa.float64() and dtype == pa.float32():
        return ~narrowed_to_infinity(xp, column.data, column.data.astype(xp.float32))
    if not (is_integer(dtype) or is_decimal(dtype)) or is_boolean(source):
        return None  # to floats, dates and timestamps every number or time converts (or CAST refuses the plan)
    if needs_words(column) or dtype == pa.uint64() or (is_decimal(dtype) and dtype.precision > 18):
        return _converts_on_host(device, column, dtype)
    if is_floating(source):
        data = column.data.astype(xp.float64)
        if is_integer(dtype):
            return _fits_float(xp, xp.rint(data), dtype)
        scaled = round_half_away(xp, data * float(POWERS_OF_TEN[scale_of(dtype)]))
        limit = float(10**dtype.precision)
        return (scaled > -limit) & (scaled < limit)
    values = column.data.astype(xp.int64, copy=False)
    source_scale, target_scale = scale_of(source), scale_of(dtype)
    if is_integer(dtype):
        return _fits(xp, divide_round_half_away(xp, values, POWERS_OF_TEN[source_scale]), dtype)
    if target_scale < source_scale:
        return _fits(xp, divide_round_half_away(xp, values, POWERS_OF_TEN[source_scale - target_scale]), dtype)
    digits = dtype.precision - (target_scale - source_scale)  # the digits the unscaled value may have
    if digits >= 19:
        return None
    if digits <= 0:
        return values == 0
    return (values > -POWERS_OF_TEN[digits]) & (values < POWERS_OF_TEN[digits])


def _fits(xp: Any, values: Any, dtype: pa.DataType) -> Any:
    """Return where int64 ``values`` (scaled for a decimal) fit ``dtype``."""
    if is_decimal(dtype):
        if dtype.precision > 18:
            return xp.ones(values.shape[0], dtype=bool)
        limit = POWERS_OF_TEN[dtype.precision]
        return (values > -limit) & (values < limit)
    info = np.iinfo(physical_dtype(dtype))
    return (values >= max(int(info.min), -(2**63))) & (values <= min(int(info.max), 2**63 - 1))


def _fits_float(xp: Any, rounded: Any, dtype: pa.DataType) -> Any:
    """Return where integral floats ``rounded`` fit the integer ``dtype`` (NaN never does)."""
    info = np.iinfo(physical_dtype(dtype))
    low, high = float(max(int(info.min), -(2**63))), float(min(int(info.max), 2**63 - 1))
    if high >= 2.0**63:
        return (rounded >= low) & (rounded < 2.0**63)
    return (rounded >= low) & (rounded <= high)


def _converts_on_host(device: Device, column: Column, dtype: pa.DataType) -> Any:
    """Check 128-bit values (and targets) one by one on the host with exact decimal arithmetic."""
    values = column.to_arrow(device).to_pylist()
    if is_integer(dtype):
        info = np.iinfo(physical_dtype(dtype))
        low, high, scale = int(info.min), int(info.max), 0
    else:
        scale = scale_of(dtype)
        high = 10**dtype.precision - 1
        low = -high
    quantum = decimal.Decimal(1).scaleb(-scale)
    context = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_UP)
    flags = []
    for value in values:
        if value is None:
            flags.append(False)
            continue
        number = decimal.Decimal(value) if not isinstance(value, float) else decimal.Decimal(repr(value))
        if not number.is_finite():
            flags.append(False)
            continue
        if is_integer(dtype) and isinstance(value, float):
            scaled = int(number.to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
        else:
            scaled = int(number.quantize(quantum, context=context).scaleb(scale, context=context))
        flags.append(low <= scaled <= high)
    return device.asarray(np.array(flags, dtype=bool))


