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

from typing import Any, Sequence

import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import is_boolean, is_decimal, is_floating, is_numeric, is_string, is_temporal
from gpu_engine.device import Device
from gpu_engine.errors import PlanError
from gpu_engine.expressions import strings, temporal
from gpu_engine.expressions.literals import literal_column
from gpu_engine.expressions.logical import kleene_or
from gpu_engine.expressions.nulls import all_null_bools, and_validity
from gpu_engine.expressions.numeric import POWERS_OF_TEN, as_float, as_words, needs_words, scale_of
from gpu_engine.kernels.decimal128 import COMPARE, wide_binary
from gpu_engine.plans.expressions import Literal

__all__ = ["compare", "compare_to_string", "in_list", "FLIPPED"]

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
            return _scaled_order(xp, left.data.astype(xp.int64, copy=False), scale_of(lt),
                                 right.data.astype(xp.int64, copy=False), scale_of(rt))
        return left.data < right.data, left.data == right.data
    if is_temporal(lt) and is_temporal(rt):
        left_values, right_values = temporal.common_time_values(xp, left, right)
        return left_values < right_values, left_values == right_values
    raise PlanError(f"cannot compare {lt} with {rt}")


def compare(device: Device, op: str, left: Column, right: Column) -> Column:
    """Return the bool column ``left op right``; NULL where either side is NULL."""
    less, equal = _order(device, left, right)
    validity = and_validity(strings.string_validity(device, left), strings.string_validity(device, right))
    return Column(pa.bool_(), _apply(device.xp, op, less, equal), validity)


def compare_to_string(device: Device, op: str, column: Column, value: str) -> Column:
    """Return ``column op 'value'``, comparing each dictionary value only once."""
    signs = strings.compare_signs_to_literal(device, column, value)
    result = _apply(device.xp, op, signs < 0, signs == 0)
    return Column(pa.bool_(), result, strings.string_validity(device, column))


def in_list(device: Device, operand: Column, values: Sequence[Literal], negated: bool) -> Column:
    """Return ``operand [NOT] IN (values)``: TRUE on a match, else NULL if the list holds NULL, else FALSE.

    A NULL operand gives NULL, as it would through the equivalent OR of equalities.
    """
    xp = device.xp
    rows = len(operand)
    present = [v for v in values if v.value is not None]
    has_null = len(present) < len(values)
    if is_string(operand.dtype):
        matched = strings.isin_matches(device, operand, [v.value for v in present])
        result = Column(pa.bool_(), matched, strings.string_validity(device, operand))
    else:
        result = Column(pa.bool_(), xp.zeros(rows, dtype=xp.bool_), operand.validity)
        for value in present:
            result = kleene_or(xp, result, compare(device, "eq", operand, literal_column(device, value, rows)))
    if has_null:
        result = kleene_or(xp, result, all_null_bools(xp, rows))
    if negated:
        result = Column(pa.bool_(), ~result.data, result.validity)
    return result
