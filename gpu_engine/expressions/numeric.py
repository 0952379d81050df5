"""Move numbers between int64 scaled integers and floats exactly, and refuse to overflow.

Decimals are int64 values scaled by ``10**scale``; integers are decimals of
scale 0. Every int64 add, subtract and multiply runs through
:mod:`gpu_engine.kernels.checked_arithmetic`, which detects overflow in the same
pass as the arithmetic, so nothing ever wraps silently.
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
    if dtype.scale > MAX_INT64_DECIMAL_PRECISION:
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
    """Return an integer or decimal column as int64 values at ``scale``."""
    values = column.data.astype(device.xp.int64, copy=False)
    return rescale(device, values, scale_of(column.dtype), scale, column.validity, what)


def as_float(xp: Any, column: Column) -> Any:
    """Return a numeric column as float64 (decimals divided by ``10**scale``, as DuckDB does)."""
    values = column.data.astype(xp.float64)
    scale = scale_of(column.dtype)
    if scale:
        values = values / float(POWERS_OF_TEN[scale])
    return values


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
