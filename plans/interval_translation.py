"""Translate SQL's INTERVAL forms into the typed IR: literals, constructors, arithmetic, ``age``.

DuckDB's forms: ``INTERVAL '1 year 2 months'`` and ``INTERVAL 3 DAY`` are
constants (:class:`~gpu_engine.plans.intervals.IntervalValue` literals);
``INTERVAL (x) DAY`` scales a computed count, as ``to_days(x)`` does;
``date/timestamp ± interval`` is a TIMESTAMP, ``timestamp - timestamp`` an
INTERVAL of days and microseconds, ``interval ± interval`` and
``interval * integer`` intervals. A timestamp shifted by a *constant* interval
stays the ``add_interval(t, months, days, micros)`` call the generated kernels
lower, so queries that only add constants keep their fused plans; anything
with an interval value per row is evaluated unfused
(:mod:`gpu_engine.expressions.intervals`).
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from sqlglot import exp
from sqlglot.tokens import TokenType

from gpu_engine.columnar.types import INTERVAL, is_integer, is_interval, is_numeric, is_string, is_temporal, is_time
from gpu_engine.plans.expressions import Cast, Expr, Function, Literal
from gpu_engine.plans.function_translation import build_function
from gpu_engine.plans.intervals import (
    UNIT_CONSTRUCTORS, IntervalValue, constructor_unit, interval_unit, parse_interval,
)

__all__ = ["interval_expression", "interval_arithmetic", "negated_interval", "interval_text_literal",
           "INTERVAL_CALLS", "is_interval_arithmetic", "to_days_call", "interval_texts_kept"]

#: The constructor function of each unit (``day`` -> ``to_days``).
_CONSTRUCTOR_OF = {unit: name for name, unit in (
    (n, constructor_unit(n)) for n in ("to_millennia", "to_centuries", "to_decades", "to_years", "to_quarters",
                                       "to_months", "to_weeks", "to_days", "to_hours", "to_minutes", "to_seconds",
                                       "to_milliseconds", "to_microseconds"))}
_INT32 = (-(2**31), 2**31 - 1)
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%"}


def _scaled(translator: Any, amount: int, unit: str, tree: exp.Expression) -> IntervalValue:
    field, scale = UNIT_CONSTRUCTORS[unit]
    value = amount * scale
    if not (_INT32[0] <= value <= _INT32[1] if field < 2 else -(2**63) <= value < 2**63):
        raise translator.error(f"interval value {amount} {unit}s is out of range", tree)
    parts = [0, 0, 0]
    parts[field] = value
    return IntervalValue(*parts)


def interval_text_literal(translator: Any, text: str, tree: exp.Expression) -> Literal:
    """Return the constant interval a text spells (``'1 year 2 months'``), or raise naming it."""
    try:
        return Literal(parse_interval(text), INTERVAL)
    except ValueError as error:
        raise translator.error(f"Could not convert string '{text}' to INTERVAL ({error})", tree) from None


def interval_expression(translator: Any, tree: exp.Interval) -> Expr:
    """Return ``INTERVAL <amount> [<unit>]``: a constant interval, or ``to_<unit>s(amount)`` of a computed one."""
    unit_tree = tree.args.get("unit")
    if unit_tree is not None and not isinstance(unit_tree, exp.Var):
        raise translator.error(f"INTERVAL ... {unit_tree.sql(dialect='duckdb')} (a span of units) is not supported; "
                               "write the interval as text (INTERVAL '1 year 2 months')", tree)
    unit_name = unit_tree.name if unit_tree is not None else ""
    unit = interval_unit(unit_name) if unit_name else None
    if unit_name and unit is None:
        raise translator.error(f"unknown INTERVAL unit {unit_name!r}", tree)
    if tree.this is None:
        raise translator.error("INTERVAL needs an amount", tree)
    amount = translator.translate(tree.this)
    if isinstance(amount, Literal) and amount.value is None:
        return Literal(None, INTERVAL)
    if isinstance(amount, Literal) and isinstance(amount.value, str):
        if unit and "." in amount.value and not tree.args.get("fraction_in_string"):
            # DuckDB reads INTERVAL '1.5' DAY as a count cast to an integer (1 day), unlike INTERVAL '1.5 days'.
            raise translator.error(f"INTERVAL '{amount.value}' {unit_name} (a fraction with the unit outside the "
                                   f"text) is not supported; write INTERVAL '{amount.value} {unit_name.lower()}'",
                                   tree)
        return interval_text_literal(translator, f"{amount.value} {unit_name}" if unit else amount.value, tree)
    if unit is None:
        raise translator.error("INTERVAL of a number needs a unit (INTERVAL 3 DAY)", tree)
    if isinstance(amount, Literal) and isinstance(amount.value, int) and not isinstance(amount.value, bool):
        return Literal(_scaled(translator, amount.value, unit, tree), INTERVAL)
    return build_function(translator, _CONSTRUCTOR_OF[unit], [amount], tree)


def negated_interval(translator: Any, operand: Expr, tree: exp.Expression) -> Expr:
    """Return ``-interval``: a constant folded, a column negated per row."""
    if isinstance(operand, Literal):
        value = operand.value
        return Literal(None if value is None else IntervalValue(-value.months, -value.days, -value.micros), INTERVAL)
    return build_function(translator, "interval_negate", [operand], tree)


def is_interval_arithmetic(op: str, left: Expr, right: Expr) -> bool:
    """Return True when ``left op right`` is interval arithmetic: an interval operand, or two instants subtracted
    where one is a timestamp (``DATE - DATE`` stays the days between, BIGINT)."""
    if is_interval(left.dtype) or is_interval(right.dtype):
        return True
    both_instants = is_temporal(left.dtype) and is_temporal(right.dtype)
    return op == "sub" and both_instants and not (pa.types.is_date32(left.dtype) and pa.types.is_date32(right.dtype))


def _as_untyped_null(expr: Expr, dtype: pa.DataType) -> Expr:
    return Literal(None, dtype) if isinstance(expr, Literal) and pa.types.is_null(expr.dtype) else expr


def _whole_days(interval: Expr) -> bool:
    """Return True when ``interval`` holds no time of day: a constant without microseconds, or a constructor of
    days, weeks, months or longer (``to_months(n)``)."""
    if isinstance(interval, Literal):
        return interval.value is None or interval.value.micros == 0
    unit = constructor_unit(interval.name) if isinstance(interval, Function) else None
    return unit is not None and UNIT_CONSTRUCTORS[unit][0] < 2


def _shifted(translator: Any, instant: Expr, interval: Expr, subtract: bool, tree: exp.Expression) -> Expr:
    """Return ``instant ± interval`` (a TIMESTAMP; a DATE where the Spark dialect marked a date plus whole days,
    see :mod:`gpu_engine.sql.spark_functions`)."""
    shifted = _timestamp_shifted(translator, instant, interval, subtract, tree)
    if tree.meta.get("date_interval_is_date") and pa.types.is_date32(instant.dtype) and _whole_days(interval):
        return Cast(shifted, pa.date32())
    return shifted


def _timestamp_shifted(translator: Any, instant: Expr, interval: Expr, subtract: bool, tree: exp.Expression
                       ) -> Expr:
    """Return ``instant ± interval``: a constant interval through ``add_interval``'s constants (fusable)."""
    if isinstance(interval, Literal) and interval.value is not None:
        value = interval.value
        sign = -1 if subtract else 1
        constants = [Literal(sign * value.months, pa.int64()), Literal(sign * value.days, pa.int64()),
                     Literal(sign * value.micros, pa.int64())]
        return build_function(translator, "add_interval", [instant, *constants], tree)
    if subtract:
        interval = negated_interval(translator, interval, tree)
    return build_function(translator, "timestamp_add_interval", [instant, interval], tree)


def interval_arithmetic(translator: Any, op: str, left: Expr, right: Expr, tree: exp.Expression) -> Expr:
    """Return ``left op right`` where :func:`is_interval_arithmetic` holds, or raise naming the operand types."""
    left, right = _as_untyped_null(left, right.dtype), _as_untyped_null(right, left.dtype)
    left_interval, right_interval = is_interval(left.dtype), is_interval(right.dtype)
    if left_interval and right_interval and op in ("add", "sub"):
        return build_function(translator, "interval_add" if op == "add" else "interval_sub", [left, right], tree)
    if (left_interval and is_time(right.dtype) and op == "add"
            or right_interval and is_time(left.dtype) and op in ("add", "sub")):
        # DuckDB's TIME ± INTERVAL: the interval's time part, wrapped within the day (its days and months add
        # nothing to a time of day)
        time, interval = (right, left) if left_interval else (left, right)
        if op == "sub":
            interval = negated_interval(translator, interval, tree)
        return build_function(translator, "time_add_interval", [time, interval], tree)
    if left_interval and is_temporal(right.dtype) and op == "add":
        return _shifted(translator, right, left, False, tree)
    if right_interval and is_temporal(left.dtype) and op in ("add", "sub"):
        return _shifted(translator, left, right, op == "sub", tree)
    if op == "mul" and (left_interval or right_interval):
        interval, factor = (left, right) if left_interval else (right, left)
        if is_integer(factor.dtype):
            return build_function(translator, "interval_multiply", [interval, factor], tree)
        if is_numeric(factor.dtype):  # DuckDB: INTERVAL * DOUBLE, a decimal or float factor cast to DOUBLE
            return build_function(translator, "interval_scale", [interval, _as_double(factor)], tree)
    if op == "div" and left_interval and is_numeric(right.dtype):  # INTERVAL / DOUBLE, an integer divisor too
        return build_function(translator, "interval_divide", [left, _as_double(right)], tree)
    if op == "sub" and is_temporal(left.dtype) and is_temporal(right.dtype):
        return build_function(translator, "timestamp_difference", [left, right], tree)
    hint = " (an INTERVAL multiplies by or divides by a number)" if op in ("mul", "div") else ""
    raise translator.error(f"type mismatch: cannot apply '{_SYMBOL[op]}' to {left.dtype} and {right.dtype}{hint}",
                           tree)


def _as_double(value: Expr) -> Expr:
    """Return ``value`` as a DOUBLE (a constant converted here, a column cast per row)."""
    if pa.types.is_float64(value.dtype):
        return value
    if isinstance(value, Literal):
        return Literal(None if value.value is None else float(value.value), pa.float64())
    return Cast(value, pa.float64())


def _instant(translator: Any, tree: exp.Expression) -> Expr:
    operand = translator.translate(tree)
    if isinstance(operand, Literal) and is_string(operand.dtype) and operand.value is not None:
        from gpu_engine.plans.sql_literals import coerce_literal, infinity_refusal

        as_date = coerce_literal(operand, pa.date32())
        if as_date is None:
            raise translator.error(infinity_refusal(operand.value, "DATE") or f"invalid date literal {operand.sql()}",
                                   tree)
        return as_date
    return _as_untyped_null(operand, pa.timestamp("us"))


def _age(translator: Any, tree: exp.Expression) -> Expr:
    args = list(tree.expressions) if isinstance(tree, exp.Anonymous) else [tree.this, tree.expression]
    args = [arg for arg in args if arg is not None]
    if len(args) not in (1, 2):  # age(x): from today's midnight (DuckDB's current_date), read when it runs
        raise translator.error(f"age() takes 1 or 2 arguments, got {len(args)}", tree)
    return build_function(translator, "age", [_instant(translator, arg) for arg in args], tree)


def _constructor(translator: Any, tree: exp.Expression) -> Expr:
    name = "to_days" if isinstance(tree, exp.ToDays) else tree.name.lower()
    args = list(tree.expressions) if isinstance(tree, exp.Anonymous) else [tree.this]
    if len(args) != 1 or args[0] is None:
        raise translator.error(f"{name}() takes 1 argument", tree)
    count = _as_untyped_null(translator.translate(args[0]), pa.int64())
    if isinstance(count, Literal) and isinstance(count.value, int) and not isinstance(count.value, bool):
        return Literal(_scaled(translator, count.value, constructor_unit(name), tree), INTERVAL)
    return build_function(translator, name, [count], tree)


#: Calls the translator hands here by name (sqlglot keeps them as anonymous functions).
INTERVAL_CALLS = {"age": _age, **{name: _constructor for name in _CONSTRUCTOR_OF.values()}}


_ONE_UNIT = re.compile(r"\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]+)\s*")  # sqlglot's INTERVAL_STRING_RE


def interval_texts_kept(tokens: list) -> list:
    """Return ``tokens`` with each ``INTERVAL '<text>'`` whose text holds one unit and more (``'3 days 04:05:06'``,
    ``'2 weeks ago'``) prefixed by ``0 days``, so the parser keeps the whole text.

    Why: sqlglot's parser turns an interval text with exactly one ``<number> <unit>`` into ``INTERVAL '<number>'
    <unit>`` and drops the rest of the text (a clock time, ``ago``), which would silently change the value; with a
    second unit it keeps the text, which :func:`~gpu_engine.plans.intervals.parse_interval` reads as DuckDB does
    (zero days added change nothing).
    """
    for previous, token in zip(tokens, tokens[1:]):
        if previous.token_type == TokenType.INTERVAL and token.token_type == TokenType.STRING:
            parts = _ONE_UNIT.findall(token.text)
            if len(parts) == 1 and not _ONE_UNIT.fullmatch(token.text):
                token.text = "0 days " + token.text
    return tokens


def to_days_call(translator: Any, tree: exp.ToDays) -> Expr:
    """Return ``to_days(n)`` (sqlglot parses it into its own node)."""
    return _constructor(translator, tree)

