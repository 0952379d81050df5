"""Evaluate + - * / % and unary minus on numbers with DuckDB's result types.

The IR already carries DuckDB's result type; this module computes in it.
Float results (any float operand, and ``/`` always) use IEEE arithmetic, as
DuckDB 2 does: ``x / 0`` is ±inf and ``0 / 0`` NaN. Integer and decimal results
are exact int64 scaled integers: add/sub rescale both operands to the result
scale, mul multiplies at scale ``s1 + s2`` and rounds (half away from zero) to
the result scale if that is smaller, mod works at the result scale with C's
sign rule (the dividend's sign). An exact remainder by zero raises, as DuckDB's
default does (a float one is NaN). Every int64 result is overflow-checked and
then checked against its type (INTEGER * INTEGER raises past INT32, as in
DuckDB); nothing wraps.

Results of decimal(p > 18) (sums' decimal(38), products such as TPC-H Q11's),
and any operand that is wide or uint64, are computed on 128-bit words
(:mod:`gpu_engine.kernels.decimal128`) and checked at 38 digits; the result is
narrowed back to int64 when every value fits (see
:mod:`gpu_engine.expressions.numeric`). Narrower results keep the one-pass
int64 kernels: the fast path is unchanged.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import is_decimal, is_floating, is_integer, is_numeric, physical_dtype
from gpu_engine.device import Device
from gpu_engine.errors import PlanError
from gpu_engine.expressions.nulls import and_validity
from gpu_engine.expressions.numeric import (
    add_checked, as_float, as_scaled, as_words, fit_to_type, fit_words, integer_division_words, multiply_checked,
    needs_words, raise_at_first, rescale, scale_of, subtract_checked, truncated_remainder, wide_result,
)
from gpu_engine.kernels import decimal128
from gpu_engine.columnar.types import MAX_INT64_DECIMAL_PRECISION

__all__ = ["arithmetic", "negate"]

_NAMES = {"add": "addition", "sub": "subtraction", "mul": "multiplication", "div": "division", "mod": "modulo"}
_INT64_MIN = -(2**63)


def _float_arithmetic(xp: Any, op: str, left: Any, right: Any) -> Any:
    if op == "add":
        return left + right
    if op == "sub":
        return left - right
    if op == "mul":
        return left * right
    if op == "div":
        return left / right
    return xp.fmod(left, right)


def _exact_arithmetic(device: Device, op: str, left: Column, right: Column, dtype: pa.DataType,
                      validity: Any) -> tuple[Any, Any]:
    """Return ``(int64 values at dtype's scale, validity)`` for an integer or decimal result."""
    xp = device.xp
    scale = scale_of(dtype)
    what = f"{_NAMES[op]} of {dtype}"
    if op == "mul":
        product = multiply_checked(device, left.data.astype(xp.int64, copy=False), right.data.astype(xp.int64, copy=False),
                                   validity, what)
        return rescale(device, product, scale_of(left.dtype) + scale_of(right.dtype), scale, validity, what), validity
    left_values = as_scaled(device, left, scale, what)
    right_values = as_scaled(device, right, scale, what)
    if op == "add":
        return add_checked(device, left_values, right_values, validity, what), validity
    if op == "sub":
        return subtract_checked(device, left_values, right_values, validity, what), validity
    if op == "mod":
        by_zero = right_values == 0
        raise_at_first(device, by_zero, validity, f"Division by zero in {what}")  # DuckDB raises, never NULL
        # x % -1 is 0 (INT64_MIN's too, as in DuckDB); dividing by 1 instead keeps INT64_MIN % -1 (a trap in C) out.
        divisor = xp.where(by_zero | (right_values == -1), 1, right_values)
        return truncated_remainder(xp, left_values, divisor), validity
    raise PlanError(f"{_NAMES[op]} cannot produce {dtype}; '/' always gives a float")


_WIDE_OPS = {"add": decimal128.ADD, "sub": decimal128.SUBTRACT, "mul": decimal128.MULTIPLY}


def _is_wide_type(dtype: pa.DataType) -> bool:
    return is_decimal(dtype) and dtype.precision > MAX_INT64_DECIMAL_PRECISION


def _needs_128_bits(op: str, dtype: pa.DataType) -> bool:
    """Return True when a result of ``dtype`` may exceed int64 (narrow operands' sum of decimal(19) cannot)."""
    if op == "mod" or not _is_wide_type(dtype):
        return False
    return not (op in ("add", "sub") and dtype.precision <= MAX_INT64_DECIMAL_PRECISION + 1)


def _wide_arithmetic(device: Device, op: str, left: Column, right: Column, dtype: pa.DataType, validity: Any) -> Any:
    """Return ``left op right`` on 128-bit words as the data of a ``dtype`` column (checked at 38 digits)."""
    what = f"{_NAMES[op]} of {dtype}"
    if op not in _WIDE_OPS:
        raise PlanError(f"{_NAMES[op]} of {left.dtype} and {right.dtype} needs 128-bit values, "
                        "which only + - * support; CAST the operands to a decimal of 18 digits or fewer")
    scale, left_scale, right_scale = scale_of(dtype), scale_of(left.dtype), scale_of(right.dtype)
    left_words, right_words = as_words(device, left), as_words(device, right)
    if op == "mul":
        words = wide_result(device, _WIDE_OPS[op], left_words, right_words, validity, what,
                            down=left_scale + right_scale - scale)
    else:
        words = wide_result(device, _WIDE_OPS[op], left_words, right_words, validity, what,
                            left_up=scale - left_scale, right_up=scale - right_scale)
    return fit_words(device, words, dtype, validity, what)


def arithmetic(device: Device, op: str, left: Column, right: Column, dtype: pa.DataType) -> Column:
    """Return ``left op right`` of type ``dtype``; NULL where either side is NULL."""
    xp = device.xp
    if not (is_numeric(left.dtype) and is_numeric(right.dtype)):
        raise PlanError(f"{_NAMES.get(op, op)} needs numbers, got {left.dtype} and {right.dtype}")
    validity = and_validity(left.validity, right.validity)
    if is_floating(dtype):
        # Operands convert to the result type first, so float32 math stays float32 as in DuckDB.
        physical = physical_dtype(dtype)
        left_values = as_float(xp, left).astype(physical, copy=False)
        right_values = as_float(xp, right).astype(physical, copy=False)
        values = _float_arithmetic(xp, op, left_values, right_values)
        return Column(dtype, values.astype(physical, copy=False), validity)
    if not (is_integer(dtype) or is_decimal(dtype)) or is_floating(left.dtype) or is_floating(right.dtype):
        raise PlanError(f"{_NAMES.get(op, op)} of {left.dtype} and {right.dtype} cannot produce {dtype}")
    if op == "mod" and needs_words(left, right) and is_integer(left.dtype) and is_integer(right.dtype):
        # UBIGINT % an integer (UBIGINT or HUGEINT): exact on magnitudes, which the 128-bit kernel's + - * lack
        _quotient, remainder = integer_division_words(device, left, right, validity, f"{_NAMES[op]} of {dtype}")
        return Column(dtype, fit_words(device, remainder, dtype, validity, f"{_NAMES[op]} of {dtype}"), validity)
    if _needs_128_bits(op, dtype) or needs_words(left, right):
        return Column(dtype, _wide_arithmetic(device, op, left, right, dtype, validity), validity)
    values, validity = _exact_arithmetic(device, op, left, right, dtype, validity)
    return Column(dtype, fit_to_type(device, values, dtype, validity, f"{_NAMES[op]} of {dtype}"), validity)


def negate(device: Device, operand: Column, dtype: pa.DataType) -> Column:
    """Return ``-operand`` as ``dtype``, raising where the negation does not fit (``-INT64_MIN``)."""
    xp = device.xp
    if is_floating(dtype):
        return Column(dtype, (-as_float(xp, operand)).astype(physical_dtype(dtype), copy=False), operand.validity)
    if not (is_integer(dtype) or is_decimal(dtype)) or not is_numeric(operand.dtype) or is_floating(operand.dtype):
        raise PlanError(f"cannot negate {operand.dtype} into {dtype}")
    if _is_wide_type(dtype) or needs_words(operand):
        zero = Column(dtype, xp.zeros(1, dtype=xp.int64))
        words = wide_result(device, decimal128.SUBTRACT, as_words(device, zero), as_words(device, operand),
                            operand.validity, f"negation of {dtype}", right_up=scale_of(dtype) - scale_of(operand.dtype))
        return Column(dtype, fit_words(device, words, dtype, operand.validity, f"negation of {dtype}"),
                      operand.validity)
    values = as_scaled(device, operand, scale_of(dtype), f"negation of {dtype}")
    raise_at_first(device, values == _INT64_MIN, operand.validity, f"Overflow in negation of {dtype}")
    return Column(dtype, fit_to_type(device, -values, dtype, operand.validity, f"negation of {dtype}"), operand.validity)
