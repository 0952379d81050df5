"""Convert values to SQL text and parse SQL text back, as DuckDB's casts do.

Integers, decimals and dates are formatted with array arithmetic (each output
byte finds its row and computes its digit), so they stay on the device.
Parsing integers, decimals and dates runs the string kernels (once per
dictionary value for dictionary columns). Two conversions are **host round
trips**: float -> string (the shortest round-trip text, DuckDB's format, has no
simple vectorized form) and string -> float (correctly rounded parsing needs
arbitrary precision); both copy the column to the host, convert there and copy
back.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import is_boolean, is_decimal, is_floating, is_integer, is_time
from gpu_engine.device import Device
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.expressions.deferred_checks import defer_row_check, first_true_row
from gpu_engine.expressions.numeric import fit_to_type, scale_of
from gpu_engine.expressions.strings import string_validity
from gpu_engine.expressions.temporal import civil_from_days
from gpu_engine.expressions.text_on_host import (
    BC_SUFFIX, format_times, format_timestamps, parse_booleans, parse_times, parse_timestamps, parse_unsigned_bigints,
)
from gpu_engine.kernels import strings as kernels

__all__ = ["to_string", "from_string", "formats_to_string", "parses_from_string"]

_ASCII_ZERO, _ASCII_MINUS, _ASCII_POINT = 48, 45, 46


def formats_to_string(dtype: pa.DataType) -> bool:
    """Return True when :func:`to_string` can format ``dtype``."""
    return (is_integer(dtype) or is_decimal(dtype) or is_floating(dtype) or is_boolean(dtype)
            or pa.types.is_date32(dtype) or pa.types.is_timestamp(dtype) or is_time(dtype))


def parses_from_string(dtype: pa.DataType) -> bool:
    """Return True when :func:`from_string` can parse text into ``dtype``."""
    return (is_integer(dtype) or is_decimal(dtype) or is_floating(dtype) or pa.types.is_date32(dtype)
            or is_boolean(dtype) or pa.types.is_timestamp(dtype) or is_time(dtype))


# ------------------------------------------------------------------ formatting
def _pack(device: Device, widths: Any) -> tuple[Any, Any, Any]:
    """Return ``(offsets, row, position)``: for each output byte, its row and its place in that row.

    The row of a byte is found by binary search in the offsets (CuPy's
    ``repeat`` takes no device array of counts). The byte count is read back
    (one host sync): the output's size.
    """
    xp = device.xp
    rows = int(widths.shape[0])
    offsets = xp.zeros(rows + 1, dtype=xp.int64)
    if rows:
        offsets[1:] = xp.cumsum(widths.astype(xp.int64))
    total = int(device.read_scalar(offsets, -1)) if rows else 0
    byte = xp.arange(total, dtype=xp.int64)
    row = xp.searchsorted(offsets[1:], byte, side="right")
    return offsets, row, byte - offsets[row]


def _format_scaled(device: Device, values: Any, scale: int, validity: Any) -> Column:
    """Format int64 values scaled by ``10**scale`` as ``[-]digits[.fraction]`` with exactly ``scale`` decimals."""
    xp = device.xp
    values = values.astype(xp.int64, copy=False)
    negative = values < 0
    # |v| without overflowing at INT64_MIN: -(v + 1) fits, then add the 1 back unsigned.
    magnitude = xp.where(negative, -(values + 1), values).astype(xp.uint64) + negative.astype(xp.uint64)
    powers = device.asarray(np.array([10**k for k in range(20)], dtype=np.uint64))
    digits = xp.searchsorted(powers[1:], magnitude, side="right").astype(xp.int64) + 1
    int_digits = xp.maximum(digits - scale, 1)
    text_width = int_digits + (scale + 1 if scale else 0)
    widths = negative.astype(xp.int64) + text_width
    if validity is not None:
        widths = xp.where(validity, widths, 0)
    offsets, row, position = _pack(device, widths)
    k = position - negative[row].astype(xp.int64)
    row_int_digits = int_digits[row]
    exponent = xp.where(k < row_int_digits, row_int_digits - 1 - k + scale, text_width[row] - 1 - k)
    exponent = xp.clip(exponent, 0, 19)
    digit = (magnitude[row] // xp.take(powers, exponent)) % xp.uint64(10)
    chars = digit.astype(xp.uint8) + xp.uint8(_ASCII_ZERO)
    if scale:
        chars = xp.where(k == row_int_digits, xp.uint8(_ASCII_POINT), chars)
    chars = xp.where(k < 0, xp.uint8(_ASCII_MINUS), chars).astype(xp.uint8)
    return Column(pa.string(), chars, validity, offsets)


def _format_dates(device: Device, column: Column) -> Column:
    """Format date32 days as DuckDB does: ``YYYY-MM-DD``, more year digits past 9999 (``10000-01-01``) and
    ``0001-12-31 (BC)`` before year 1 (year 0 is 1 BC, -5 is 6 BC)."""
    xp = device.xp
    year, month, day = civil_from_days(xp, column.data)
    before_christ = year < 1
    shown = xp.where(before_christ, 1 - year, year)
    year_digits = 4 + sum((shown >= 10**k).astype(xp.int64) for k in range(4, 8))  # date32 spans 7 digits
    widths = year_digits + 6 + xp.where(before_christ, len(BC_SUFFIX), 0)
    if column.validity is not None:
        widths = xp.where(column.validity, widths, 0)
    offsets, row, position = _pack(device, widths)
    # Text of every row as one number: <year>0MM0DD with the zeros replaced by dashes, then the era's suffix.
    digits = year_digits[row]
    number = (shown * 1_000_000 + month * 1_000 + day)[row]
    powers = device.asarray(np.array([10**k for k in range(14)], dtype=np.int64))
    digit = (number // xp.take(powers, xp.clip(digits + 5 - position, 0, 13))) % 10
    chars = xp.where((position == digits) | (position == digits + 3), _ASCII_MINUS, digit + _ASCII_ZERO)
    suffix = device.asarray(np.frombuffer(BC_SUFFIX.encode(), dtype=np.uint8).astype(np.int64))
    chars = xp.where(position >= digits + 6, xp.take(suffix, xp.clip(position - digits - 6, 0, len(BC_SUFFIX) - 1)),
                     chars).astype(xp.uint8)
    return Column(pa.string(), chars, column.validity, offsets)


def _format_floats_on_host(device: Device, column: Column) -> Column:
    """Format floats as DuckDB does (shortest round-trip text). Host round trip."""
    values = device.to_host(column.data)
    validity = None if column.validity is None else device.to_host(column.validity)
    if values.dtype == np.float32:
        # The shortest float32 digits, laid out by Python's (= DuckDB's) positional/exponent rule.
        shortest = [float(str(np.float32(v))) for v in values.tolist()]
    else:
        shortest = values.tolist()
    texts = [None if validity is not None and not validity[i] else repr(v) for i, v in enumerate(shortest)]
    return Column.from_arrow(pa.array(texts, type=pa.string()), device)


def to_string(device: Device, column: Column) -> Column:
    """Return ``CAST(column AS VARCHAR)`` in DuckDB's text forms."""
    xp = device.xp
    dtype = column.dtype
    if is_boolean(dtype):
        dictionary = Column.from_arrow(pa.array(["false", "true"]), device)
        return Column(pa.string(), column.data.astype(xp.int32), column.validity, None, dictionary)
    if column.data.ndim == 2 or dtype == pa.uint64():
        # 128-bit decimals and uint64 past 2**63 have no int64 form: formatted exactly, on the host. Arrow writes
        # a decimal below 1e-6 in exponent form ('0E-10'); DuckDB, like format(.., 'f'), writes every digit.
        values = column.to_arrow(device)
        if is_decimal(dtype):
            values = pa.array([None if v is None else format(v, "f") for v in values.to_pylist()], pa.string())
        return Column.from_arrow(values.cast(pa.string()), device)
    if is_integer(dtype):
        return _format_scaled(device, column.data, 0, column.validity)
    if is_decimal(dtype):
        return _format_scaled(device, column.data, scale_of(dtype), column.validity)
    if pa.types.is_date32(dtype):
        return _format_dates(device, column)
    if pa.types.is_timestamp(dtype):
        return format_timestamps(device, column)
    if is_time(dtype):
        return format_times(device, column)
    if is_floating(dtype):
        return _format_floats_on_host(device, column)
    raise PlanError(f"casting {dtype} to a string is not supported")


# --------------------------------------------------------------------- parsing
def _parse_rows(device: Device, column: Column, parse: Callable[[Any, Any], tuple[Any, Any]]) -> tuple[Any, Any]:
    """Run a parse kernel on the strings (a dictionary's values once) and return per-row (values, status)."""
    if column.dictionary is None:
        return parse(column.offsets, column.data)
    values, status = parse(column.dictionary.offsets, column.dictionary.data)
    xp = device.xp
    if values.shape[0] == 0:
        return xp.zeros(len(column), dtype=values.dtype), xp.zeros(len(column), dtype=status.dtype)
    return xp.take(values, column.data), xp.take(status, column.data)


def _raise_parse_errors(device: Device, column: Column, status: Any, validity: Any, dtype: pa.DataType,
                        out_of_range: str) -> None:
    """Raise for the first valid row that did not parse, deferred like every row check (see :func:`raise_at_first`)."""
    failed = status != kernels.PARSE_OK
    if validity is not None:
        failed = failed & validity

    def parse_error(row: int) -> ExecutionError:
        from gpu_engine.kernels.gather import gather_column

        # Only the failing row comes back to the host for the message, not the whole column.
        text = gather_column(device, column, device.asarray(np.array([row], dtype=np.int64))).to_arrow(device)[0].as_py()
        if int(device.read_scalar(status, row)) == kernels.PARSE_OUT_OF_RANGE:
            return ExecutionError(f"Could not convert string {text!r} to {dtype}: {out_of_range} (row {row})")
        return ExecutionError(f"Could not convert string {text!r} to {dtype} (row {row})")

    defer_row_check(device, first_true_row(device, failed), -1, parse_error)


def _parse_floats_on_host(device: Device, column: Column, dtype: pa.DataType) -> Column:
    """Parse text to floats with Arrow (DuckDB's grammar: ``1_000`` separators between digits too). Host round trip."""
    text = pc.utf8_trim(column.to_arrow(device), characters=" \t\n\v\f\r")
    for _ in range(2):  # "1_0_0": a match takes the digit after it, so a second pass takes the rest
        text = pc.replace_substring_regex(text, r"(\d)_(\d)", r"\1\2")
    try:
        values = pc.cast(text, pa.float64())
    except pa.ArrowInvalid as error:
        raise ExecutionError(f"Could not convert string to {dtype}: {error}") from error
    return Column.from_arrow(values.cast(dtype), device)


def from_string(device: Device, column: Column, dtype: pa.DataType) -> Column:
    """Return ``CAST(column AS dtype)`` for text, raising :class:`ExecutionError` on text that does not parse."""
    if dtype == pa.uint64():  # the parse kernel holds 63 bits: UBIGINT's upper half is read on the host
        return parse_unsigned_bigints(device, column, strict=True)
    validity = string_validity(device, column)
    if is_integer(dtype) or is_decimal(dtype):
        scale = scale_of(dtype)
        values, status = _parse_rows(device, column, lambda o, c: kernels.parse_decimal(
            device, o, c, scale, prefixed=is_integer(dtype)))  # '0x1F' and '0b101' read as integers only
        # The kernel holds 64 bits: past them a decimal(p > 18) value may still fit the type (DuckDB answers).
        wide = is_decimal(dtype) and dtype.precision > 18
        _raise_parse_errors(device, column, status, validity, dtype,
                            "value needs more than the 64 bits a decimal holds here, or is out of range" if wide
                            else "value is out of range")
        return Column(dtype, fit_to_type(device, values, dtype, validity, f"cast from text to {dtype}"), validity)
    if pa.types.is_date32(dtype):
        days, status = _parse_rows(device, column, lambda o, c: kernels.parse_date(device, o, c))
        _raise_parse_errors(device, column, status, validity, dtype, "date field value out of range")
        return Column(dtype, days, validity)
    if is_floating(dtype):
        return _parse_floats_on_host(device, column, dtype)
    if is_boolean(dtype) or pa.types.is_timestamp(dtype) or is_time(dtype):
        values, parsed = (parse_booleans(device, column) if is_boolean(dtype) else
                          parse_times(device, column) if is_time(dtype) else parse_timestamps(device, column, dtype))
        status = device.xp.where(parsed, kernels.PARSE_OK, kernels.PARSE_BAD_FORMAT)
        _raise_parse_errors(device, column, status, validity, dtype, "value is out of range")
        return Column(dtype, values, validity)
    raise PlanError(f"casting a string to {dtype} is not supported")
