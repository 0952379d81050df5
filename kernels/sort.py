"""Sort rows by several key columns, by encoding every key as order-preserving uint64 words.

Why: one radix-friendly integer comparison then sorts any mix of types, orders
and null placements, and the sort itself is a library call (``xp.lexsort``, a
stable sort on NumPy and CuPy alike). The "sort keys" kernels write, per column,
an optional null word (placing nulls first or last, whatever the direction) and
value words: sign-flipped integers; floats in IEEE total order with
``-0.0 == 0.0`` and NaN greatest (DuckDB's order); strings as big-endian 8-byte
words (memcmp order of UTF-8) plus a length word; dictionary strings as the dense
rank of their dictionary value. Descending keys store the bitwise NOT.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from numba import cuda, njit

from gpu_engine.columnar.column import Column
from gpu_engine.columnar.types import is_floating, is_interval
from gpu_engine.device import Device
from gpu_engine.kernels.gather import dictionary_row_validity, gather, gather_column, rows_or_dictionary
from gpu_engine.kernels.hash import fixed_width_key_words
from gpu_engine.kernels.launch import launch_twin

__all__ = ["dense_ranks", "key_changes", "packed_key_words", "sort_indices", "sort_key_words", "stable_order",
           "top_n_indices"]

_SIGNED, _UNSIGNED, _FLOAT = 0, 1, 2
_SIGN_BIT = np.uint64(1 << 63)
_ALL_BITS = np.uint64(0xFFFFFFFFFFFFFFFF)
_U0 = np.uint64(0)
_U63 = np.uint64(63)


@njit(nogil=True, cache=True)
def _order_preserving_word(word, kind, descending):
    """Return a word whose unsigned order is the value's order (reversed when ``descending``)."""
    if kind == _SIGNED:
        key = word ^ _SIGN_BIT
    elif kind == _FLOAT:
        key = word ^ (_ALL_BITS if (word >> _U63) != _U0 else _SIGN_BIT)
    else:
        key = word
    return ~key if descending else key


@njit(nogil=True, cache=True)
def _directed(word, descending):
    return ~word if descending else word


# ------------------------------------------------------------------- CPU twins
@njit(nogil=True, cache=True)
def _encode_fixed_cpu(words, validity, has_validity, kind, descending, out, row):
    for i in range(words.shape[0]):
        if has_validity and not validity[i]:
            out[row, i] = _U0
        else:
            out[row, i] = _order_preserving_word(words[i], kind, descending)


@njit(nogil=True, cache=True)
def _encode_strings_cpu(offsets, chars, validity, has_validity, descending, out, top_row, num_byte_words):
    for i in range(offsets.shape[0] - 1):
        valid = not has_validity or validity[i]
        start = offsets[i]
        stop = offsets[i + 1]
        for w in range(num_byte_words):
            word = _U0
            first = start + 8 * w
            if valid:
                for k in range(8):
                    if first + k < stop:
                        word |= np.uint64(chars[first + k]) << np.uint64(56 - 8 * k)
                word = _directed(word, descending)
            out[top_row - w, i] = word
        out[top_row - num_byte_words, i] = _directed(np.uint64(stop - start), descending) if valid else _U0


# ------------------------------------------------------------------ CUDA twins
@cuda.jit
def _encode_fixed_cuda(words, validity, has_validity, kind, descending, out, row):
    for i in range(cuda.grid(1), words.shape[0], cuda.gridsize(1)):
        if has_validity and not validity[i]:
            out[row, i] = _U0
        else:
            out[row, i] = _order_preserving_word(words[i], kind, descending)


@cuda.jit
def _encode_strings_cuda(offsets, chars, validity, has_validity, descending, out, top_row, num_byte_words):
    for i in range(cuda.grid(1), offsets.shape[0] - 1, cuda.gridsize(1)):
        valid = not has_validity or validity[i]
        start = offsets[i]
        stop = offsets[i + 1]
        for w in range(num_byte_words):
            word = _U0
            first = start + 8 * w
            if valid:
                for k in range(8):
                    if first + k < stop:
                        word |= np.uint64(chars[first + k]) << np.uint64(56 - 8 * k)
                word = _directed(word, descending)
            out[top_row - w, i] = word
        out[top_row - num_byte_words, i] = _directed(np.uint64(stop - start), descending) if valid else _U0


# ---------------------------------------------------------------- key encoding
def _value_word_counts(device: Device, columns: Sequence[Column]) -> list[int]:
    """Return the key words each column needs; plain strings' longest lengths are read in one host sync."""
    xp = device.xp
    plain_strings = [column.is_string and not column.is_dictionary for column in columns]
    longest = iter(device.read_scalars([
        (column.offsets[1:] - column.offsets[:-1]).max() if len(column) else xp.zeros(1, dtype=xp.int64)
        for column, plain in zip(columns, plain_strings) if plain]))
    # A wide decimal (128-bit words, see gpu_engine.expressions.numeric) sorts by its high then low word.
    # An INTERVAL sorts by its normalized months, days and microseconds (three words).
    return [(next(longest) + 7) // 8 + 1 if plain else 3 if is_interval(column.dtype) else 2 if column.data.ndim == 2
            else 1
            for column, plain in zip(columns, plain_strings)]


def _row_validity(device: Device, column: Column) -> Any:
    return dictionary_row_validity(device, column) if column.is_dictionary else column.validity


def _dictionary_ranks(device: Device, dictionary: Column) -> Any:
    """Return the dense ascending rank (``uint64``) of each dictionary value; equal values share a rank."""
    return dense_ranks(device, [dictionary], [True], [True])[0].astype(device.xp.uint64)


def _fixed_words_and_kind(device: Device, column: Column) -> tuple[Any, int]:
    if column.is_dictionary:
        xp = device.xp
        if len(column.dictionary) == 0:  # every row is null
            return xp.zeros(len(column), dtype=xp.uint64), _UNSIGNED
        return gather(device, _dictionary_ranks(device, column.dictionary), column.data), _UNSIGNED
    if is_floating(column.dtype):
        kind = _FLOAT
    elif column.data.dtype.kind in "ub":
        kind = _UNSIGNED
    else:
        kind = _SIGNED
    return fixed_width_key_words(device, column), kind


def _sort_key_matrix(device: Device, columns: Sequence[Column], ascending: Sequence[bool],
                     nulls_first: Sequence[bool]) -> Any:
    """Return the ``(K, n)`` uint64 key words for ``xp.lexsort``: the primary word in the last row."""
    xp = device.xp
    n = len(columns[0])
    # A dictionary of more values than rows (a few rows joined to a dimension) is ranked as the rows' strings.
    columns = [rows_or_dictionary(device, column) for column in columns]
    validities = [_row_validity(device, column) for column in columns]
    value_words = _value_word_counts(device, columns)
    num_words = sum(words + (v is not None) for words, v in zip(value_words, validities))
    keys = xp.empty((num_words, n), dtype=xp.uint64)
    no_validity = xp.zeros(1, dtype=xp.bool_)
    word = 0  # logical index, 0 = most significant; stored at row num_words - 1 - word
    for column, validity, words_of_value, is_ascending, is_nulls_first in zip(columns, validities, value_words,
                                                                              ascending, nulls_first):
        descending = not is_ascending
        has_validity = validity is not None
        if has_validity:
            valid_word, null_word = (np.uint64(1), np.uint64(0)) if is_nulls_first else (np.uint64(0), np.uint64(1))
            keys[num_words - 1 - word] = xp.where(validity, valid_word, null_word)
            word += 1
        validity = xp.ascontiguousarray(validity) if has_validity else no_validity
        top_row = num_words - 1 - word
        if column.is_string and not column.is_dictionary:
            num_byte_words = words_of_value - 1
            offsets = xp.ascontiguousarray(column.offsets.astype(xp.int64, copy=False))
            chars = column.data if column.data.shape[0] else xp.zeros(1, dtype=xp.uint8)
            launch_twin(device, n, _encode_strings_cpu, _encode_strings_cuda,
                        offsets, chars, validity, has_validity, descending, keys, top_row, num_byte_words)
            word += num_byte_words + 1
        elif is_interval(column.dtype):  # DuckDB orders intervals normalized (30-day months, 24-hour days)
            from gpu_engine.expressions.intervals import normalized_fields

            for offset, values in enumerate(normalized_fields(xp, column.data)):
                words = xp.ascontiguousarray(values.astype(xp.int64)).view(xp.uint64)
                launch_twin(device, n, _encode_fixed_cpu, _encode_fixed_cuda,
                            words, validity, has_validity, _SIGNED, descending, keys, top_row - offset)
            word += 3
        elif column.data.ndim == 2:
            for offset, (index, kind) in enumerate(((1, _SIGNED), (0, _UNSIGNED))):
                words = xp.ascontiguousarray(column.data[:, index]).view(xp.uint64)
                launch_twin(device, n, _encode_fixed_cpu, _encode_fixed_cuda,
                            words, validity, has_validity, kind, descending, keys, top_row - offset)
            word += 2
        else:
            words, kind = _fixed_words_and_kind(device, column)
            launch_twin(device, n, _encode_fixed_cpu, _encode_fixed_cuda,
                        words, validity, has_validity, kind, descending, keys, top_row)
            word += 1
    return keys


def packed_key_words(device: Device, words: Any) -> Any:
    """Return ``(K, n)`` key words (primary last) as one ``(1, n)`` word where their ranges fit 64 bits together.

    Why: ``np.lexsort`` sorts once per word (an indirect merge sort each), and most keys use few of their 64
    bits (a null word 1, an item key 15, a date 11): a window partitioned by an item and ordered by a date
    sorted its rows twice (TPC-DS q51's Window was ~45% of its CPU). Each word less its minimum, shifted above
    the less significant ones, orders and ties rows exactly as the words did, so one stable sort (and one
    comparison a row in :func:`key_changes`) does. A NULL's value word is 0 while its column's values are
    sign-flipped near 2**63, so a wide word whose extreme value stands apart is packed as that value and the
    range of the others (:func:`_narrowed_word`). Words that still need more than 64 bits are returned as they
    are. CPU only: CuPy sorts by radix already, and reading the ranges back would be a host sync a call.
    """
    if device.kernel_flavor != "cpu" or words.ndim != 2 or words.shape[0] < 2 or words.shape[1] == 0:
        return words
    low, high = words.min(axis=1).tolist(), words.max(axis=1).tolist()
    parts = [(words[k], lo, (hi - lo).bit_length()) for k, (lo, hi) in enumerate(zip(low, high))]
    if sum(width for _, _, width in parts) > 64:
        # narrow the wide words, giving up as soon as the words cannot fit (a plain string's byte words)
        total = sum(width for _, _, width in parts if width <= 32)
        if total > 64:
            return words
        for k, ((word, lo, width), hi) in enumerate(zip(parts, high)):
            if width > 32:
                parts[k] = _narrowed_word(word, lo, hi)
                total += parts[k][2]
                if total > 64:
                    return words
    packed = np.zeros(words.shape[1], dtype=np.uint64)
    shift = 0
    for word, lo, width in parts:  # row 0 is the least significant word
        if width:
            packed |= (word - np.uint64(lo)) << np.uint64(shift)
            shift += width
    return packed[None, :]


def _narrowed_word(word: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, int, int]:
    """Return ``(values, offset, width)`` for one wide word: the word itself, or, where its minimum or maximum
    stands apart from the rest (a NULL's 0 below sign-flipped values), the extreme mapped next to the rest's
    range, order kept: ``values - offset`` fits ``width`` bits."""
    best = (word, lo, (hi - lo).bit_length())
    rest = word[word != lo]  # the minimum apart: it becomes 0, the rest start at 1
    if rest.size:
        low2, high2 = int(rest.min()), int(rest.max())
        width = (high2 - low2 + 1).bit_length()
        if width < best[2]:
            best = (np.where(word == np.uint64(lo), np.uint64(0), word - np.uint64(low2 - 1)), 0, width)
    rest = word[word != hi]  # the maximum apart: it becomes one above the rest's range
    if rest.size:
        low2, high2 = int(rest.min()), int(rest.max())
        width = (high2 - low2 + 1).bit_length()
        if width < best[2]:
            best = (np.where(word == np.uint64(hi), np.uint64(high2 - low2 + 1), word - np.uint64(low2)), 0, width)
    return best


def stable_order(device: Device, words: Any, pack: bool = True) -> Any:
    """Return the stable sort order of ``(K, n)`` key words (primary last), as ``xp.lexsort`` does.

    Why: a single word sorts by ``argsort(kind="stable")``, cheaper on NumPy than ``lexsort``'s general
    path; words are first packed into one where they fit (:func:`packed_key_words`; ``pack=False``: the caller
    packed them already).
    """
    xp = device.xp
    if pack:
        words = packed_key_words(device, words)
    if words.shape[0] == 1 and device.kernel_flavor == "cpu":
        return np.argsort(words[0], kind="stable")
    return xp.lexsort(words)


def _check_arguments(columns: Sequence[Column], ascending: Sequence[bool], nulls_first: Sequence[bool]) -> None:
    if not columns:
        raise ValueError("sorting needs at least one key column")
    if not len(columns) == len(ascending) == len(nulls_first):
        raise ValueError(f"got {len(columns)} sort keys, {len(ascending)} directions, {len(nulls_first)} null orders")
    if any(len(column) != len(columns[0]) for column in columns):
        raise ValueError("sort key columns differ in length")


def _sorted(device: Device, columns: Sequence[Column], ascending: Sequence[bool],
            nulls_first: Sequence[bool]) -> tuple[Any, Any]:
    """Return the key words (see :func:`_sort_key_matrix`; None without rows) and the ``int32`` stable order."""
    _check_arguments(columns, ascending, nulls_first)
    xp = device.xp
    if len(columns[0]) == 0:
        return None, xp.empty(0, dtype=xp.int32)
    keys = packed_key_words(device, _sort_key_matrix(device, columns, ascending, nulls_first))
    return keys, stable_order(device, keys, pack=False).astype(xp.int32)


def sort_indices(device: Device, columns: Sequence[Column], ascending: Sequence[bool],
                 nulls_first: Sequence[bool]) -> Any:
    """Return the ``int32`` row order of a stable multi-key sort.

    Parameters
    ----------
    device
        Where the columns live; selects the twin of the key-encoding kernels.
    columns
        Key columns, the first one primary.
    ascending
        Direction per key.
    nulls_first
        Null placement per key (independent of the direction).

    Returns
    -------
    array
        ``int32`` row indices; rows with equal keys keep their input order.
    """
    return _sorted(device, columns, ascending, nulls_first)[1]


def sort_key_words(device: Device, columns: Sequence[Column], ascending: Sequence[bool],
                   nulls_first: Sequence[bool]) -> Any:
    """Return the ``(K, n)`` ``uint64`` words that sort rows as :func:`sort_indices` does, the primary word last.

    Why: rows with equal keys have equal words (NULLs equal NULLs), so a caller that sorts by these words
    (``xp.lexsort``) also finds where the keys change between neighbours, as a window finds its partitions.
    """
    _check_arguments(columns, ascending, nulls_first)
    return _sort_key_matrix(device, columns, ascending, nulls_first)


def key_changes(device: Device, words: Any, order: Any) -> Any:
    """Return, for each row of ``order`` after the first, whether its :func:`sort_key_words` differ from the row before.

    Why: equal keys have equal words, so over rows in sorted order a change starts a new partition, peer group
    or distinct value (``n - 1`` booleans; the first row always starts one).
    """
    ordered = words[:, order]
    return device.xp.any(ordered[:, 1:] != ordered[:, :-1], axis=0)


def dense_ranks(device: Device, columns: Sequence[Column], ascending: Sequence[bool],
                nulls_first: Sequence[bool]) -> tuple[Any, Any, Any]:
    """Return each row's dense rank in sort order (``int64`` from 0), the sort order, and the rank of each sorted row.

    Equal keys share a rank (NULLs tie with NULLs: their :func:`sort_key_words` are equal). Why: a column's
    distinct values become small integers that sort, compare and index as the values do (a dictionary's
    ranks stand in for its strings; a window's min/max over strings works on ranks).
    """
    _check_arguments(columns, ascending, nulls_first)
    xp = device.xp
    keys = packed_key_words(device, _sort_key_matrix(device, columns, ascending, nulls_first))
    order = stable_order(device, keys, pack=False)
    dense = xp.zeros(order.shape[0], dtype=xp.int64)
    dense[1:] = xp.cumsum(key_changes(device, keys, order))
    ranks = xp.empty_like(dense)
    ranks[order] = dense
    return ranks, order, dense


def top_n_indices(device: Device, columns: Sequence[Column], ascending: Sequence[bool],
                  nulls_first: Sequence[bool], n: int, with_ties: bool = False) -> Any:
    """Return the ``int32`` indices of the first ``n`` rows in :func:`sort_indices` order (fewer if there are fewer rows).

    With ``with_ties`` the rows whose keys equal the ``n``-th row's keys follow it (SQL's ``FETCH FIRST n
    ROWS WITH TIES``: every row whose rank is at most ``n``). Keys are equal when their sort words are,
    so NULLs tie with NULLs; ties cost one comparison pass and one host read of their count.
    """
    if n < 0:
        raise ValueError(f"top_n_indices needs n >= 0, got {n}")
    candidates = _top_n_candidates(device, columns, ascending, nulls_first, n)
    if candidates is not None:  # sort the few rows that can be among the first n (their order kept: stable)
        picked = [gather_column(device, column, candidates) for column in columns]
        return candidates[top_n_indices(device, picked, ascending, nulls_first, n, with_ties)]
    keys, order = _sorted(device, columns, ascending, nulls_first)
    end = n
    if with_ties and 0 < n < order.shape[0]:
        # Rows with the n-th row's keys sort right after it: count them and keep them too.
        boundary = keys[:, order[n - 1]]
        end = n + int(device.xp.count_nonzero(device.xp.all(keys[:, order[n:]] == boundary[:, None], axis=0)))
    return device.xp.ascontiguousarray(order[:end])


#: A top-n over fewer rows than this (or than 4 n) sorts them all: narrowing first would save little.
TOP_N_NARROWING_ROWS = 4096


def _top_n_candidates(device: Device, columns: Sequence[Column], ascending: Sequence[bool],
                      nulls_first: Sequence[bool], n: int) -> Any:
    """Return the increasing ``int32`` rows that can be among the first ``n`` (ties with the ``n``-th included), or
    None when they are not fewer than half the rows (or too few rows to pay).

    Why: a TopN sorted every buffered row by every key (TPC-DS q47's ORDER BY of 11 keys, four of them strings,
    over 49K rows for a LIMIT 100: a quarter of its final Task's CPU). The first ``n`` rows in sort order have the
    ``n`` least first-key words among them (:func:`packed_key_words`), so every row whose first key sorts after
    the ``n``-th least first key is out, and rows tied with the ``n``-th row share its first key. Selecting that
    word (``np.partition``) costs a pass over one column; where the first key's words do not pack into one (a
    NULL word beside a full-range value word, a string's byte words) the ``n``-th least is selected word by word,
    each among the rows tied so far. The rows kept keep their input order, so a stable sort of them orders them
    as the whole sort did. CPU only, as :func:`packed_key_words` (the count kept would be a host read a call on a
    GPU, where the sort is a radix sort already).
    """
    rows = len(columns[0])
    if device.kernel_flavor != "cpu" or n == 0 or rows < max(TOP_N_NARROWING_ROWS, 4 * n):
        return None
    words = packed_key_words(device, _sort_key_matrix(device, columns[:1], ascending[:1], nulls_first[:1]))
    keep = np.zeros(rows, dtype=np.bool_)
    tied = np.arange(rows)  # the rows whose words so far equal the n-th row's
    need = n  # of the first n, the rows not yet known to be in: all are among ``tied``
    for word in words[::-1]:  # the most significant first
        values = word[tied]
        threshold = np.partition(values, need - 1)[need - 1]
        below = values < threshold
        keep[tied[below]] = True
        need -= int(np.count_nonzero(below))
        tied = tied[values == threshold]
        if tied.shape[0] <= need:
            break
    keep[tied] = True
    candidates = np.flatnonzero(keep)
    return None if 2 * candidates.shape[0] > rows else candidates.astype(np.int32)
