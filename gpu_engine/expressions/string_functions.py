"""Evaluate the string functions (``upper``, ``||``, ``trim``, ``lpad``, ``strpos``, ...) with DuckDB's semantics.

Cost is per distinct value where the input is dictionary-encoded, as for LIKE
(:mod:`gpu_engine.expressions.strings`): a function of one string column and
constants runs on the dictionary's values and the result keeps the row codes
(``upper(n_name)`` over a million rows converts 25 strings). On the device:
``length`` (a count of UTF-8 lead bytes per string), ``strpos``'s character
count, ``starts_with`` / ``ends_with`` / ``contains`` (the LIKE kernels, when
the search string has no LIKE wildcard in it), ``||`` and ``concat`` (the
parts' bytes gathered by the string copy kernel), ``upper``/``lower`` of
ASCII text, ``trim`` of ASCII characters (the trim-bounds kernel) and
``left``/``right`` (the substring kernel; ``left(s, -n)`` aside).

The other transforming functions (Unicode case mapping and trim sets, padding,
replacing, ``left(s, -n)``, regular expressions) and ``strpos``'s search are
**host round trips**: the
strings they read (the dictionary, or a plain column's values) are copied to
the host, transformed with Arrow's UTF-8 kernels (Unicode case mapping as
DuckDB's utf8proc does it; ``lpad``/``rpad`` in Python) and copied back. On a
dictionary that is a few values; on a plain string column it is one copy of
the column each way.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_engine.columnar import Column
from gpu_engine.device import Device
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.expressions.nulls import and_validity
from gpu_engine.expressions.numeric import raise_at_first
from gpu_engine.expressions.like_patterns import like_pattern
from gpu_engine.expressions.literals import literal_column
from gpu_engine.expressions.strings import like_matches, map_values, string_validity, substring, substring_rows
from gpu_engine.kernels import strings as kernels
from gpu_engine.plans.expressions import SUBSTRING_UPPER, Literal
from gpu_engine.plans.functions import capturing_groups, regex_pattern

__all__ = ["STRING_FUNCTIONS", "evaluate_string_function"]


def _table(column: Column) -> Column:
    """Return the plain string column holding a column's values (its dictionary, or itself)."""
    return column.dictionary if column.dictionary is not None else column


def _transform(device: Device, column: Column, transform: Callable[[pa.Array], pa.Array]) -> Column:
    """Return ``transform`` applied to every value (each dictionary value once; rows keep their codes)."""
    table = _table(column)
    result = Column.from_arrow(transform(table.to_arrow(device)).cast(pa.string()), device)
    if column.dictionary is None:
        validity = and_validity(column.validity, result.validity)
        return Column(pa.string(), result.data, validity, result.offsets)
    return Column(pa.string(), column.data, column.validity, None, result)


def _case_mapped(device: Device, column: Column, upper: bool) -> Column | None:
    """Return upper/lower of an all-ASCII string table mapped on the device, or None when a byte is not ASCII
    (Unicode case mapping then runs on the host). Costs one reduction read back (is every byte ASCII?)."""
    xp = device.xp
    table = _table(column)
    chars = table.data
    if int(chars.shape[0]) and bool(device.read_scalar(xp.any(chars >= 0x80).reshape(1), 0)):
        return None
    low, high = (ord("a"), ord("z")) if upper else (ord("A"), ord("Z"))
    shift = xp.uint8(32)
    mapped = xp.where((chars >= low) & (chars <= high), chars - shift if upper else chars + shift, chars)
    result = Column(pa.string(), mapped.astype(xp.uint8), table.validity, table.offsets)
    if column.dictionary is None:
        return result
    return Column(pa.string(), column.data, column.validity, None, result)


def _trimmed(device: Device, column: Column, name: str, characters: str | None) -> Column | None:
    """Return trim/ltrim/rtrim by the trim kernel on the device (rows keep their dictionary codes), or None when
    the characters to trim are not all ASCII (the host path then trims Unicode characters)."""
    characters = " " if characters is None else characters  # DuckDB trims spaces only, not tabs or newlines
    if not characters.isascii():
        return None
    table = _table(column)
    starts, ends = kernels.trim_bounds(device, table.offsets, table.data, characters.encode("ascii"),
                                       name != "rtrim", name != "ltrim")
    offsets, chars = kernels.copy_ranges(device, table.data, starts, ends - starts)
    result = Column(pa.string(), chars, table.validity, offsets)
    if column.dictionary is None:
        return result
    return Column(pa.string(), column.data, column.validity, None, result)


def _sliced(device: Device, column: Column, name: str, count: int) -> Column | None:
    """Return left(s, n >= 0) and right(s, n) as DuckDB's substring on the device (substring(s, 1, n),
    substring(s, -n), substring(s, 1 - n)); None for left(s, -n), which needs each string's length.

    DuckDB's right clamps ``n`` to each string's length first, so any ``n`` past the longest string a substring
    can reach (2**32 - 1 characters) is that longest one (right(s, 2**63 - 1) is s, right(s, -2**63) is '');
    its left(s, n > 2**32 - 1) is substring(s, 1, n), which raises for each non-NULL string."""
    if name == "left":
        if count > SUBSTRING_UPPER:
            lengths = literal_column(device, Literal(count, pa.int64()), len(column))
            return substring_rows(device, column, literal_column(device, Literal(1, pa.int64()), len(column)), lengths)
        return substring(device, column, 1, count) if count >= 0 else None
    if count == 0:
        return substring(device, column, 1, 0)
    count = max(min(count, SUBSTRING_UPPER), -SUBSTRING_UPPER)
    return substring(device, column, -count if count > 0 else 1 - count, None)


def _per_value(device: Device, column: Column, compute: Callable[[pa.Array], Any], dtype: pa.DataType) -> Column:
    """Return a fixed-width result computed on the host once per distinct value, gathered per row."""

    def function(offsets: Any, chars: Any) -> Any:
        values = compute(Column(pa.string(), chars, None, offsets).to_arrow(device))
        filled = values.fill_null(False if pa.types.is_boolean(values.type) else 0)
        return device.asarray(np.asarray(filled.to_numpy(zero_copy_only=False)))

    return Column(dtype, map_values(device, column, function), string_validity(device, column))


def _lead_counts(xp: Any, chars: Any) -> Any:
    """Return how many UTF-8 lead bytes (characters) come before each byte position (one more than bytes)."""
    leads = xp.zeros(int(chars.shape[0]) + 1, dtype=xp.int64)
    if chars.shape[0]:
        leads[1:] = xp.cumsum(((chars & 0xC0) != 0x80).astype(xp.int64))
    return leads


def _character_lengths(device: Device, offsets: Any, chars: Any) -> Any:
    """Return the characters of each string: its bytes that do not continue a UTF-8 sequence (on the device)."""
    xp = device.xp
    leads = _lead_counts(xp, chars)
    offsets = offsets.astype(xp.int64, copy=False)
    return xp.take(leads, offsets[1:]) - xp.take(leads, offsets[:-1])


def _length(device: Device, column: Column) -> Column:
    values = map_values(device, column, lambda offsets, chars: _character_lengths(device, offsets, chars))
    return Column(pa.int64(), values, string_validity(device, column))


def _byte_lengths(device: Device, column: Column, bits: bool) -> Column:
    """Return ``strlen`` (each string's bytes) or ``bit_length`` (eight a byte), from the offsets on the device."""
    xp = device.xp

    def function(offsets: Any, _chars: Any) -> Any:
        offsets = offsets.astype(xp.int64, copy=False)
        return (offsets[1:] - offsets[:-1]) * (8 if bits else 1)

    return Column(pa.int64(), map_values(device, column, function), string_validity(device, column))


def _first_code_points(device: Device, column: Column, empty: int) -> Column:
    """Return ``ascii``/``unicode``: the code point of each string's first character (``empty`` for '': DuckDB's
    ascii gives 0, unicode -1), decoded from its first one to four UTF-8 bytes on the device."""
    xp = device.xp

    def function(offsets: Any, chars: Any) -> Any:
        offsets = offsets.astype(xp.int64, copy=False)
        starts = offsets[:-1]
        padded = xp.concatenate([chars, xp.zeros(4, dtype=xp.uint8)]).astype(xp.int32)
        b0, b1, b2, b3 = (xp.take(padded, starts + k) for k in range(4))
        two = ((b0 & 0x1F) << 6) | (b1 & 0x3F)
        three = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
        four = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
        point = xp.where(b0 < 0x80, b0, xp.where(b0 >= 0xF0, four, xp.where(b0 >= 0xE0, three, two)))
        return xp.where(offsets[1:] > starts, point, empty).astype(xp.int32)

    return Column(pa.int32(), map_values(device, column, function), string_validity(device, column))


def _code_point_text(device: Device, points: Column | None, value: int | None, rows: int) -> Column:
    """Return ``chr``: each code point encoded as its one to four UTF-8 bytes, on the device (no host copy of the
    rows); DuckDB's error for a value that is no code point (negative, a surrogate, past U+10FFFF)."""
    xp = device.xp
    if points is None:  # a constant code point
        if value is None:
            return Column.from_arrow(pa.nulls(rows, pa.string()), device)
        points = Column(pa.int64(), xp.full(1, value, dtype=xp.int64), None)
        encoded = _code_point_text(device, points, None, 1)
        codes = xp.zeros(rows, dtype=xp.int32)
        return Column(pa.string(), codes, None, None, encoded)
    values = points.data.astype(xp.int64)
    valid = xp.ones(int(values.shape[0]), dtype=xp.bool_) if points.validity is None else points.validity
    bad = valid & ((values < 0) | (values > 0x10FFFF) | ((values >= 0xD800) & (values <= 0xDFFF)))
    if int(values.shape[0]) and bool(device.read_scalar(xp.any(bad).reshape(1), 0)):
        first = int(device.read_scalar(values[xp.argmax(bad)].reshape(1), 0))
        raise ExecutionError(f"Invalid UTF8 Codepoint {first}")
    values = xp.where(valid, values, 0)
    lengths = xp.where(valid, 1 + (values >= 0x80) + (values >= 0x800) + (values >= 0x10000), 0).astype(xp.int64)
    continuation = [0x80 | ((values >> shift) & 0x3F) for shift in (18, 12, 6, 0)]
    lead = xp.where(lengths == 4, 0xF0 | (values >> 18), xp.where(
        lengths == 3, 0xE0 | (values >> 12), xp.where(lengths == 2, 0xC0 | (values >> 6), values)))
    # byte k of a string of n bytes: the lead, then the last n - 1 continuation bytes
    table = xp.stack([lead] + [xp.where(lengths == 4, continuation[k], xp.where(
        lengths == 3, continuation[min(k + 1, 3)], continuation[min(k + 2, 3)])) for k in range(1, 4)], axis=1)
    keep = xp.arange(4, dtype=xp.int64)[None, :] < lengths[:, None]
    chars = table[keep].astype(xp.uint8)
    offsets = xp.zeros(int(values.shape[0]) + 1, dtype=xp.int64)
    offsets[1:] = xp.cumsum(lengths)
    return Column(pa.string(), chars, points.validity, offsets.astype(xp.int32))


def _translate(values: pa.Array, source: str, target: str) -> pa.Array:
    """Return DuckDB's translate: each character of ``source`` becomes the character at its position in
    ``target`` (its first occurrence counts), or is dropped where ``target`` is shorter."""
    table: dict[int, str | None] = {}
    for position, character in enumerate(source):
        table.setdefault(ord(character), target[position] if position < len(target) else None)
    return pa.array([None if text is None else text.translate(table) for text in values.to_pylist()], pa.string())


def _translate_rows(device: Device, args: Sequence[Any], columns: Sequence[Column | None], rows: int) -> Column:
    """Return ``translate(s, from, to)`` where ``from`` or ``to`` is a column: each row's own table, on the host
    (as the constant form's transform is)."""
    parts = [[arg.value] * rows if column is None else column.to_arrow(device).to_pylist()
             for arg, column in zip(args, columns)]
    out = []
    for text, source, target in zip(*parts):
        if text is None or source is None or target is None:
            out.append(None)
            continue
        table: dict[int, str | None] = {}
        for position, character in enumerate(source):
            table.setdefault(ord(character), target[position] if position < len(target) else None)
        out.append(text.translate(table))
    return Column.from_arrow(pa.array(out, pa.string()), device)


def _like_rows(device: Device, name: str, args: Sequence[Any], columns: Sequence[Column | None],
               rows: int) -> Column:
    """Return ``like_escape(s, p, e)`` / ``ilike_escape`` (``s [I]LIKE p``, the pattern a column): each row's own
    pattern, on the host (compiled once per distinct pattern, matched in time linear in the string:
    :mod:`gpu_engine.expressions.like_patterns`). NULL where the string or the pattern is; ILIKE folds both to
    lower case as DuckDB's ``lower`` does (code point by code point: ``'İ'`` is ``'i'``, a final ``'Σ'`` is
    ``'σ'``, where Python's ``str.lower`` differs). A constant pattern is the LIKE kernels'."""
    escape = args[2].value
    if escape is None:
        return Column.from_arrow(pa.nulls(rows, pa.bool_()), device)
    if len(escape) > 1:
        raise ExecutionError("Invalid escape string. Escape string must be empty or one character.")
    texts, patterns = (pa.array([arg.value] * rows, pa.string()) if column is None else column.to_arrow(device)
                       for arg, column in zip(args[:2], columns[:2]))
    if name == "ilike_escape":
        texts, patterns = pc.utf8_lower(texts), pc.utf8_lower(patterns)
    out = []
    for text, pattern in zip(texts.to_pylist(), patterns.to_pylist()):
        if text is None or pattern is None:
            out.append(None)
            continue
        compiled = like_pattern(pattern, escape)
        matched = compiled.matches(text)
        if compiled.dangling and matched:  # DuckDB raises where its matcher reaches the escape at the end
            raise ExecutionError("Like pattern must not end with escape character!")
        out.append(matched and not compiled.dangling)
    return Column.from_arrow(pa.array(out, pa.bool_()), device)


def _strip_accents(values: pa.Array) -> pa.Array:
    """Return DuckDB's strip_accents (utf8proc's STRIPMARK): decompose, drop the marks, compose again."""
    if pc.all(pc.string_is_ascii(values)).as_py() is not False:
        return values

    def strip(text: str) -> str:
        decomposed = unicodedata.normalize("NFD", text)
        kept = "".join(c for c in decomposed if unicodedata.category(c) not in ("Mn", "Mc", "Me"))
        return unicodedata.normalize("NFC", kept)

    return pa.array([None if text is None else strip(text) for text in values.to_pylist()], pa.string())


def _search_test(name: str, device: Device, column: Column, needle: str) -> Column:
    """Return starts_with / ends_with / contains: the LIKE kernel where the needle has no wildcard, else Arrow's."""
    if "%" not in needle and "_" not in needle:
        pattern = {"starts_with": f"{needle}%", "ends_with": f"%{needle}", "contains": f"%{needle}%"}[name]
        return Column(pa.bool_(), like_matches(device, column, pattern), string_validity(device, column))
    compute = {"starts_with": pc.starts_with, "ends_with": pc.ends_with, "contains": pc.match_substring}[name]
    return _per_value(device, column, lambda values: compute(values, pattern=needle), pa.bool_())


def _strpos(device: Device, column: Column, needle: str) -> Column:
    """Return DuckDB's 1-based character position of ``needle`` (0 when absent; 1 for the empty needle).

    Arrow finds the byte position on the host; the characters before it are counted on the device.
    """
    xp = device.xp

    def function(offsets: Any, chars: Any) -> Any:
        values = Column(pa.string(), chars, None, offsets).to_arrow(device)
        found = pc.find_substring(values, pattern=needle).fill_null(-1).to_numpy(zero_copy_only=False)
        found = device.asarray(found.astype(np.int64))
        leads = _lead_counts(xp, chars)
        starts = offsets[:-1].astype(xp.int64)
        before = xp.take(leads, starts + xp.maximum(found, 0)) - xp.take(leads, starts)
        return xp.where(found >= 0, before + 1, 0)

    return Column(pa.int64(), map_values(device, column, function), string_validity(device, column))


def _pad(values: pa.Array, width: int, fill: str, left: bool) -> pa.Array:
    """Return DuckDB's lpad/rpad: pad with ``fill`` repeated to ``width`` characters, or cut to ``width``; NULL
    where the empty ``fill`` cannot pad (DuckDB raises there: :func:`_checked_rows` does, for a row that holds it)."""
    out = []
    for text in values.to_pylist():
        if text is None:
            out.append(None)
            continue
        if width <= len(text):
            out.append(text[:max(width, 0)])
            continue
        if not fill:
            out.append(None)
            continue
        padding = (fill * ((width - len(text)) // len(fill) + 1))[:width - len(text)]
        out.append(padding + text if left else text + padding)
    return pa.array(out, pa.string())


#: The longest string DuckDB makes (bytes); repeat() past it raises "Cannot create a string of size ...".
_LONGEST_STRING = 4294967295


def _repeat(values: pa.Array, count: int) -> pa.Array:
    """Return DuckDB's repeat; NULL where the result would pass :data:`_LONGEST_STRING` bytes (DuckDB raises there:
    :func:`_checked_rows` does, for a row that holds it). Arrow's binary_repeat where every value fits, else in
    Python: Arrow refuses any count past 2**31 (even of ''). A batch's results past 2 GiB raise (one Arrow array)."""
    longest = pc.max(pc.binary_length(values)).as_py() or 0
    try:
        if count < 2**31 and longest <= _LONGEST_STRING // max(count, 1):  # every value fits: vectorized
            return pc.binary_repeat(values, count)
        out = []
        for text in values.to_pylist():
            fits = text is not None and (count == 0 or len(text.encode()) <= _LONGEST_STRING // count)
            out.append(text * count if fits else None)
        return pa.array(out, pa.string())
    except (pa.ArrowCapacityError, pa.ArrowInvalid) as error:  # a batch's strings are one Arrow array
        raise ExecutionError(f"repeat(s, {count}): the batch's results pass the 2 GiB a string column holds") from error


def _split_part(values: pa.Array, delimiter: str, index: int) -> pa.Array:
    """Return DuckDB's split_part: the ``index``-th piece (1-based; negative from the end; '' out of range; an
    empty delimiter splits into characters)."""
    out = []
    for text in values.to_pylist():
        if text is None:
            out.append(None)
            continue
        pieces = text.split(delimiter) if delimiter else list(text)
        if index > 0:
            out.append(pieces[index - 1] if index <= len(pieces) else "")
        elif index < 0:
            out.append(pieces[index] if -index <= len(pieces) else "")
        else:
            out.append("")
    return pa.array(out, pa.string())


def _left_right(values: pa.Array, count: int, left: bool) -> pa.Array:
    """Return DuckDB's left/right: ``count`` characters from that end, or all but ``-count`` from the other."""
    if left:
        return pc.utf8_slice_codeunits(values, start=0, stop=count)
    if count == 0:
        return pc.utf8_slice_codeunits(values, start=0, stop=0)
    return pc.utf8_slice_codeunits(values, start=-count)  # the last count, or all after the first -count


def _replace(values: pa.Array, search: str, replacement: str) -> pa.Array:
    if search == "":  # DuckDB leaves the string as it is (Arrow would insert between every character)
        return values
    return pc.replace_substring(values, pattern=search, replacement=replacement)


def _extends_cluster(character: str, cluster: str) -> bool:
    """Return True when ``character`` continues the grapheme cluster ``cluster`` (Unicode's rules, simplified as
    utf8proc applies them for DuckDB: marks, joiners, variation selectors, skin tones, emoji tags, flag pairs)."""
    code = ord(character)
    if unicodedata.category(character) in ("Mn", "Me", "Mc") or code in (0x200C, 0x200D):
        return True
    if 0xFE00 <= code <= 0xFE0F or 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:
        return True
    if cluster.endswith("\u200d") and len(cluster) > 1 and unicodedata.category(character) == "So":
        return True  # an emoji ZWJ sequence
    regional = 0x1F1E6 <= code <= 0x1F1FF
    if regional and 0x1F1E6 <= ord(cluster[-1]) <= 0x1F1FF:
        flags = sum(1 for c in cluster if 0x1F1E6 <= ord(c) <= 0x1F1FF)
        return flags % 2 == 1  # the second of a pair of regional indicators
    return False


def _reverse_text(text: str) -> str:
    clusters: list[str] = []
    for character in text:
        if clusters and _extends_cluster(character, clusters[-1]):
            clusters[-1] += character
        else:
            clusters.append(character)
    return "".join(reversed(clusters))


def _reverse(values: pa.Array) -> pa.Array:
    """Reverse each string by grapheme clusters, as DuckDB does: 'e' + U+0301 stays 'é', a flag stays a flag
    (Arrow reverses code points). ASCII strings are reversed by Arrow."""
    if pc.all(pc.string_is_ascii(values)).as_py() is not False:
        return pc.utf8_reverse(values)
    return pa.array([None if v is None else _reverse_text(v) for v in values.to_pylist()], values.type)


def _trim(name: str, characters: str | None) -> Callable[[pa.Array], pa.Array]:
    characters = " " if characters is None else characters  # DuckDB trims spaces only, not tabs or newlines
    compute = {"trim": pc.utf8_trim, "ltrim": pc.utf8_ltrim, "rtrim": pc.utf8_rtrim}[name]
    return lambda values: values if characters == "" else compute(values, characters=characters)


def _unary_transform(name: str, constants: Sequence[Any]) -> Callable[[pa.Array], pa.Array]:
    """Return the host transform of one string for ``name(string, constants...)``."""
    if name == "upper":
        return pc.utf8_upper
    if name == "lower":
        return pc.utf8_lower
    if name in ("trim", "ltrim", "rtrim"):
        return _trim(name, constants[0] if constants else None)
    if name == "replace":
        return lambda values: _replace(values, constants[0], constants[1])
    if name in ("left", "right"):
        return lambda values: _left_right(values, constants[0], name == "left")
    if name in ("lpad", "rpad"):
        return lambda values: _pad(values, constants[0], constants[1], name == "lpad")
    if name == "reverse":
        return _reverse
    if name == "repeat":
        return lambda values: _repeat(values, max(constants[0], 0))
    if name == "split_part":
        return lambda values: _split_part(values, constants[0], constants[1])
    if name == "md5":
        return _md5
    if name == "translate":
        return lambda values: _translate(values, constants[0], constants[1])
    if name == "strip_accents":
        return _strip_accents
    raise PlanError(f"no string transform named {name!r}")


def _join_rows(device: Device, constants: Sequence[str | None], columns: Sequence[Column | None], rows: int,
               skip_nulls: bool) -> Column:
    """Return the row-wise concatenation of string columns and constants, on the device.

    Every part's string table (a dictionary, a plain column, a constant) is pooled into one byte buffer; row ``i``
    is then the byte ranges of its parts in order, which the string gather kernel (``copy_ranges``) packs: no
    kernel of its own and no host copy. A NULL part makes the row NULL (``||``) or adds nothing (``concat``).
    """
    xp = device.xp
    count = len(columns)
    pool, base = [], 0
    starts = xp.zeros((rows, count), dtype=xp.int64)
    lengths = xp.zeros((rows, count), dtype=xp.int64)
    validity = None
    for j, (constant, column) in enumerate(zip(constants, columns)):
        if column is None:
            encoded = np.frombuffer((constant or "").encode("utf-8"), dtype=np.uint8)
            pool.append(device.asarray(encoded.copy()))
            starts[:, j] = base
            lengths[:, j] = len(encoded)
            base += len(encoded)
            continue
        table = _table(column)
        offsets = table.offsets.astype(xp.int64, copy=False)
        first, last = device.read_scalars([offsets[0], offsets[-1]])
        pool.append(table.data[first:last])
        slots = column.data.astype(xp.int64) if column.dictionary is not None else xp.arange(rows, dtype=xp.int64)
        if column.dictionary is not None and int(offsets.shape[0]) == 1:  # an empty dictionary: every row NULL
            slots = xp.zeros(rows, dtype=xp.int64)
            offsets = xp.zeros(2, dtype=xp.int64) + first
        row_starts = xp.take(offsets, slots)
        row_lengths = xp.take(offsets, slots + 1) - row_starts
        starts[:, j] = row_starts - first + base
        part_validity = string_validity(device, column)
        if part_validity is not None:
            row_lengths = xp.where(part_validity, row_lengths, 0)
            if not skip_nulls:
                validity = part_validity if validity is None else validity & part_validity
        lengths[:, j] = row_lengths
        base += last - first
    if validity is not None:
        lengths = xp.where(validity[:, None], lengths, 0)
    chars = xp.concatenate(pool) if pool else xp.zeros(0, dtype=xp.uint8)
    offsets, out = kernels.copy_ranges(device, chars, starts.reshape(-1), lengths.reshape(-1))
    return Column(pa.string(), out, validity, xp.ascontiguousarray(offsets[::count]))


def _concatenate(device: Device, name: str, args: Sequence[Any], columns: Sequence[Column | None],
                 rows: int) -> Column:
    """Return ``||`` (NULL if any part is) or ``concat`` (NULL parts skipped) of columns and constants.

    With one dictionary column among constants (``c_last_name || ', '``) the constants are joined to each
    distinct value of the column and the rows keep their codes; otherwise rows are joined on the device.
    """
    skip_nulls = name == "concat"
    if not skip_nulls and any(isinstance(arg, Literal) and arg.value is None for arg in args):
        return Column.from_arrow(pa.nulls(rows, pa.string()), device)
    constants = [arg.value if isinstance(arg, Literal) else None for arg in args]
    varying = [k for k, column in enumerate(columns) if column is not None]
    if not varying:
        handling = {"null_handling": "replace", "null_replacement": ""} if skip_nulls else {}
        parts = [pa.array([c], pa.string()) for c in constants]
        value = pc.binary_join_element_wise(*parts, "", **handling)[0].as_py()
        return Column.from_arrow(pa.array([value] * rows, pa.string()), device)
    column = columns[varying[0]]
    if len(varying) == 1 and column.dictionary is not None and not (skip_nulls and column.validity is not None):
        table = column.dictionary
        joined = _join_rows(device, constants, [table if c is not None else None for c in columns], len(table),
                            skip_nulls)
        return Column(pa.string(), column.data, column.validity, None, joined)
    return _join_rows(device, constants, columns, rows, skip_nulls)


def _regex_function(device: Device, name: str, column: Column, constants: Sequence[Any]) -> Column:
    """Return regexp_matches / regexp_full_match / regexp_replace with RE2 (DuckDB's engine), on the host once per
    distinct value."""
    if name == "regexp_extract":
        return _regexp_extract(device, column, constants)
    options = constants[-1] if len(constants) > (2 if name == "regexp_replace" else 1) else None
    pattern = regex_pattern(name, constants[0], options)
    if name == "regexp_replace":
        every = "g" in (options or "")
        return _transform(device, column, lambda values: pc.replace_substring_regex(
            values, pattern=pattern, replacement=constants[1], max_replacements=None if every else 1))
    if name == "regexp_full_match":
        pattern = rf"\A(?:{pattern})\z"
    return _per_value(device, column, lambda values: pc.match_substring_regex(values, pattern=pattern), pa.bool_())


def _regexp_extract(device: Device, column: Column, constants: Sequence[Any]) -> Column:
    """Return DuckDB's regexp_extract: group ``n`` of the first match ('' where nothing matches or the group took no
    part), with RE2 on the host once per distinct value. The pattern is wrapped to match the whole string
    (``(?s:.*?)(?:pattern)(?s:.*)``: the lazy prefix finds the first match, the pattern keeps its own preferences)
    and the string replaced by the group, which RE2's rewrite names ``\\1`` to ``\\9`` (group 0: the pattern
    wrapped in a group of its own)."""
    group = constants[1] if len(constants) > 1 else 0
    pattern = regex_pattern("regexp_extract", constants[0], constants[2] if len(constants) > 2 else None)
    whole = f"(?s:.*?)({pattern})(?s:.*)" if group == 0 else f"(?s:.*?)(?:{pattern})(?s:.*)"
    if group > capturing_groups(constants[0]):  # a group the pattern lacks: '' for every string, as DuckDB
        return _transform(device, column,
                          lambda values: pc.if_else(pc.is_valid(values), "", pa.scalar(None, pa.string())))

    def extract(values: pa.Array) -> pa.Array:
        found = pc.match_substring_regex(values, pattern=pattern)
        replaced = pc.replace_substring_regex(values, pattern=whole, replacement=f"\\{max(group, 1)}",
                                              max_replacements=1)
        return pc.if_else(found, replaced, pa.scalar("", pa.string()))

    return _transform(device, column, extract)


def _md5(values: pa.Array) -> pa.Array:
    """Return each string's MD5 digest in lower-case hex (DuckDB's md5), on the host."""
    import hashlib

    return pa.array([None if text is None else hashlib.md5(text.encode("utf-8")).hexdigest()
                     for text in values.to_pylist()], pa.string())


def _concat_with_separator(device: Device, args: Sequence[Any], columns: Sequence[Column | None], rows: int) -> Column:
    """Return DuckDB's concat_ws: the non-NULL parts joined by the separator (NULL when the separator is).
    Host round trip (Arrow's join with NULLs skipped)."""
    parts = [column.to_arrow(device) if column is not None else pa.array([arg.value] * rows, pa.string())
             for arg, column in zip(args, columns)]
    if columns[0] is None:  # a constant separator (Arrow drops rows when the separator is an array and NULLs skip)
        if args[0].value is None:
            return Column.from_arrow(pa.nulls(rows, pa.string()), device)
        # Arrow's "skip" also drops the rows whose parts are all NULL (pyarrow 26: a shorter result); DuckDB answers
        # '' there, which an empty first part gives (the other parts are skipped, so no separator is added).
        every_null = functools.reduce(pc.and_, [pc.is_null(part) for part in parts[1:]])
        parts[1] = pc.if_else(every_null, pa.scalar("", pa.string()), parts[1])
        joined = pc.binary_join_element_wise(*parts[1:], args[0].value, null_handling="skip")
        return Column.from_arrow(joined, device)
    rows_of = zip(*(part.to_pylist() for part in parts))
    joined = [None if row[0] is None else row[0].join(v for v in row[1:] if v is not None) for row in rows_of]
    return Column.from_arrow(pa.array(joined, pa.string()), device)


#: The functions this module evaluates.
STRING_FUNCTIONS = ("upper", "lower", "length", "trim", "ltrim", "rtrim", "replace", "strpos", "starts_with",
                    "ends_with", "contains", "left", "right", "lpad", "rpad", "concat", "||", "regexp_matches",
                    "regexp_full_match", "regexp_replace", "reverse", "repeat", "split_part", "concat_ws",
                    "regexp_extract", "md5", "strlen", "bit_length", "ascii", "unicode", "chr", "translate",
                    "strip_accents", "like_escape", "ilike_escape")


def evaluate_string_function(device: Device, name: str, args: Sequence[Any], columns: Sequence[Column | None],
                             rows: int) -> Column:
    """Return ``name(args)`` over ``rows`` rows.

    ``args`` are the call's IR arguments and ``columns`` their evaluated
    columns, None for a constant (:class:`Literal`) argument, whose value the
    function reads from ``args`` instead.
    """
    if name in ("concat", "||"):
        return _concatenate(device, name, args, columns, rows)
    if name == "concat_ws":
        return _concat_with_separator(device, args, columns, rows)
    if name in ("like_escape", "ilike_escape"):
        return _like_rows(device, name, args, columns, rows)
    if name == "translate" and any(column is not None for column in columns[1:]):
        return _translate_rows(device, args, columns, rows)
    if name == "chr":
        return _code_point_text(device, columns[0], args[0].value if columns[0] is None else None, rows)
    column = columns[0]
    constants = [arg.value for arg in args[1:]]
    if column is None:  # a constant string: evaluate it once, as a one-value column
        column = Column.from_arrow(pa.array([args[0].value], pa.string()), device)
        result = evaluate_string_function(device, name, args, [column, *columns[1:]], 1)
        codes = device.xp.zeros(rows, dtype=device.xp.int32)
        if result.is_string:
            return Column(pa.string(), codes, None if result.validity is None else device.xp.take(
                result.validity, codes), None, result)
        validity = None if result.validity is None else device.xp.take(result.validity, codes)
        return Column(result.dtype, device.xp.take(result.data, codes), validity)
    if any(value is None for value in constants):  # a NULL constant argument makes every row NULL
        dtype = pa.int64() if name in ("length", "strpos", "strlen", "bit_length") else pa.int32() if name in (
            "ascii", "unicode") else pa.bool_() if name in (
            "starts_with", "ends_with", "contains", "regexp_matches", "regexp_full_match") else pa.string()
        return Column.from_arrow(pa.nulls(len(column), dtype), device)
    if name == "length":
        return _length(device, column)
    if name in ("strlen", "bit_length"):
        return _byte_lengths(device, column, name == "bit_length")
    if name in ("ascii", "unicode"):
        return _first_code_points(device, column, 0 if name == "ascii" else -1)
    if name in ("starts_with", "ends_with", "contains"):
        return _search_test(name, device, column, constants[0])
    if name == "strpos":
        return _strpos(device, column, constants[0])
    if name.startswith("regexp_"):
        return _regex_function(device, name, column, constants)
    if name in ("upper", "lower"):
        mapped = _case_mapped(device, column, name == "upper")
        if mapped is not None:
            return mapped
    if name in ("trim", "ltrim", "rtrim"):
        trimmed = _trimmed(device, column, name, constants[0] if constants else None)
        if trimmed is not None:
            return trimmed
    if name in ("left", "right"):
        sliced = _sliced(device, column, name, constants[0])
        if sliced is not None:
            return sliced
    if name in ("lpad", "rpad", "repeat"):
        return _checked_rows(device, column, name, constants)
    return _transform(device, column, _unary_transform(name, constants))


#: A dictionary whose values repeated would make more bytes than this is first cut to the values rows hold.
_HELD_ONLY_ABOVE = 1 << 26


def _held_values(device: Device, column: Column, count: int) -> Column:
    """Return a dictionary column with only the values its rows hold (codes renumbered), where ``repeat(s,
    count)`` of its whole dictionary would pass :data:`_HELD_ONLY_ABOVE` bytes; else the column as it is.

    Why: the transform runs once per dictionary value; a long value no row holds (one a filter removed) repeated
    passed the 2 GiB a batch's strings hold and raised where DuckDB answers (fuzz10). Below the limit the
    dictionary is repeated whole (no distinct codes computed: one read of its size).
    """
    table = column.dictionary
    size = device.read_scalar(table.offsets, int(table.offsets.shape[0]) - 1)
    if size * count <= _HELD_ONLY_ABOVE or int(column.data.shape[0]) == 0:
        return column
    xp = device.xp
    codes = column.data if column.validity is None else xp.where(column.validity, column.data, 0)  # NULL rows: any code
    held, renumbered = xp.unique(codes, return_inverse=True)
    from gpu_engine.kernels.gather import gather_column

    values = gather_column(device, table, held.astype(xp.int32))
    return Column(pa.string(), renumbered.reshape(-1).astype(column.data.dtype), column.validity, None, values)


def _checked_rows(device: Device, column: Column, name: str, constants: Sequence[Any]) -> Column:
    """Return lpad/rpad/repeat, raising DuckDB's error for the first row (not dictionary value: one a filter removed,
    or no row uses, must not raise) whose value the transform could not make (NULL from a valid string): a string
    shorter than the width with an empty fill ("Insufficient padding"), a repeat past 4294967295 bytes."""
    if name == "repeat" and column.dictionary is not None:
        column = _held_values(device, column, max(constants[0], 0))
    result = _transform(device, column, _unary_transform(name, constants))
    if name in ("lpad", "rpad") and constants[1] != "":
        return result
    made = string_validity(device, result)
    if made is not None:
        valid = string_validity(device, column)
        message = (f"Insufficient padding in {name.upper()}." if name != "repeat" else
                   f"Cannot create a string of size: repeat(s, {constants[0]}), the maximum supported string size "
                   f"is: '{_LONGEST_STRING}'")
        raise_at_first(device, ~made if valid is None else valid & ~made, None, message)
    return result
