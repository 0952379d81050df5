"""Decide the result types of SQL operators as DuckDB's binder does, so plans match the test reference.

The rules were checked against DuckDB 2.0.1 with ``SELECT typeof(...)`` (see
``tests/plans/test_sql_expressions.py`` and ``tests/sql/test_arithmetic_types.py``,
which keep checking them). Integer ``+ - * %`` keeps the wider input type
(TINYINT + TINYINT is TINYINT, INTEGER * INTEGER is INTEGER) and raises where
the result leaves it; a signed and an unsigned integer meet in the signed type
when it is wider, else in BIGINT. (The SQL translator gives an integer literal
the other operand's integer type when the value fits it, as DuckDB's integer
literals do: ``tinyint_col + 100`` is TINYINT, ``+ 1000`` INTEGER.) A uint64
(UBIGINT) beside a signed integer meets it in DuckDB's HUGEINT, which the engine
holds as DECIMAL(38, 0) (DuckDB hands HUGEINT to Arrow as decimal128(38, 0)):
in ``+ - * %``, CASE, COALESCE and set operations alike; beside an unsigned one
it stays UBIGINT. Where types meet, HUGEINT is told apart from a real DECIMAL(38, 0)
(:func:`is_hugeint`, and the mark on plan fields, :func:`gpu_engine.plans.null_type.plan_field`):
beside DECIMAL(10, 2) it is DECIMAL(38, 2), a real DECIMAL(38, 0) stays DECIMAL(38, 0). The evaluator computes both on 128-bit words. Decimals, floats
and ``/`` follow DuckDB exactly, including its rule that a decimal product of
two inputs of precision <= 18 is capped at precision 18 (the evaluator checks
such products for overflow).

An integer operand meeting a decimal is treated as the decimal that holds every
value of its type: int8 -> decimal(3,0), int16 -> (5,0), int32 -> (10,0), int64
-> (19,0). An integer *literal* is typed int32 or int64 first (DuckDB types
``1`` as INTEGER), so ``1 - d`` with ``d`` decimal(15,2) is decimal(16,2).
"""

from __future__ import annotations

import pyarrow as pa

from gpu_engine.columnar.types import (
    MAX_INT64_DECIMAL_PRECISION,
    is_boolean,
    is_decimal,
    is_interval,
    is_floating,
    is_integer,
    is_numeric,
    is_string,
    is_time,
    is_temporal,
)
from gpu_engine.plans.expressions import AggregateCall, BinaryOp, Case, ColumnRef, Expr, Function, UnaryOp

__all__ = [
    "MAX_DECIMAL_PRECISION",
    "HUGEINT",
    "integer_literal_type",
    "integer_as_decimal",
    "arithmetic_type",
    "common_type",
    "is_hugeint",
    "is_hugeint_result",
    "is_comparable",
    "is_castable",
    "unimplemented_cast",
    "unimplemented_cast_message",
]

MAX_DECIMAL_PRECISION = 38
#: DuckDB's HUGEINT as the engine holds it (and as DuckDB hands it to Arrow).
HUGEINT = pa.decimal128(MAX_DECIMAL_PRECISION, 0)

_INTEGER_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}
_UNSIGNED_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}


def integer_literal_type(value: int) -> pa.DataType:
    """Return DuckDB's type for an integer literal: int32 when it fits, else int64.

    Raises
    ------
    ValueError
        When the value does not fit int64 (DuckDB would use HUGEINT).
    """
    if -(2**31) <= value < 2**31:
        return pa.int32()
    if -(2**63) <= value < 2**63:
        return pa.int64()
    raise ValueError(f"integer literal {value} does not fit int64")


def integer_as_decimal(dtype: pa.DataType) -> pa.DataType:
    """Return the decimal type an integer (or decimal) operand takes in decimal arithmetic."""
    if is_decimal(dtype):
        return dtype
    digits = (_INTEGER_DIGITS if pa.types.is_signed_integer(dtype) else _UNSIGNED_DIGITS)[dtype.bit_width]
    return pa.decimal128(digits, 0)


def _float_type(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """Return float32 when no float64 takes part (DuckDB keeps FLOAT), else float64."""
    return pa.float64() if pa.float64() in (left, right) else pa.float32()


def _decimal_arithmetic(op: str, left: pa.DataType, right: pa.DataType) -> pa.DataType:
    left, right = integer_as_decimal(left), integer_as_decimal(right)
    p1, s1, p2, s2 = left.precision, left.scale, right.precision, right.scale
    scale = max(s1, s2)
    if op in ("add", "sub"):
        precision = max(p1 - s1, p2 - s2) + scale + 1
    elif op == "mod":
        precision = max(p1 - s1, p2 - s2) + scale
        if precision > MAX_DECIMAL_PRECISION:
            # DuckDB binds a remainder that needs more than 38 digits as DOUBLE (HUGEINT % 1.5 too), where + - *
            # cap the precision at 38
            return pa.float64()
    else:  # mul
        scale = s1 + s2
        if scale > MAX_DECIMAL_PRECISION:
            raise ValueError(f"a product of {left} and {right} needs scale {scale}, more than {MAX_DECIMAL_PRECISION}")
        precision = p1 + p2
        fits_int64 = max(p1, p2) <= MAX_INT64_DECIMAL_PRECISION and scale < MAX_INT64_DECIMAL_PRECISION
        if fits_int64:
            precision = min(precision, MAX_INT64_DECIMAL_PRECISION)
    return pa.decimal128(min(precision, MAX_DECIMAL_PRECISION), scale)


def arithmetic_type(op: str, left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """Return the result type of ``left op right`` for ``op`` in ``add sub mul div mod``.

    Raises
    ------
    TypeError
        When an operand is not numeric.
    ValueError
        When a decimal product needs a scale above 38 (DuckDB refuses it too).
    """
    if not (is_numeric(left) and is_numeric(right)):
        raise TypeError(f"cannot apply {op} to {left} and {right}")
    if is_floating(left) or is_floating(right):
        return _float_type(left, right)
    if op == "div":
        return pa.float64()
    if is_integer(left) and is_integer(right):
        return _integer_arithmetic(left, right)
    return _decimal_arithmetic(op, left, right)


def _integer_arithmetic(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """Return DuckDB's type for integer ``+ - * %``: the wider type; signed with unsigned, the signed if wider, else
    BIGINT, and HUGEINT beside a UBIGINT."""
    if pa.types.is_signed_integer(left) == pa.types.is_signed_integer(right):
        return left if left.bit_width >= right.bit_width else right
    unsigned, signed = (left, right) if pa.types.is_unsigned_integer(left) else (right, left)
    if unsigned.bit_width == 64:
        return HUGEINT
    return signed if signed.bit_width > unsigned.bit_width else pa.int64()


def _common_integer(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    if pa.types.is_signed_integer(left) == pa.types.is_signed_integer(right):
        return left if left.bit_width >= right.bit_width else right
    unsigned, signed = (left, right) if pa.types.is_unsigned_integer(left) else (right, left)
    if unsigned.bit_width < signed.bit_width:
        return signed
    if unsigned.bit_width == 64:
        return HUGEINT
    return pa.int64() if unsigned.bit_width == 32 else {8: pa.int16(), 16: pa.int32()}[unsigned.bit_width]


def common_type(left: pa.DataType, right: pa.DataType, hugeint: tuple[bool, bool] = (False, False)) -> pa.DataType:
    """Return the type both operands convert to in CASE branches and IN lists (DuckDB's max type).

    ``pa.null()`` (an untyped NULL literal) yields the other type. ``hugeint`` says which operand is DuckDB's
    HUGEINT rather than a real DECIMAL(38, 0) (same storage): HUGEINT beside DECIMAL(p, s) is DECIMAL(38, s),
    keeping the fraction digits, where a real DECIMAL(38, 0) keeps its integer digits and rounds them away.

    Raises
    ------
    TypeError
        When no common type exists (a string and a number, a date and a bool…).
    """
    if left == right or pa.types.is_null(right):
        return left
    if pa.types.is_null(left):
        return right
    if is_numeric(left) and is_numeric(right):
        if is_floating(left) or is_floating(right):
            return _float_type(left, right)
        if is_integer(left) and is_integer(right):
            return _common_integer(left, right)
        if hugeint[0] != hugeint[1]:
            other = right if hugeint[0] else left
            if is_decimal(other):  # HUGEINT beside a real decimal (an integer beside HUGEINT gives HUGEINT below)
                return pa.decimal128(MAX_DECIMAL_PRECISION, other.scale)
        left, right = integer_as_decimal(left), integer_as_decimal(right)
        scale = max(left.scale, right.scale)
        digits = max(left.precision - left.scale, right.precision - right.scale)
        # Past 38 digits DuckDB keeps every integer digit and gives up fraction digits (decimal(38, 37) with
        # decimal(22, 2) is decimal(38, 18)): keeping the scale would leave no room for the wider integer part.
        return pa.decimal128(min(digits + scale, MAX_DECIMAL_PRECISION),
                             min(scale, max(MAX_DECIMAL_PRECISION - digits, 0)))
    if is_string(left) and is_string(right):
        return pa.string()
    if is_temporal(left) and is_temporal(right):
        # date with timestamp, or two timestamp units: the finer timestamp.
        timestamps = [t for t in (left, right) if pa.types.is_timestamp(t)]
        units = ("s", "ms", "us", "ns")
        finest = max(timestamps, key=lambda t: units.index(t.unit))
        zoned = [t for t in timestamps if t.tz is not None]
        if zoned and finest.tz is None and finest.unit != "ns":
            # a TIMESTAMP (s, ms, us) with a TIMESTAMPTZ is a TIMESTAMPTZ, as DuckDB's max type (TIMESTAMP_NS
            # stays TIMESTAMP_NS there)
            return pa.timestamp(finest.unit, tz=zoned[0].tz)
        return finest
    raise TypeError(f"no common type for {left} and {right}")


def is_hugeint(expr: Expr) -> bool:
    """Return True when ``expr`` is DuckDB's HUGEINT, not a real DECIMAL(38, 0) (the engine holds both alike).

    HUGEINT comes from an integer sum (``sum``/``count_if`` of integers or booleans, over groups or windows:
    their plan fields carry the mark, :func:`gpu_engine.plans.null_type.plan_field`), from a UBIGINT beside a
    signed integer in ``+ - * %``, and stays HUGEINT beside integers and other HUGEINTs (``sum(k) + 1``, ``-s``,
    ``coalesce(s, 0)``, ``max(s)``). ``sum`` of a DECIMAL(p, 0) is a real DECIMAL(38, 0), as in DuckDB.
    """
    if expr.dtype != HUGEINT:
        return False
    if isinstance(expr, ColumnRef):
        return expr.hugeint
    if isinstance(expr, BinaryOp):
        return _integral(expr.left) and _integral(expr.right)
    if isinstance(expr, UnaryOp):
        return _integral(expr.operand)
    if isinstance(expr, Case):
        return all(_integral(value) for _, value in expr.whens) and (expr.default is None
                                                                      or _integral(expr.default))
    if isinstance(expr, Function):
        return expr.name in ("greatest", "least", "coalesce", "abs") and all(_integral(arg) for arg in expr.args)
    if isinstance(expr, AggregateCall):
        return is_hugeint_result(expr.dtype, (expr.arg,) if expr.arg is not None else ())
    return False


def is_hugeint_result(dtype: pa.DataType, args: tuple[Expr, ...]) -> bool:
    """Return True when an aggregate or window function of type ``dtype`` over ``args`` gives DuckDB's HUGEINT:
    ``sum``/``count_if`` of integers or booleans, ``max``/``lag``/``sum`` of a HUGEINT; not ``sum`` of a decimal."""
    return dtype == HUGEINT and bool(args) and all(_integral(arg) or pa.types.is_boolean(arg.dtype) for arg in args)


def _integral(expr: Expr) -> bool:
    """An integer, a HUGEINT or an untyped NULL: what leaves a HUGEINT a HUGEINT where it meets it."""
    return is_integer(expr.dtype) or pa.types.is_null(expr.dtype) or is_hugeint(expr)


def is_comparable(left: pa.DataType, right: pa.DataType) -> bool:
    """Return True when ``=``/``<`` between the two types is defined without a cast.

    Numbers compare with numbers, strings with strings, dates and timestamps with
    each other, booleans with booleans; an untyped NULL with anything. A string
    compared with a number is refused (DuckDB would cast the string silently); a TIME with a TIME.
    """
    if pa.types.is_null(left) or pa.types.is_null(right):
        return True
    return any(
        check(left) and check(right) for check in (is_numeric, is_string, is_temporal, is_boolean, is_interval,
                                                   is_time)
    )


def _cast_kind(dtype: pa.DataType) -> str | None:
    if is_numeric(dtype) or is_boolean(dtype):
        return "number"
    if pa.types.is_date32(dtype):
        return "date"
    if pa.types.is_timestamp(dtype):
        return "timestamptz" if dtype.tz is not None else "timestamp"
    if is_time(dtype):
        return "time"
    if is_interval(dtype):
        return "interval"
    return None


_TEMPORAL_KINDS = ("date", "timestamp", "timestamptz", "time", "interval")
#: Casts DuckDB binds (the result has the target type) but implements for no value: each non-NULL row raises
#: "Unimplemented type for cast" (checked for every pair of kinds against DuckDB 2.0.1). TIMESTAMPTZ -> TIME is not
#: one: DuckDB's ICU extension casts it in the session's time zone, so the engine keeps refusing it.
_UNIMPLEMENTED_CASTS = frozenset(
    [("number", kind) for kind in _TEMPORAL_KINDS] + [(kind, "number") for kind in _TEMPORAL_KINDS]
    + [("date", "time"), ("date", "interval"), ("timestamp", "interval"), ("timestamptz", "interval"),
       ("time", "date"), ("time", "timestamp"), ("time", "timestamptz"), ("time", "interval"),
       ("interval", "date"), ("interval", "timestamp"), ("interval", "timestamptz"), ("interval", "time")])


def unimplemented_cast(source: pa.DataType, target: pa.DataType) -> bool:
    """Return True for an explicit ``CAST(source AS target)`` DuckDB binds but converts no value with (a number to
    DATE, a DATE to INTEGER): it is planned, typed ``target``, and raises for the first non-NULL row that reaches
    it (NULL rows and empty inputs answer; a constant's too: DuckDB does not fold it), as DuckDB does. Implicit
    conversions (:func:`is_castable`) stay refused, and Spark SQL's casts are its own."""
    return (_cast_kind(source), _cast_kind(target)) in _UNIMPLEMENTED_CASTS or (
        pa.types.is_timestamp(source) and pa.types.is_timestamp(target) and source.tz is None and target.tz is None
        and source.unit == "ns" and target.unit == "s")  # TIMESTAMP_NS -> TIMESTAMP_S: DuckDB has none


def unimplemented_cast_message(source: pa.DataType, target: pa.DataType) -> str:
    """Return DuckDB's error for an :func:`unimplemented_cast` (its type names)."""
    from gpu_engine.plans.function_translation import duckdb_type_name  # (it imports this module)

    return (f"Conversion Error: Unimplemented type for cast ({duckdb_type_name(source) or source} -> "
            f"{duckdb_type_name(target) or target})")


def is_castable(source: pa.DataType, target: pa.DataType) -> bool:
    """Return True when ``CAST(source AS target)`` is supported."""
    if source == target or pa.types.is_null(source) or is_string(source) or is_string(target):
        return True
    if is_numeric(target) or is_boolean(target):
        return is_numeric(source) or is_boolean(source)
    if is_temporal(target):
        return is_temporal(source)
    if is_time(target):  # a TIMESTAMP's time of day (DuckDB casts no DATE or TIMESTAMPTZ to TIME)
        return pa.types.is_timestamp(source) and source.tz is None
    return False
