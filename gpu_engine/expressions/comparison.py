"""Evaluate comparisons and IN lists with DuckDB's typing, ordering and null rules.

Numbers compare exactly: floats against anything compare as float64 (NaN equals
NaN and sorts above every other value, as in DuckDB); decimals and integers
compare as scaled integers without rescaling either side upward (which could
overflow): the finer-scaled side is split by floor division into a quotient and
a non-negative remainder, which decide the order exactly. Wide (128-bit)
decimals and uint64 compare on 128-bit words, the coarser side scaled up in the
same kernel (saturating, which keeps the order exact). Strings compare by
bytes, which for UTF-8 is code-point order.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import (
    is_boolean, is_decimal, is_floating, is_interval, is_numeric, is_string, is_temporal, is_time,
)
from gpu_engine.device import Device
from gpu_engine.errors import PlanError
from gpu_engine.expressions import strings, temporal
from gpu_engine.expressions.literals import literal_column, literal_values_column
from gpu_engine.expressions.logical import kleene_or
from gpu_engine.expressions.intervals import interval_order
from gpu_engine.expressions.nulls import all_null_bools, and_validity
from gpu_engine.expressions.numeric import POWERS_OF_TEN, as_float, as_words, needs_words, scale_of
from gpu_engine.kernels.decimal128 import COMPARE, wide_binary
from gpu_engine.plans.expressions import Literal

__all__ = ["compare", "compare_to_constant", "compare_to_string", "in_list", "FLIPPED"]

#: The operator that gives the same answer with the operands swapped.
FLIPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _apply(xp: Any, op: str, less: Any, equal: Any) -> Any:
    """Return the comparison ``op`` from the "less than" and "equal" masks of a total order."""
    if op == "eq":
        return equal
    if op == "ne":
        return ~equal
    if op == "lt":
        return less
    if op == "le":
        return less | equal
    if op == "gt":
        return ~(less | equal)
    if op == "ge":
        return ~less
    raise PlanError(f"unknown comparison operator {op!r}")


def _float_order(xp: Any, left: Any, right: Any) -> tuple[Any, Any]:
    left_nan, right_nan = xp.isnan(left), xp.isnan(right)
    less = (left < right) | (~left_nan & right_nan)
    equal = (left == right) | (left_nan & right_nan)
    return less, equal


def _scaled_order(xp: Any, left: Any, left_scale: int, right: Any, right_scale: int) -> tuple[Any, Any]:
    """Order two scaled-integer arrays exactly, whatever their scales."""
    if left_scale == right_scale:
        return left < right, left == right
    if left_scale > right_scale:
        less, equal = _scaled_order(xp, right, right_scale, left, left_scale)
        return ~(less | equal), equal
    power = xp.int64(POWERS_OF_TEN[right_scale - left_scale])
    quotient = xp.floor_divide(right, power)
    remainder = right - quotient * power  # 0 <= remainder < power
    at_quotient = left == quotient
    return (left < quotient) | (at_quotient & (remainder > 0)), at_quotient & (remainder == 0)


def _aligned(xp: Any, values: Any, dtype: pa.DataType, scale: int) -> tuple[Any, int]:
    """Return ``values`` (of ``dtype``) as int64 at ``scale`` when that is a larger scale they reach exactly; else as they are.

    Why: comparing scales apart divides the finer side with a remainder (six passes over the rows);
    the coarser side multiplied up compares in one. It is exact when no value of ``dtype`` can overflow
    int64 at the finer scale: a decimal of precision p holds less than 10**p, an n-bit integer less than 2**n.
    TPC-DS compares decimal prices with integer bounds (q28's ``ss_list_price BETWEEN 8 AND 8 + 10``).
    """
    values = values.astype(xp.int64, copy=False)
    own = scale_of(dtype)
    if scale <= own:
        return values, own
    bound = 10**dtype.precision if is_decimal(dtype) else 2**dtype.bit_width if pa.types.is_integer(dtype) else None
    if bound is None or bound * POWERS_OF_TEN[scale - own] > np.iinfo(np.int64).max:
        return values, own
    return values * xp.int64(POWERS_OF_TEN[scale - own]), scale


def _order(device: Device, left: Column, right: Column) -> tuple[Any, Any]:
    """Return ``(less, equal)`` masks for two columns of comparable types."""
    xp = device.xp
    lt, rt = left.dtype, right.dtype
    if is_string(lt) and is_string(rt):
        signs = strings.compare_signs(device, left, right)
        return signs < 0, signs == 0
    if is_numeric(lt) and is_numeric(rt) or is_boolean(lt) and is_boolean(rt):
        if is_floating(lt) or is_floating(rt):
            return _float_order(xp, as_float(xp, left), as_float(xp, right))
        if needs_words(left, right) and not (lt == rt == pa.uint64()):
            scale = max(scale_of(lt), scale_of(rt))
            signs, _ = wide_binary(device, COMPARE, as_words(device, left), as_words(device, right),
                                   scale - scale_of(lt), scale - scale_of(rt))
            return signs[:, 0] < 0, signs[:, 0] == 0
        if is_decimal(lt) or is_decimal(rt):
            left_values, left_scale = _aligned(xp, left.data, lt, scale_of(rt))
            right_values, right_scale = _aligned(xp, right.data, rt, left_scale)
            return _scaled_order(xp, left_values, left_scale, right_values, right_scale)
        return left.data < right.data, left.data == right.data
    if is_interval(lt) and is_interval(rt):  # normalized first, as DuckDB compares intervals
        return interval_order(xp, left.data, right.data)
    if is_temporal(lt) and is_temporal(rt):
        left_values, right_values = temporal.common_time_values(xp, left, right)
        return left_values < right_values, left_values == right_values
    if is_time(lt) and is_time(rt):  # microseconds of the day
        return left.data < right.data, left.data == right.data
    raise PlanError(f"cannot compare {lt} with {rt}")


def compare(device: Device, op: str, left: Column, right: Column) -> Column:
    """Return the bool column ``left op right``; NULL where either side is NULL."""
    less, equal = _order(device, left, right)
    validity = and_validity(strings.string_validity(device, left), strings.string_validity(device, right))
    return Column(pa.bool_(), _apply(device.xp, op, less, equal), validity)


def compare_to_constant(device: Device, op: str, column: Column, constant: Column) -> Column | None:
    """Return ``column op c`` for ``c`` the value of a one-row host column, as one pass; None where not handled.

    The constant is brought to the column's terms on the host: an integer or decimal to the column's
    scale (a finer one splits into floor and remainder, which decide each operator exactly, as
    :func:`_scaled_order` does), a float as :func:`as_float` converts it, a date or timestamp of the
    column's own type as it is. NaN, NULL, wide or mixed-time constants and wide columns are not handled.
    Why: a comparison with a literal materialized the literal as a column, rescaled both sides and
    built ``less``/``equal`` masks: five to seven passes where one does, on every batch of the lowest tier
    (TPC-DS q28 tests 36 ranges of decimal prices against integer bounds per row).
    """
    xp = device.xp
    kind = _comparison_kind(column.dtype, constant.dtype)
    if (kind is None or column.data.ndim != 1 or constant.data.ndim != 1 or is_boolean(column.dtype)
            or (constant.validity is not None and not bool(constant.validity[0]))):
        return None
    data = column.data
    if kind == "float":
        value = float(as_float(np, constant)[0])
        if value != value:  # NaN sorts above every number: left to _float_order
            return None
        values = data if data.dtype == xp.float64 else as_float(xp, column)
        result = _apply_to_scalar(op, values, value)
        if op in ("gt", "ge"):  # a NaN row is above every number
            result |= xp.isnan(values)
        return Column(pa.bool_(), result, column.validity)
    if kind == "time":
        if column.dtype != constant.dtype:
            return None
        return Column(pa.bool_(), _apply_to_scalar(op, data, constant.data[0]), column.validity)
    value, shift = int(constant.data[0]), scale_of(column.dtype) - scale_of(constant.dtype)
    remainder = 0
    if shift >= 0:
        value *= 10**shift
    else:
        value, remainder = divmod(value, 10**-shift)  # the constant is value + remainder / 10**-shift
        if remainder and op in ("eq", "ne"):
            return Column(pa.bool_(), xp.full(len(column), op == "ne", dtype=xp.bool_), column.validity)
        if remainder and op in ("lt", "ge"):  # below / at least a value past the floor: the next integer
            value += 1
    if not np.iinfo(np.int64).min <= value <= np.iinfo(np.int64).max:
        return None
    return Column(pa.bool_(), _apply_to_scalar(op, data, np.int64(value)), column.validity)


def _apply_to_scalar(op: str, values: Any, scalar: Any) -> Any:
    """Return ``values op scalar`` as a bool array (one pass)."""
    if op == "eq":
        return values == scalar
    if op == "ne":
        return values != scalar
    if op == "lt":
        return values < scalar
    if op == "le":
        return values <= scalar
    if op == "gt":
        return values > scalar
    if op == "ge":
        return values >= scalar
    raise PlanError(f"unknown comparison operator {op!r}")


def compare_to_string(device: Device, op: str, column: Column, value: str) -> Column:
    """Return ``column op 'value'``, comparing each dictionary value only once."""
    signs = strings.compare_signs_to_literal(device, column, value)
    result = _apply(device.xp, op, signs < 0, signs == 0)
    return Column(pa.bool_(), result, strings.string_validity(device, column))


#: IN lists with more values than this are one lookup in their sorted values, not one comparison per value.
SET_MEMBERSHIP_VALUES = 8


def in_list(device: Device, operand: Column, values: Sequence[Literal], negated: bool) -> Column:
    """Return ``operand [NOT] IN (values)``: TRUE on a match, else NULL if the list holds NULL, else FALSE.

    A NULL operand gives NULL, as it would through the equivalent OR of equalities. A list of more than
    :data:`SET_MEMBERSHIP_VALUES` numbers, dates or timestamps is a set-membership test: each row's value
    is looked up in the values sorted once (:func:`_set_membership`), so a 100,000-value list costs one
    binary search per row, not 100,000 passes.
    """
    xp = device.xp
    rows = len(operand)
    present = [v for v in values if v.value is not None]
    has_null = len(present) < len(values)
    if is_string(operand.dtype):
        matched = strings.isin_matches(device, operand, [v.value for v in present])
        result = Column(pa.bool_(), matched, strings.string_validity(device, operand))
    else:
        matched = _set_membership(device, operand, tuple(values)) if len(present) > SET_MEMBERSHIP_VALUES else None
        if matched is not None:
            result = Column(pa.bool_(), matched, operand.validity)
        else:
            result = Column(pa.bool_(), xp.zeros(rows, dtype=xp.bool_), operand.validity)
            for value in present:
                result = kleene_or(xp, result, compare(device, "eq", operand, literal_column(device, value, rows)))
    if has_null:
        result = kleene_or(xp, result, all_null_bools(xp, rows))
    if negated:
        result = Column(pa.bool_(), ~result.data, result.validity)
    return result


def _set_membership(device: Device, operand: Column, values: tuple[Literal, ...]) -> Any | None:
    """Return a bool per row of ``operand``: whether it equals one of the non-null ``values``; None when not handled.

    Both sides are brought to one exact key, as :func:`_order` compares them: float64 when either is a
    float (NaN equal to NaN), the operand's own scaled integers for integers and decimals (a value not
    representable at the operand's scale equals no row and is left out), the finer unit for dates and
    timestamps. Mixed literal types, 128-bit decimals and uint64 are left to the comparisons.
    """
    xp = device.xp
    sorted_keys, has_nan, value_type = _sorted_keys(values, operand.dtype)
    if sorted_keys is None:
        return None
    keys = _operand_keys(xp, operand, value_type)
    if len(sorted_keys) == 0:
        matched = xp.zeros(len(operand), dtype=xp.bool_)
    else:
        table = device.asarray(sorted_keys)
        at = xp.minimum(xp.searchsorted(table, keys), len(sorted_keys) - 1)
        matched = table[at] == keys
    if has_nan:
        matched = matched | xp.isnan(keys)
    return matched


def _comparison_kind(operand_type: pa.DataType, value_type: pa.DataType) -> str | None:
    if is_numeric(operand_type) and is_numeric(value_type):
        if is_floating(operand_type) or is_floating(value_type):
            return "float"
        if operand_type == pa.uint64() or value_type == pa.uint64() or (
                is_decimal(operand_type) and operand_type.precision > 18) or (
                is_decimal(value_type) and value_type.precision > 18):
            return None  # 128-bit words
        return "scaled"
    if is_boolean(operand_type) and is_boolean(value_type):
        return "scaled"
    if is_temporal(operand_type) and is_temporal(value_type):
        return "time"
    return None


def _time_unit(operand_type: pa.DataType, value_type: pa.DataType) -> str | None:
    units = [t.unit for t in (operand_type, value_type) if pa.types.is_timestamp(t)]
    return max(units, key=temporal.TICKS_PER_DAY.get) if units else None


def _operand_keys(xp: Any, operand: Column, value_type: pa.DataType) -> Any:
    kind = _comparison_kind(operand.dtype, value_type)
    if kind == "float":
        return as_float(xp, operand)
    if kind == "time":
        return temporal.time_values(xp, operand, _time_unit(operand.dtype, value_type))
    return operand.data.astype(xp.int64, copy=False)


#: Sorted keys of the IN lists evaluated lately, by the identity of their value tuple (which the entry keeps
#: alive): a plan's list is converted once, not once per batch.
_SORTED_KEYS: dict[tuple[int, str], tuple[tuple, tuple]] = {}
_SORTED_KEYS_KEPT = 16
_SORTED_KEYS_LOCK = threading.Lock()


def _sorted_keys(values: tuple[Literal, ...], operand_type: pa.DataType) -> tuple[Any | None, bool, Any]:
    """Return the distinct keys of the non-null ``values`` sorted (host NumPy), whether a NaN is among them, and
    their type; ``(None, False, None)`` when :func:`_set_membership` does not handle them."""
    cache_key = (id(values), str(operand_type))
    with _SORTED_KEYS_LOCK:  # drivers evaluate one plan's list at once
        cached = _SORTED_KEYS.get(cache_key)
        if cached is not None and cached[0] is values:
            return cached[1]
        answer = _keys_of(values, operand_type)
        while len(_SORTED_KEYS) >= _SORTED_KEYS_KEPT:
            del _SORTED_KEYS[next(iter(_SORTED_KEYS))]
        _SORTED_KEYS[cache_key] = (values, answer)
        return answer


def _keys_of(values: tuple[Literal, ...], operand_type: pa.DataType) -> tuple[Any | None, bool, Any]:
    present = [v for v in values if v.value is not None]
    value_type = present[0].dtype
    kind = _comparison_kind(operand_type, value_type)
    if kind is None or any(v.dtype != value_type for v in present):
        return None, False, None
    try:
        column = literal_values_column(present, value_type)
    except (pa.ArrowException, ValueError, TypeError, ArithmeticError):
        return None, False, None  # the comparisons name the literal that fails
    has_nan = False
    if kind == "float":
        keys = as_float(np, column)
        has_nan = bool(np.isnan(keys).any())
        keys = keys[~np.isnan(keys)]
    elif kind == "time":
        keys = temporal.time_values(np, column, _time_unit(operand_type, value_type))
    else:
        keys = column.data.astype(np.int64)
        shift = scale_of(operand_type) - scale_of(value_type)
        if shift < 0:  # a value with digits below the operand's scale equals no row
            power = 10 ** -shift
            keys = keys[keys % power == 0] // power
        elif shift > 0:  # a value whose scaled form overflows int64 equals no row
            power = 10 ** shift
            keys = keys[np.abs(keys) <= (2**63 - 1) // power] * power
    return np.unique(keys), has_nan, value_type
