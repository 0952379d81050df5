"""Describe INTERVAL values as DuckDB defines them: months, days and microseconds, kept apart.

A month has no fixed length, so ``INTERVAL '1 month'`` and ``INTERVAL '30 days'``
are different values (``'1 month'`` added to January 31st clamps to February's
end), yet DuckDB compares them as equal: comparisons and ordering follow the
length with a month counted as 30 days and a day as 24 hours
(:func:`gpu_engine.expressions.intervals.normalized_fields`). This module holds
the value class a :class:`Literal` carries, DuckDB's text forms
(:func:`parse_interval`, :func:`format_interval`, the casts to and from VARCHAR)
and the typing rules of the interval functions, which
:mod:`gpu_engine.plans.functions` adds to its table; the evaluation is
:mod:`gpu_engine.expressions.intervals`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import pyarrow as pa

from gpu_engine.columnar.types import INTERVAL, is_integer, is_interval, is_temporal
from gpu_engine.plans.expressions import Expr, Literal

__all__ = [
    "IntervalValue",
    "parse_interval",
    "format_interval",
    "MICROS_PER_DAY",
    "DAYS_PER_MONTH",
    "UNIT_CONSTRUCTORS",
    "INTERVAL_PARTS",
    "INTERVAL_FUNCTIONS",
    "interval_unit",
    "shifted_dtype",
]

MICROS_PER_SECOND = 1_000_000
MICROS_PER_MINUTE = 60 * MICROS_PER_SECOND
MICROS_PER_HOUR = 60 * MICROS_PER_MINUTE
MICROS_PER_DAY = 24 * MICROS_PER_HOUR
#: Only for comparing and ordering (DuckDB's ``Interval::DAYS_PER_MONTH``): a month counts as 30 days.
DAYS_PER_MONTH = 30
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class IntervalValue:
    """One INTERVAL: ``months`` and ``days`` (int32 each, as DuckDB) and ``micros`` (int64), never normalized."""

    months: int = 0
    days: int = 0
    micros: int = 0

    def sql(self) -> str:
        """Return the literal as SQL writes it (``INTERVAL '1 month 2 days'``)."""
        return f"INTERVAL '{format_interval(self)}'"


#: The units an interval constructor (``to_days(n)``, ``INTERVAL (n) DAY``) scales: (field, multiplier), field 0
#: months, 1 days, 2 microseconds; the integer widths DuckDB's constructors take (months and days are int32).
UNIT_CONSTRUCTORS = {
    "millennium": (0, 12000), "century": (0, 1200), "decade": (0, 120), "year": (0, 12), "quarter": (0, 3),
    "month": (0, 1), "week": (1, 7), "day": (1, 1), "hour": (2, MICROS_PER_HOUR), "minute": (2, MICROS_PER_MINUTE),
    "second": (2, MICROS_PER_SECOND), "millisecond": (2, 1000), "microsecond": (2, 1),
}
#: DuckDB's constructor functions, by unit.
_CONSTRUCTOR_NAMES = {
    "to_millennia": "millennium", "to_centuries": "century", "to_decades": "decade", "to_years": "year",
    "to_quarters": "quarter", "to_months": "month", "to_weeks": "week", "to_days": "day", "to_hours": "hour",
    "to_minutes": "minute", "to_seconds": "second", "to_milliseconds": "millisecond",
    "to_microseconds": "microsecond",
}
#: The spellings of each unit in interval text and after ``INTERVAL n``, as DuckDB reads them.
_UNIT_SPELLINGS = {
    "millennium": ("millennium", "millennia", "millenniums", "millenium", "mil", "mils"),
    "century": ("century", "centuries", "c", "cent"),
    "decade": ("decade", "decades", "dec", "decs"),
    "year": ("year", "years", "y", "yr", "yrs"),
    "quarter": ("quarter", "quarters"),
    "month": ("month", "months", "mon", "mons"),
    "week": ("week", "weeks", "w", "weekofyear"),
    "day": ("day", "days", "d", "dayofmonth"),
    "hour": ("hour", "hours", "h", "hr", "hrs"),
    "minute": ("minute", "minutes", "m", "min", "mins"),
    "second": ("second", "seconds", "s", "sec", "secs"),
    "millisecond": ("millisecond", "milliseconds", "ms", "msec", "msecs", "msecond", "mseconds"),
    "microsecond": ("microsecond", "microseconds", "us", "usec", "usecs", "usecond", "useconds"),
}
_UNIT_OF = {spelling: unit for unit, spellings in _UNIT_SPELLINGS.items() for spelling in spellings}
#: The parts ``date_part``/``EXTRACT`` read from an interval.
INTERVAL_PARTS = ("millennium", "century", "decade", "year", "quarter", "month", "day", "hour", "minute", "second",
                  "millisecond", "microsecond", "epoch")


def interval_unit(name: str) -> str | None:
    """Return the unit an interval text or ``INTERVAL n <unit>`` names (``'mons'`` -> ``month``), or None."""
    return _UNIT_OF.get(name.strip().lower())


def _checked(value: int, bounds: tuple[int, int], text: str) -> int:
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"interval value is out of range: {text!r}")
    return value


def _round_away(value: float) -> int:
    """Return ``value`` rounded to the nearest integer, halves away from zero (C++'s ``round``)."""
    magnitude = int(abs(value) + 0.5)
    return magnitude if value >= 0 else -magnitude


def _with_fraction(unit: str, amount: int, fraction: float) -> tuple[int, int, int]:
    """Return the ``(months, days, micros)`` of ``amount.fraction`` units, the fraction spilled as DuckDB spills it:
    years and longer round it to months, a quarter or a month spill whole months (days) then days (microseconds),
    a week whole days then microseconds, a day and the time units round it to microseconds."""
    field, scale = UNIT_CONSTRUCTORS[unit]
    added = [0, 0, 0]
    added[field] = amount * scale
    if abs(fraction) <= 1e-10:
        return added[0], added[1], added[2]
    if unit in ("quarter", "month", "week"):
        whole = int(fraction * scale)  # toward zero, as C++ casts
        added[field] += whole
        rest = fraction * scale - whole
        if unit == "quarter":
            added[1] += _round_away(rest * DAYS_PER_MONTH)
        elif unit == "month":
            days = int(rest * DAYS_PER_MONTH)
            added[1] += days
            added[2] += _round_away((rest * DAYS_PER_MONTH - days) * MICROS_PER_DAY)
        else:
            added[2] += _round_away(rest * MICROS_PER_DAY)
    elif unit == "day":
        added[2] += _round_away(fraction * MICROS_PER_DAY)
    else:
        added[field] += _round_away(fraction * scale)
    return added[0], added[1], added[2]


_NUMBER = re.compile(r"\s*(-?)(\d+)(?:\.(\d*))?\s*([A-Za-z]*)")
_TIME = re.compile(r"\s*(-?)(\d+):(\d\d?)(?::(\d\d?)(?:\.(\d{1,6})\d*)?)?\s*$")
_AGO = re.compile(r"\s*ago\s*$", re.IGNORECASE)


def parse_interval(text: str) -> IntervalValue:
    """Return the interval DuckDB reads from ``text`` (``'1 year 2 months'``, ``'3 days 04:05:06'``, ``'-2 h'``,
    ``'1 day ago'``, ``'42'`` seconds; a fraction of a unit spills into the smaller fields as DuckDB spills it).

    Raises
    ------
    ValueError
        When the text is not an interval, or a field leaves its range.
    """
    months, days, micros = 0, 0, 0
    position, found = (1 if text[:1] == "@" else 0), False
    while position < len(text):
        rest = text[position:]
        if not rest.strip():
            break
        if found and _AGO.match(rest):
            months, days, micros = -months, -days, -micros
            break
        time = _TIME.match(rest)
        if time:
            sign, hours, minutes, seconds, fraction = time.groups()
            if int(minutes) >= 60 or int(seconds or 0) >= 60:
                raise ValueError(f"invalid interval {text!r}: minutes and seconds run to 59")
            value = ((int(hours) * 60 + int(minutes)) * 60 + int(seconds or 0)) * MICROS_PER_SECOND
            value += int((fraction or "").ljust(6, "0"))
            micros += -value if sign == "-" else value
            found = True
            break
        number = _NUMBER.match(rest)
        if not number:
            raise ValueError(f"invalid interval {text!r}")
        sign, whole, fraction_digits, unit_text = number.groups()
        trailing = rest[number.end():]
        if not unit_text:  # a bare number is seconds, alone in the text
            if found or trailing.strip():
                raise ValueError(f"invalid interval {text!r}: a number without a unit")
            unit = "second"
        else:
            unit = interval_unit(unit_text)
            if unit is None:
                raise ValueError(f"invalid interval {text!r}: unknown unit {unit_text!r}")
        fraction = float("0." + fraction_digits) if fraction_digits else 0.0
        negative = sign == "-"
        added = _with_fraction(unit, -int(whole) if negative else int(whole), -fraction if negative else fraction)
        months, days, micros = months + added[0], days + added[1], micros + added[2]
        found = True
        position += number.end()
    if not found:
        raise ValueError(f"invalid interval {text!r}")
    return IntervalValue(_checked(months, _INT32, text), _checked(days, _INT32, text), _checked(micros, _INT64, text))


def _counted(amount: int, unit: str) -> str:
    return f"{amount} {unit}" + ("" if abs(amount) == 1 else "s")


def format_interval(value: IntervalValue) -> str:
    """Return DuckDB's text of an interval: ``1 year 2 months 3 days 04:05:06.5``, ``00:00:00`` when empty."""
    parts = []
    if value.months:
        years = int(value.months / 12)  # toward zero, as C++ divides
        months = value.months - years * 12
        if years:
            parts.append(_counted(years, "year"))
        if months:
            parts.append(_counted(months, "month"))
    if value.days:
        parts.append(_counted(value.days, "day"))
    if value.micros:
        micros = abs(value.micros)
        hours, micros = divmod(micros, MICROS_PER_HOUR)
        minutes, micros = divmod(micros, MICROS_PER_MINUTE)
        seconds, micros = divmod(micros, MICROS_PER_SECOND)
        clock = f"{'-' if value.micros < 0 else ''}{hours:02d}:{minutes:02d}:{seconds:02d}"
        if micros:
            clock += "." + f"{micros:06d}".rstrip("0")
        parts.append(clock)
    return " ".join(parts) or "00:00:00"


# -- typing rules (added to gpu_engine.plans.functions.SCALAR_FUNCTIONS) ---------------------------------------


def _arity(name: str, args: Sequence[Expr], count: int) -> None:
    if len(args) != count:
        raise TypeError(f"{name}() takes {count} argument{'s' if count != 1 else ''}, got {len(args)}")


def _is_null(arg: Expr) -> bool:
    return pa.types.is_null(arg.dtype)


def _interval_argument(name: str, arg: Expr, position: int) -> None:
    if not (is_interval(arg.dtype) or _is_null(arg)):
        raise TypeError(f"{name}() needs an INTERVAL as argument {position}, got {arg.dtype}")


def _temporal_argument(name: str, arg: Expr, position: int) -> None:
    if not (is_temporal(arg.dtype) or _is_null(arg)):
        raise TypeError(f"{name}() needs a date or timestamp as argument {position}, got {arg.dtype}")


def _constructor(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``to_days(n)`` and the other constructors: an integer count of the unit (a fraction is refused by name:
    DuckDB rounds some units' fractions and refuses others)."""
    _arity(name, args, 1)
    if not (is_integer(args[0].dtype) or _is_null(args[0])):
        raise TypeError(f"{name}() needs an integer count, got {args[0].dtype} (CAST it AS BIGINT; fractions of "
                        f"a unit are not supported)")
    if args[0].dtype == pa.uint64():
        raise TypeError(f"{name}() needs a signed integer count, got uint64 (CAST it AS BIGINT)")
    return INTERVAL


def _two_intervals(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 2)
    _interval_argument(name, args[0], 1)
    _interval_argument(name, args[1], 2)
    return INTERVAL


def _negate(name: str, args: Sequence[Expr]) -> pa.DataType:
    _arity(name, args, 1)
    _interval_argument(name, args[0], 1)
    return INTERVAL


def _multiply(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``interval_multiply(interval, n)``: each field times an integer (DuckDB's ``INTERVAL * BIGINT``)."""
    _arity(name, args, 2)
    _interval_argument(name, args[0], 1)
    if not (is_integer(args[1].dtype) or _is_null(args[1])) or args[1].dtype == pa.uint64():
        raise TypeError(f"an INTERVAL multiplies by a signed integer, got {args[1].dtype} (fractional factors are "
                        "not supported)")
    return INTERVAL


def _scale(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``interval_scale(interval, x)`` / ``interval_divide(interval, x)``: DuckDB's ``INTERVAL * DOUBLE`` and
    ``INTERVAL / DOUBLE`` (the factor a DOUBLE, as DuckDB casts any number to it)."""
    _arity(name, args, 2)
    _interval_argument(name, args[0], 1)
    if not (pa.types.is_float64(args[1].dtype) or _is_null(args[1])):
        raise TypeError(f"{name}() needs a DOUBLE factor, got {args[1].dtype}")
    return INTERVAL


def shifted_dtype(dtype: pa.DataType) -> pa.DataType:
    """The type of ``instant + INTERVAL``: a TIMESTAMP (of a DATE too), keeping a timestamp's zone, and its unit
    where that is nanoseconds (DuckDB's TIMESTAMP_NS / TIMESTAMPTZ_NS + INTERVAL stay nanoseconds; seconds and
    milliseconds become microseconds, as DuckDB's TIMESTAMP_S / _MS + INTERVAL are TIMESTAMP)."""
    if not pa.types.is_timestamp(dtype):
        return pa.timestamp("us")
    return pa.timestamp("ns" if dtype.unit == "ns" else "us", tz=dtype.tz)


def _shift(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``timestamp_add_interval(t, interval)``: ``t + interval``, a TIMESTAMP (of a DATE too, as DuckDB)."""
    _arity(name, args, 2)
    _temporal_argument(name, args[0], 1)
    _interval_argument(name, args[1], 2)
    return shifted_dtype(args[0].dtype)


def _time_shift(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``time_add_interval(t, interval)``: DuckDB's ``TIME + INTERVAL``, a TIME."""
    _arity(name, args, 2)
    if not (pa.types.is_time64(args[0].dtype) or _is_null(args[0])):
        raise TypeError(f"{name}() needs a TIME as argument 1, got {args[0].dtype}")
    _interval_argument(name, args[1], 2)
    return pa.time64("us")


def _between_instants(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``timestamp_difference(a, b)`` (``a - b``) and ``age(a, b)``: an INTERVAL between two instants."""
    _arity(name, args, 2)
    _temporal_argument(name, args[0], 1)
    _temporal_argument(name, args[1], 2)
    return INTERVAL


def _age(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``age(a, b)`` as ``a - b`` in calendar fields; ``age(b)`` from the current date's midnight (DuckDB's)."""
    if len(args) == 1:
        _temporal_argument(name, args[0], 1)
        return INTERVAL
    return _between_instants(name, args)


def _part(name: str, args: Sequence[Expr]) -> pa.DataType:
    """``interval_part(part, interval)``: ``date_part``/``EXTRACT`` of an interval (BIGINT; epoch DOUBLE)."""
    _arity(name, args, 2)
    part = args[0].value if isinstance(args[0], Literal) else None
    if part not in INTERVAL_PARTS:
        raise TypeError(f"date_part of an INTERVAL does not support the part {part!r} (supported: "
                        f"{', '.join(INTERVAL_PARTS)})")
    _interval_argument("date_part", args[1], 2)
    return pa.float64() if part == "epoch" else pa.int64()


def constructor_unit(name: str) -> str | None:
    """Return the unit a constructor function scales (``to_days`` -> ``day``), or None."""
    return _CONSTRUCTOR_NAMES.get(name)


INTERVAL_FUNCTIONS: dict[str, Callable[[str, Sequence[Expr]], pa.DataType]] = {
    **{name: _constructor for name in _CONSTRUCTOR_NAMES},
    "interval_add": _two_intervals, "interval_sub": _two_intervals, "interval_negate": _negate,
    "interval_multiply": _multiply, "interval_scale": _scale, "interval_divide": _scale,
    "timestamp_add_interval": _shift, "time_add_interval": _time_shift,
    "timestamp_difference": _between_instants, "age": _age, "interval_part": _part,
}
