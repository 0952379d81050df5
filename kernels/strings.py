"""String kernels (compare, LIKE, IN, substring, copy, parse), each a CPU and a CUDA twin.

Strings are Arrow-layout ``uint8`` chars plus ``int64`` offsets. Most kernels
read their strings through *slots*: ``offsets[slot] : offsets[slot + 1]``, where
the slot of row ``i`` is ``i`` (a plain column) or ``index[i]`` (a dictionary
column's codes, or all zeros for a broadcast literal). That lets one kernel
serve plain columns, dictionary columns and literals without decoding anything.

Every kernel is written once, as a per-row function (``register_jitable``, so
numba compiles it for both targets), called by an ``njit`` loop (the CPU twin)
and by a grid-stride ``cuda.jit`` kernel (the CUDA twin). The entry points take
a :class:`~gpu_engine.device.Device` first and launch through
:func:`gpu_engine.kernels.launch.launch_twin`; callers never branch on the device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit
from numba.extending import register_jitable

from gpu_engine.kernels.launch import launch_twin

__all__ = [
    "compare",
    "like",
    "isin",
    "substring_bounds",
    "substring_bounds_rows",
    "trim_bounds",
    "copy_ranges",
    "parse_decimal",
    "parse_date",
    "LIKE_ANY",
    "LIKE_ONE",
    "PARSE_OK",
    "PARSE_BAD_FORMAT",
    "PARSE_OUT_OF_RANGE",
]

#: Pattern tokens for :func:`like`: ``%`` and ``_``; other tokens are literal bytes.
#: Decorates the row helpers the CPU and CUDA kernels call once a row: compiled without numba's reference
#: counting. Why: each call counted references to the arrays it was passed, ~40 ns a row on the CPU whatever
#: the row's work (isin and substring over TPC-H's 150K phone numbers: 46 -> 1.5 ns a row; p_type LIKE
#: '%BRASS': 10 -> 1 ms). They allocate nothing, so they need none; the CUDA target counts no references.
_row_helper = register_jitable(_nrt=False)

LIKE_ANY = -1
LIKE_ONE = -2
_PATTERN_END = -3

#: Status codes written by the parse kernels.
PARSE_OK = 0
PARSE_BAD_FORMAT = 1
PARSE_OUT_OF_RANGE = 2

_INT64_MAX = 9223372036854775807
_INT64_MIN = -9223372036854775808
_INT64_MIN_TENTH = -922337203685477580  # the lowest value that times 10 still fits int64 (rounded toward zero)
_DATE_MAX_DAYS = 2147483646  # DuckDB's last date (5881580-07-10) in days from 1970-01-01; the first is its negation


# --------------------------------------------------------------- row functions
@_row_helper
def _slot(i, index, indexed):
    if indexed:
        return index[i]
    return i


@_row_helper
def _compare_row(i, l_offsets, l_chars, l_index, l_indexed, r_offsets, r_chars, r_index, r_indexed, out):
    """Write the sign of memcmp-then-length of left vs right (byte order = code-point order)."""
    ls = _slot(i, l_index, l_indexed)
    rs = _slot(i, r_index, r_indexed)
    lo = l_offsets[ls]
    ln = l_offsets[ls + 1] - lo
    ro = r_offsets[rs]
    rn = r_offsets[rs + 1] - ro
    common = ln if ln < rn else rn
    result = 0
    for k in range(common):
        a = l_chars[lo + k]
        b = r_chars[ro + k]
        if a != b:
            result = -1 if a < b else 1
            break
    if result == 0 and ln != rn:
        result = -1 if ln < rn else 1
    out[i] = result


@_row_helper
def _like_row(i, offsets, chars, pattern, out):
    """Match ``%``/``_`` wildcards with single-star backtracking; ``_`` and ``%`` step whole UTF-8 chars."""
    t = offsets[i]
    end = offsets[i + 1]
    n_pattern = pattern.shape[0]
    p = 0
    star_p = -1
    star_t = t
    while t < end:
        token = pattern[p] if p < n_pattern else _PATTERN_END
        if token == LIKE_ONE:
            t += 1
            while t < end and (chars[t] & 0xC0) == 0x80:
                t += 1
            p += 1
        elif token >= 0 and token == chars[t]:
            t += 1
            p += 1
        elif token == LIKE_ANY:
            star_p = p
            star_t = t
            p += 1
        elif star_p >= 0:
            star_t += 1
            while star_t < end and (chars[star_t] & 0xC0) == 0x80:
                star_t += 1
            t = star_t
            p = star_p + 1
        else:
            out[i] = False
            return
    while p < n_pattern and pattern[p] == LIKE_ANY:
        p += 1
    out[i] = p == n_pattern


@_row_helper
def _matches_at(chars, start, segments, first, length):
    """Return True when ``chars[start:start + length]`` equals ``segments[first:first + length]``."""
    for k in range(length):
        if chars[start + k] != segments[first + k]:
            return False
    return True


@_row_helper
def _find_segment(chars, t, end, segments, first, last):
    """Return where ``segments[first:last]`` next occurs in ``chars[t:end]``, or -1."""
    length = last - first
    if length == 0:
        return t
    lead = segments[first]
    limit = end - length
    while t <= limit:
        if chars[t] == lead and _matches_at(chars, t + 1, segments, first + 1, length - 1):
            return t
        t += 1
    return -1


@_row_helper
def _like_segments_row(i, offsets, chars, segments, bounds, anchored_start, anchored_end, out):
    """Match a ``%``-only pattern: its literal segments in order, the first at the start and the last at the end
    when the pattern is anchored there (no ``%`` before the first / after the last)."""
    t = offsets[i]
    end = offsets[i + 1]
    count = bounds.shape[0] - 1
    for s in range(count):
        first = bounds[s]
        last = bounds[s + 1]
        length = last - first
        if s == count - 1 and anchored_end:
            start = end - length
            if start < t:
                out[i] = False
                return
            out[i] = not (s == 0 and anchored_start and start != t) and _matches_at(chars, start, segments, first,
                                                                                    length)
            return
        if s == 0 and anchored_start:
            if end - t < length or not _matches_at(chars, t, segments, first, length):
                out[i] = False
                return
            t += length
            continue
        found = _find_segment(chars, t, end, segments, first, last)
        if found < 0:
            out[i] = False
            return
        t = found + length
    out[i] = True


@_row_helper
def _isin_row(i, offsets, chars, set_offsets, set_chars, out):
    """Write True when string ``i`` equals any member of the set."""
    start = offsets[i]
    length = offsets[i + 1] - start
    found = False
    for m in range(set_offsets.shape[0] - 1):
        m_start = set_offsets[m]
        if set_offsets[m + 1] - m_start != length:
            continue
        same = True
        for k in range(length):
            if chars[start + k] != set_chars[m_start + k]:
                same = False
                break
        if same:
            found = True
            break
    out[i] = found


@_row_helper
def _substring_range(first, last, chars, start, length):
    """Return the byte range ``(begin, stop)`` of DuckDB's ``substring(s, start, length)`` (characters, 1-based)
    of the string ``chars[first:last]``.

    DuckDB places the first character at 0 for ``start > 0`` (``start - 1``),
    one before the first for ``start == 0`` and ``size + start`` for a negative
    start; a negative length takes the characters *before* that position; the
    range is then clamped to the string.
    """
    size = 0
    for k in range(first, last):
        if (chars[k] & 0xC0) != 0x80:
            size += 1
    if start > 0:
        begin = start - 1
    elif start == 0:
        begin = -1
    else:
        begin = size + start
    if length >= 0:
        stop = begin + length
    else:
        stop = begin
        begin = begin + length
    begin = 0 if begin < 0 else (size if begin > size else begin)
    stop = 0 if stop < 0 else (size if stop > size else stop)
    if stop <= begin:
        return first, first
    position = 0
    byte_begin = last
    byte_stop = last
    for k in range(first, last):
        if (chars[k] & 0xC0) != 0x80:
            if position == begin:
                byte_begin = k
            if position == stop:
                byte_stop = k
                break
            position += 1
    return byte_begin, byte_stop


@_row_helper
def _substring_row(i, offsets, chars, start, length, out_start, out_end):
    """Write the byte range of DuckDB's ``substring(s, start, length)`` of string ``i`` (constant bounds)."""
    begin, stop = _substring_range(offsets[i], offsets[i + 1], chars, start, length)
    out_start[i] = begin
    out_end[i] = stop


@_row_helper
def _substring_rows_row(i, offsets, chars, index, indexed, starts, lengths, out_start, out_end):
    """Write the byte range of row ``i``'s substring, its start and length read per row (columns, not constants);
    the row's string is ``index[i]`` of the table when ``indexed`` (a dictionary column's codes)."""
    slot = index[i] if indexed else i
    begin, stop = _substring_range(offsets[slot], offsets[slot + 1], chars, starts[i], lengths[i])
    out_start[i] = begin
    out_end[i] = stop


@_row_helper
def _in_set(byte, members):
    for k in range(members.shape[0]):
        if members[k] == byte:
            return True
    return False


@_row_helper
def _trim_row(i, offsets, chars, members, left, right, out_start, out_end):
    """Write the byte range of string ``i`` without the leading (``left``) and trailing (``right``) bytes found in
    ``members`` (ASCII bytes: they never occur inside a multi-byte UTF-8 character)."""
    first = offsets[i]
    last = offsets[i + 1]
    if left:
        while first < last and _in_set(chars[first], members):
            first += 1
    if right:
        while last > first and _in_set(chars[last - 1], members):
            last -= 1
    out_start[i] = first
    out_end[i] = last


@_row_helper
def _copy_row(i, src_chars, src_starts, dst_offsets, dst_chars):
    """Copy row ``i``'s bytes from ``src_starts[i]`` to its place in the output."""
    source = src_starts[i]
    target = dst_offsets[i]
    for k in range(dst_offsets[i + 1] - target):
        dst_chars[target + k] = src_chars[source + k]


@register_jitable
def _is_space(byte):
    return byte == 32 or (byte >= 9 and byte <= 13)


@register_jitable
def _is_digit(byte):
    return byte >= 48 and byte <= 57


@_row_helper
def _hex_digit(byte, radix):
    """Return the value of an ASCII digit of base 16 or 2, or -1."""
    code = int(byte)  # a Python int in the simulator too (a uint8 would wrap the overflow test)
    if code >= 48 and code <= 57:
        value = code - 48
    elif code >= 97 and code <= 102:
        value = code - 87
    elif code >= 65 and code <= 70:
        value = code - 55
    else:
        return -1
    return value if value < radix else -1


@_row_helper
def _parse_decimal_row(i, offsets, chars, scale, prefixed, out, status):
    """Parse ``ws* [+-] digits[_digits] [. digits] [e [+-] digits] ws*`` to an int64 scaled by 10**scale.

    Digits beyond the target scale round half away from zero (as DuckDB). With ``prefixed`` (an integer
    target) a text that starts ``0x`` or ``0b`` (after blanks; no sign, no blanks after: DuckDB's rule) is
    hexadecimal or binary.
    """
    position = offsets[i]
    end = offsets[i + 1]
    out[i] = 0
    while position < end and _is_space(chars[position]):
        position += 1
    if prefixed and end - position >= 2 and chars[position] == 48 and (
            chars[position + 1] == 120 or chars[position + 1] == 88 or chars[position + 1] == 98
            or chars[position + 1] == 66):
        radix = 16 if chars[position + 1] == 120 or chars[position + 1] == 88 else 2
        position += 2
        accumulated = 0
        previous_digit = False
        while position < end:
            digit = _hex_digit(chars[position], radix)
            if digit >= 0:
                if accumulated > (_INT64_MAX - digit) // radix:
                    status[i] = 2
                    return
                accumulated = accumulated * radix + digit
                previous_digit = True
            elif chars[position] == 95 and previous_digit and position + 1 < end \
                    and _hex_digit(chars[position + 1], radix) >= 0:
                previous_digit = False
            else:
                status[i] = 1
                return
            position += 1
        out[i] = accumulated
        status[i] = 0 if previous_digit else 1
        return
    while end > position and _is_space(chars[end - 1]):
        end -= 1
    negative = False
    if position < end and (chars[position] == 43 or chars[position] == 45):
        negative = chars[position] == 45
        position += 1
    digits_begin = position
    n_int = 0
    n_frac = 0
    point = -1
    previous_digit = False
    while position < end:
        c = chars[position]
        if _is_digit(c):
            if point < 0:
                n_int += 1
            else:
                n_frac += 1
            previous_digit = True
        elif c == 95 and point < 0 and previous_digit and position + 1 < end and _is_digit(chars[position + 1]):
            # a digit separator, as in 1_000
            previous_digit = False
        elif c == 46 and point < 0:
            point = position
            previous_digit = False
        else:
            break
        position += 1
    digits_end = position
    if n_int + n_frac == 0:
        status[i] = 1
        return
    exponent = 0
    if position < end and (chars[position] == 101 or chars[position] == 69):
        position += 1
        exponent_negative = False
        if position < end and (chars[position] == 43 or chars[position] == 45):
            exponent_negative = chars[position] == 45
            position += 1
        if position == end:
            status[i] = 1
            return
        while position < end and _is_digit(chars[position]):
            if exponent < 100000:
                exponent = exponent * 10 + (int(chars[position]) - 48)
            position += 1
        if exponent_negative:
            exponent = -exponent
    if position != end:
        status[i] = 1
        return
    # value = D * 10**shift, D the integer formed by all digits
    shift = exponent - n_frac + scale
    n_digits = n_int + n_frac
    keep = n_digits if shift >= 0 else n_digits + shift
    # The magnitude accumulates negated: -2**63 (a negative text's lowest value) has no positive int64.
    accumulated = 0
    round_up = False
    seen = 0
    for k in range(digits_begin, digits_end):
        c = chars[k]
        if not _is_digit(c):
            continue
        digit = int(c) - 48
        if seen < keep:
            if accumulated < _INT64_MIN_TENTH or (accumulated == _INT64_MIN_TENTH and digit > 8):
                status[i] = 2
                return
            accumulated = accumulated * 10 - digit
        elif seen == keep:
            round_up = digit >= 5
        seen += 1
    if round_up:
        if accumulated == _INT64_MIN:
            status[i] = 2
            return
        accumulated -= 1
    if shift > 0 and accumulated != 0:
        for _ in range(shift):
            if accumulated < _INT64_MIN_TENTH:
                status[i] = 2
                return
            accumulated *= 10
    if not negative and accumulated == _INT64_MIN:
        status[i] = 2
        return
    out[i] = accumulated if negative else -accumulated
    status[i] = 0


@_row_helper
def _read_number(chars, position, end, max_digits):
    """Return (value, next position) of up to ``max_digits`` ASCII digits; value -1 when none."""
    value = 0
    count = 0
    while position < end and count < max_digits and _is_digit(chars[position]):
        value = value * 10 + (int(chars[position]) - 48)
        position += 1
        count += 1
    if count == 0:
        return -1, position
    return value, position


@_row_helper
def _is_zone_name_byte(byte):
    return (byte >= 65 and byte <= 90) or (byte >= 97 and byte <= 122) or _is_digit(byte) or byte == 95 \
        or byte == 47 or byte == 43 or byte == 45


@_row_helper
def _zone_name_end(chars, position, end):
    """Return the position after `` name ws*`` (one blank, then a time zone name such as ``Europe/Berlin``, which
    DuckDB reads and a TIMESTAMP or DATE drops), or -1."""
    if position + 1 >= end or chars[position] != 32 or not _is_zone_name_byte(chars[position + 1]):
        return -1
    position += 1
    while position < end and _is_zone_name_byte(chars[position]):
        position += 1
    while position < end and _is_space(chars[position]):
        position += 1
    return position


@_row_helper
def _skip_time_of_day(chars, position, end):
    """Return the position after ``( |T)ws* H{1,2}:M{1,2}[:S{1,2}[.digits*]] ws* [Z|UTC|(+|-)H{1,2}[[:]MM]]``, or -1.

    Why: DuckDB reads a timestamp's text as a DATE by dropping a valid time of day (``'2020-01-02 10:00'``).
    """
    if position >= end or (chars[position] != 32 and chars[position] != 84):
        return -1
    position += 1
    while position < end and _is_space(chars[position]):  # DuckDB lets blanks run before the time
        position += 1
    hour, position = _read_number(chars, position, end, 2)
    if hour < 0 or hour > 24 or position >= end or chars[position] != 58:
        return -1
    minute, position = _read_number(chars, position + 1, end, 2)
    if minute < 0 or minute > 59 or (hour == 24 and minute != 0):  # 24:00:00 is the day's end
        return -1
    if position < end and chars[position] == 58:
        second, position = _read_number(chars, position + 1, end, 2)
        if second < 0 or second > 59 or (hour == 24 and second != 0):
            return -1
        if position < end and chars[position] == 46:
            position += 1
            while position < end and _is_digit(chars[position]):
                position += 1
    if _zone_name_end(chars, position, end) == end:
        return end
    while position < end and _is_space(chars[position]):
        position += 1
    if position < end and (chars[position] == 90 or chars[position] == 122):  # Z
        position += 1
    elif position + 2 < end and (chars[position] == 85 or chars[position] == 117):  # UTC
        if (chars[position + 1] == 84 or chars[position + 1] == 116) and (chars[position + 2] == 67
                                                                         or chars[position + 2] == 99):
            position += 3
        else:
            return -1
    elif position < end and (chars[position] == 43 or chars[position] == 45):
        offset, position = _read_number(chars, position + 1, end, 2)
        if offset < 0:
            return -1
        if position < end and chars[position] == 58:
            position += 1
        if position < end:
            minutes, position = _read_number(chars, position, end, 2)
            if minutes < 0:
                return -1
    return position if position == end else -1


@_row_helper
def _parse_date_row(i, offsets, chars, out, status):
    """Parse ``ws* [-]Y+ sep M{1,2} sep D{1,2} ws*`` (sep one of ``- / \\ space``) to days since 1970-01-01.

    A valid time of day may follow the date (:func:`_skip_time_of_day`); it is dropped, as DuckDB drops it.
    """
    position = offsets[i]
    end = offsets[i + 1]
    out[i] = 0
    while position < end and _is_space(chars[position]):
        position += 1
    while end > position and _is_space(chars[end - 1]):
        end -= 1
    negative = False
    if position < end and chars[position] == 45:
        negative = True
        position += 1
    year, position = _read_number(chars, position, end, 9)
    if year < 0 or position >= end:
        status[i] = 1
        return
    separator = chars[position]
    if separator != 45 and separator != 47 and separator != 92 and separator != 32:
        status[i] = 1
        return
    month, position = _read_number(chars, position + 1, end, 2)
    if month < 0 or position >= end or chars[position] != separator:
        status[i] = 1
        return
    day, position = _read_number(chars, position + 1, end, 2)
    if day >= 0 and position != end:
        position = _skip_time_of_day(chars, position, end)
    if day < 0 or position != end:
        status[i] = 1
        return
    if negative:
        year = -year
    leap = (year % 4 == 0 and year % 100 != 0) or year % 400 == 0
    days_in_month = 31
    if month == 4 or month == 6 or month == 9 or month == 11:
        days_in_month = 30
    elif month == 2:
        days_in_month = 29 if leap else 28
    if month < 1 or month > 12 or day < 1 or day > days_in_month:
        status[i] = 2
        return
    # Howard Hinnant's days_from_civil
    y = year - 1 if month <= 2 else year
    era = y // 400  # floor division (Hinnant's C++ shifts negative years by 399 for its truncating division)
    year_of_era = y - era * 400
    shifted_month = month - 3 if month > 2 else month + 9
    day_of_year = (153 * shifted_month + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    days = era * 146097 + day_of_era - 719468
    if days > _DATE_MAX_DAYS or days < -_DATE_MAX_DAYS:  # DuckDB's range (+-2**31 - 2: infinities sit beyond it)
        status[i] = 2
        return
    out[i] = days
    status[i] = 0


# ------------------------------------------------------------------ CPU twins
@njit(nogil=True, cache=True)
def _compare_cpu(l_offsets, l_chars, l_index, l_indexed, r_offsets, r_chars, r_index, r_indexed, out):
    for i in range(out.shape[0]):
        _compare_row(i, l_offsets, l_chars, l_index, l_indexed, r_offsets, r_chars, r_index, r_indexed, out)


@njit(nogil=True, cache=True)
def _like_cpu(offsets, chars, pattern, out):
    for i in range(out.shape[0]):
        _like_row(i, offsets, chars, pattern, out)


@njit(nogil=True, cache=True)
def _like_segments_cpu(offsets, chars, segments, bounds, anchored_start, anchored_end, out):
    # _like_segments_row written out in the loop (the CUDA twin calls it): even without reference counting
    # (_row_helper) the call kept LLVM from optimizing across rows (p_type LIKE '%BRASS' over 200K rows:
    # 10 ms with counting, 2 ms called, 0.9 ms written out; o_comment LIKE '%special%requests%': 111, 95, 81).
    count = bounds.shape[0] - 1
    for i in range(out.shape[0]):
        t = offsets[i]
        end = offsets[i + 1]
        matched = True
        for s in range(count):
            first = bounds[s]
            last = bounds[s + 1]
            length = last - first
            if s == count - 1 and anchored_end:
                start = end - length
                matched = (start >= t and not (s == 0 and anchored_start and start != t)
                           and _matches_at(chars, start, segments, first, length))
                break
            if s == 0 and anchored_start:
                if end - t < length or not _matches_at(chars, t, segments, first, length):
                    matched = False
                    break
                t += length
                continue
            found = -1
            if length == 0:
                found = t
            else:
                lead = segments[first]
                while t <= end - length:
                    if chars[t] == lead and _matches_at(chars, t + 1, segments, first + 1, length - 1):
                        found = t
                        break
                    t += 1
            if found < 0:
                matched = False
                break
            t = found + length
        out[i] = matched


@njit(nogil=True, cache=True)
def _isin_cpu(offsets, chars, set_offsets, set_chars, out):
    for i in range(out.shape[0]):
        _isin_row(i, offsets, chars, set_offsets, set_chars, out)


@njit(nogil=True, cache=True)
def _substring_cpu(offsets, chars, start, length, out_start, out_end):
    for i in range(out_start.shape[0]):
        _substring_row(i, offsets, chars, start, length, out_start, out_end)


@njit(nogil=True, cache=True)
def _substring_rows_cpu(offsets, chars, index, indexed, starts, lengths, out_start, out_end):
    for i in range(out_start.shape[0]):
        _substring_rows_row(i, offsets, chars, index, indexed, starts, lengths, out_start, out_end)


@njit(nogil=True, cache=True)
def _trim_cpu(offsets, chars, members, left, right, out_start, out_end):
    for i in range(out_start.shape[0]):
        _trim_row(i, offsets, chars, members, left, right, out_start, out_end)


@njit(nogil=True, cache=True)
def _copy_cpu(src_chars, src_starts, dst_offsets, dst_chars):
    for i in range(src_starts.shape[0]):
        _copy_row(i, src_chars, src_starts, dst_offsets, dst_chars)


@njit(nogil=True, cache=True)
def _parse_decimal_cpu(offsets, chars, scale, prefixed, out, status):
    for i in range(out.shape[0]):
        _parse_decimal_row(i, offsets, chars, scale, prefixed, out, status)


@njit(nogil=True, cache=True)
def _parse_date_cpu(offsets, chars, out, status):
    for i in range(out.shape[0]):
        _parse_date_row(i, offsets, chars, out, status)


# ----------------------------------------------------------------- CUDA twins
@cuda.jit
def _compare_cuda(l_offsets, l_chars, l_index, l_indexed, r_offsets, r_chars, r_index, r_indexed, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        _compare_row(i, l_offsets, l_chars, l_index, l_indexed, r_offsets, r_chars, r_index, r_indexed, out)


@cuda.jit
def _like_cuda(offsets, chars, pattern, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        _like_row(i, offsets, chars, pattern, out)


@cuda.jit
def _like_segments_cuda(offsets, chars, segments, bounds, anchored_start, anchored_end, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        _like_segments_row(i, offsets, chars, segments, bounds, anchored_start, anchored_end, out)


@cuda.jit
def _isin_cuda(offsets, chars, set_offsets, set_chars, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        _isin_row(i, offsets, chars, set_offsets, set_chars, out)


@cuda.jit
def _substring_cuda(offsets, chars, start, length, out_start, out_end):
    for i in range(cuda.grid(1), out_start.shape[0], cuda.gridsize(1)):
        _substring_row(i, offsets, chars, start, length, out_start, out_end)


@cuda.jit
def _substring_rows_cuda(offsets, chars, index, indexed, starts, lengths, out_start, out_end):
    for i in range(cuda.grid(1), out_start.shape[0], cuda.gridsize(1)):
        _substring_rows_row(i, offsets, chars, index, indexed, starts, lengths, out_start, out_end)


@cuda.jit
def _trim_cuda(offsets, chars, members, left, right, out_start, out_end):
    for i in range(cuda.grid(1), out_start.shape[0], cuda.gridsize(1)):
        _trim_row(i, offsets, chars, members, left, right, out_start, out_end)


@cuda.jit
def _copy_cuda(src_chars, src_starts, dst_offsets, dst_chars):
    for i in range(cuda.grid(1), src_starts.shape[0], cuda.gridsize(1)):
        _copy_row(i, src_chars, src_starts, dst_offsets, dst_chars)


@cuda.jit
def _parse_decimal_cuda(offsets, chars, scale, prefixed, out, status):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        _parse_decimal_row(i, offsets, chars, scale, prefixed, out, status)


@cuda.jit
def _parse_date_cuda(offsets, chars, out, status):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        _parse_date_row(i, offsets, chars, out, status)


def _encode_strings(device, values) -> tuple[Any, Any]:
    """Return device (offsets, chars) for a few host strings (a pattern set, an IN list)."""
    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in encoded], dtype=np.int64)
    chars = np.frombuffer(b"".join(encoded), dtype=np.uint8) if encoded else np.zeros(0, np.uint8)
    return device.asarray(offsets), device.asarray(np.ascontiguousarray(chars))


# --------------------------------------------------------------- entry points
def compare(device, rows: int, left: tuple, right: tuple):
    """Return ``int8`` signs (-1, 0, 1) comparing two strings per row, bytewise then by length.

    Parameters
    ----------
    left, right
        ``(offsets, chars, index)``: the string of row ``i`` is slot ``index[i]``,
        or slot ``i`` when ``index`` is None.
    """
    xp = device.xp
    out = xp.zeros(rows, dtype=xp.int8)
    args = []
    for offsets, chars, index in (left, right):
        indexed = index is not None
        index = index.astype(xp.int32, copy=False) if indexed else xp.zeros(1, dtype=xp.int32)
        args += [offsets.astype(xp.int64, copy=False), chars, index, indexed]
    launch_twin(device, rows, _compare_cpu, _compare_cuda, *args, out)
    return out


def like(device, offsets, chars, pattern: str):
    """Return per-string booleans of ``string LIKE pattern`` (``%`` any run, ``_`` one character, no escape).

    A pattern without ``_`` is matched as its literal segments in order (a
    substring search per segment, anchored at the ends the pattern is), which
    is much tighter than the general backtracking matcher.
    """
    xp = device.xp
    if "_" not in pattern:
        return _like_segments(device, offsets, chars, pattern)
    tokens = np.frombuffer(pattern.encode("utf-8"), dtype=np.uint8).astype(np.int32)
    tokens[tokens == ord("%")] = LIKE_ANY
    tokens[tokens == ord("_")] = LIKE_ONE
    rows = int(offsets.shape[0]) - 1
    out = xp.zeros(rows, dtype=xp.bool_)
    offsets = offsets.astype(xp.int64, copy=False)
    launch_twin(device, rows, _like_cpu, _like_cuda, offsets, chars, device.asarray(tokens), out)
    return out


def _like_segments(device, offsets, chars, pattern: str):
    xp = device.xp
    pieces = [piece.encode("utf-8") for piece in pattern.split("%") if piece]
    segments = np.frombuffer(b"".join(pieces) or b"\0", dtype=np.uint8)
    bounds = np.zeros(len(pieces) + 1, dtype=np.int64)
    bounds[1:] = np.cumsum([len(piece) for piece in pieces])
    anchored_start, anchored_end = not pattern.startswith("%"), not pattern.endswith("%")
    rows = int(offsets.shape[0]) - 1
    if not pieces:  # only '%' (any string), or '' (the empty string)
        lengths = offsets[1:] - offsets[:-1]
        return xp.ones(rows, dtype=xp.bool_) if pattern else lengths == 0
    out = xp.zeros(rows, dtype=xp.bool_)
    offsets = offsets.astype(xp.int64, copy=False)
    launch_twin(device, rows, _like_segments_cpu, _like_segments_cuda, offsets, chars, device.asarray(segments),
                device.asarray(bounds), anchored_start, anchored_end, out)
    return out


def isin(device, offsets, chars, values):
    """Return per-string booleans: does the string equal one of ``values`` (host ``str``)?"""
    xp = device.xp
    set_offsets, set_chars = _encode_strings(device, values)
    rows = int(offsets.shape[0]) - 1
    out = xp.zeros(rows, dtype=xp.bool_)
    offsets = offsets.astype(xp.int64, copy=False)
    launch_twin(device, rows, _isin_cpu, _isin_cuda, offsets, chars, set_offsets, set_chars, out)
    return out


def substring_bounds(device, offsets, chars, start: int, length: int | None):
    """Return absolute byte ``(starts, ends)`` of DuckDB's ``substring(s, start, length)`` per string."""
    xp = device.xp
    rows = int(offsets.shape[0]) - 1
    out_start = xp.zeros(rows, dtype=xp.int64)
    out_end = xp.zeros(rows, dtype=xp.int64)
    length = (1 << 62) if length is None else int(length)
    offsets = offsets.astype(xp.int64, copy=False)
    launch_twin(device, rows, _substring_cpu, _substring_cuda, offsets, chars, int(start), length, out_start, out_end)
    return out_start, out_end


def substring_bounds_rows(device, offsets, chars, index, starts, lengths):
    """Return absolute byte ``(starts, ends)`` of DuckDB's ``substring(s, start, length)`` per row, ``start`` and
    ``length`` int64 arrays a row (a column's values); ``index`` maps rows to strings of the table (a dictionary
    column's codes) or is None (row i is string i)."""
    xp = device.xp
    rows = int(starts.shape[0])
    out_start = xp.zeros(rows, dtype=xp.int64)
    out_end = xp.zeros(rows, dtype=xp.int64)
    offsets = offsets.astype(xp.int64, copy=False)
    indexed = index is not None
    index = index.astype(xp.int64, copy=False) if indexed else xp.zeros(1, dtype=xp.int64)
    launch_twin(device, rows, _substring_rows_cpu, _substring_rows_cuda, offsets, chars, index, indexed,
                starts.astype(xp.int64, copy=False), lengths.astype(xp.int64, copy=False), out_start, out_end)
    return out_start, out_end


def trim_bounds(device, offsets, chars, members: bytes, left: bool, right: bool):
    """Return absolute byte ``(starts, ends)`` of each string without leading/trailing bytes in ``members``.

    ``members`` must be ASCII (bytes below 0x80), so trimming bytes is trimming characters.
    """
    xp = device.xp
    rows = int(offsets.shape[0]) - 1
    out_start = xp.zeros(rows, dtype=xp.int64)
    out_end = xp.zeros(rows, dtype=xp.int64)
    offsets = offsets.astype(xp.int64, copy=False)
    member_bytes = device.asarray(np.frombuffer(members or b"\0", dtype=np.uint8).copy())
    launch_twin(device, rows, _trim_cpu, _trim_cuda, offsets, chars, member_bytes, bool(left and members),
                bool(right and members), out_start, out_end)
    return out_start, out_end


def copy_ranges(device, chars, starts, lengths):
    """Gather byte ranges ``chars[starts[i] : starts[i] + lengths[i]]`` into a new string column.

    Returns ``(offsets, chars)`` of the packed result. This is the string
    gather: decoding a dictionary, merging CASE branches, materializing substrings.
    """
    xp = device.xp
    rows = int(starts.shape[0])
    offsets = xp.zeros(rows + 1, dtype=xp.int64)
    if rows:
        offsets[1:] = xp.cumsum(lengths)
    total = int(device.read_scalar(offsets, -1)) if rows else 0
    out = xp.zeros(total, dtype=xp.uint8)
    if total:
        launch_twin(device, rows, _copy_cpu, _copy_cuda, chars, starts.astype(xp.int64, copy=False), offsets, out)
    return offsets, out


def parse_decimal(device, offsets, chars, scale: int, prefixed: bool = False):
    """Parse strings to int64 values scaled by ``10**scale``; returns ``(values, status)``.

    ``prefixed`` (for an integer target) also reads DuckDB's ``0x1F`` and ``0b101``.

    ``status`` is :data:`PARSE_OK`, :data:`PARSE_BAD_FORMAT` or
    :data:`PARSE_OUT_OF_RANGE` per string; callers decide which rows matter
    (null rows hold empty strings and fail to parse).
    """
    xp = device.xp
    rows = int(offsets.shape[0]) - 1
    values = xp.zeros(rows, dtype=xp.int64)
    status = xp.zeros(rows, dtype=xp.int8)
    offsets = offsets.astype(xp.int64, copy=False)
    launch_twin(device, rows, _parse_decimal_cpu, _parse_decimal_cuda, offsets, chars, int(scale), bool(prefixed),
                values, status)
    return values, status


def parse_date(device, offsets, chars):
    """Parse ``YYYY-MM-DD``-style strings to date32 days; returns ``(days, status)`` like :func:`parse_decimal`."""
    xp = device.xp
    rows = int(offsets.shape[0]) - 1
    days = xp.zeros(rows, dtype=xp.int32)
    status = xp.zeros(rows, dtype=xp.int8)
    offsets = offsets.astype(xp.int64, copy=False)
    launch_twin(device, rows, _parse_date_cpu, _parse_date_cuda, offsets, chars, days, status)
    return days, status
