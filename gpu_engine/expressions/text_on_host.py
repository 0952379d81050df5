"""Convert text to booleans and timestamps, and timestamps to text, as DuckDB 2.0.1 does (on the host).

Why on the host: these casts are rare in a pipeline's hot path (they turn
user-typed text into values, or values into display text), and their
grammars are wider than a kernel's worth of code; pyarrow's vectorized
string functions parse them column-wise, as text -> float already does.

* Text -> BOOLEAN: ``true``/``t``/``yes``/``y``/``1`` and
  ``false``/``f``/``no``/``n``/``0``, any case, no surrounding blanks.
* Text -> TIMESTAMP: ``YYYY-MM-DD[( |T)HH:MM[:SS[.fraction]]]`` (``/`` also
  separates the date's fields; fields may lack zero padding), blanks around, an optional ``Z``, ``UTC`` or
  numeric offset (not applied, as DuckDB's TIMESTAMP does not), ``24:00:00`` as
  the next midnight, and ``epoch``; fractions past microseconds are cut.
* Text -> TIMESTAMPTZ: the same grammar, the offset applied (``+02``, ``-05:30``, ``+0130``) and a zone's name
  after one blank read from the IANA database (``Europe/Berlin``, ``CET``; ``UTC``/``Z`` in any case); without
  one the Session's zone (UTC). A wall time a zone skips or repeats takes the later instant (the smaller
  offset), as DuckDB's ICU does; an unknown name raises as DuckDB does ("Unknown TimeZone").
* Text -> DECIMAL wider than 18 digits (for TRY_CAST: the device parse holds
  18 digits): exact, with Python's decimals, halves rounded away from zero; a
  value needing more than 64 bits raises, as every function's result does.
* Text -> TIME: ``[YYYY-MM-DD( |T)]HH:MM[:SS[.fraction]]`` with an offset or ``Z`` after it dropped (as DuckDB
  drops it), ``24:00:00`` the day's end; TIME -> text ``HH:MM:SS`` plus the fraction without trailing zeros.
* TIMESTAMP -> text: ``YYYY-MM-DD HH:MM:SS`` plus the fraction without
  trailing zeros (``…:05.5``), years 1 to 9999; a TIMESTAMPTZ adds the Session zone's offset, ``+00``.

Each parse returns the values and the rows that parsed, so CAST can raise
for the first valid row that did not and TRY_CAST can make it NULL.
"""

from __future__ import annotations

import datetime
import decimal
import re
import zoneinfo
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_engine.columnar import Column
from gpu_engine.expressions.numeric import divide_round_half_away
from gpu_engine.columnar.arrow_numpy import arrow_from_pylist, arrow_values, numpy_validity, numpy_values
from gpu_engine.device import Device
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions.numeric import narrow_values
from gpu_engine.expressions.temporal import TICKS_PER_DAY, civil_from_days

__all__ = ["BC_SUFFIX", "parse_booleans", "parse_timestamps", "format_timestamps", "parse_times", "format_times",
           "parse_wide_decimals", "parse_unsigned_bigints"]

_DECIMAL_TEXT = re.compile(r"^\s*([+-]?)(\d+(?:_\d+)*)?(?:\.(\d*))?(?:[eE]([+-]?\d+))?\s*$")

_TRUE = ["true", "t", "yes", "y", "1"]
_FALSE = ["false", "f", "no", "n", "0"]
# As DuckDB reads it: a bare date ends the text (no blanks or zone after it); a time follows 'T' or blanks and
# may end in '.' with no digits, then blanks and a zone, or one blank and a zone's name (dropped, as DuckDB drops
# it for a TIMESTAMP: 'Europe/Berlin').
_TIMESTAMP_TEXT = (r"^\s*(?P<year>\d{1,4})[-/](?P<month>\d{1,2})[-/](?P<day>\d{1,2})"
                   r"(?:(?:T|\s)\s*(?P<hour>\d{1,2}):(?P<minute>\d{1,2})"
                   r"(?::(?P<second>\d{1,2})(?:\.(?P<fraction>\d*))?)?"
                   r"(?: (?P<name>[A-Za-z0-9_/+\-]+)|\s*(?:Z|UTC|(?P<sign>[+-])(?P<offset_hour>\d{1,2})"
                   r"(?::?(?P<offset_minute>\d{2}))?))?\s*)?$")
_TIME_TEXT = (r"^\s*(?:\d{1,4}[-/]\d{1,2}[-/]\d{1,2}(?:T|\s+))?(?P<hour>\d{1,2}):(?P<minute>\d{1,2})"
              r"(?::(?P<second>\d{1,2})(?:\.(?P<fraction>\d*))?)?(?:Z|[+-]\d{1,2}(?::?\d{2})?)?\s*$")
#: A text starting with a date (a TIME cast reads it as a TIMESTAMP: :func:`parse_times`).
_DATE_PREFIX = r"^\s*\d{1,4}[-/]\d"
_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _text(value: str) -> pa.Scalar:
    """An Arrow string scalar made without ``pa.scalar`` (which, as pyarrow's compute does with a Python
    argument, imports pandas: ~0.2 s of the first query in a new process that casts text to a TIME)."""
    return arrow_from_pylist([value], pa.string())[0]


def _flags(array: pa.Array) -> np.ndarray:
    """A boolean Arrow array as NumPy, NULL as False (``fill_null(False).to_numpy()`` without pandas)."""
    return numpy_values(array) & numpy_validity(array) if array.null_count else numpy_values(array).copy()


def _integers(array: pa.Array) -> np.ndarray:
    """An integer Arrow array as int64 NumPy, NULL as 0 (``fill_null(0).to_numpy()`` without pandas)."""
    values = numpy_values(array).astype(np.int64)
    return np.where(numpy_validity(array), values, 0) if array.null_count else values


def _host_text(device: Device, column: Column) -> pa.Array:
    array = column.to_arrow(device)
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def parse_booleans(device: Device, column: Column) -> tuple[Any, Any]:
    """Return (bool values, parsed) on the device for a text column; a NULL row counts as parsed."""
    lowered = pc.utf8_lower(_host_text(device, column))
    true = _flags(pc.is_in(lowered, value_set=arrow_from_pylist(_TRUE, pa.string())))
    false = _flags(pc.is_in(lowered, value_set=arrow_from_pylist(_FALSE, pa.string())))
    missing = _flags(pc.is_null(lowered))
    return device.asarray(np.asarray(true, dtype=bool)), device.asarray(np.asarray(true | false | missing, dtype=bool))


def _field(parts: pa.StructArray, name: str) -> np.ndarray:
    values = pc.replace_substring_regex(pc.struct_field(parts, name), "^$", "0")  # an absent optional group is ""
    return _integers(pc.cast(values, pa.int64()))


def _days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Return days since 1970-01-01 of proleptic Gregorian dates (Howard Hinnant's algorithm)."""
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def parse_timestamps(device: Device, column: Column, dtype: pa.DataType) -> tuple[Any, Any]:
    """Return (int64 ticks in ``dtype``'s unit, parsed) on the device for a text column (NULL rows parse)."""
    text = _host_text(device, column)
    missing = _flags(pc.is_null(text))
    epoch = _flags(pc.equal(pc.utf8_lower(pc.utf8_trim_whitespace(text)), _text("epoch")))
    parts = pc.extract_regex(text, _TIMESTAMP_TEXT)
    matched = _flags(pc.is_valid(parts))
    year, month, day = (_field(parts, name) for name in ("year", "month", "day"))
    hour, minute, second = (_field(parts, name) for name in ("hour", "minute", "second"))
    fraction = pc.utf8_slice_codeunits(pc.struct_field(parts, "fraction").fill_null(_text("")), 0, 6)
    digits = _integers(pc.utf8_length(fraction))
    padded = pc.utf8_rpad(fraction, width=6, padding="0")
    micros = _integers(pc.cast(padded, pa.int64()))
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = _DAYS_IN_MONTH[np.clip(month, 0, 12)] + ((month == 2) & leap)
    valid_date = (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= month_days)
    midnight = (hour == 24) & (minute == 0) & (second == 0) & (micros == 0)
    valid_time = ((hour <= 23) | midnight) & (minute <= 59) & (second <= 59)
    parsed = (matched & valid_date & valid_time) | epoch | missing
    days = np.where(matched & valid_date, _days_from_civil(year, month, day), 0)
    total = (days * 86_400 + (hour * 60 + minute) * 60 + second) * 1_000_000 + np.where(digits > 0, micros, 0)
    total = np.where(parsed & ~epoch, total, 0)
    if dtype.tz is not None:
        total, parsed = _to_utc(parts, total, parsed & ~epoch, parsed)
    if dtype.unit == "ns":  # past the years 1677-2262 no nanosecond count holds it: not converted, as in DuckDB
        limit = (2**63 - 1) // 1000 - 1
        parsed = parsed & (epoch | missing | ((total <= limit) & (total >= -limit)))
        total = np.where(parsed, total, 0)
    ticks = _from_micros(total, dtype.unit)
    if dtype.unit == "ns":  # TIMESTAMP_NS keeps the fraction's 7th to 9th digits
        nanos = pc.utf8_slice_codeunits(pc.struct_field(parts, "fraction").fill_null(_text("")), 6, 9)
        extra = _integers(pc.cast(pc.utf8_rpad(nanos, width=3, padding="0"), pa.int64()))
        ticks = ticks + np.where(parsed & ~epoch & (_integers(pc.utf8_length(nanos)) > 0), extra, 0)
    return device.asarray(ticks), device.asarray(parsed)


def _to_utc(parts: pa.StructArray, local: np.ndarray, rows: np.ndarray, parsed: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Return (UTC microseconds, parsed) of wall-clock microseconds ``local`` with the offset or zone name each
    text gives (none: the Session's zone, UTC); a row naming an unknown zone does not parse."""
    sign = np.where(_flags(pc.equal(pc.struct_field(parts, "sign"), _text("-"))), -1, 1)
    offset = sign * (_field(parts, "offset_hour") * 60 + _field(parts, "offset_minute")) * 60_000_000
    utc = local - np.where(rows, offset, 0)
    parsed = parsed.copy()
    names = pc.struct_field(parts, "name").to_pylist()
    for row, name in enumerate(names):
        if not name or not rows[row] or name.upper() in ("UTC", "Z"):
            continue
        try:
            zone = zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            parsed[row] = False
            continue
        wall = _EPOCH + datetime.timedelta(microseconds=int(local[row]))
        utc[row] = max(int(local[row]) - int(wall.replace(tzinfo=zone, fold=fold).utcoffset()
                                             // datetime.timedelta(microseconds=1)) for fold in (0, 1))
    return utc, parsed


_EPOCH = datetime.datetime(1970, 1, 1)


def parse_times(device: Device, column: Column) -> tuple[Any, Any]:
    """Return (int64 microseconds of the day, parsed) on the device for a text column (NULL rows parse)."""
    text = _host_text(device, column)
    missing = _flags(pc.is_null(text))
    parts = pc.extract_regex(text, _TIME_TEXT)
    matched = _flags(pc.is_valid(parts))
    hour, minute, second = (_field(parts, name) for name in ("hour", "minute", "second"))
    fraction = pc.utf8_slice_codeunits(pc.struct_field(parts, "fraction").fill_null(_text("")), 0, 6)
    digits = _integers(pc.utf8_length(fraction))
    micros = _integers(pc.cast(pc.utf8_rpad(fraction, width=6, padding="0"), pa.int64()))
    micros = np.where(digits > 0, micros, 0)
    day_end = (hour == 24) & (minute == 0) & (second == 0) & (micros == 0)
    parsed = matched & ((hour <= 23) | day_end) & (minute <= 59) & (second <= 59) | missing
    total = np.where(parsed & ~missing, ((hour * 60 + minute) * 60 + second) * 1_000_000 + micros, 0)
    # DuckDB reads a text that is no time as a TIMESTAMP and keeps its time of day ('2020-01-01' is 00:00:00,
    # '2020-01-01 24:00:00' 00:00:00 of the next day, '2020-02-30 10:00' no TIME): every text with a date does
    timestamp_rows = ~missing & (~parsed | _flags(pc.match_substring_regex(text, _DATE_PREFIX)))
    if timestamp_rows.any():
        ticks, stamped = (np.asarray(device.to_host(a)) for a in parse_timestamps(device, column, pa.timestamp("us")))
        total = np.where(timestamp_rows, np.where(stamped, np.mod(ticks, 86_400_000_000), 0), total)
        parsed = np.where(timestamp_rows, stamped, parsed)
    return device.asarray(total), device.asarray(parsed)


def format_times(device: Device, column: Column) -> Column:
    """Format a TIME column as DuckDB's text (``10:11:12``, ``10:11:12.5``)."""
    array = column.to_arrow(device)
    micros = _integers(array.cast(pa.int64()))
    valid = numpy_validity(array)
    texts = []
    for value, ok in zip(micros.tolist(), valid.tolist()):
        if not ok:
            texts.append(None)
            continue
        second, sub = divmod(value, 1_000_000)
        text = f"{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        texts.append(text + ("." + f"{sub:06d}".rstrip("0") if sub else ""))
    return Column.from_arrow(arrow_from_pylist(texts, pa.string()), device)


#: What DuckDB writes after a date before year 1 (``0001-12-31 (BC)``, a timestamp's time after it).
BC_SUFFIX = " (BC)"


def _from_micros(micros: np.ndarray, unit: str) -> np.ndarray:
    """Return microseconds as ticks of ``unit``; to seconds or milliseconds rounded half away from zero, as DuckDB
    casts text to TIMESTAMP_S / TIMESTAMP_MS (``'10:11:12.5'`` is 10:11:13)."""
    per_day = TICKS_PER_DAY[unit]
    if per_day >= TICKS_PER_DAY["us"]:
        return micros * (per_day // TICKS_PER_DAY["us"])
    return divide_round_half_away(np, micros.astype(np.int64), TICKS_PER_DAY["us"] // per_day)


def format_timestamps(device: Device, column: Column) -> Column:
    """Format a timestamp column as DuckDB's text (``2020-01-02 03:04:05.5``; ``10000-01-01 00:00:00`` past
    year 9999 and ``0001-12-31 (BC) 00:00:00`` before year 1, as DuckDB writes dates)."""
    array = column.to_arrow(device)
    unit = column.dtype.unit
    ticks = _integers(array.cast(pa.int64()))
    per_day = TICKS_PER_DAY[unit]
    days, within = np.divmod(ticks, per_day)
    per_second = per_day // 86_400
    seconds, sub = np.divmod(within, per_second)
    years, months, month_days = civil_from_days(np, days)
    valid = numpy_validity(array)
    texts = []
    digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}[unit]
    zone = "" if column.dtype.tz is None else "+00"  # the Session zone's (UTC's) offset, as DuckDB writes it
    for row, ok in enumerate(valid.tolist()):
        if not ok:
            texts.append(None)
            continue
        second = int(seconds[row])
        year = int(years[row])
        date = f"{max(year, 1 - year):04d}-{int(months[row]):02d}-{int(month_days[row]):02d}"
        text = f"{date}{BC_SUFFIX if year < 1 else ''} {second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        if digits and sub[row]:
            text += "." + f"{int(sub[row]):0{digits}d}".rstrip("0")
        texts.append(text + zone)
    return Column.from_arrow(arrow_from_pylist(texts, pa.string()), device)


#: DuckDB's 0x/0b integer text: blanks before, ``_`` between two digits, no sign, nothing after.
_PREFIXED_TEXT = re.compile(r"^\s*0([xXbB])([0-9a-fA-F]+(?:_[0-9a-fA-F]+)*)$")
_UBIGINT_LIMIT = 2**64


def _unsigned_bigint(text: str | None) -> int | None:
    """Return the UBIGINT ``text`` holds as DuckDB reads it (rounded half away from zero), None when none."""
    if text is None:
        return None
    prefixed = _PREFIXED_TEXT.match(text)
    if prefixed is not None:
        radix = 16 if prefixed.group(1) in "xX" else 2
        try:
            value = int(prefixed.group(2).replace("_", ""), radix)
        except ValueError:  # a hex digit in binary text
            return None
        return value if value < _UBIGINT_LIMIT else None
    match = _DECIMAL_TEXT.match(text)
    if match is None or (match.group(2) is None and not match.group(3)):
        return None
    sign, whole, fraction, exponent = match.groups()
    if exponent is not None and abs(int(exponent)) > 100:
        return None
    number = decimal.Decimal(f"{sign}{(whole or '0').replace('_', '')}.{fraction or '0'}e{exponent or '0'}")
    if number.adjusted() >= 20:  # 1e20 and past: beyond 2**64, and more digits than quantize's precision may hold
        return None
    value = int(number.quantize(decimal.Decimal(1), context=decimal.Context(prec=200,
                                                                            rounding=decimal.ROUND_HALF_UP)))
    return value if 0 <= value < _UBIGINT_LIMIT else None


def parse_unsigned_bigints(device: Device, column: Column, strict: bool) -> Column:
    """Return text parsed as UBIGINT (``0xFFFFFFFFFFFFFFFF``, ``18446744073709551615``), NULL where it does not
    parse or fit; ``strict`` (CAST) raises for the first such valid row instead (TRY_CAST: NULL).

    Why on the host: the parse kernel accumulates signed 64-bit values, so UBIGINT's upper half (2^63 up) was out
    of range (CAST failed, TRY_CAST gave NULL where DuckDB reads the value). Casting text to UBIGINT is rare: one
    round trip of the text, as the wide decimals' parse.
    """
    texts = _host_text(device, column).to_pylist()
    values = [_unsigned_bigint(text) for text in texts]
    if strict:
        for row, (text, value) in enumerate(zip(texts, values)):
            if text is not None and value is None:
                raise ExecutionError(f"Could not convert string {text!r} to UBIGINT (row {row})")
    return Column.from_arrow(arrow_from_pylist(values, pa.uint64()), device)


def parse_wide_decimals(device: Device, column: Column, dtype: pa.DataType) -> Column:
    """Return text parsed as ``dtype`` (a decimal of more than 18 digits), NULL where it does not parse or fit.

    Raises
    ------
    ExecutionError
        For a value that fits ``dtype`` but needs more than 64 bits.
    """
    scale, limit = dtype.scale, decimal.Decimal(10) ** (dtype.precision - dtype.scale)
    quantum = decimal.Decimal(1).scaleb(-scale)
    context = decimal.Context(prec=120, rounding=decimal.ROUND_HALF_UP, Emax=10**6, Emin=-10**6)
    values = []
    for text in _host_text(device, column).to_pylist():
        match = _DECIMAL_TEXT.match(text) if text is not None else None
        if match is None or (match.group(2) is None and not match.group(3)):
            values.append(None)
            continue
        sign, whole, fraction, exponent = match.groups()
        try:
            number = decimal.Decimal(f"{sign}{(whole or '0').replace('_', '')}.{fraction or '0'}e{exponent or '0'}")
            value = number.quantize(quantum, context=context)
        except decimal.InvalidOperation:  # an exponent past what any decimal holds
            values.append(None)
            continue
        values.append(value if abs(value) < limit else None)
    column = Column.from_arrow(arrow_from_pylist(values, dtype), device)
    # As every function's result: 64 bits per value (a fused projection holds no more), else a clear error.
    return Column(dtype, narrow_values(device, column, f"TRY_CAST to {dtype}"), column.validity)
