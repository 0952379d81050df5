"""Run string kernels on plain and dictionary-encoded columns.

A dictionary column is evaluated on its dictionary (the distinct values, a
small column) and the per-value results are gathered through the codes: LIKE on
a million rows of a 25-value column matches 25 strings. String results keep the
encoding too (``substring`` on a dictionary column transforms the dictionary).
Note that such derived dictionaries may repeat values, so codes identify rows'
values only through the dictionary, never by themselves.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.device import Device
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions.deferred_checks import defer_row_check, first_true_row
from gpu_engine.kernels import strings as kernels
from gpu_engine.kernels.gather import dictionary_row_validity
from gpu_engine.plans.expressions import SUBSTRING_LOWER, SUBSTRING_UPPER

__all__ = [
    "string_slots",
    "string_validity",
    "map_values",
    "compare_signs",
    "compare_signs_to_literal",
    "like_matches",
    "isin_matches",
    "substring",
    "substring_rows",
    "choose_strings",
    "scatter_strings",
]


def string_slots(column: Column) -> tuple[Any, Any, Any]:
    """Return ``(offsets, chars, index)`` as the string kernels read them (``index`` None for plain columns)."""
    if column.dictionary is not None:
        return column.dictionary.offsets, column.dictionary.data, column.data
    return column.offsets, column.data, None


def _take(xp: Any, per_value: Any, codes: Any) -> Any:
    """Gather per-dictionary-value results through codes (an empty dictionary means all rows are null)."""
    if per_value.shape[0] == 0:
        return xp.zeros(codes.shape[0], dtype=per_value.dtype)
    return xp.take(per_value, codes)


def string_validity(device: Device, column: Column) -> Any:
    """Return the row validity of a string column, counting null dictionary entries as null rows."""
    if column.dictionary is None:
        return column.validity
    return dictionary_row_validity(device, column)


def map_values(device: Device, column: Column, function: Callable[[Any, Any], Any]) -> Any:
    """Apply ``function(offsets, chars) -> per-string array`` once per distinct value, then per row."""
    if column.dictionary is None:
        return function(column.offsets, column.data)
    per_value = function(column.dictionary.offsets, column.dictionary.data)
    return _take(device.xp, per_value, column.data)


def compare_signs(device: Device, left: Column, right: Column) -> Any:
    """Return per-row ``int8`` signs of left vs right, byte-lexicographic (= code-point order for UTF-8).

    A side with an empty dictionary (an all-NULL column) makes every row NULL, so every sign is moot: zeros, as
    its codes index nothing (the kernel read past the dictionary's one offset: out of bounds on a GPU).
    """
    if any(side.dictionary is not None and len(side.dictionary) == 0 for side in (left, right)):
        return device.xp.zeros(len(left), dtype=device.xp.int8)
    return kernels.compare(device, len(left), string_slots(left), string_slots(right))


def compare_signs_to_literal(device: Device, column: Column, value: str) -> Any:
    """Return per-row signs of column vs a constant, comparing each dictionary value once."""
    xp = device.xp
    literal = Column.from_strings([value], device)

    def signs(offsets: Any, chars: Any) -> Any:
        count = int(offsets.shape[0]) - 1
        return kernels.compare(device, count, (offsets, chars, None),
                               (literal.offsets, literal.data, xp.zeros(count, dtype=xp.int32)))

    return map_values(device, column, signs)


def like_matches(device: Device, column: Column, pattern: str) -> Any:
    """Return per-row booleans of ``column LIKE pattern`` (nulls not applied)."""
    return map_values(device, column, lambda offsets, chars: kernels.like(device, offsets, chars, pattern))


def isin_matches(device: Device, column: Column, values: Sequence[str]) -> Any:
    """Return per-row booleans: does the row equal one of ``values`` (nulls not applied)."""
    return map_values(device, column, lambda offsets, chars: kernels.isin(device, offsets, chars, list(values)))


def _substring_plain(device: Device, column: Column, start: int, length: int | None) -> Column:
    starts, ends = kernels.substring_bounds(device, column.offsets, column.data, start, length)
    offsets, chars = kernels.copy_ranges(device, column.data, starts, ends - starts)
    return Column(pa.string(), chars, column.validity, offsets)


def substring(device: Device, column: Column, start: int, length: int | None) -> Column:
    """Return DuckDB's ``substring(column, start, length)``; a dictionary column keeps its codes."""
    if column.dictionary is None:
        return _substring_plain(device, column, start, length)
    dictionary = _substring_plain(device, column.dictionary, start, length)
    return Column(pa.string(), column.data, column.validity, None, dictionary)


_SUBSTRING_RANGE_ERRORS = ("Substring offset outside of supported range (< -4294967296)",
                           "Substring offset outside of supported range (> 4294967295)",
                           "Substring length outside of supported range (< -4294967296)",
                           "Substring length outside of supported range (> 4294967295)")


def substring_rows(device: Device, column: Column, starts: Column, lengths: Column | None) -> Column:
    """Return DuckDB's ``substring(column, start[, length])`` with the start and length read per row (columns).

    A row is NULL where the string, its start or its length is; a valid row whose start or length lies outside
    DuckDB's supported range raises (offset checked before length, the first such row in order), as DuckDB's
    function does; rows with NULLs are not checked (DuckDB does not call the function on them).
    """
    xp = device.xp
    rows = len(column)
    validity = string_validity(device, column)
    for part in (starts, lengths):
        if part is not None and part.validity is not None:
            validity = part.validity if validity is None else validity & part.validity
    start_values = starts.data.astype(xp.int64, copy=False)
    length_values = (xp.full(rows, 1 << 62, dtype=xp.int64) if lengths is None
                     else lengths.data.astype(xp.int64, copy=False))
    code = xp.zeros(rows, dtype=xp.int8)
    checks = [start_values < SUBSTRING_LOWER, start_values > SUBSTRING_UPPER]
    if lengths is not None:
        checks += [length_values < SUBSTRING_LOWER, length_values > SUBSTRING_UPPER]
    for number, bad in reversed(list(enumerate(checks, 1))):  # the first failing check of a row names it
        code = xp.where(bad, xp.int8(number), code)
    bad = code > 0 if validity is None else (code > 0) & validity
    defer_row_check(device, first_true_row(device, bad), -1, lambda row: ExecutionError(
        f"{_SUBSTRING_RANGE_ERRORS[int(device.read_scalar(code, row)) - 1]} (first at row {row})"))
    if validity is not None:  # a NULL row's bounds are never read: keep the kernel's work in range
        start_values = xp.where(validity, start_values, 1)
        length_values = xp.where(validity, length_values, 0)
    offsets, chars, index = string_slots(column)
    if index is not None and len(column.dictionary) == 0:  # an all-NULL column: its codes index nothing
        index = xp.zeros(rows, dtype=xp.int64)
        offsets = xp.zeros(2, dtype=xp.int64)
    begins, ends = kernels.substring_bounds_rows(device, offsets, chars, index, start_values, length_values)
    out_offsets, out_chars = kernels.copy_ranges(device, chars, begins, ends - begins)
    return Column(pa.string(), out_chars, validity, out_offsets)


def _string_pool(device: Device, sources: Sequence[Column]) -> tuple[Any, Any, list[int]]:
    """Concatenate the sources' string tables (dictionaries, or the plain columns) into one.

    Returns the pool's ``(offsets, chars)`` and the first pool slot of each
    source. The tables' first and last offsets are read in one host sync.
    """
    xp = device.xp
    tables = [source.dictionary if source.dictionary is not None else source for source in sources]
    table_offsets = [table.offsets.astype(xp.int64, copy=False) for table in tables]
    ends = device.read_scalars([end for offsets in table_offsets for end in (offsets[0], offsets[-1])])
    pool_offsets = [xp.zeros(1, dtype=xp.int64)]
    pool_chars = []
    bases = []
    slot_base = 0
    char_base = 0
    for index, (table, offsets) in enumerate(zip(tables, table_offsets)):
        first, last = ends[2 * index], ends[2 * index + 1]
        pool_chars.append(table.data[first:last])
        pool_offsets.append(offsets[1:] - first + char_base)
        bases.append(slot_base)
        slot_base += int(offsets.shape[0]) - 1
        char_base += last - first
    chars = xp.concatenate(pool_chars) if pool_chars else xp.zeros(0, dtype=xp.uint8)
    return xp.concatenate(pool_offsets), chars, bases


def _local_slots(xp: Any, source: Column, positions: Any) -> Any:
    """Return the slots in a source's string table of its rows ``positions``."""
    if source.dictionary is not None:
        return source.data[positions].astype(xp.int64)
    return positions.astype(xp.int64, copy=False)


def _from_pool(device: Device, sources: Sequence[Column], offsets: Any, chars: Any, slot: Any, validity: Any) -> Column:
    """Return rows reading pool ``slot``: a dictionary over the pool when every source is one, else gathered bytes."""
    xp = device.xp
    if validity is not None:  # a NULL row's slot may lie past the pool (a code of an empty dictionary): read slot 0
        slot = xp.where(validity, slot, 0)
    if int(offsets.shape[0]) == 1:  # no values at all: every row is NULL
        offsets, chars = xp.zeros(2, dtype=xp.int64), xp.zeros(0, dtype=xp.uint8)
    if all(source.dictionary is not None for source in sources):
        return Column(pa.string(), slot.astype(xp.int32), validity, None, Column(pa.string(), chars, None, offsets))
    starts = xp.take(offsets, slot)
    lengths = xp.take(offsets, slot + 1) - starts
    if validity is not None:
        lengths = xp.where(validity, lengths, 0)
    out_offsets, out_chars = kernels.copy_ranges(device, chars, starts, lengths)
    return Column(pa.string(), out_chars, validity, out_offsets)


def choose_strings(device: Device, choice: Any, sources: Sequence[Column], validity: Any) -> Column:
    """Return per row the string of ``sources[choice[row]]`` (CASE over string branches of all rows).

    The sources' string tables are pooled and each row picks a slot in the
    pool. When every source is dictionary-encoded (literals are), the pool is
    small and the result is a dictionary column over it; otherwise the chosen
    bytes are gathered into a plain column.
    """
    xp = device.xp
    offsets, chars, bases = _string_pool(device, sources)
    rows = xp.arange(int(choice.shape[0]), dtype=xp.int64)
    slot = xp.zeros(int(choice.shape[0]), dtype=xp.int64)
    for k, source in enumerate(sources):
        slot = xp.where(choice == k, _local_slots(xp, source, rows) + bases[k], slot)
    return _from_pool(device, sources, offsets, chars, slot, validity)


def scatter_strings(device: Device, rows: int, parts: Sequence[tuple[Any, Column]]) -> Column:
    """Return ``rows`` strings where ``parts`` = ``[(target_rows, column)]`` place each column's rows; others NULL."""
    xp = device.xp
    sources = [column for _target, column in parts]
    offsets, chars, bases = _string_pool(device, sources)
    slot = xp.zeros(rows, dtype=xp.int64)
    validity = xp.zeros(rows, dtype=xp.bool_)
    for (target, column), base in zip(parts, bases):
        positions = xp.arange(len(column), dtype=xp.int64)
        slot[target] = _local_slots(xp, column, positions) + base
        column_validity = string_validity(device, column)
        validity[target] = True if column_validity is None else column_validity
    return _from_pool(device, sources, offsets, chars, slot, validity)
