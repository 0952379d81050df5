"""Move numbers between int64 scaled integers and floats exactly, and refuse to overflow.

Decimals are int64 values scaled by ``10**scale``; integers are decimals of
scale 0. Every int64 add, subtract and multiply runs through
:mod:`gpu_engine.kernels.checked_arithmetic`, which detects overflow in the same
pass as the arithmetic, so nothing ever wraps silently.

A decimal column whose values do not all fit int64 is *wide*: its ``data`` is
an ``(n, 2)`` int64 array of (low, high) words, Arrow's decimal128 buffer (see
:mod:`gpu_engine.kernels.decimal128`). Why per column and not per type: a
decimal(38, s) sum or product almost always fits int64, and a narrow column
keeps every other operator (sort, hash, join, exchange) on its int64 fast path;
results are narrowed back whenever every value fits (:func:`narrowed`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import MAX_INT64_DECIMAL_PRECISION, is_decimal, is_floating, is_integer, physical_dtype
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.expressions.deferred_checks import defer_row_check, first_true_row
from gpu_engine.kernels.checked_arithmetic import ADD, MULTIPLY, SUBTRACT, checked_arithmetic_on_device

__all__ = [
    "POWERS_OF_TEN",
    "scale_of",
    "as_float",
    "narrowed_to_infinity",
    "as_scaled",
    "rescale",
    "add_checked",
    "subtract_checked",
    "multiply_checked",
    "truncated_remainder",
    "divide_round_half_away",
    "round_half_away",
    "fit_to_type",
    "raise_at_first",
    "is_wide",
    "needs_words",
    "as_words",
    "narrowed",
    "narrow_values",
    "constant_words",
    "fit_words",
    "wide_result",
    "integer_division_words",
]

#: Powers of ten that fit in int64.
POWERS_OF_TEN = tuple(10**k for k in range(19))



def scale_of(dtype: pa.DataType) -> int:
    """Return the decimal scale of a type; integers and bools count as scale 0.

    Raises
    ------
    PlanError
        For a scale above 18: such a decimal has no nonzero value in int64.
    """
    if not is_decimal(dtype):
        return 0
    if dtype.scale > MAX_INT64_DECIMAL_PRECISION:  # 128-bit words could, but int64 scale factors cannot
        raise PlanError(f"{dtype} has a scale above {MAX_INT64_DECIMAL_PRECISION}, which 64-bit decimals cannot hold")
    return dtype.scale


def raise_at_first(device: Any, bad: Any, validity: Any, message: str) -> None:
    """Raise :class:`ExecutionError` naming the first valid row where ``bad`` holds, if any.

    The check is deferred to the enclosing
    :func:`~gpu_engine.expressions.deferred_checks.checks_read_together` block,
    so one host sync covers all of an evaluation's checks.
    """
    if validity is not None:
        bad = bad & validity
    defer_row_check(device, first_true_row(device, bad), -1,
                    lambda row: ExecutionError(f"{message} (first at row {row})"))


def _checked(device: Any, op: int, left: Any, right: Any, validity: Any, what: str) -> Any:
    values, first_bad = checked_arithmetic_on_device(device, op, left, right, validity)
    defer_row_check(device, first_bad, values.shape[0], lambda row: ExecutionError(
        f"Overflow in {what}: the result does not fit in 64-bit integers (first at row {row})"))
    return values


def add_checked(device: Any, left: Any, right: Any, validity: Any, what: str) -> Any:
    """Return ``left + right`` in int64, raising where a valid row overflows."""
    return _checked(device, ADD, left, right, validity, what)


def subtract_checked(device: Any, left: Any, right: Any, validity: Any, what: str) -> Any:
    """Return ``left - right`` in int64, raising where a valid row overflows."""
    return _checked(device, SUBTRACT, left, right, validity, what)


def multiply_checked(device: Any, left: Any, right: Any, validity: Any, what: str) -> Any:
    """Return ``left * right`` in int64 (``right`` an array or a Python int), raising on overflow."""
    return _checked(device, MULTIPLY, left, right, validity, what)


def truncated_remainder(xp: Any, dividend: Any, divisor: Any) -> Any:
    """Return C's ``dividend % divisor`` (sign of the dividend) for int64, exactly; divisors must be non-zero.

    ``xp.fmod`` would do, but CuPy computes integer fmod through float64, which
    is inexact beyond 2**53; the floor remainder (sign of the divisor) is exact
    everywhere and moves to C's convention with one adjustment that cannot overflow.
    """
    floor_remainder = xp.remainder(dividend, divisor)
    wrong_sign = (floor_remainder != 0) & ((floor_remainder < 0) != (dividend < 0))
    return xp.where(wrong_sign, floor_remainder - divisor, floor_remainder)


def divide_round_half_away(xp: Any, values: Any, power: int) -> Any:
    """Return ``values / power`` rounded half away from zero (``power`` a positive power of ten)."""
    if power == 1:
        return values
    remainder = truncated_remainder(xp, values, np.int64(power))
    quotient = (values - remainder) // xp.int64(power)
    half = power // 2
    return quotient + (remainder >= half).astype(xp.int64) - (remainder <= -half).astype(xp.int64)


def round_half_away(xp: Any, values: Any) -> Any:
    """Return floats rounded to integral values, halves away from zero (``xp.round`` rounds to even)."""
    whole = xp.trunc(values)
    fraction = values - whole
    return whole + xp.where(fraction >= 0.5, 1.0, 0.0) - xp.where(fraction <= -0.5, 1.0, 0.0)


def rescale(device: Any, values: Any, from_scale: int, to_scale: int, validity: Any, what: str) -> Any:
    """Return int64 scaled values moved from one decimal scale to another (up: checked; down: rounded)."""
    if to_scale > from_scale:
        return multiply_checked(device, values, POWERS_OF_TEN[to_scale - from_scale], validity, what)
    if to_scale < from_scale:
        return divide_round_half_away(device.xp, values, POWERS_OF_TEN[from_scale - to_scale])
    return values


def as_scaled(device: Any, column: Column, scale: int, what: str) -> Any:
    """Return an integer or decimal column as int64 values at ``scale`` (raising where a value needs 128 bits)."""
    values = narrow_values(device, column, what)
    return rescale(device, values, scale_of(column.dtype), scale, column.validity, what)


def is_wide(column: Column) -> bool:
    """Return True for a decimal column held as (low, high) words (see the module docstring)."""
    return getattr(column.data, "ndim", 1) == 2


def needs_words(*columns: Column) -> bool:
    """Return True when exact arithmetic on these columns must run on 128-bit words.

    Wide decimals need it, and so does uint64: its values from 2**63 up have no
    int64 form (``astype`` would wrap them).
    """
    return any(is_wide(c) or c.dtype == pa.uint64() for c in columns)


def as_words(device: Any, column: Column) -> Any:
    """Return an integer, bool or decimal column's values as ``(n, 2)`` int64 (low, high) words."""
    xp = device.xp
    if is_wide(column):
        return column.data
    words = xp.empty((len(column), 2), dtype=xp.int64)
    if column.dtype == pa.uint64():
        words[:, 0] = column.data.view(xp.int64)
        words[:, 1] = 0
    else:
        low = column.data.astype(xp.int64, copy=False)
        words[:, 0] = low
        words[:, 1] = low >> 63
    return words


def _fits_int64(xp: Any, words: Any) -> Any:
    return words[:, 1] == (words[:, 0] >> 63)


def narrowed(device: Any, words: Any, validity: Any) -> Any:
    """Return ``words`` as a column's data: int64 values when every valid row fits int64, else the words."""
    xp = device.xp
    fits = _fits_int64(xp, words)
    if validity is not None:
        fits = fits | ~validity
    if words.shape[0] == 0 or bool(xp.all(fits)):
        return xp.ascontiguousarray(words[:, 0])
    return words


def narrow_values(device: Any, column: Column, what: str) -> Any:
    """Return a column's values as int64, raising :class:`ExecutionError` where a valid value needs more bits."""
    xp = device.xp
    if column.dtype == pa.uint64():
        raise_at_first(device, column.data >= np.uint64(2**63), column.validity,
                       f"{what}: a uint64 value does not fit int64")
        return column.data.astype(xp.int64)
    if not is_wide(column):
        return column.data.astype(xp.int64, copy=False)
    raise_at_first(device, ~_fits_int64(xp, column.data), column.validity,
                   f"{what}: a value of {column.dtype} needs more than 64 bits here")
    return xp.ascontiguousarray(column.data[:, 0])


def as_float(xp: Any, column: Column) -> Any:
    """Return a numeric column as float64 (decimals divided by ``10**scale``, as DuckDB does)."""
    if is_wide(column):
        # high * 2**64 + low with low read *signed* (high corrected by its sign bit): a value that fits
        # int64 converts with one rounding instead of cancelling -2**64 against ~2**64.
        words = column.data
        low = words[:, 0]
        high = words[:, 1] + (low < 0).astype(xp.int64)
        values = high.astype(xp.float64) * float(2**64) + low.astype(xp.float64)
    else:
        values = column.data.astype(xp.float64)
    scale = scale_of(column.dtype)
    if scale:
        values = values / float(POWERS_OF_TEN[scale])
    return values


def narrowed_to_infinity(xp: Any, doubles: Any, floats: Any) -> Any:
    """Return where a finite DOUBLE became an infinite FLOAT: DuckDB's cast fails there ("out of range for the
    destination type FLOAT"; TRY_CAST gives NULL), while it rounds every other double to the nearest float (just
    above FLOAT's largest value to it) and keeps NaN and infinities."""
    return xp.isinf(floats) & xp.isfinite(doubles)


def fit_to_type(device: Any, values: Any, dtype: pa.DataType, validity: Any, what: str) -> Any:
    """Return int64 ``values`` in the physical type of ``dtype``, raising where a valid row does not fit.

    Integer types must hold the value; ``decimal(p, s)`` with ``p <= 18`` must
    have fewer than ``p`` digits, as DuckDB checks.
    """
    if is_decimal(dtype):
        if dtype.precision <= 18:
            limit = POWERS_OF_TEN[dtype.precision]
            raise_at_first(device, (values >= limit) | (values <= -limit), validity,
                           f"{what}: value is out of range for {dtype}")
        return values
    if is_integer(dtype):
        target = physical_dtype(dtype)
        if target != np.dtype(np.int64):
            info = np.iinfo(target)
            raise_at_first(device, (values < int(max(info.min, -(2**63)))) | (values > int(min(info.max, 2**63 - 1))),
                           validity, f"{what}: value is out of range for {dtype}")
        return values.astype(target, copy=False)
    if is_floating(dtype):
        return values.astype(physical_dtype(dtype))
    raise TypeError(f"cannot store integers as {dtype}")


def constant_words(device: Any, value: int) -> Any:
    """Return a ``(1, 2)`` word array holding one signed 128-bit integer (broadcast by the kernels)."""
    low = value & (2**64 - 1)
    high = (value >> 64) & (2**64 - 1)
    words = np.array([[low, high]], dtype=np.uint64).view(np.int64)
    return device.asarray(words)


def fit_words(device: Any, words: Any, dtype: pa.DataType, validity: Any, what: str) -> Any:
    """Return 128-bit ``words`` as the data of a ``dtype`` column, raising where a valid row does not fit.

    Decimals must have fewer than ``p`` digits (as DuckDB's casts check) and
    stay wide only where a value needs it; integers must fit their type (uint64
    up to ``2**64 - 1``).
    """
    from gpu_engine.kernels.decimal128 import COMPARE, wide_binary

    xp = device.xp
    if is_decimal(dtype):
        if dtype.precision < 38:
            limit = 10**dtype.precision
            above, _ = wide_binary(device, COMPARE, words, constant_words(device, limit - 1))
            below, _ = wide_binary(device, COMPARE, words, constant_words(device, 1 - limit))
            raise_at_first(device, (above[:, 0] > 0) | (below[:, 0] < 0), validity,
                           f"{what}: value is out of range for {dtype}")
        if dtype.precision > MAX_INT64_DECIMAL_PRECISION:
            return narrowed(device, words, validity)
        return xp.ascontiguousarray(words[:, 0])
    if dtype == pa.uint64():
        raise_at_first(device, words[:, 1] != 0, validity, f"{what}: value is out of range for {dtype}")
        return xp.ascontiguousarray(words[:, 0]).view(xp.uint64)
    if is_integer(dtype):
        raise_at_first(device, ~_fits_int64(xp, words), validity, f"{what}: value is out of range for {dtype}")
        return fit_to_type(device, xp.ascontiguousarray(words[:, 0]), dtype, validity, what)
    raise TypeError(f"cannot store 128-bit integers as {dtype}")


def wide_result(device: Any, op: int, left: Any, right: Any, validity: Any, what: str, left_up: int = 0,
                right_up: int = 0, down: int = 0) -> Any:
    """Return the words of one :func:`~gpu_engine.kernels.decimal128.wide_binary` op, raising where it overflowed."""
    from gpu_engine.kernels.decimal128 import wide_binary

    words, status = wide_binary(device, op, left, right, left_up, right_up, down)
    raise_at_first(device, status != 0, validity, f"Overflow in {what}: the result does not fit in 38 digits")
    return words


def _sign_and_magnitude(xp: Any, column: Column) -> tuple[Any, Any]:
    """Return an integer column's (negative, magnitude as uint64): every int64 and uint64 magnitude fits uint64
    (``-(-2**63)`` wraps to itself, which read unsigned is 2**63)."""
    if column.dtype == pa.uint64():
        return xp.zeros(len(column), dtype=xp.bool_), column.data
    values = column.data.astype(xp.int64, copy=False)
    negative = values < 0
    return negative, xp.where(negative, -values, values).astype(xp.uint64)


def _signed_words(xp: Any, negative: Any, magnitude: Any) -> Any:
    """Return ``-magnitude`` where ``negative``, else ``magnitude``, as (low, high) words (magnitudes are uint64)."""
    words = xp.empty((magnitude.shape[0], 2), dtype=xp.int64)
    words[:, 0] = xp.where(negative, ~magnitude + np.uint64(1), magnitude).view(xp.int64)
    words[:, 1] = xp.where(negative & (magnitude != 0), -1, 0)
    return words


def integer_division_words(device: Any, left: Column, right: Column, validity: Any, what: str) -> tuple[Any, Any]:
    """Return the (quotient, remainder) words of integer columns, truncated toward zero as DuckDB's ``//`` and
    ``%`` are (the remainder takes the dividend's sign); a zero divisor in a valid row raises DuckDB's error.

    Why on magnitudes: a uint64 beside a signed integer is DuckDB's HUGEINT (``UBIGINT_MAX // -1`` is
    ``-(2**64 - 1)``), whose operands have no common 64-bit type, but every magnitude fits uint64, where the
    division is exact; the signs are put back as 128-bit words (:func:`fit_words` stores them in the result type).
    """
    xp = device.xp
    left_negative, dividend = _sign_and_magnitude(xp, left)
    right_negative, divisor = _sign_and_magnitude(xp, right)
    by_zero = divisor == 0
    raise_at_first(device, by_zero, validity, f"Division by zero in {what}")
    divisor = xp.where(by_zero, np.uint64(1), divisor)
    quotient = _signed_words(xp, left_negative ^ right_negative, dividend // divisor)
    return quotient, _signed_words(xp, left_negative, dividend % divisor)
