"""Type SQL constants as DuckDB does and convert them exactly, so plans never carry lossy constants.

The SQL translator builds every :class:`Literal` here: numbers get DuckDB's
literal types (``1`` int32, ``3000000000`` int64, ``0.06`` decimal(3,2),
``1e3`` float64), dates are ``datetime.date`` values, and constant date
arithmetic with intervals is folded into a date (``DATE '1998-12-01' -
INTERVAL '90' DAY`` -> ``DATE '1998-09-02'``, month ends clamped as DuckDB
does). :func:`coerce_literal` converts a constant to another type only when no
value changes, which lets IN lists and CASE branches share one type.
"""

from __future__ import annotations

import calendar
import datetime
import decimal
import re

import pyarrow as pa

from gpu_engine.columnar.types import is_boolean, is_decimal, is_floating, is_integer, is_string
from gpu_engine.plans.expressions import Literal
from gpu_engine.plans.type_coercion import MAX_DECIMAL_PRECISION, integer_literal_type

__all__ = [
    "number_literal",
    "negate_literal",
    "date_literal",
    "parse_date_text",
    "infinity_refusal",
    "shift_date",
    "compared_interval_arithmetic",
    "coerce_literal",
    "INTERVAL_UNITS",
]

INTERVAL_UNITS = ("day", "week", "month", "year")


def number_literal(text: str) -> Literal:
    """Return the literal for a numeric token as DuckDB types it.

    Digits with a point are a decimal whose precision counts every digit
    written and whose scale counts the digits after the point (``00.10`` is
    decimal(4,2)); an exponent makes a float64; more than 38 digits too.

    Raises
    ------
    ValueError
        For an integer that does not fit int64.
    """
    if "e" in text.lower():
        return Literal(float(text), pa.float64())
    if "." not in text:
        value = int(text)
        return Literal(value, integer_literal_type(value))
    integer_digits, fraction_digits = text.lstrip("+-").split(".")
    scale = len(fraction_digits)
    precision = max(len(integer_digits) + scale, scale, 1)
    if precision > MAX_DECIMAL_PRECISION:
        return Literal(float(text), pa.float64())
    return Literal(decimal.Decimal(text), pa.decimal128(precision, scale))


def negate_literal(literal: Literal) -> Literal:
    """Return ``-literal`` of the literal's own type, as DuckDB 2 types a negated constant.

    The sign is not part of the number token, so ``-2147483648`` negates the
    int64 literal ``2147483648`` and stays int64 (``-2147483647`` is int32).

    Raises
    ------
    TypeError
        When the literal is not a number (or NULL).
    """
    value = literal.value
    if value is None:
        return literal
    if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
        raise TypeError(f"cannot negate {literal.sql()}")
    if isinstance(value, int) and not (is_integer(literal.dtype) and -value < 2 ** (literal.dtype.bit_width - 1)):
        return Literal(-value, integer_literal_type(-value))  # -(-2147483648::INTEGER) needs int64
    if isinstance(value, decimal.Decimal):  # exact: ``-value`` rounds to the context's 28 digits (38 written)
        return Literal(value.copy_negate(), literal.dtype)
    return Literal(-value, literal.dtype)


#: DuckDB's date text: year, month and day separated by one of ``- / space`` (the same twice), month and day of
#: one or two digits (``'2002-3-01'``, which TPC-DS writes), surrounding spaces and a time of day allowed.
_DATE_TEXT = re.compile(r"\s*(\d{1,4})([-/ ])(\d{1,2})\2(\d{1,2})(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?\s*")


def infinity_refusal(text: object, kind: str) -> str | None:
    """Return the refusal of DuckDB's infinite DATE / TIMESTAMP text (``'infinity'``, ``'-infinity'``), or None.

    Why refused rather than read: DuckDB's infinities are special values (the int64 extremes) that each temporal
    function treats apart (``year()`` is NULL, text is ``'infinity'``, arithmetic raises "Cannot subtract
    infinite timestamps"); the engine's DATE and TIMESTAMP columns hold plain ticks every kernel computes with,
    and Arrow gives them out as datetimes (years 1 to 9999), so an infinity would answer as a wrong date.
    """
    if not isinstance(text, str) or text.strip().lower() not in ("infinity", "-infinity"):
        return None
    bound = "9999-12-31" if kind == "DATE" else "9999-12-31 23:59:59.999999"
    if text.strip().startswith("-"):
        bound = "0001-01-01" if kind == "DATE" else "0001-01-01 00:00:00"
    return (f"{kind} '{text}' is not supported: the engine's {kind} has no infinite values (DuckDB's are special "
            f"values its temporal functions treat apart); write a bound such as {kind} '{bound}'")


def parse_date_text(text: str) -> datetime.date:
    """Return the date DuckDB reads in ``text`` (years 1 to 9999).

    Raises
    ------
    ValueError
        When the text is not a date DuckDB accepts, or names a day that does not exist.
    """
    match = _DATE_TEXT.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid date {text!r}")
    year, _separator, month, day = match.groups()
    return datetime.date(int(year), int(month), int(day))


def date_literal(text: str) -> Literal:
    """Return the date literal for ``'yyyy-mm-dd'`` (``'yyyy-m-d'`` too, as DuckDB reads dates).

    Raises
    ------
    ValueError
        When the text is not a valid date.
    """
    return Literal(parse_date_text(text), pa.date32())


def shift_date(date: datetime.date, amount: int, unit: str) -> datetime.date:
    """Return ``date + INTERVAL amount unit``; a day past the month's end becomes its last day.

    ``unit`` is one of :data:`INTERVAL_UNITS`.
    """
    if unit == "day":
        return date + datetime.timedelta(days=amount)
    if unit == "week":
        return date + datetime.timedelta(weeks=amount)
    months = amount * (12 if unit == "year" else 1)
    year, month = divmod(date.month - 1 + months, 12)
    year += date.year
    day = min(date.day, calendar.monthrange(year, month + 1)[1])
    return datetime.date(year, month + 1, day)


def compared_interval_arithmetic(node) -> bool:
    """Return whether ``node`` (a sqlglot node: DATE +/- INTERVAL) is a side of a comparison, BETWEEN or IN,
    through parentheses and more INTERVAL arithmetic: only there is a constant one folded to a DATE. DuckDB's value
    is a TIMESTAMP at midnight, which a date compares with as its own day; as a value (a SELECT column, ``- DATE``,
    an argument) a DATE is of the wrong type (fuzz round 9). Only INTERVAL arithmetic is walked through: in ``d -
    (DATE + INTERVAL) > INTERVAL 2 DAY`` the sum is an operand of ``d - ...``, DuckDB's TIMESTAMP (the difference
    an INTERVAL), where a DATE made it a day count that compared with no INTERVAL (review stop 50). Nor is one of a
    unit under a day: ``ts = DATE '2024-04-01' - INTERVAL 12 HOUR`` compared ts with the DATE '2024-03-31'."""
    from sqlglot import exp

    top = node  # a time of day (INTERVAL 12 HOUR) anywhere in the chain moves off midnight: no DATE holds it (the
    while isinstance(top.parent, (exp.Paren, exp.Add, exp.Sub)):  # simplifier folds a flattened + chain as one)
        top = top.parent
    stack = [top]
    while stack:
        side = stack.pop()
        if isinstance(side, (exp.Paren, exp.Add, exp.Sub)):
            stack.extend(side.iter_expressions())
        elif side.find(exp.Column) is not None:  # (ts - DATE) - INTERVAL: sqlglot regroups it as ts - (DATE -
            return False  # INTERVAL), the sign of the interval flipped; a chain over a column is computed as written
        elif isinstance(side, exp.Interval):
            unit = side.args.get("unit")
            if not (isinstance(unit, exp.Var) and unit.name.lower().removesuffix("s") in INTERVAL_UNITS):
                return False
    child, parent = node, node.parent
    while isinstance(parent, exp.Paren) or (isinstance(parent, (exp.Add, exp.Sub)) and isinstance(
            (parent.expression if parent.this is child else parent.this).unnest(), exp.Interval)):
        child, parent = parent, parent.parent
    return isinstance(parent, (exp.Predicate, exp.Between, exp.In))


def _exact_integer(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (float, decimal.Decimal)) and value == int(value):
        return int(value)
    return None


def _exact_decimal(value, dtype: pa.Decimal128Type) -> decimal.Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
        return None
    exact = decimal.Decimal(repr(value)) if isinstance(value, float) else decimal.Decimal(value)
    quantum = decimal.Decimal(1).scaleb(-dtype.scale)
    try:
        rounded = exact.quantize(quantum, context=decimal.Context(prec=MAX_DECIMAL_PRECISION + 2))
    except decimal.InvalidOperation:  # more digits at this scale than the context holds: cannot fit dtype
        return None
    if rounded != exact or len(rounded.as_tuple().digits) > dtype.precision:
        return None
    return rounded


def coerce_literal(literal: Literal, dtype: pa.DataType) -> Literal | None:
    """Return ``literal`` converted to ``dtype``, or None when a value would change or the types do not mix.

    NULL converts to every type; a string converts to a date when it is an ISO date.
    """
    value = literal.value
    if value is None or literal.dtype == dtype:
        return Literal(value, dtype)
    converted = None
    if is_integer(dtype):
        converted = _exact_integer(value)
        if converted is not None:
            bits = dtype.bit_width
            low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1)) if pa.types.is_signed_integer(dtype) else (0, 2**bits)
            converted = converted if low <= converted < high else None
    elif is_decimal(dtype):
        converted = _exact_decimal(value, dtype)
    elif is_floating(dtype):
        if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            converted = float(value)
    elif pa.types.is_date32(dtype):
        if isinstance(value, str):
            try:
                converted = parse_date_text(value)
            except ValueError:
                converted = None
    elif is_string(dtype):
        converted = value if isinstance(value, str) else None
    elif is_boolean(dtype):
        converted = value if isinstance(value, bool) else None
    return None if converted is None else Literal(converted, dtype)
