"""Turn IR literals into physical scalars and broadcast columns."""

from __future__ import annotations

import datetime
import decimal
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.arrow_numpy import arrow_from_pylist
from gpu_engine.columnar.types import (
    MAX_INT64_DECIMAL_PRECISION, is_decimal, is_interval, is_string, normalize_type, physical_dtype,
)
from gpu_engine.device import Device, get_device
from gpu_engine.errors import PlanError
from gpu_engine.plans.expressions import Literal

__all__ = ["literal_scalar", "literal_scalars", "literal_column", "literal_values_column", "string_literal_column",
           "is_null_literal"]

_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()


def _arrow_value(literal: Literal) -> Any:
    """Coerce a literal's Python value to what ``pa.array`` accepts for its dtype."""
    value, dtype = literal.value, literal.dtype
    if is_decimal(dtype) and not isinstance(value, decimal.Decimal):
        value = decimal.Decimal(str(value))
    if is_decimal(dtype):
        # Python's default context keeps 28 digits; a DECIMAL holds up to 38, so quantize in a context that wide
        value = value.quantize(decimal.Decimal(1).scaleb(-dtype.scale), rounding=decimal.ROUND_HALF_UP,
                               context=decimal.Context(prec=max(28, dtype.precision)))
    if pa.types.is_date32(dtype) and isinstance(value, str):
        value = datetime.date.fromisoformat(value)
    if pa.types.is_floating(dtype) and isinstance(value, decimal.Decimal):
        value = float(value)
    return value


def _direct_physical(values: list, dtype: pa.DataType) -> np.ndarray | None:
    """Return the physical values of ``values`` (as :func:`_arrow_value` gives them) as a column of ``dtype`` holds
    them, where each converts exactly as Arrow converts it; else None (the caller converts through Arrow).

    Why: integers, doubles, dates and DECIMALs of up to 18 digits need no Arrow array per literal (a TPC-DS
    pass converted ~2,000 literal lists; ``pa.array`` also asks whether its input is a pandas object, which
    imports pandas on its first call, 0.26 s of a new process's CPU).
    """
    if pa.types.is_integer(dtype):
        info = np.iinfo(physical_dtype(dtype))
        if all(type(v) is int and info.min <= v <= info.max for v in values):
            return np.array(values, dtype=physical_dtype(dtype))
    elif pa.types.is_float64(dtype):
        if all(type(v) is float for v in values):
            return np.array(values, dtype=np.float64)
    elif pa.types.is_date32(dtype):
        if all(type(v) is datetime.date for v in values):
            return np.array([v.toordinal() - _EPOCH_ORDINAL for v in values], dtype=np.int32)
    elif pa.types.is_decimal128(dtype):  # wider than 18 digits: one int64 a value where each fits, as Arrow's reads
        scaled = []
        for value in values:
            if type(value) is not decimal.Decimal or not value.is_finite():
                return None
            sign, digits, exponent = value.as_tuple()
            if exponent != -dtype.scale or len(digits) > dtype.precision:  # Arrow's error, through Arrow
                return None
            unscaled = int("".join(map(str, digits)))
            scaled.append(-unscaled if sign else unscaled)
        if dtype.precision > MAX_INT64_DECIMAL_PRECISION and not all(-2**63 <= v < 2**63 for v in scaled):
            return None  # (two words a value: through Arrow)
        return np.array(scaled, dtype=np.int64)
    return None


def literal_values_column(literals: Sequence[Literal], dtype: pa.DataType) -> Column:
    """Return the values of non-null, non-string ``literals`` as a host column of ``dtype``.

    Raises what Arrow's conversion raises for a value ``dtype`` cannot hold (``pa.ArrowException``,
    ``ValueError``, ``TypeError``, ``decimal.InvalidOperation``).
    """
    values = [_arrow_value(literal) for literal in literals]
    direct = _direct_physical(values, dtype)
    if direct is not None:
        return Column(normalize_type(dtype), direct)
    # arrow_from_pylist, not pa.array: pyarrow's list conversion imports pandas (a TIMESTAMP literal's value)
    return Column.from_arrow(arrow_from_pylist(values, dtype), get_device("cpu"))


def literal_scalar(literal: Literal) -> Any:
    """Return the physical value of a non-null, non-string literal (days for dates, scaled int for decimals)."""
    plain = _plain_scalar(literal)
    if plain is not None:
        return plain
    try:
        host = literal_values_column([literal], literal.dtype)
    except (pa.ArrowException, ValueError, TypeError, decimal.InvalidOperation) as error:
        raise PlanError(f"literal {literal.sql()} cannot be represented as {literal.dtype}: {error}",
                        column=literal.sql()) from error
    return host.data[0]



def _plain_scalar(literal: Literal) -> Any:
    """Return an integer literal of an integer type or a float literal of a float type as its NumPy scalar, else None.

    Why: through Arrow a literal costs an array and a column (~1 ms on a loaded machine); a 2000-term
    predicate evaluated eagerly spent half its time there. These two kinds convert exactly as Arrow
    converts them (an integer in range, a float rounded to nearest); every other literal goes through Arrow.
    """
    value, dtype = literal.value, literal.dtype
    if type(value) is int and pa.types.is_integer(dtype):
        physical = np.dtype(physical_dtype(dtype))
        info = np.iinfo(physical)
        return physical.type(value) if info.min <= value <= info.max else None
    if type(value) is float and (pa.types.is_float32(dtype) or pa.types.is_float64(dtype)):
        with np.errstate(over="ignore"):  # past float32's range is infinity, as Arrow converts it
            return np.dtype(physical_dtype(dtype)).type(value)
    return None

def literal_scalars(literals: Sequence[Literal]) -> list[Any]:
    """Return the physical values of non-null, non-string literals, one Arrow conversion per distinct type.

    Why: a generated kernel takes an IN list's values as a parameter array; converting a 100k-value
    list one literal at a time (:func:`literal_scalar`) cost an Arrow array per value.
    """
    groups: dict[str, list[int]] = {}
    for position, literal in enumerate(literals):
        groups.setdefault(str(literal.dtype), []).append(position)
    values: list[Any] = [None] * len(literals)
    for positions in groups.values():
        dtype = literals[positions[0]].dtype
        try:
            host = literal_values_column([literals[p] for p in positions], dtype)
        except (pa.ArrowException, ValueError, TypeError, decimal.InvalidOperation):
            for p in positions:  # names the literal that fails
                values[p] = literal_scalar(literals[p])
            continue
        for p, value in zip(positions, host.data.tolist()):
            values[p] = value
    return values


def string_literal_column(device: Device, value: str | None, rows: int) -> Column:
    """Return a string literal as a one-entry dictionary column, so string kernels read it once."""
    xp = device.xp
    text = "" if value is None else value
    dictionary = Column.from_strings([text], device)
    codes = xp.zeros(rows, dtype=xp.int32)
    validity = xp.zeros(rows, dtype=xp.bool_) if value is None else None
    return Column(pa.string(), codes, validity, None, dictionary)


def literal_column(device: Device, literal: Literal, rows: int) -> Column:
    """Return ``rows`` copies of a literal on ``device`` (a NULL literal is an all-null column)."""
    xp = device.xp
    dtype = literal.dtype
    if is_string(dtype):
        return string_literal_column(device, literal.value, rows)
    if pa.types.is_null(dtype):
        raise PlanError("an untyped NULL literal needs a type (cast it)", column=literal.sql())
    if is_interval(dtype):  # months, days, microseconds: three words a row
        from gpu_engine.expressions.intervals import interval_literal_column

        return interval_literal_column(device, literal.value, rows)
    physical = physical_dtype(dtype)
    if literal.value is None:
        return Column(dtype, xp.zeros(rows, dtype=physical), xp.zeros(rows, dtype=xp.bool_))
    value = literal_scalar(literal)
    if getattr(value, "ndim", 0):  # a DECIMAL wider than 18 digits is two int64 words a row: repeat the pair
        data = xp.empty((rows,) + tuple(value.shape), dtype=physical)
        data[...] = xp.asarray(value)
        return Column(dtype, data)
    return Column(dtype, xp.full(rows, value, dtype=physical))


def is_null_literal(expr: Any) -> bool:
    """Return True for a NULL literal."""
    return isinstance(expr, Literal) and expr.value is None

