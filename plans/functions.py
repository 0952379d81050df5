"""Type the scalar function library as DuckDB 2.0.1 binds it: which functions exist, their arguments and result.

Every :class:`~gpu_engine.plans.expressions.Function` node is typed here, by
the SQL translator when it builds one and by plan validation when a plan comes
from JSON, so a call with the wrong arguments is refused before anything runs
and the evaluator (:mod:`gpu_engine.expressions.functions`) can trust the
types it is handed. The result types were read off DuckDB with
``SELECT typeof(...)`` (``tests/expressions/test_*_functions.py`` keep
checking them): ``floor``/``ceil`` of an integer is DOUBLE, of a
``decimal(p, s)`` ``decimal(p, 0)``; ``round(decimal(p, s), n)`` is
``decimal(p, min(max(n, 0), s))``; ``sign`` is TINYINT; ``//`` of integers
is the integer type of ``+`` (DuckDB truncates toward zero), of anything else
DOUBLE division; ``date_trunc`` of a DATE is a TIMESTAMP, as is
``date + INTERVAL``.

Arguments that must be constants (``round``'s digits, ``lpad``'s width and
fill, ``replace``'s search and replacement, a date part's name) are checked
here too: a column there is refused by name, never ignored.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import pyarrow as pa

from gpu_engine.columnar.types import (
    is_decimal, is_floating, is_integer, is_interval, is_numeric, is_string, is_temporal, is_time,
)
from gpu_engine.plans.expressions import Expr, Literal
from gpu_engine.plans.intervals import INTERVAL_FUNCTIONS, shifted_dtype
from gpu_engine.plans.type_coercion import arithmetic_type, common_type

__all__ = [
    "SCALAR_FUNCTIONS",
    "SCALAR_SUBQUERY_VALUE",
    "DATE_PARTS",
    "TIME_PARTS",
    "TRUNC_PARTS",
    "DIFF_PARTS",
    "SAME_AS_PART",
    "function_type",
    "constant_value",
    "part_name",
    "strftime_tokens",
    "regex_pattern",
    "strptime_format",
    "capturing_groups",
    "REGEXP_EXTRACT_GROUPS",
]

#: Fields of ``date_part``/``EXTRACT`` beyond year, month and day (which the Extract node has).
#: Parts of the time of day (0 for a DATE), in microseconds per unit.
TIME_PARTS = {"hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000, "millisecond": 1_000,
              "microsecond": 1}
DATE_PARTS = ("year", "month", "day", "quarter", "dayofweek", "isodow", "dayofyear", "week", "yearweek",
              "decade", "century", "millennium", "isoyear", "epoch", "julian", "era", *TIME_PARTS)
#: Parts DuckDB's date_trunc / date_diff / date_sub read as another: a day's parts as the day, yearweek as the
#: week, epoch as the second.
SAME_AS_PART = {"dayofweek": "day", "isodow": "day", "dayofyear": "day", "julian": "day", "yearweek": "week",
                "epoch": "second"}
#: Parts ``date_trunc`` truncates a date or timestamp to.
TRUNC_PARTS = ("millennium", "century", "decade", "year", "isoyear", "quarter", "month", "week", "day", "hour",
               "minute", "second", "millisecond", "microsecond", *SAME_AS_PART)
#: Parts ``date_diff`` counts boundaries of (and ``date_sub`` whole ones of).
DIFF_PARTS = ("year", "isoyear", "quarter", "month", "week", "day", "decade", "century", "millennium", *TIME_PARTS,
              *SAME_AS_PART)

#: DuckDB's other spellings of the part names.
_PART_ALIASES = {
    "years": "year", "y": "year", "yr": "year", "yrs": "year", "months": "month", "mon": "month", "mons": "month",
    "days": "day", "d": "day", "quarters": "quarter", "weeks": "week", "w": "week", "dow": "dayofweek",
    "weekday": "dayofweek", "doy": "dayofyear", "decades": "decade", "centuries": "century",
    "hours": "hour", "h": "hour", "hr": "hour", "hrs": "hour", "minutes": "minute", "min": "minute",
    "mins": "minute", "m": "minute", "seconds": "second", "s": "second", "sec": "second", "secs": "second",
    "milliseconds": "millisecond", "ms": "millisecond", "msec": "millisecond", "msecs": "millisecond",
    "microseconds": "microsecond", "us": "microsecond", "usec": "microsecond", "usecs": "microsecond",
    "millennia": "millennium", "millenniums": "millennium", "weekofyear": "week",
}


def part_name(value: object) -> str | None:
    """Return the canonical date part a constant names (``'DOW'`` -> ``dayofweek``), or None."""
    if not isinstance(value, str):
        return None
    name = value.strip().lower()
    return _PART_ALIASES.get(name, name)


def constant_value(arg: Expr, what: str, kinds: tuple[type, ...]):
    """Return the value of a constant argument, raising TypeError naming ``what`` when it is not one."""
    if not isinstance(arg, Literal) or (arg.value is not None and (
            isinstance(arg.value, bool) or not isinstance(arg.value, kinds))):
        raise TypeError(f"{what} must be a constant (a column or expression there is not supported)")
    return arg.value


def _arity(name: str, args: Sequence[Expr], low: int, high: int | None) -> None:
    if len(args) < low or (high is not None and len(args) > high):
        wanted = f"{low}" if high == low else (f"{low} to {high}" if high is not None else f"at least {low}")
        raise TypeError(f"{name}() takes {wanted} arguments, got {len(args)}")


def _string(name: str, arg: Expr, position: int) -> None:
    if not (is_string(arg.dtype) or pa.types.is_null(arg.dtype)):
        raise TypeError(f"{name}() needs a string as argument {position}, got {arg.dtype}")


def _number(name: str, arg: Expr, position: int) -> None:
    if not (is_numeric(arg.dtype) or pa.types.is_null(arg.dtype)):
        raise TypeError(f"{name}() needs a number as argument {position}, got {arg.dtype}")


def _integer_constant(name: str, args: Sequence[Expr], position: int, what: str) -> None:
    constant_value(args[position - 1], f"{name}()'s {what} (argument {position})", (int,))


def _string_constant(name: str, args: Sequence[Expr], position: int, what: str) -> None:
    _string(name, args[position - 1], position)
    constant_value(args[position - 1], f"{name}()'s {what} (argument {position})", (str,))


# -- strings --------------------------------------------------------------------------------------
def _string_unary(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 1, 1)
    _string(name, args[0], 1)
    return pa.int64() if name == "length" else pa.string()


def _repeat(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2, 2)
    _string(name, args[0], 1)
    _integer_constant(name, args, 2, "count")
    return pa.string()


def _split_part(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 3, 3)
    _string(name, args[0], 1)
    _string_constant(name, args, 2, "delimiter")
    _integer_constant(name, args, 3, "index")
    return pa.string()


def _trim(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 1, 2)
    _string(name, args[0], 1)
    if len(args) == 2:
        _string_constant(name, args, 2, "characters")
    return pa.string()


def _replace(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 3, 3)
    _string(name, args[0], 1)
    _string_constant(name, args, 2, "search string")
    _string_constant(name, args, 3, "replacement")
    return pa.string()


def _search(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2, 2)
    _string(name, args[0], 1)
    _string_constant(name, args, 2, "search string")
    return pa.int64() if name == "strpos" else pa.bool_()


#: Regular expression options DuckDB takes that Arrow's RE2 matching honours: case-insensitive and -sensitive,
#: and (regexp_replace) every match rather than the first.
_REGEX_OPTIONS = {"regexp_matches": "ic", "regexp_full_match": "ic", "regexp_replace": "icg", "regexp_extract": "ic"}


def regex_pattern(name: str, pattern: str, options: str | None) -> str:
    """Return ``pattern`` with its options applied as RE2 flags, checked to compile (RE2, as DuckDB's).

    Raises
    ------
    TypeError
        For an option the engine does not apply or a pattern RE2 does not compile.
    """
    import pyarrow.compute as pc

    options = options or ""
    unknown = sorted(set(options) - set(_REGEX_OPTIONS[name]))
    if unknown:
        raise TypeError(f"{name}() does not support the option(s) {''.join(unknown)!r} "
                        f"(supported: {_REGEX_OPTIONS[name]!r})")
    insensitive = options.rfind("i") > options.rfind("c")  # the last of 'i' and 'c' wins
    flagged = f"(?i){pattern}" if insensitive else pattern
    try:
        pc.match_substring_regex(pa.array([""]), pattern=flagged)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise TypeError(f"{name}(): invalid regular expression {pattern!r}: {error}") from None
    return flagged


def _regex(name: str, args: Sequence[Expr]) -> pa.DataType:
    replace = name == "regexp_replace"
    _arity(name, args, 3 if replace else 2, 4 if replace else 3)
    _string(name, args[0], 1)
    _string_constant(name, args, 2, "pattern")
    if replace:
        _string_constant(name, args, 3, "replacement")
    if len(args) > (3 if replace else 2):
        _string_constant(name, args, len(args), "options")
    if args[1].value is not None:
        regex_pattern(name, args[1].value, args[-1].value if len(args) > (3 if replace else 2) else None)
    return pa.string() if replace else pa.bool_()


#: The highest group regexp_extract reads (as DuckDB: RE2's rewrite strings name groups 0 to 9).
REGEXP_EXTRACT_GROUPS = 9


def _regexp_extract(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``regexp_extract(s, pattern[, group[, options]])``: the group's text of the first match, '' without one."""
    import re

    _arity(name, args, 2, 4)
    _string(name, args[0], 1)
    _string_constant(name, args, 2, "pattern")
    group = 0
    if len(args) > 2:
        _integer_constant(name, args, 3, "group")
        group = args[2].value
    if len(args) > 3:
        _string_constant(name, args, 4, "options")
    if group is not None and not 0 <= group <= REGEXP_EXTRACT_GROUPS:
        raise TypeError(f"{name}() reads groups 0 to {REGEXP_EXTRACT_GROUPS}, got {group}")
    if args[1].value is not None:
        regex_pattern(name, args[1].value, args[3].value if len(args) > 3 else None)
    return pa.string()


def capturing_groups(pattern: str) -> int:
    """Return how many capturing groups an RE2 pattern has (``(...)`` and named groups; not ``(?:...)``, escaped
    parentheses or parentheses inside a character class)."""
    count, position, in_class = 0, 0, False
    while position < len(pattern):
        char = pattern[position]
        if char == "\\":
            position += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            position += 1
            if pattern[position:position + 1] == "^":
                position += 1
            if pattern[position:position + 1] == "]":  # []...] and [^]...] hold a ]
                position += 1
            continue
        elif char == "(" and (not pattern.startswith("(?", position)
                              or pattern.startswith(("(?P<", "(?<"), position)):
            count += 1
        position += 1
    return count


def _printf(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``printf(format, ...)`` / ``format(format, ...)``: an argument per specifier, of the type it formats
    (:func:`~gpu_engine.expressions.text_formatting.specifier_argument`); arguments past them are ignored."""
    from gpu_engine.expressions.text_formatting import format_tokens, printf_tokens, specifier_argument

    _arity(name, args, 1, None)
    _string_constant(name, args, 1, "format")
    if args[0].value is None:
        return pa.string()
    tokens = printf_tokens(args[0].value) if name == "printf" else format_tokens(args[0].value)
    specs = [text for kind, text in tokens if kind == "spec"]
    if len(specs) > len(args) - 1:
        raise TypeError(f"{name}(): the format has {len(specs)} specifier(s) for {len(args) - 1} argument(s)")
    for position, (spec, arg) in enumerate(zip(specs, args[1:]), 2):
        if not pa.types.is_null(arg.dtype) and specifier_argument(name, spec, arg.dtype) != arg.dtype:
            raise TypeError(f"{name}(): {spec} does not format {arg.dtype} (argument {position})")
    return pa.string()


def _md5(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 1, 1)
    _string(name, args[0], 1)
    return pa.string()


def _character_code(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``ascii``/``unicode`` (INTEGER: the first character's code point), ``strlen``/``bit_length`` (BIGINT: the
    bytes or bits), ``strip_accents`` (VARCHAR)."""
    _arity(name, args, 1, 1)
    _string(name, args[0], 1)
    return pa.int32() if name in ("ascii", "unicode") else pa.int64() if name in ("strlen", "bit_length") \
        else pa.string()


def _chr(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 1, 1)
    if not (is_integer(args[0].dtype) or pa.types.is_null(args[0].dtype)):
        raise TypeError(f"chr() needs an integer code point as argument 1, got {args[0].dtype}")
    return pa.string()


def _translate(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 3, 3)
    _string(name, args[0], 1)
    _string(name, args[1], 2)  # characters to replace: constants, or columns (then row by row)
    _string(name, args[2], 3)  # their replacements
    return pa.string()


def _like_escape(name: str, args: Sequence[Expr]) -> pa.DataType:
    """DuckDB's ``like_escape(s, pattern, escape)`` / ``ilike_escape``: ``s [I]LIKE pattern ESCAPE escape`` with a
    pattern that may be a column (matched row by row); the escape a constant ('' for none)."""
    _arity(name, args, 3, 3)
    _string(name, args[0], 1)
    _string(name, args[1], 2)
    _string(name, args[2], 3)
    if not isinstance(args[2], Literal):
        raise TypeError(f"{name}()'s escape character (argument 3) must be a constant")
    return pa.bool_()


def _left_right(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2, 2)
    _string(name, args[0], 1)
    _integer_constant(name, args, 2, "length")
    return pa.string()


def _substring(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``substring(s, start[, length])`` with a start or length that is not a constant (read per row); constant
    bounds are the :class:`~gpu_engine.plans.expressions.Substring` node. BIGINT bounds, as DuckDB's signature
    (narrower integers widen; UBIGINT and non-integers it does not bind)."""
    _arity(name, args, 2, 3)
    _string(name, args[0], 1)
    for position, arg in enumerate(args[1:], 2):
        if not (is_integer(arg.dtype) and arg.dtype != pa.uint64() or pa.types.is_null(arg.dtype)):
            raise TypeError(f"{name}() needs a BIGINT {('start', 'length')[position - 2]}, got {arg.dtype}")
    return pa.string()


def _pad(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 3, 3)
    _string(name, args[0], 1)
    _integer_constant(name, args, 2, "length")
    width = args[1].value
    if width is not None and not -(2**31) <= width < 2**31:  # DuckDB binds lpad(VARCHAR, INTEGER, VARCHAR) only
        raise TypeError(f"{name}()'s length (argument 2) must fit an INTEGER (-2147483648 to 2147483647), got {width}")
    _string_constant(name, args, 3, "fill")
    return pa.string()


def _concat(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, {"||": 2, "concat": 1, "concat_ws": 2}[name], 2 if name == "||" else None)
    for position, arg in enumerate(args, 1):
        _string(name, arg, position)  # the translator casts other types to VARCHAR first
    return pa.string()


# -- numbers --------------------------------------------------------------------------------------
def _same_number(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 1, 1)
    _number(name, args[0], 1)
    return args[0].dtype


def _double(name: str, args: Sequence[Expr]) -> pa.DataType:
    count = {"power": 2, "atan2": 2, "log": None}.get(name, 1)
    _arity(name, args, 1 if count is None else count, 2 if count is None else count)
    for position, arg in enumerate(args, 1):
        _number(name, arg, position)
    return pa.float64()


def _floor_ceil(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 1, 1)
    _number(name, args[0], 1)
    dtype = args[0].dtype
    if is_decimal(dtype):
        return pa.decimal128(dtype.precision, 0)
    return dtype if is_floating(dtype) else pa.float64()


def _round(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2 if name == "round_even" else 1, 1 if name == "trunc" else 2)
    _number(name, args[0], 1)
    digits = 0
    if len(args) == 2:
        _integer_constant(name, args, 2, "number of decimal places")
        digits = args[1].value
    dtype = args[0].dtype
    if is_decimal(dtype):
        if (digits or 0) < 0 and dtype.scale == 0 and -digits <= dtype.precision:  # 99999 -> 100000: a digit more,
            return pa.decimal128(min(dtype.precision + 1, 38), 0)  # as DuckDB types it (a decimal of scale 0 only)
        return pa.decimal128(dtype.precision, min(max(digits or 0, 0), dtype.scale))
    return dtype


def _sign(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 1, 1)
    _number(name, args[0], 1)
    return pa.int8()


def _greatest(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 1, None)
    for position, arg in enumerate(args, 1):
        if not (is_numeric(arg.dtype) or is_temporal(arg.dtype) or is_time(arg.dtype) or pa.types.is_null(arg.dtype)):
            raise TypeError(f"{name}() compares numbers, dates and times, got {arg.dtype} as argument {position}")
    try:
        return functools.reduce(common_type, [arg.dtype for arg in args])
    except TypeError:
        raise TypeError(f"{name}() arguments have no common type: "
                        + ", ".join(str(arg.dtype) for arg in args)) from None


def _float_test(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``isnan``/``isinf``/``isfinite``: of a number as DOUBLE (an integer or decimal is finite, not NaN)."""
    _arity(name, args, 1, 1)
    _number(name, args[0], 1)
    return pa.bool_()


def _integer_division(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2, 2)
    for position, arg in enumerate(args, 1):
        _number(name, arg, position)
    left, right = args[0].dtype, args[1].dtype
    if is_integer(left) and is_integer(right):
        return arithmetic_type("add", left, right)
    return pa.float64()


# -- dates ----------------------------------------------------------------------------------------
def _part(name: str, args: Sequence[Expr], parts: tuple[str, ...]) -> None:
    value = constant_value(args[0], f"{name}()'s part (argument 1)", (str,))
    if part_name(value) not in parts:
        raise TypeError(f"{name}() does not support the part {value!r} (supported: {', '.join(parts)})")


def _temporal(name: str, arg: Expr, position: int) -> None:
    if not (is_temporal(arg.dtype) or pa.types.is_null(arg.dtype)):
        raise TypeError(f"{name}() needs a date or timestamp as argument {position}, got {arg.dtype}")


def _date_part(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2, 2)
    _part(name, args, DATE_PARTS)
    if is_time(args[1].dtype):  # a TIME has the parts of a time of day only, as DuckDB's
        if args[0].value is not None and part_name(args[0].value) not in (*TIME_PARTS, "epoch"):
            raise TypeError(f'{name}(): "time" units "{part_name(args[0].value).upper()}" not recognized')
    else:
        _temporal(name, args[1], 2)
    return pa.float64() if part_name(args[0].value) in ("epoch", "julian") else pa.int64()


def _date_trunc(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2, 2)
    _part(name, args, TRUNC_PARTS)
    _temporal(name, args[1], 2)
    # A TIMESTAMPTZ truncates in the Session's zone (UTC: its UTC fields) and stays one, as DuckDB's.
    return pa.timestamp("us", tz=args[1].dtype.tz) if pa.types.is_timestamp(args[1].dtype) else pa.timestamp("us")


def _date_diff(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 3, 3)
    _part(name, args, DIFF_PARTS)
    _temporal(name, args[1], 2)
    _temporal(name, args[2], 3)
    return pa.int64()


def _add_interval(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``add_interval(t, months, days, microseconds)``: ``t + INTERVAL ...`` (a TIMESTAMP, as DuckDB; of a TIMESTAMP
    WITH TIME ZONE one with its zone, of nanoseconds one of nanoseconds: ``shifted_dtype``)."""
    _arity(name, args, 4, 4)
    _temporal(name, args[0], 1)
    _integer_constant(name, args, 2, "months")
    _integer_constant(name, args, 3, "days")
    _integer_constant(name, args, 4, "microseconds")
    return shifted_dtype(args[0].dtype)


#: strftime's specifiers (DuckDB's, ``%-x`` forms included; ``%z`` is ``+00`` and ``%Z`` empty without time zones).
STRFTIME_SPECIFIERS = frozenset("aAwudbBhmyYHIpMSfjUWVGcxXgnzZ%")
_UNPADDED_SPECIFIERS = frozenset("dmyHIMSj")


def strftime_tokens(fmt: str) -> list[tuple[str, str]]:
    """Split a strftime format into ``(kind, text)`` tokens: ``("text", ...)`` or ``("spec", "d" / "-d")``.

    Raises
    ------
    TypeError
        For a specifier DuckDB's strftime does not have, or a lone ``%`` at the end.
    """
    if fmt == "":
        raise TypeError("strftime() needs a non-empty format")
    tokens, position = [], 0
    while position < len(fmt):
        percent = fmt.find("%", position)
        if percent < 0:
            tokens.append(("text", fmt[position:]))
            break
        if percent > position:
            tokens.append(("text", fmt[position:percent]))
        spec = fmt[percent + 1:percent + 3] if fmt[percent + 1:percent + 2] == "-" else fmt[percent + 1:percent + 2]
        letter = spec[-1:]
        if not letter or letter not in STRFTIME_SPECIFIERS or (len(spec) == 2 and letter not in _UNPADDED_SPECIFIERS):
            raise TypeError(f"strftime() does not support the format specifier %{spec or ''}")
        tokens.append(("spec", spec))
        position = percent + 1 + len(spec)
    return tokens


def _strftime(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2, 2)
    _temporal(name, args[0], 1)
    _string_constant(name, args, 2, "format")
    if args[1].value is not None:
        strftime_tokens(args[1].value)
    return pa.string()


def _date_days(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``date_add_days(date, n)`` / ``date_sub_days``: DuckDB's ``DATE +/- INTEGER`` (BIGINT is refused, as there)."""
    _arity(name, args, 2, 2)
    if not (pa.types.is_date32(args[0].dtype) or pa.types.is_null(args[0].dtype)):
        raise TypeError(f"{name}() needs a date as argument 1, got {args[0].dtype}")
    dtype = args[1].dtype
    if not (pa.types.is_null(dtype) or dtype in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16())):
        raise TypeError(f"a date and {dtype} do not add: DuckDB adds INTEGER days to a DATE (cast the days "
                        "AS INTEGER, or use INTERVAL)")
    return pa.date32()


def _date_difference(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``date_sub(a, b)``: DuckDB's ``DATE - DATE``, the days between them as BIGINT; ``date_sub(part, start,
    end)``: DuckDB's whole parts between two dates or timestamps (``date_diff`` counts boundaries instead)."""
    _arity(name, args, 2, 3)
    if len(args) == 3:
        _part(name, args, DIFF_PARTS)
        _temporal(name, args[1], 2)
        _temporal(name, args[2], 3)
        return pa.int64()
    for position, arg in enumerate(args, 1):
        if not (pa.types.is_date32(arg.dtype) or pa.types.is_null(arg.dtype)):
            raise TypeError(f"{name}() needs dates, got {arg.dtype} as argument {position}")
    return pa.int64()


#: strptime's specifiers: those Python's strptime reads as DuckDB's does (time zones, week numbers and the
#: locale's forms are refused by name).
STRPTIME_SPECIFIERS = frozenset("aAbBdHIjmMpSyYf%")


def strptime_format(fmt: str) -> str:
    """Return ``fmt`` checked to hold only the specifiers :func:`strptime` reads.

    Raises
    ------
    TypeError
        For any other specifier, or a lone ``%`` at the end.
    """
    position = fmt.find("%")
    while position >= 0:
        letter = fmt[position + 1:position + 2]
        if letter not in STRPTIME_SPECIFIERS or not letter:
            what = "a time zone (TIMESTAMP WITH TIME ZONE)" if letter in ("z", "Z") else "the specifier"
            raise TypeError(f"strptime() does not support {what} %{letter} (supported: "
                            + " ".join(f"%{c}" for c in sorted(STRPTIME_SPECIFIERS)) + ")")
        position = fmt.find("%", position + 2)
    return fmt


def _strptime(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2, 2)
    _string(name, args[0], 1)
    _string_constant(name, args, 2, "format")
    if args[1].value is not None:
        strptime_format(args[1].value)
    return pa.timestamp("us")


def _epoch_ms(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``epoch_ms(t)``: milliseconds since 1970 of a date or timestamp (BIGINT); ``epoch_ms(n)``: the TIMESTAMP
    ``n`` milliseconds after 1970 (both as DuckDB)."""
    _arity(name, args, 1, 1)
    if is_integer(args[0].dtype):
        return pa.timestamp("us")
    _temporal(name, args[0], 1)
    return pa.int64()


def _epoch_of_ns(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``epoch_ns_of_ns(t)`` / ``epoch_us_of_ns(t)``: DuckDB's ``epoch_ns`` / ``epoch_us`` of a TIMESTAMP_NS /
    TIMESTAMPTZ_NS, its nanoseconds (microseconds, floored) since 1970 (BIGINT; of other instants the SQL
    translator writes ``date_diff('microsecond', ...)``, which rounds a TIMESTAMP_NS as DuckDB's date_diff does)."""
    _arity(name, args, 1, 1)
    if not (pa.types.is_timestamp(args[0].dtype) and args[0].dtype.unit == "ns"):
        raise TypeError(f"{name}() takes a nanosecond timestamp here, got {args[0].dtype}")
    return pa.int64()


def _to_timestamp(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``to_timestamp(seconds)``: the instant ``seconds`` after 1970, a TIMESTAMP WITH TIME ZONE (UTC) as DuckDB."""
    _arity(name, args, 1, 1)
    _number(name, args[0], 1)
    return pa.timestamp("us", tz="UTC")


def _time_bucket(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``time_bucket(width, t[, offset | origin])``: ``t``'s bucket start, DATE for a DATE, else TIMESTAMP."""
    _arity(name, args, 2, 3)
    if not (is_interval(args[0].dtype) or pa.types.is_null(args[0].dtype)):
        raise TypeError(f"{name}() needs an INTERVAL bucket width as argument 1, got {args[0].dtype}")
    for position, arg in enumerate(args[1:], 2):
        if is_interval(arg.dtype) and position == 3:
            continue  # an offset
        _temporal(name, arg, position)
    if pa.types.is_date32(args[1].dtype):
        return pa.date32()
    # A TIMESTAMPTZ buckets in the Session's zone (UTC: as its UTC TIMESTAMP) and stays one, as DuckDB's.
    return pa.timestamp("us", tz=args[1].dtype.tz) if pa.types.is_timestamp(args[1].dtype) else pa.timestamp("us")


def _last_day(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 1, 1)
    _temporal(name, args[0], 1)
    return pa.date32()


#: Functions whose value changes from call to call: an expression calling one is computed once where written, never
#: copied into a filter below its projection or into a fused kernel that would draw it again.
VOLATILE_FUNCTIONS = frozenset({"random", "uuid"})


def is_volatile(expr: Expr) -> bool:
    """Return True when ``expr`` calls a function of :data:`VOLATILE_FUNCTIONS`."""
    from gpu_engine.plans.expressions import Function, walk

    return any(isinstance(node, Function) and node.name in VOLATILE_FUNCTIONS for node in walk(expr))


def _integer_arguments(name: str, args: Sequence[Expr]) -> None:
    """Raise TypeError naming the first of ``args`` (counted from 1) that is neither an integer nor NULL."""
    for position, arg in enumerate(args, 1):
        if not (is_integer(arg.dtype) or pa.types.is_null(arg.dtype)):
            raise TypeError(f"{name}() needs integers, got {arg.dtype} as argument {position}")


def _factorial(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``factorial(n)`` of an INTEGER (or narrower; DuckDB has no BIGINT overload): HUGEINT, as DuckDB's."""
    _arity(name, args, 1, 1)
    _integer_arguments(name, args)
    if is_integer(args[0].dtype) and args[0].dtype.bit_width > 32:
        raise TypeError(f"factorial() takes an INTEGER (DuckDB has no {args[0].dtype} overload); CAST it to INTEGER")
    return pa.decimal128(38, 0)


def _divisor(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``gcd(a, b)`` / ``lcm(a, b)`` of integers: BIGINT, as DuckDB binds them."""
    _arity(name, args, 2, 2)
    _integer_arguments(name, args)
    return pa.int64()


def _bitwise(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``a & b``, ``a | b``, ``xor(a, b)``, ``a << n``, ``a >> n`` of integers: their common type, as DuckDB's
    arithmetic (``INTEGER & BIGINT`` a BIGINT); ``~a`` its type; ``bit_count(a)`` a TINYINT."""
    unary = name in ("~", "bit_count")
    _arity(name, args, 1 if unary else 2, 1 if unary else 2)
    for position, arg in enumerate(args, 1):
        if not (is_integer(arg.dtype) or pa.types.is_null(arg.dtype)):
            spelled = f"{name}()" if name.isalpha() or "_" in name else f"'{name}'"
            raise TypeError(f"{spelled} needs integers, got {arg.dtype} as operand {position}; CAST it to an "
                            "integer type (BIGINT)")
    if name == "bit_count":
        return pa.int8()
    types = [arg.dtype for arg in args if not pa.types.is_null(arg.dtype)] or [pa.int32()]
    result = types[0]
    for dtype in types[1:]:
        result = arithmetic_type("add", result, dtype)
    return result


def _random(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``random(call)``: DOUBLE; ``call`` (an integer constant) tells the query's calls apart."""
    _arity(name, args, 1, 1)
    if not (isinstance(args[0], Literal) and is_integer(args[0].dtype)):
        raise TypeError("random() takes no arguments (its one argument is the call's ordinal, an integer constant)")
    return pa.float64()


def _uuid(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``uuid(call)`` / ``gen_random_uuid()``: a random (version 4) UUID per row, as VARCHAR (DuckDB's UUID type
    prints the same text; the engine has no UUID type)."""
    _random(name, args)
    return pa.string()


def _current_date(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``current_date`` / ``today()``: the local date when the query runs (DuckDB's default time zone)."""
    _arity(name, args, 0, 0)
    return pa.date32()


def _make_timestamp(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``make_timestamp(year, month, day, hour, minute, seconds)`` or ``make_timestamp(microseconds)``: TIMESTAMP."""
    if len(args) != 1:
        _arity(name, args, 6, 6)
    _integer_arguments(name, args[:5] if len(args) == 6 else args)
    if len(args) == 6:
        _number(name, args[5], 6)
    return pa.timestamp("us")


def _make_time(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``make_time(hour, minute, seconds)``: a TIME, as DuckDB's."""
    _arity(name, args, 3, 3)
    _integer_arguments(name, args[:2])
    _number(name, args[2], 3)
    return pa.time64("us")


def _date_add_time(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``date_add_time(date, time)``: DuckDB's ``DATE + TIME``, a TIMESTAMP."""
    _arity(name, args, 2, 2)
    if not (pa.types.is_date32(args[0].dtype) or pa.types.is_null(args[0].dtype)):
        raise TypeError(f"{name}() needs a date as argument 1, got {args[0].dtype}")
    if not (is_time(args[1].dtype) or pa.types.is_null(args[1].dtype)):
        raise TypeError(f"{name}() needs a TIME as argument 2, got {args[1].dtype}")
    return pa.timestamp("us")


def _current_timestamp(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``now()`` / ``current_timestamp``: the instant the query's Task first reads it, TIMESTAMP WITH TIME ZONE."""
    _arity(name, args, 0, 0)
    return pa.timestamp("us", tz="UTC")


def _calendar_name(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``dayname(d)`` / ``monthname(d)``: the English name of a date's or timestamp's weekday or month."""
    _arity(name, args, 1, 1)
    _temporal(name, args[0], 1)
    return pa.string()


def _make_date(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 3, 3)
    _integer_arguments(name, args)
    return pa.date32()


#: Every scalar function: name -> typing rule ``(name, args) -> result type`` (raises TypeError with the reason).
def _try_cast(name: str, args: Sequence[Expr]) -> pa.DataType:
    """TRY_CAST's type: its target, carried by a typed NULL second argument.

    Any source type: between types with no conversion (a number to DATE, DATE to a number, TIME to DATE...)
    DuckDB binds TRY_CAST and answers NULL for every row (its ``TryVectorNullCast``), so the evaluator does too.
    """
    _arity(name, args, 2, 2)
    target = args[1].dtype
    if not (isinstance(args[1], Literal) and args[1].value is None) or pa.types.is_null(target):
        raise TypeError("try_cast: the second argument must be a typed NULL naming the target type")
    return target


#: The planner's own call: a correlated scalar subquery's value beside its row count (more than one row fails).
SCALAR_SUBQUERY_VALUE = "scalar_subquery_value"


def _scalar_subquery_value(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2, 2)
    if not is_integer(args[1].dtype):
        raise TypeError(f"{name}: the second argument (the subquery's row count) must be an integer")
    return args[0].dtype


def _try(name: str, args: Sequence[Expr]) -> pa.DataType:
    """DuckDB's TRY(expr): its operand's type (NULL where the operand raises)."""
    _arity(name, args, 1, 1)
    return args[0].dtype


SCALAR_FUNCTIONS: dict[str, Callable[[str, Sequence[Expr]], pa.DataType]] = {
    "try_cast": _try_cast, "try": _try,
    SCALAR_SUBQUERY_VALUE: _scalar_subquery_value,
    "upper": _string_unary, "lower": _string_unary, "length": _string_unary,
    "trim": _trim, "ltrim": _trim, "rtrim": _trim,
    "replace": _replace,
    "reverse": _string_unary, "repeat": _repeat, "split_part": _split_part,
    "regexp_matches": _regex, "regexp_full_match": _regex, "regexp_replace": _regex,
    "regexp_extract": _regexp_extract, "md5": _md5, "printf": _printf, "format": _printf,
    "strpos": _search, "starts_with": _search, "ends_with": _search, "contains": _search,
    "left": _left_right, "right": _left_right, "substring": _substring,
    "lpad": _pad, "rpad": _pad,
    "ascii": _character_code, "unicode": _character_code, "strlen": _character_code, "bit_length": _character_code,
    "strip_accents": _character_code, "chr": _chr, "translate": _translate,
    "like_escape": _like_escape, "ilike_escape": _like_escape,
    "concat": _concat, "||": _concat, "concat_ws": _concat,
    "abs": _same_number,
    "sqrt": _double, "cbrt": _double, "ln": _double, "log": _double, "log2": _double, "exp": _double,
    "power": _double, "random": _random, "uuid": _uuid, "factorial": _factorial, "even": _double, "gcd": _divisor, "lcm": _divisor,
    "gamma": _double, "lgamma": _double,
    **{name: _bitwise for name in ("&", "|", "xor", "~", "<<", ">>", "bit_count")},
    **{name: _double for name in ("sin", "cos", "tan", "cot", "asin", "acos", "atan", "atan2", "degrees", "radians")},
    "floor": _floor_ceil, "ceil": _floor_ceil, "trunc": _round,
    "round": _round, "round_even": _round,
    "sign": _sign,
    "greatest": _greatest, "least": _greatest,
    "//": _integer_division,
    "isnan": _float_test, "isinf": _float_test, "isfinite": _float_test,
    "date_part": _date_part, "date_trunc": _date_trunc, "date_diff": _date_diff,
    "add_interval": _add_interval, "make_date": _make_date,
    "make_time": _make_time, "date_add_time": _date_add_time,
    "date_add_days": _date_days, "date_sub_days": _date_days, "date_sub": _date_difference,
    "strftime": _strftime, "last_day": _last_day, "dayname": _calendar_name, "monthname": _calendar_name,
    "current_date": _current_date, "current_timestamp": _current_timestamp, "make_timestamp": _make_timestamp,
    "strptime": _strptime, "try_strptime": _strptime, "time_bucket": _time_bucket,
    "epoch_ms": _epoch_ms, "epoch_ns_of_ns": _epoch_of_ns, "epoch_us_of_ns": _epoch_of_ns,
    "to_timestamp": _to_timestamp,
    **INTERVAL_FUNCTIONS,  # constructors, interval arithmetic, age, parts: gpu_engine.plans.intervals
}


def function_type(name: str, args: Sequence[Expr]) -> pa.DataType:
    """Return the result type of ``name(args)``.

    Raises
    ------
    TypeError
        For an unknown function, a wrong number of arguments, an argument of a
        type the function does not take, or a column where a constant is needed.
    """
    rule = SCALAR_FUNCTIONS.get(name)
    if rule is None:
        raise TypeError(f"unknown function {name!r}")
    return rule(name, args)
