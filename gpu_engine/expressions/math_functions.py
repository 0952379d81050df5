"""Evaluate the math functions (``round``, ``floor``, ``abs``, ``sqrt``, ``greatest``, ``//``, ...) as DuckDB does.

Everything is array arithmetic on the device (``batch.device.xp``), no kernel
of its own. Exact types stay exact: ``round``/``floor``/``ceil`` of a decimal
work on its scaled integers (halves away from zero, as DuckDB rounds), of an
integer on the integer; floats follow C's ``round`` (halves away from zero,
not NumPy's to-even). Errors DuckDB raises are raised here too, for the first
valid row: ``abs`` or ``//`` leaving the integer type, ``round`` of an integer
overflowing, ``//`` by zero (for floats too: DuckDB's ``//`` raises where
``/`` gives infinity).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import is_decimal, is_floating, is_integer, physical_dtype
from gpu_engine.device import Device
from gpu_engine.errors import PlanError
from gpu_engine.expressions.nulls import and_validity
from gpu_engine.expressions.numeric import (
    POWERS_OF_TEN, as_float, as_words, constant_words, divide_round_half_away, fit_to_type, fit_words,
    integer_division_words, is_wide, narrow_values, narrowed, needs_words, raise_at_first, round_half_away, scale_of,
    truncated_remainder, wide_result,
)
from gpu_engine.kernels import decimal128
from gpu_engine.kernels.gamma import gamma_values

__all__ = ["MATH_FUNCTIONS", "evaluate_math_function"]


def _integer_bounds(dtype: pa.DataType) -> tuple[int, int]:
    bits = dtype.bit_width
    if pa.types.is_signed_integer(dtype):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


def _exact(device: Device, column: Column, what: str) -> Any:
    return narrow_values(device, column, what)


# -- decimals held as 128-bit words (gpu_engine.expressions.numeric): a wide column's rows on the words' kernel --
def _words_negative(words: Any) -> Any:
    return words[:, 1] < 0


def _words_sign(xp: Any, words: Any) -> Any:
    positive = (words[:, 1] > 0) | ((words[:, 1] == 0) & (words[:, 0] != 0))
    return positive.astype(xp.int8) - _words_negative(words).astype(xp.int8)


def _words_abs(device: Device, column: Column, dtype: pa.DataType) -> Column:
    """Return abs of a wide decimal column: its negative rows subtracted from 0 on the words' kernel."""
    words = column.data
    negated = wide_result(device, decimal128.SUBTRACT, constant_words(device, 0), words, column.validity, "abs")
    magnitude = device.xp.where(_words_negative(words)[:, None], negated, words)
    return Column(dtype, fit_words(device, magnitude, dtype, column.validity, "abs"), column.validity)


def _words_rounded(device: Device, column: Column, name: str, digits: int, dtype: pa.DataType) -> Column:
    """Return floor / ceil / trunc / round(x, digits) of a wide decimal column, as the narrow paths compute them.

    The words' kernel rescales down rounding half away from zero (``round``); floor, ceil and trunc then step one
    unit toward their side where that rounding went past the value (the rounded value, scaled back up, compared
    with it). ``round`` to tens or beyond scales back up after.
    """
    xp = device.xp
    validity = column.validity
    words, drop = column.data, scale_of(column.dtype) - digits
    if drop > 38:  # finer digits than a decimal(38) has: every value rounds to 0
        rounded = xp.zeros_like(words)
    else:
        rounded = wide_result(device, decimal128.RESCALE, words, constant_words(device, 0), validity, name, down=drop)
    if name != "round":
        past, _ = decimal128.wide_binary(device, decimal128.COMPARE, rounded, words, left_up=drop)
        above, below = past[:, 0] > 0, past[:, 0] < 0  # the rounded value lies above / below the value
        if name == "trunc":
            negative = _words_negative(words)
            above, below = above & ~negative, below & negative
        down = above if name in ("floor", "trunc") else xp.zeros_like(above)
        up = below if name in ("ceil", "trunc") else xp.zeros_like(below)
        one = constant_words(device, 1)
        rounded = xp.where(down[:, None], wide_result(device, decimal128.SUBTRACT, rounded, one, validity, name),
                           rounded)
        rounded = xp.where(up[:, None], wide_result(device, decimal128.ADD, rounded, one, validity, name), rounded)
    if digits < 0:
        rounded = wide_result(device, decimal128.RESCALE, rounded, constant_words(device, 0), validity, name,
                              left_up=-digits)
    return Column(dtype, fit_words(device, rounded, dtype, validity, name), validity)


def _abs(device: Device, column: Column, dtype: pa.DataType) -> Column:
    xp = device.xp
    if is_floating(dtype):
        return Column(dtype, xp.abs(column.data), column.validity)
    if pa.types.is_unsigned_integer(dtype):  # its own magnitude (UBIGINT's upper half has no int64 form)
        return Column(dtype, column.data, column.validity)
    if is_wide(column):
        return _words_abs(device, column, dtype)
    values = _exact(device, column, "abs")
    if is_integer(dtype):
        low, _high = _integer_bounds(dtype)
        if low < 0:
            raise_at_first(device, values == low, column.validity, f"Overflow on abs of {dtype}")
        return Column(dtype, xp.abs(values).astype(column.data.dtype), column.validity)
    # A decimal of more than 18 digits may hold -2**63 in 64 bits, whose magnitude does not fit them (abs wraps).
    raise_at_first(device, values == np.int64(-(2**63)), column.validity,
                   f"abs: a value of {dtype} needs more than 64 bits here")
    return Column(dtype, fit_to_type(device, xp.abs(values), dtype, column.validity, "abs"), column.validity)


def _sign(device: Device, column: Column) -> Column:
    xp = device.xp
    if is_floating(column.dtype):
        values = column.data
        signs = (values > 0).astype(xp.int8) - (values < 0).astype(xp.int8)  # NaN and -0.0 are 0, as DuckDB
    elif pa.types.is_unsigned_integer(column.dtype):
        signs = (column.data > 0).astype(xp.int8)
    elif is_wide(column):
        signs = _words_sign(xp, column.data)
    else:
        values = _exact(device, column, "sign")
        signs = (values > 0).astype(xp.int8) - (values < 0).astype(xp.int8)
    return Column(pa.int8(), signs, column.validity)


def _floor_ceil(device: Device, name: str, column: Column, dtype: pa.DataType) -> Column:
    xp = device.xp
    if is_floating(column.dtype):
        return Column(dtype, (xp.floor if name == "floor" else xp.ceil)(column.data), column.validity)
    if is_integer(column.dtype):
        return Column(dtype, as_float(xp, column), column.validity)
    if is_wide(column):
        return _words_rounded(device, column, name, 0, dtype)
    values = _exact(device, column, name)
    power = np.int64(POWERS_OF_TEN[scale_of(column.dtype)])
    result = xp.floor_divide(values, power) if name == "floor" else -xp.floor_divide(-values, power)
    return Column(dtype, fit_to_type(device, result, dtype, column.validity, name), column.validity)


def _product_error(xp: Any, a: Any, b: float) -> tuple[Any, Any]:
    """Return ``(p, e)`` with ``p = fl(a * b)`` and ``a * b = p + e`` exactly (Dekker's product, Veltkamp's split)."""
    product = a * b

    def split(value: Any) -> tuple[Any, Any]:
        scaled = 134217729.0 * value  # 2**27 + 1
        high = scaled - (scaled - value)
        return high, value - high

    a_high, a_low = split(a)
    b_high, b_low = split(xp.asarray(b, dtype=xp.float64))
    error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    return product, error


def _trunc(device: Device, column: Column, dtype: pa.DataType) -> Column:
    """Return the value with its fraction dropped (toward zero): floats stay floats, a decimal(p, s) is decimal(p, 0)."""
    xp = device.xp
    if is_floating(dtype):
        return Column(dtype, xp.trunc(column.data), column.validity)
    if is_integer(dtype):
        return Column(dtype, column.data, column.validity)
    if is_wide(column):
        return _words_rounded(device, column, "trunc", 0, dtype)
    values = _exact(device, column, "trunc")
    power = np.int64(POWERS_OF_TEN[scale_of(column.dtype)])
    truncated = (values - truncated_remainder(xp, values, power)) // power
    return Column(dtype, fit_to_type(device, truncated, dtype, column.validity, "trunc"), column.validity)


def _round_float(xp: Any, values: Any, digits: int, to_even: bool = False) -> Any:
    """Return ``values`` rounded to ``digits`` decimal places as DuckDB 2 does: the exact binary value rounded,
    halves away from zero (``round(2.675, 2)`` is 2.67: 2.675 is stored as 2.67499999...; ``round(0.125, 2)`` is
    0.13), or to the even neighbour (``to_even``: ``round_even(0.125, 2)`` is 0.12, ``round_even(2.675, 2)`` 2.67).
    Scaling by ``10**digits`` rounds once; the rounding error, computed exactly, decides the ties it makes.
    Values already integral at that scale (and NaN, infinities) come back unchanged.
    """
    if digits > 308:  # finer than any double's digits
        return values
    if digits < -308:  # coarser than any finite double: 0 (NaN and infinities stay)
        return xp.where(xp.isfinite(values), 0.0, values)
    modifier = 10.0 ** abs(digits)
    with_error = digits >= 0
    if with_error:
        scaled, error = _product_error(xp, values, modifier)
    else:
        scaled = values / modifier
        product, product_error = _product_error(xp, scaled, modifier)
        error = (values - product) - product_error  # values = scaled * modifier + error: the quotient's sign
    tie = xp.abs(scaled - xp.trunc(scaled)) == 0.5
    toward_zero = tie & (((scaled > 0) & (error < 0)) | ((scaled < 0) & (error > 0)))
    if to_even:  # a tie only where the error is 0; else the side the exact value lies on
        away = tie & (((scaled > 0) & (error > 0)) | ((scaled < 0) & (error < 0)))
        rounded = xp.where(toward_zero, xp.trunc(scaled), xp.where(away, xp.trunc(scaled) + xp.sign(scaled),
                                                                     xp.rint(scaled)))
    else:
        rounded = xp.where(toward_zero, round_half_away(xp, scaled) - xp.sign(scaled), round_half_away(xp, scaled))
    result = rounded / modifier if with_error else rounded * modifier
    keep = ~xp.isfinite(result) | ~xp.isfinite(scaled) | (xp.abs(scaled) >= 2.0**52)
    return xp.where(keep, values, result)


def _round(device: Device, column: Column, digits: int, dtype: pa.DataType) -> Column:
    xp = device.xp
    if is_floating(dtype):
        values = column.data.astype(xp.float64)
        return Column(dtype, _round_float(xp, values, digits).astype(column.data.dtype), column.validity)
    scale = scale_of(column.dtype)
    if digits >= scale:
        return Column(dtype, column.data, column.validity)
    if is_wide(column):
        return _words_rounded(device, column, "round", digits, dtype)
    values = _exact(device, column, "round")
    return _rounded_exact(device, column, values, digits, dtype, "ROUND", lambda power: divide_round_half_away(
        xp, values, power))


def _rounded_exact(device: Device, column: Column, values, digits: int, dtype: pa.DataType, name: str,
                   divide) -> Column:
    """Return an integer or decimal ``column`` (its exact scaled ``values``) rounded to ``digits`` by
    ``divide(power)`` (the scaled values over ``power``, rounded as the function rounds), in ``dtype``: ROUND and
    ROUND_EVEN differ only in how they divide. Rounding at a place above every int64 value is 0 (DuckDB:
    round(5, -20) = 0); a result past ``dtype`` raises DuckDB's overflow error."""
    xp = device.xp
    drop = scale_of(column.dtype) - digits  # digits to remove, from the scaled integer
    if drop > 18:
        rounded = xp.zeros_like(values)
    else:
        rounded = divide(POWERS_OF_TEN[drop])
        if digits < 0:
            raise_at_first(device, xp.abs(rounded) > (2**63 - 1) // POWERS_OF_TEN[-digits], column.validity,
                           f"Overflow in {name} of {column.dtype}")
            rounded = rounded * np.int64(POWERS_OF_TEN[-digits])
    if is_integer(dtype):
        low, high = _integer_bounds(dtype)
        raise_at_first(device, (rounded < low) | (rounded > high), column.validity, f"Overflow in {name} of integer")
        return Column(dtype, rounded.astype(column.data.dtype), column.validity)
    return Column(dtype, fit_to_type(device, rounded, dtype, column.validity, name.lower()), column.validity)


def _round_even(device: Device, column: Column, digits: int, dtype: pa.DataType) -> Column:
    """Return DuckDB's ``round_even(x, digits)``: halves to the even neighbour; a float's exact binary value
    rounded (:func:`_round_float`), an integer or decimal exactly."""
    xp = device.xp
    if is_floating(dtype):
        values = column.data.astype(xp.float64)
        return Column(dtype, _round_float(xp, values, digits, to_even=True).astype(column.data.dtype),
                      column.validity)
    scale = scale_of(column.dtype)
    if digits >= scale:
        return Column(dtype, column.data, column.validity)
    values = _exact(device, column, "round_even")

    def divide_half_to_even(power: int):
        remainder = xp.remainder(values, np.int64(power))  # floored: 0 <= remainder < power
        quotient = (values - remainder) // np.int64(power)
        up = (2 * remainder > power) | ((2 * remainder == power) & (xp.remainder(quotient, 2) == 1))
        return quotient + up.astype(xp.int64)

    return _rounded_exact(device, column, values, digits, dtype, "ROUND_EVEN", divide_half_to_even)


#: The trigonometric functions: name -> the device array operation (``cot(0)`` is infinity, as in DuckDB).
_TRIGONOMETRY = {
    "sin": lambda xp, x: xp.sin(x), "cos": lambda xp, x: xp.cos(x), "tan": lambda xp, x: xp.tan(x),
    "cot": lambda xp, x: 1.0 / xp.tan(x), "asin": lambda xp, x: xp.arcsin(x), "acos": lambda xp, x: xp.arccos(x),
    "atan": lambda xp, x: xp.arctan(x), "atan2": lambda xp, y, x: xp.arctan2(y, x),
    "degrees": lambda xp, x: xp.degrees(x), "radians": lambda xp, x: xp.radians(x),
}


def _double_function(device: Device, name: str, columns: Sequence[Column]) -> Column:
    xp = device.xp
    values = [as_float(xp, column) for column in columns]
    validity = and_validity(*(column.validity for column in columns))
    if name == "sqrt":
        result = xp.sqrt(values[0])
    elif name == "cbrt":
        result = xp.cbrt(values[0])
    elif name == "ln":
        result = xp.log(values[0])
    elif name == "exp":
        result = xp.exp(values[0])
    elif name == "power":
        result = xp.power(values[0], values[1])
    elif name in _TRIGONOMETRY:  # NaN outside a function's domain (asin(2), sin(inf)), as DuckDB 2.0.1 answers
        with np.errstate(all="ignore"):
            result = _TRIGONOMETRY[name](xp, *values)
    elif name == "even":  # away from zero to the next even integer (DuckDB's even: 2.5 -> 4, -1.5 -> -2)
        up = xp.ceil(xp.abs(values[0]))
        finite = xp.isfinite(up)  # infinities and NaN stay as they are
        result = xp.copysign(xp.where(finite, up + xp.remainder(xp.where(finite, up, 0.0), 2.0), up), values[0])
    elif name in ("gamma", "lgamma"):  # C's tgamma / lgamma, as DuckDB's (a kernel: NumPy and CuPy have none)
        result = gamma_values(device, values[0], name == "lgamma")
    elif name == "log" and len(values) == 1:  # DuckDB's log(x) is the base-10 logarithm
        result = xp.log10(values[0])
    elif name == "log":
        result = xp.log(values[1]) / xp.log(values[0])
    else:
        raise PlanError(f"no math function named {name!r}")
    return Column(pa.float64(), result.astype(xp.float64), validity)


def _divisor(device: Device, name: str, columns: Sequence[Column]) -> Column:
    """Return DuckDB's gcd / lcm of two integers (BIGINT; of magnitudes, so never negative; lcm with a 0 is 0):
    Euclid's steps on the device while a row's remainder is not 0, DuckDB's overflow errors."""
    xp = device.xp
    validity = and_validity(*(column.validity for column in columns))
    left, right = (narrow_values(device, column, name).astype(xp.int64) for column in columns)
    if validity is not None:
        left, right = xp.where(validity, left, 0), xp.where(validity, right, 0)
    minimum = np.int64(-(2**63))
    for values in (left, right):
        raise_at_first(device, values == minimum, validity, f"Overflow on abs({int(minimum)})")
    a, b = xp.abs(xp.where(left == minimum, 0, left)), xp.abs(xp.where(right == minimum, 0, right))
    if name == "lcm":
        magnitudes = (a, b)
    while bool(device.read_scalar(xp.any(b != 0))):
        a, b = xp.where(b != 0, b, a), xp.where(b != 0, a % xp.where(b != 0, b, 1), 0)
    if name == "gcd":
        return Column(pa.int64(), a, validity)
    x, y = magnitudes
    zero = (x == 0) | (y == 0)
    reduced = x // xp.where(zero, 1, a)
    over = ~zero & (reduced > (2**63 - 1) // xp.where(zero, 1, y))
    raise_at_first(device, over, validity, "lcm value is out of range")
    return Column(pa.int64(), xp.where(zero | over, 0, reduced * xp.where(over, 0, y)), validity)


#: 0! .. 20!: the factorials a 64-bit HUGEINT holds (the engine's DECIMAL(38, 0) keeps int64 values).
_FACTORIALS = [1]
for _n in range(1, 21):
    _FACTORIALS.append(_FACTORIALS[-1] * _n)


def _factorial(device: Device, column: Column, dtype: pa.DataType) -> Column:
    """Return DuckDB's factorial (HUGEINT): a lookup in the table of 0! .. 20! on the device; DuckDB's errors for
    a negative n and past 33!, and a named one for 21! .. 33!, which need more than the engine's 64 bits."""
    xp = device.xp
    values = column.data.astype(xp.int64)
    raise_at_first(device, values < 0, column.validity, "factorial of a negative number is undefined")
    raise_at_first(device, values > 33, column.validity, "Value out of range")
    raise_at_first(device, (values > 20) & (values <= 33), column.validity,
                   "factorial(n) for n from 21 to 33 exceeds the engine's 64-bit HUGEINT storage")
    table = xp.asarray(np.array(_FACTORIALS, dtype=np.int64))
    return Column(dtype, xp.take(table, xp.clip(values, 0, 20)), column.validity)


def _extreme(device: Device, name: str, columns: Sequence[Column], dtype: pa.DataType) -> Column:
    """Return greatest/least per row over the non-NULL arguments (NULL only where all are); NaN is the largest."""
    xp = device.xp
    if is_decimal(dtype) and any(is_wide(column) for column in columns):
        return _words_extreme(device, name, columns, dtype)
    if is_decimal(dtype):
        columns = [Column(dtype, _exact(device, column, name), column.validity) for column in columns]
    best = columns[0].data
    valid = columns[0].validity
    for column in columns[1:]:
        values = column.data
        if name == "greatest":
            better = values > best
            if is_floating(dtype):
                better = better | (xp.isnan(values) & ~xp.isnan(best))
        else:
            better = values < best
            if is_floating(dtype):
                better = better | (xp.isnan(best) & ~xp.isnan(values))
        if valid is not None:
            better = better | ~valid
        if column.validity is not None:
            better = better & column.validity
        best = xp.where(better, values, best)
        valid = None if valid is None or column.validity is None else valid | column.validity
    if is_decimal(dtype):
        best = fit_to_type(device, best, dtype, valid, name)
    return Column(dtype, best, valid)


def _words_extreme(device: Device, name: str, columns: Sequence[Column], dtype: pa.DataType) -> Column:
    """Return greatest/least of decimal columns (of ``dtype``'s scale) of which one holds 128-bit words: rows
    compared on the words' kernel, NULLs skipped as :func:`_extreme` skips them."""
    xp = device.xp
    best, valid = as_words(device, columns[0]), columns[0].validity
    for column in columns[1:]:
        values = as_words(device, column)
        order, _ = decimal128.wide_binary(device, decimal128.COMPARE, values, best)
        better = order[:, 0] > 0 if name == "greatest" else order[:, 0] < 0
        if valid is not None:
            better = better | ~valid
        if column.validity is not None:
            better = better & column.validity
        best = xp.where(better[:, None], values, best)
        valid = None if valid is None or column.validity is None else valid | column.validity
    return Column(dtype, narrowed(device, best, valid), valid)


def _integer_division(device: Device, left: Column, right: Column, dtype: pa.DataType) -> Column:
    """Return DuckDB's ``//``: integer division truncating toward zero, else DOUBLE division; by zero raises."""
    xp = device.xp
    validity = and_validity(left.validity, right.validity)
    if is_integer(left.dtype) and is_integer(right.dtype) and (needs_words(left, right) or not is_integer(dtype)):
        # a UBIGINT operand: UBIGINT, or HUGEINT beside a signed one (UBIGINT_MAX // -1), exact on magnitudes
        quotient, _remainder = integer_division_words(device, left, right, validity, "//")
        return Column(dtype, fit_words(device, quotient, dtype, validity, "//"), validity)
    if not is_integer(dtype):
        dividend, divisor = as_float(xp, left), as_float(xp, right)
        raise_at_first(device, divisor == 0, validity, "Division by zero in //")
        return Column(dtype, dividend / xp.where(divisor == 0, 1.0, divisor), validity)
    dividend, divisor = _exact(device, left, "//"), _exact(device, right, "//")
    raise_at_first(device, divisor == 0, validity, "Division by zero in //")
    low, high = _integer_bounds(dtype)
    raise_at_first(device, (divisor == -1) & (dividend == low), validity, f"Overflow in division of {dtype}")
    safe = xp.where((divisor == 0) | (divisor == -1), 1, divisor)
    remainder = truncated_remainder(xp, dividend, safe)
    quotient = (dividend - remainder) // safe
    quotient = xp.where(divisor == -1, -xp.where(dividend == low, 0, dividend), quotient)
    return Column(dtype, quotient.astype(physical_dtype(dtype)), validity)


def _float_test(device: Device, name: str, column: Column) -> Column:
    """Return isnan / isinf / isfinite of a number (an integer or decimal is finite and not NaN, as DuckDB casts it)."""
    xp = device.xp
    if not is_floating(column.dtype):
        values = xp.full(len(column), name == "isfinite", dtype=xp.bool_)
    elif name == "isnan":
        values = xp.isnan(column.data)
    elif name == "isinf":
        values = xp.isinf(column.data)
    else:
        values = xp.isfinite(column.data)
    return Column(pa.bool_(), values, column.validity)


#: The functions this module evaluates.
MATH_FUNCTIONS = ("abs", "sign", "floor", "ceil", "round", "round_even", "trunc", "sqrt", "cbrt", "ln", "log", "exp",
                  "power",
                  "greatest", "least", "//", "isnan", "isinf", "isfinite", "even", "gcd", "lcm", "factorial", "gamma",
                  "lgamma", *_TRIGONOMETRY)


def evaluate_math_function(device: Device, name: str, args: Sequence[Any], columns: Sequence[Column],
                           dtype: pa.DataType) -> Column:
    """Return ``name(args)`` from the evaluated argument ``columns`` (constants evaluated as columns too)."""
    if name == "abs":
        return _abs(device, columns[0], dtype)
    if name == "sign":
        return _sign(device, columns[0])
    if name in ("floor", "ceil"):
        return _floor_ceil(device, name, columns[0], dtype)
    if name == "trunc":
        return _trunc(device, columns[0], dtype)
    if name in ("round", "round_even"):
        digits = args[1].value if len(args) > 1 else 0
        if digits is None:  # round(x, NULL)
            return Column.from_arrow(pa.nulls(len(columns[0]), dtype), device)
        return (_round if name == "round" else _round_even)(device, columns[0], digits, dtype)
    if name in ("greatest", "least"):
        return _extreme(device, name, columns, dtype)
    if name == "//":
        return _integer_division(device, columns[0], columns[1], dtype)
    if name in ("isnan", "isinf", "isfinite"):
        return _float_test(device, name, columns[0])
    if name in ("gcd", "lcm"):
        return _divisor(device, name, columns)
    if name == "factorial":
        return _factorial(device, columns[0], dtype)
    return _double_function(device, name, columns)
