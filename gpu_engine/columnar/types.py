"""Map Arrow logical types to the physical buffers the engine keeps on a device.

The engine's type system is Arrow's: a plan's schemas and an expression's
``dtype`` are ``pyarrow.DataType`` objects. This module decides how each is laid
out in device memory, so every kernel sees plain fixed-width arrays:

=====================  ==========================================================
logical type           physical buffer
=====================  ==========================================================
int8 … int64, uint*    the same NumPy/CuPy dtype
float32, float64       the same
bool                   ``bool_`` (one byte per row, not Arrow's bit-packing)
date32                 ``int32`` days since the epoch
timestamp[unit, tz]    ``int64`` in that unit
time64[us]             TIME: ``int64`` microseconds of the day (time32 and
                       time64[ns] inputs become time64[us], as DuckDB reads them)
decimal128(p, s)       ``int64`` scaled integers; a column of p > 18 whose values
                       do not all fit int64 holds ``(n, 2)`` int64 words (low,
                       high: Arrow's decimal128 buffer), see
                       :mod:`gpu_engine.expressions.numeric`
string                 ``uint8`` chars + ``int64`` offsets (utf8, large_utf8 and
                       string_view input all become ``pa.string()``)
month_day_nano         INTERVAL (DuckDB's): ``(n, 3)`` int64 words — months, days,
interval               microseconds (Arrow's nanoseconds / 1000), see
                       :mod:`gpu_engine.expressions.intervals`
=====================  ==========================================================

Validity is a per-row ``bool_`` array (True = valid), not a bitmap: kernels then
read validity with the same index as the values, which keeps both twins simple
and coalesced on the GPU; conversion to Arrow's bitmap happens once at the edge.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = [
    "normalize_type",
    "physical_dtype",
    "is_string",
    "is_decimal",
    "is_integer",
    "is_floating",
    "is_numeric",
    "is_temporal",
    "is_boolean",
    "is_interval",
    "INTERVAL",
    "TIMESTAMPTZ",
    "is_zoned",
    "TIME",
    "is_time",
    "MAX_INT64_DECIMAL_PRECISION",
]

#: The engine's INTERVAL type: Arrow's month_day_nano interval, held as months, days and microseconds.
INTERVAL = pa.month_day_nano_interval()

#: The engine's TIMESTAMP WITH TIME ZONE (DuckDB's TIMESTAMPTZ): UTC microseconds, as DuckDB stores it. The
#: Session's time zone is UTC (DuckDB's default setting): it governs text, casts to and from TIMESTAMP, DATE and
#: text, date_trunc and extract, so each of those reads the UTC instant's fields. An Arrow input of another zone
#: name (``timestamp[ms, tz=Europe/Berlin]``) holds UTC instants too and keeps its type.
TIMESTAMPTZ = pa.timestamp("us", tz="UTC")

#: The engine's TIME (DuckDB's): microseconds since midnight, ``00:00:00`` to ``24:00:00``.
TIME = pa.time64("us")

MAX_INT64_DECIMAL_PRECISION = 18

_FIXED = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint8(): np.uint8,
    pa.uint16(): np.uint16,
    pa.uint32(): np.uint32,
    pa.uint64(): np.uint64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
    pa.bool_(): np.bool_,
    pa.date32(): np.int32,
}


def normalize_type(dtype: pa.DataType) -> pa.DataType:
    """Return the logical type the engine uses for an Arrow input type.

    Raises
    ------
    TypeError
        For types the engine does not support (nested types, binary, …).
    """
    if pa.types.is_dictionary(dtype):
        return normalize_type(dtype.value_type)
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
        return pa.string()
    if pa.types.is_decimal(dtype):
        return pa.decimal128(min(dtype.precision, 38), dtype.scale)
    if pa.types.is_timestamp(dtype) and dtype.tz is not None and dtype.tz != "UTC":
        # an instant labelled with another zone ('America/New_York', '+02:00') is the same UTC instant: DuckDB reads
        # every zoned Arrow timestamp as a TIMESTAMPTZ, shown in its session's zone (the engine's: UTC)
        return pa.timestamp(dtype.unit, tz="UTC")
    if pa.types.is_timestamp(dtype) or dtype in _FIXED or dtype == INTERVAL:
        return dtype
    if pa.types.is_date64(dtype):
        return pa.date32()
    if pa.types.is_time(dtype):
        return TIME
    raise TypeError(f"unsupported column type {dtype}")


def physical_dtype(dtype: pa.DataType) -> np.dtype:
    """Return the dtype of the values buffer for a logical type (chars for strings)."""
    if dtype in _FIXED:
        return np.dtype(_FIXED[dtype])
    if pa.types.is_timestamp(dtype) or pa.types.is_decimal(dtype) or dtype == INTERVAL or dtype == TIME:
        return np.dtype(np.int64)
    if pa.types.is_string(dtype):
        return np.dtype(np.uint8)
    raise TypeError(f"unsupported column type {dtype}")


def is_string(dtype: pa.DataType) -> bool:
    """Return True for the engine's string type."""
    return pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype)


def is_decimal(dtype: pa.DataType) -> bool:
    """Return True for decimal types."""
    return pa.types.is_decimal(dtype)


def is_integer(dtype: pa.DataType) -> bool:
    """Return True for signed and unsigned integer types."""
    return pa.types.is_integer(dtype)


def is_floating(dtype: pa.DataType) -> bool:
    """Return True for float32/float64."""
    return pa.types.is_floating(dtype)


def is_numeric(dtype: pa.DataType) -> bool:
    """Return True for integers, floats and decimals."""
    return is_integer(dtype) or is_floating(dtype) or is_decimal(dtype)


def is_temporal(dtype: pa.DataType) -> bool:
    """Return True for date32 and timestamps."""
    return pa.types.is_date32(dtype) or pa.types.is_timestamp(dtype)


def is_zoned(dtype: pa.DataType) -> bool:
    """Return True for a TIMESTAMP WITH TIME ZONE (an Arrow timestamp with a zone)."""
    return pa.types.is_timestamp(dtype) and dtype.tz is not None


def is_time(dtype: pa.DataType) -> bool:
    """Return True for the TIME type (a time of day)."""
    return dtype == TIME


def is_interval(dtype: pa.DataType) -> bool:
    """Return True for the INTERVAL type (Arrow's month_day_nano interval)."""
    return dtype == INTERVAL


def is_boolean(dtype: pa.DataType) -> bool:
    """Return True for bool."""
    return pa.types.is_boolean(dtype)
