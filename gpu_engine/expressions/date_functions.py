"""Evaluate the date functions (``date_part``, ``date_trunc``, ``date_diff``, ``+ INTERVAL``, ``make_date``).

Calendar arithmetic on day numbers in array code on the device, as EXTRACT
does (:mod:`gpu_engine.expressions.temporal`): ``civil_from_days`` splits a
day into year, month and day, :func:`days_from_civil` (its inverse, from the
same Howard Hinnant algorithms) builds one. A timestamp's date parts are those
of its day (time zones are not applied). Results follow DuckDB 2.0.1:
``date_trunc`` and ``+ INTERVAL`` return TIMESTAMP (microseconds), a month
interval clamps the day to the month's end (``2020-01-31 + 1 month`` is
``2020-02-29``), ``dayofweek`` counts Sunday as 0, ``week``/``isoyear`` are ISO
8601's, and ``date_diff`` counts the part's boundaries crossed.
"""

from __future__ import annotations

import datetime
from typing import Any, Sequence

import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import TIME, is_time, is_zoned
from gpu_engine.device import Device
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.expressions.nulls import and_validity
from gpu_engine.expressions.numeric import as_float, divide_round_half_away, narrow_values, raise_at_first
from gpu_engine.expressions.temporal import (
    TICKS_PER_DAY, as_timestamp_micros, civil_from_days, days_of, micros_of, shifted_ticks,
)
from gpu_engine.plans.functions import SAME_AS_PART, TIME_PARTS, part_name, strftime_tokens

__all__ = ["DATE_FUNCTIONS", "evaluate_date_function", "days_from_civil", "add_interval"]

_MICROS_PER_DAY = TICKS_PER_DAY["us"]


def days_from_civil(xp: Any, year: Any, month: Any, day: Any) -> Any:
    """Return the int64 day numbers (since 1970-01-01) of proleptic Gregorian dates (arrays or ints)."""
    if isinstance(month, int):  # a constant month (January 1st of each year): no array select needed
        year, shifted = year - (1 if month <= 2 else 0), month + (-3 if month > 2 else 9)
    else:
        year, shifted = year - (month <= 2).astype(xp.int64), month + xp.where(month > 2, -3, 9)
    era = xp.floor_divide(year, 400)
    year_of_era = year - era * 400
    day_of_year = (153 * shifted + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _days_in_month(xp: Any, year: Any, month: Any) -> Any:
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    lengths = xp.asarray([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=xp.int64)
    return xp.take(lengths, xp.clip(month, 1, 12) - 1) + ((month == 2) & leap)


def _iso_week(xp: Any, days: Any) -> tuple[Any, Any]:
    """Return ``(isoyear, week)``: ISO 8601 weeks start on Monday; week 1 holds the year's first Thursday."""
    isodow = xp.remainder(days + 3, 7) + 1
    thursday = days - isodow + 4
    year, _month, _day = civil_from_days(xp, thursday)
    first = days_from_civil(xp, year, 1, 1)
    return year, (thursday - first) // 7 + 1


def _century(xp: Any, year: Any, size: int) -> Any:
    """Return DuckDB's century (``size`` 100) or millennium (1000): the 21st century starts in 2001."""
    return xp.where(year > 0, (year - 1) // size + 1, year // size - 1)


def _date_part(xp: Any, part: str, column: Column) -> Any:
    if part in TIME_PARTS:  # of the time of day: 0 for a date
        micros = micros_of(xp, column)
        if not is_time(column.dtype):  # a TIME is its time of day (24:00:00 too)
            micros = micros - xp.floor_divide(micros, _MICROS_PER_DAY) * _MICROS_PER_DAY
        time_of_day = micros
        if part == "hour":
            return time_of_day // TIME_PARTS["hour"]
        within_minute = time_of_day % TIME_PARTS["minute"]  # seconds and below count within the minute
        return within_minute // TIME_PARTS[part] if part != "minute" else (time_of_day // TIME_PARTS["minute"]) % 60
    if part == "epoch":
        if pa.types.is_timestamp(column.dtype):  # of whole microseconds (a TIMESTAMP_NS's floored), as DuckDB
            return micros_of(xp, column).astype(xp.float64) / 1_000_000.0
        if is_time(column.dtype):
            return column.data.astype(xp.float64) / (TICKS_PER_DAY[column.dtype.unit] / 86_400)
        return column.data.astype(xp.float64) * 86_400.0
    days = days_of(xp, column)
    year, month, day = civil_from_days(xp, days)
    if part in ("year", "month", "day"):
        return {"year": year, "month": month, "day": day}[part]
    if part == "quarter":
        return (month - 1) // 3 + 1
    if part == "dayofweek":
        return xp.remainder(days + 4, 7)
    if part == "isodow":
        return xp.remainder(days + 3, 7) + 1
    if part == "dayofyear":
        return days - days_from_civil(xp, year, 1, 1) + 1
    if part in ("week", "isoyear", "yearweek"):
        isoyear, week = _iso_week(xp, days)
        return {"week": week, "isoyear": isoyear, "yearweek": isoyear * 100 + week}[part]
    if part == "decade":
        return xp.floor_divide(year, 10)
    if part in ("century", "millennium"):
        return _century(xp, year, 100 if part == "century" else 1000)
    if part == "era":  # 1 AD (CE), 0 BC
        return (year > 0).astype(xp.int64)
    if part == "julian":  # the Julian day number, with the time of day as its fraction
        fraction = (micros_of(xp, column) - days * _MICROS_PER_DAY).astype(xp.float64) / _MICROS_PER_DAY
        return (days + _JULIAN_DAY_OF_1970).astype(xp.float64) + fraction
    raise PlanError(f"date_part does not support {part!r}")


#: The Julian day number of 1970-01-01.
_JULIAN_DAY_OF_1970 = 2440588


def _truncated_days(xp: Any, part: str, days: Any) -> Any:
    year, month, _day = civil_from_days(xp, days)
    one = xp.ones_like(year)
    if part == "day":
        return days
    if part == "week":
        return days - xp.remainder(days + 3, 7)
    if part == "month":
        return days_from_civil(xp, year, month, one)
    if part == "quarter":
        return days_from_civil(xp, year, (month - 1) // 3 * 3 + 1, one)
    size = {"year": 1, "decade": 10, "century": 100, "millennium": 1000}.get(part)
    if size is None:
        raise PlanError(f"date_trunc does not support {part!r}")
    # DuckDB truncates the year toward zero to a multiple of the size (century of 2020: 2000).
    truncated = xp.where(year >= 0, year // size, -((-year) // size)) * size
    return days_from_civil(xp, truncated, one, one)


def _date_trunc(xp: Any, part: str, column: Column) -> Any:
    part = SAME_AS_PART.get(part, part)
    if part == "isoyear":  # the Monday of the ISO year's first week
        days = days_of(xp, column)
        _, week = _iso_week(xp, days)
        return (days - (week - 1) * 7 - xp.remainder(days + 3, 7)) * _MICROS_PER_DAY
    if part in TIME_PARTS:
        unit = TIME_PARTS[part]
        return xp.floor_divide(micros_of(xp, column), unit) * unit
    return _truncated_days(xp, part, days_of(xp, column)) * _MICROS_PER_DAY


def _date_diff(xp: Any, part: str, start: Column, end: Column) -> Any:
    part = SAME_AS_PART.get(part, part)
    if part == "isoyear":
        return _iso_week(xp, days_of(xp, end))[0] - _iso_week(xp, days_of(xp, start))[0]
    if part in TIME_PARTS:  # boundaries of the unit crossed
        unit = TIME_PARTS[part]
        return xp.floor_divide(micros_of(xp, end), unit) - xp.floor_divide(micros_of(xp, start), unit)
    first, last = days_of(xp, start), days_of(xp, end)
    if part == "day":
        return last - first
    if part == "week":
        difference = last - first
        return xp.where(difference >= 0, difference // 7, -((-difference) // 7))  # truncated, as DuckDB
    (year1, month1, _), (year2, month2, _) = civil_from_days(xp, first), civil_from_days(xp, last)
    if part == "month":
        return (year2 * 12 + month2) - (year1 * 12 + month1)
    if part == "quarter":
        return (year2 * 4 + (month2 - 1) // 3) - (year1 * 4 + (month1 - 1) // 3)
    if part == "year":
        return year2 - year1
    size = {"decade": 10, "century": 100, "millennium": 1000}.get(part)
    if size is None:
        raise PlanError(f"date_diff does not support {part!r}")
    return year2 // size - year1 // size


def _toward_zero(xp: Any, values: Any, size: int) -> Any:
    """Return ``values / size`` truncated toward zero (C++'s integer division, which DuckDB's results follow)."""
    return xp.where(values >= 0, values // size, -((-values) // size))


def _whole_months(xp: Any, start: Any, end: Any) -> Any:
    """Return the whole months from ``start`` to ``end`` (int64 microseconds), as DuckDB's date_sub counts them.

    From the earlier instant to the later, the months between their calendar months, less one when the later's
    day and time of day come before the earlier's; an earlier day past the end of the later's month counts as that
    month's last day (``2020-01-31`` to ``2020-02-29`` is a whole month). Negative when ``end`` is earlier.
    """
    flipped = start > end
    low, high = xp.where(flipped, end, start), xp.where(flipped, start, end)
    low_day, high_day = xp.floor_divide(low, _MICROS_PER_DAY), xp.floor_divide(high, _MICROS_PER_DAY)
    low_time, high_time = low - low_day * _MICROS_PER_DAY, high - high_day * _MICROS_PER_DAY
    (year1, month1, day1), (year2, month2, day2) = civil_from_days(xp, low_day), civil_from_days(xp, high_day)
    month_end = _days_in_month(xp, year2, month2)
    day1 = xp.where((day2 == month_end) & (day1 > month_end), month_end, day1)
    borrow = (day2 < day1) | ((day2 == day1) & (high_time < low_time))
    months = (year2 * 12 + month2) - (year1 * 12 + month1) - borrow.astype(xp.int64)
    return xp.where(flipped, -months, months)


#: Months in each part date_sub counts by months.
_MONTHS_IN = {"month": 1, "quarter": 3, "year": 12, "decade": 120, "century": 1200, "millennium": 12000}


def _date_sub(xp: Any, part: str, start: Column, end: Column) -> Any:
    """Return DuckDB's ``date_sub(part, start, end)``: the whole parts from ``start`` to ``end`` (truncated toward
    zero), where ``date_diff`` counts the part's boundaries crossed."""
    first, last = micros_of(xp, start), micros_of(xp, end)
    part = "year" if part == "isoyear" else SAME_AS_PART.get(part, part)  # (whole ISO years: DuckDB's whole years)
    if part in _MONTHS_IN:
        return _toward_zero(xp, _whole_months(xp, first, last), _MONTHS_IN[part])
    unit = TIME_PARTS.get(part) or _MICROS_PER_DAY * (7 if part == "week" else 1)
    if part not in TIME_PARTS and part not in ("day", "week"):
        raise PlanError(f"date_sub does not support {part!r}")
    return _toward_zero(xp, last - first, unit)


def add_interval(xp: Any, column: Column, months: int, days: int, interval_micros: int) -> Any:
    """Return a DATE or TIMESTAMP column plus an interval as microseconds: months first (the day clamped to the
    month's length, as DuckDB), then days and microseconds. Why public: RANGE frame offsets of months too."""
    micros = micros_of(xp, column)
    day = xp.floor_divide(micros, _MICROS_PER_DAY)
    time_of_day = micros - day * _MICROS_PER_DAY
    if months:
        year, month, day_of_month = civil_from_days(xp, day)
        total = year * 12 + (month - 1) + months
        year, month = xp.floor_divide(total, 12), xp.remainder(total, 12) + 1
        day_of_month = xp.minimum(day_of_month, _days_in_month(xp, year, month))
        day = days_from_civil(xp, year, month, day_of_month)
    return (day + days) * _MICROS_PER_DAY + time_of_day + interval_micros


#: DuckDB's ``%c``, ``%x`` and ``%X``: ISO forms, not the C locale's.
_ISO_FORMS = {"c": "%Y-%m-%d %H:%M:%S", "x": "%Y-%m-%d", "X": "%H:%M:%S"}


def _format_instant(moment: datetime.datetime, tokens: Sequence[tuple[str, str]], zone: str = "",
                    nanos: int = 0) -> str:
    """Return one instant formatted as DuckDB's strftime does (Python's, but years zero-padded to 4 digits,
    ``%c``/``%x``/``%X`` in ISO form, ``%g`` milliseconds and ``%n`` nanoseconds: ``nanos`` those past the
    microsecond, of a TIMESTAMP_NS); ``%Z`` writes ``zone``, the Session zone's name for a TIMESTAMPTZ (DuckDB's
    TimeZone setting: here UTC), nothing for a TIMESTAMP."""
    parts = []
    for kind, spec in tokens:
        if kind == "text":
            parts.append(spec)
        elif spec == "Y":
            parts.append(f"{moment.year:04d}")
        elif spec == "G":
            parts.append(f"{moment.isocalendar()[0]:04d}")
        elif spec in _ISO_FORMS:
            parts.append(_format_instant(moment, strftime_tokens(_ISO_FORMS[spec]), zone, nanos))
        elif spec in ("z", "Z"):  # UTC's offset; the zone's name of a TIMESTAMPTZ only (as DuckDB prints them)
            parts.append("+00" if spec == "z" else zone)
        elif spec == "g":
            parts.append(f"{moment.microsecond // 1000:03d}")
        elif spec == "n":
            parts.append(f"{moment.microsecond * 1000 + nanos:09d}")
        elif spec.startswith("-"):
            parts.append(str(int(moment.strftime(f"%{spec[1]}"))))
        else:
            parts.append(moment.strftime(f"%{spec}"))
    return "".join(parts)


def _strftime(device: Device, column: Column, fmt: str) -> Column:
    """Return ``strftime(column, fmt)``: each distinct instant is formatted once on the host (``unique`` on the
    device, the distinct values copied back), and the result is a dictionary column over those texts."""
    xp = device.xp
    nanosecond = pa.types.is_timestamp(column.dtype) and column.dtype.unit == "ns"  # %n prints all nine digits
    ticks = column.data.astype(xp.int64) if nanosecond else micros_of(xp, column)
    if column.validity is not None:
        ticks = xp.where(column.validity, ticks, 0)
    distinct, codes = xp.unique(ticks, return_inverse=True)
    epoch = datetime.datetime(1970, 1, 1)
    tokens = strftime_tokens(fmt)
    texts = []
    for value in device.to_host(distinct).tolist():
        micros, nanos = divmod(value, 1000) if nanosecond else (value, 0)
        try:
            moment = epoch + datetime.timedelta(microseconds=micros)
        except OverflowError:
            raise ExecutionError("strftime supports years 1 to 9999 only") from None
        texts.append(_format_instant(moment, tokens, "UTC" if is_zoned(column.dtype) else "", nanos))
    dictionary = Column.from_arrow(pa.array(texts, pa.string()), device)
    return Column(pa.string(), codes.reshape(-1).astype(xp.int32), column.validity, None, dictionary)


#: dayname's and monthname's texts, in the order of date_part's dayofweek (Sunday 0) and month (January 1).
_CALENDAR_NAMES = {
    "dayname": ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"),
    "monthname": ("January", "February", "March", "April", "May", "June", "July", "August", "September",
                  "October", "November", "December"),
}


def _calendar_name(device: Device, name: str, column: Column) -> Column:
    """Return ``dayname`` / ``monthname``: a dictionary column whose codes are the weekday (or month - 1) computed
    on the device, over the seven (twelve) names: no text is made per row."""
    xp = device.xp
    codes = _date_part(xp, "dayofweek" if name == "dayname" else "month", column)
    codes = codes if name == "dayname" else codes - 1
    if column.validity is not None:
        codes = xp.where(column.validity, codes, 0)
    dictionary = Column.from_arrow(pa.array(_CALENDAR_NAMES[name], pa.string()), device)
    return Column(pa.string(), codes.astype(xp.int32), column.validity, None, dictionary)


def _make_date(device: Device, columns: Sequence[Column], name: str = "make_date") -> Column:
    xp = device.xp
    year, month, day = (narrow_values(device, column, name) for column in columns)
    validity = and_validity(*(column.validity for column in columns))
    bad = (month < 1) | (month > 12) | (day < 1) | (day > _days_in_month(xp, year, month))
    raise_at_first(device, bad, validity, f"Date out of range in {name}")
    days = days_from_civil(xp, year, xp.where(bad, 1, month), xp.where(bad, 1, day))
    raise_at_first(device, (days < -(2**31)) | (days >= 2**31), validity, f"Date out of range in {name}")
    return Column(pa.date32(), days.astype(xp.int32), validity)


def _make_timestamp(device: Device, columns: Sequence[Column]) -> Column:
    """Return DuckDB's make_timestamp: of microseconds since 1970 (one argument), or of a valid date's parts, an
    hour 0-23, a minute 0-59 and seconds from 0 to below 61 (rounded to the microsecond; 60 and more carry into
    the next minute),
    raising DuckDB's range errors for the first row out of range."""
    xp = device.xp
    if len(columns) == 1:
        return Column(pa.timestamp("us"), narrow_values(device, columns[0], "make_timestamp"), columns[0].validity)
    dates = _make_date(device, columns[:3], "make_timestamp")
    hour, minute = (narrow_values(device, column, "make_timestamp") for column in columns[3:5])
    seconds = as_float(xp, columns[5])
    validity = and_validity(dates.validity, columns[3].validity, columns[4].validity, columns[5].validity)
    bad = (hour < 0) | (hour > 23) | (minute < 0) | (minute > 59) | ~((seconds >= 0) & (seconds < 61))
    raise_at_first(device, bad, validity, "Time out of range in make_timestamp")
    micros = xp.round(xp.where(bad, 0.0, seconds) * 1_000_000.0).astype(xp.int64)
    micros = micros + (xp.where(bad, 0, hour) * 60 + xp.where(bad, 0, minute)) * 60_000_000
    return Column(pa.timestamp("us"), dates.data.astype(xp.int64) * _MICROS_PER_DAY + micros, validity)


def _make_time(device: Device, columns: Sequence[Column]) -> Column:
    """Return DuckDB's make_time(hour, minute, seconds): the time parts of :func:`_make_timestamp`, their range
    errors too (seconds rounded to the microsecond: ``59.9999999`` seconds past 23:59 is ``24:00:00``, as DuckDB)."""
    xp = device.xp
    hour, minute = (narrow_values(device, column, "make_time") for column in columns[:2])
    seconds = as_float(xp, columns[2])
    validity = and_validity(columns[0].validity, columns[1].validity, columns[2].validity)
    bad = (hour < 0) | (hour > 23) | (minute < 0) | (minute > 59) | ~((seconds >= 0) & (seconds < 61))
    raise_at_first(device, bad, validity, "Time out of range in make_time")
    micros = xp.round(xp.where(bad, 0.0, seconds) * 1_000_000.0).astype(xp.int64)
    return Column(TIME, micros + (xp.where(bad, 0, hour) * 60 + xp.where(bad, 0, minute)) * 60_000_000, validity)


def _date_plus_time(device: Device, columns: Sequence[Column]) -> Column:
    """Return DuckDB's ``DATE + TIME``: the TIMESTAMP of that day at that time (``24:00:00`` the next midnight)."""
    date, time = columns
    validity = and_validity(date.validity, time.validity)
    return Column(pa.timestamp("us"), date.data.astype(device.xp.int64) * _MICROS_PER_DAY + time.data, validity)


def _add_days(device: Device, name: str, columns: Sequence[Column]) -> Column:
    """Return ``date +/- days`` (DATE), raising where the day leaves the date type's range."""
    xp = device.xp
    date, days = columns
    validity = and_validity(date.validity, days.validity)
    step = days.data.astype(xp.int64)
    result = date.data.astype(xp.int64) + (step if name == "date_add_days" else -step)
    raise_at_first(device, (result < -(2**31)) | (result >= 2**31), validity, "Date out of range in date arithmetic")
    return Column(pa.date32(), result.astype(xp.int32), validity)


def _epoch_ms(device: Device, column: Column, dtype: pa.DataType) -> Column:
    """Return ``epoch_ms``: a date or timestamp's milliseconds since 1970 (rounded, halves away from zero, as
    DuckDB), or the TIMESTAMP of an integer's milliseconds."""
    xp = device.xp
    if pa.types.is_timestamp(dtype):
        milliseconds = narrow_values(device, column, "epoch_ms")
        too_far = (milliseconds > (2**63 - 1) // 1000) | (milliseconds < -(2**63) // 1000)
        raise_at_first(device, too_far, column.validity, "Timestamp out of range in epoch_ms")
        return Column(dtype, xp.where(too_far, 0, milliseconds) * 1000, column.validity)
    return Column(dtype, divide_round_half_away(xp, micros_of(xp, column), 1000), column.validity)


def _to_timestamp(device: Device, column: Column, dtype: pa.DataType) -> Column:
    """Return ``to_timestamp(seconds)``: the seconds as microseconds, rounded to the nearest (half to even), an
    error for a value no timestamp holds."""
    xp = device.xp
    micros = xp.round(as_float(xp, column) * 1_000_000.0)
    bad = ~(xp.abs(micros) < 2.0**63 - 1024)  # NaN and the infinities too
    raise_at_first(device, bad, column.validity, "Could not convert epoch seconds to TIMESTAMP WITH TIME ZONE")
    return Column(dtype, xp.where(bad, 0.0, micros).astype(xp.int64), column.validity)


#: time_bucket's default origins (DuckDB): 2000-01-03 (a Monday) for day and time widths, January 2000 for months.
_BUCKET_ORIGIN_MICROS = 946_857_600_000_000
_BUCKET_ORIGIN_MONTH = 2000 * 12


def _time_bucket(device: Device, columns: Sequence[Column], dtype: pa.DataType) -> Column:
    """Return ``time_bucket(width, t[, offset | origin])``: the start of ``t``'s bucket, as DuckDB computes it.

    A width of days and time divides the microseconds since the origin (floored); a width of months the months
    since the origin's month (the bucket starts on the 1st). An offset shifts ``t`` back before bucketing and
    the bucket forward after. Array code on the device, one pass per step; a width mixing months with days or
    time, or not positive, raises DuckDB's errors.
    """
    xp = device.xp
    width, instant = columns[0], columns[1]
    months, days, extra = (width.data[:, i].astype(xp.int64) for i in range(3))
    validity = and_validity(*(c.validity for c in columns))
    by_month = months != 0
    raise_at_first(device, by_month & ((days != 0) | (extra != 0)), validity,
                   "Month intervals cannot have day or time component")
    step = days * _MICROS_PER_DAY + extra
    raise_at_first(device, xp.where(by_month, months <= 0, step <= 0), validity, "Period must be greater than 0")
    at = micros_of(xp, instant)
    shift = xp.zeros_like(at)
    origin = xp.full_like(at, _BUCKET_ORIGIN_MICROS)
    origin_month = xp.full_like(at, _BUCKET_ORIGIN_MONTH)
    if len(columns) > 2 and columns[2].data.ndim == 2:  # an offset
        off_months, off_days, off_extra = (columns[2].data[:, i].astype(xp.int64) for i in range(3))
        raise_at_first(device, off_months != 0, validity, "time_bucket: an offset in months is not supported")
        shift = off_days * _MICROS_PER_DAY + off_extra
    elif len(columns) > 2:  # an origin
        origin = micros_of(xp, columns[2])
        year, month, _day = civil_from_days(xp, xp.floor_divide(origin, _MICROS_PER_DAY))
        origin_month = year * 12 + month - 1
    at = at - shift
    safe_step = xp.where(step > 0, step, 1)
    by_time = origin + xp.floor_divide(at - origin, safe_step) * safe_step
    year, month, _day = civil_from_days(xp, xp.floor_divide(at, _MICROS_PER_DAY))
    safe_months = xp.where(months > 0, months, 1)
    bucket = origin_month + xp.floor_divide(year * 12 + month - 1 - origin_month, safe_months) * safe_months
    first_day = days_from_civil(xp, xp.floor_divide(bucket, 12), xp.remainder(bucket, 12) + 1,
                                xp.ones_like(bucket)).astype(xp.int64)
    result = xp.where(by_month, first_day * _MICROS_PER_DAY, by_time) + shift
    if pa.types.is_date32(dtype):
        result = xp.floor_divide(result, _MICROS_PER_DAY).astype(xp.int32)
    return Column(dtype, result, validity)


#: The functions this module evaluates.
DATE_FUNCTIONS = ("date_part", "date_trunc", "date_diff", "add_interval", "make_date", "date_add_days",
                  "date_sub_days", "date_sub", "strftime", "last_day", "strptime", "try_strptime", "time_bucket",
                  "epoch_ms", "epoch_ns_of_ns", "epoch_us_of_ns", "to_timestamp",
                  "dayname", "monthname", "make_timestamp", "make_time", "date_add_time")


#: The functions DuckDB answers of a TIMESTAMP_NS cast to TIMESTAMP (``temporal.as_timestamp_micros``).
_OF_CAST_TIMESTAMPS = frozenset({"date_trunc", "date_diff", "date_sub", "time_bucket", "last_day"})


def evaluate_date_function(device: Device, name: str, args: Sequence[Any], columns: Sequence[Column],
                           dtype: pa.DataType) -> Column:
    """Return ``name(args)`` from the evaluated argument ``columns``; a part name is read from ``args[0]``."""
    xp = device.xp
    if name in _OF_CAST_TIMESTAMPS:
        columns = [column if column is None else as_timestamp_micros(xp, column) for column in columns]
    if name == "make_date":
        return _make_date(device, columns)
    if name == "make_timestamp":
        return _make_timestamp(device, columns)
    if name == "make_time":
        return _make_time(device, columns)
    if name == "date_add_time":
        return _date_plus_time(device, columns)
    if name in _CALENDAR_NAMES:
        return _calendar_name(device, name, columns[0])
    if name == "strftime":
        if args[1].value is None:
            return Column.from_arrow(pa.nulls(len(columns[0]), pa.string()), device)
        return _strftime(device, columns[0], args[1].value)
    if name == "last_day":
        year, month, _day = civil_from_days(xp, days_of(xp, columns[0]))
        last = days_from_civil(xp, year, month, _days_in_month(xp, year, month))
        return Column(dtype, last.astype(xp.int32), columns[0].validity)
    if name in ("date_add_days", "date_sub_days"):
        return _add_days(device, name, columns)
    if name == "time_bucket":
        return _time_bucket(device, columns, dtype)
    if name in ("strptime", "try_strptime"):
        from gpu_engine.expressions.strptime import strptime

        if args[1].value is None:
            return Column.from_arrow(pa.nulls(len(columns[0]), dtype), device)
        return strptime(device, columns[0], args[1].value, strict=name == "strptime")
    if name == "epoch_ms":
        return _epoch_ms(device, columns[0], dtype)
    if name == "epoch_ns_of_ns":  # of a nanosecond timestamp (plans.functions._epoch_of_ns): its ticks
        return Column(dtype, columns[0].data.astype(xp.int64), columns[0].validity)
    if name == "epoch_us_of_ns":  # its microseconds, floored as DuckDB's epoch_us of a TIMESTAMP_NS
        return Column(dtype, micros_of(xp, columns[0]), columns[0].validity)
    if name == "to_timestamp":
        return _to_timestamp(device, columns[0], dtype)
    if name == "date_sub" and len(args) == 3:
        validity = and_validity(columns[1].validity, columns[2].validity)
        return Column(dtype, _date_sub(xp, part_name(args[0].value), columns[1], columns[2]).astype(xp.int64),
                      validity)
    if name == "date_sub":
        validity = and_validity(columns[0].validity, columns[1].validity)
        return Column(dtype, columns[0].data.astype(xp.int64) - columns[1].data.astype(xp.int64), validity)
    if name == "add_interval":
        column = columns[0]
        shifted = add_interval(xp, column, args[1].value, args[2].value, args[3].value)
        return Column(dtype, shifted_ticks(device, column, shifted, column.validity), column.validity)
    part = part_name(args[0].value)
    if name == "date_diff":
        validity = and_validity(columns[1].validity, columns[2].validity)
        return Column(dtype, _date_diff(xp, part, columns[1], columns[2]).astype(xp.int64), validity)
    column = columns[1]
    if name == "date_trunc":
        return Column(dtype, _date_trunc(xp, part, column), column.validity)
    values = _date_part(xp, part, column)
    return Column(dtype, values.astype(xp.float64 if part in ("epoch", "julian") else xp.int64), column.validity)
