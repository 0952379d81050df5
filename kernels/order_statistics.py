"""Find the rows at given ranks of each group's values (its k-th smallest), for quantiles and medians.

Why not sort every kept value by group, then value: a median needs one or two order statistics per
group, and two argsorts over all the values (one by value, one stable by group) and their gathers cost
``n log n`` with a cache miss a row on the CPU (TPC-H-sized groups or db-benchmark's 10,000 groups of
a million rows). The CPU twin instead buckets the rows by group with a counting sort (one linear
pass) and finds each group's ranks by quickselect inside its own bucket, which stays in cache:
linear expected time. On ``cuda`` the values are sorted by the device's radix sorts (a thread per
group would run a large group's selection serially), and a rank is read at the group's start plus
the rank, as before.

Values arrive as order-preserving ``uint64`` words (:func:`~gpu_engine.kernels.sort.sort_key_words`):
equal values have equal words, so a tie picks any of the equal rows, all of which hold the value.
:func:`value_rank_rows` takes the values themselves: on the CPU a column of doubles or integers without
NULLs is turned into those words inside the bucketing pass (two passes over 10M doubles and their
temporaries were an eighth of db-benchmark q6's driver time), any other column through the sort words.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from gpu_engine.columnar.column import Column
from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_kernel_launch
from gpu_engine.kernels.hash import CANONICAL_NAN_BITS, _INFINITY_BITS, _MAGNITUDE_BITS
from gpu_engine.kernels.launch import read_only
from gpu_engine.kernels.sort import _FLOAT, _SIGNED, _order_preserving_word, sort_key_words

__all__ = ["group_rank_rows", "value_rank_rows"]

#: Buckets of at most this many values are finished by insertion sort (cheaper than partitioning them).
_INSERTION_ROWS = 16

#: Partitions a selection may make beyond two per halving of its range before it sorts the rest (see ``_select``).
_PARTITION_BUDGET = 8


@njit(nogil=True, cache=True)
def _bucket_by_group_cpu(group_ids, words, starts, bucket_words, bucket_rows):
    """Copy each row's word and index into its group's bucket (``starts``: each bucket's first position)."""
    cursor = starts.copy()
    for i in range(group_ids.shape[0]):
        g = group_ids[i]
        at = cursor[g]
        bucket_words[at] = words[i]
        bucket_rows[at] = i
        cursor[g] = at + 1


@njit(nogil=True, cache=True)
def _bucket_values_by_group_cpu(group_ids, bits, kind, starts, bucket_words, bucket_rows):
    """:func:`_bucket_by_group_cpu` of the values' bits (``kind`` ``_FLOAT``: doubles, every NaN one NaN and
    -0.0 as 0.0; ``_SIGNED``: int64), each turned into its ascending sort word on the way."""
    cursor = starts.copy()
    for i in range(group_ids.shape[0]):
        word = bits[i]
        if kind == _FLOAT:
            magnitude = word & _MAGNITUDE_BITS
            if magnitude > _INFINITY_BITS:
                word = CANONICAL_NAN_BITS
            elif magnitude == 0:
                word = np.uint64(0)
        g = group_ids[i]
        at = cursor[g]
        bucket_words[at] = _order_preserving_word(word, kind, False)
        bucket_rows[at] = i
        cursor[g] = at + 1


@njit(nogil=True, cache=True, inline="always")
def _swap(words, rows, i, j):
    word = words[i]
    words[i] = words[j]
    words[j] = word
    row = rows[i]
    rows[i] = rows[j]
    rows[j] = row


@njit(nogil=True, cache=True, inline="always")
def _partition_below(words, rows, lo, hi, pivot, or_equal):
    """Move the words of ``words[lo:hi]`` below ``pivot`` (or equal to it where ``or_equal``) to its front,
    ``rows`` alongside, and return where the rest begins.

    Branch-free (Lomuto's scheme, the swap made every step, the cursor advanced by the comparison): over
    random values the branchy three-way partition mispredicted about one comparison in two, which held ~60%
    of a selection's time (db-benchmark q6's 10,000 groups of 1,000 doubles: 122 -> 67 ms a pass).
    """
    less = lo
    for i in range(lo, hi):
        word = words[i]
        row = rows[i]
        below = word <= pivot if or_equal else word < pivot
        words[i] = words[less]
        rows[i] = rows[less]
        words[less] = word
        rows[less] = row
        less += below
    return less


@njit(nogil=True, cache=True)
def _select(words, rows, lo, hi, k):
    """Reorder ``words[lo:hi]`` (``rows`` alongside) so that ``k`` holds its rank, no greater word before it
    and no smaller one after it (Hoare's selection; a partition below the pivot, then, where ``k`` lies at or
    after the pivot, one of that part at most the pivot: a run of words equal to the pivot ends it).

    The pivot is the median of three words at pseudo-random places (fixed places took quadratic time on an
    organ pipe's or saw teeth's values); should it still be led astray, after :data:`_PARTITION_BUDGET`
    partitions plus two a halving of the range, the rest is merge sorted (``n log n`` at worst).
    """
    budget = _PARTITION_BUDGET
    seed = np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(k)
    span = hi - lo
    while span > 1:
        budget += 2
        span >>= 1
    while hi - lo > _INSERTION_ROWS:
        if budget == 0:
            order = np.argsort(words[lo:hi], kind="mergesort")
            sorted_words = words[lo:hi][order]
            sorted_rows = rows[lo:hi][order]
            words[lo:hi] = sorted_words
            rows[lo:hi] = sorted_rows
            return
        budget -= 1
        # the median of three words at pseudo-random places (xorshift): ordered input (sorted, organ pipes,
        # saw teeth) cannot lead fixed places' picks astray partition after partition
        span = np.uint64(hi - lo)
        seed ^= seed << np.uint64(13)
        seed ^= seed >> np.uint64(7)
        seed ^= seed << np.uint64(17)
        a = words[lo + np.int64(seed % span)]
        b = words[lo + np.int64((seed >> np.uint64(21)) % span)]
        c = words[lo + np.int64((seed >> np.uint64(42)) % span)]
        if a < b:
            pivot = b if b < c else (c if a < c else a)
        else:
            pivot = a if a < c else (c if b < c else b)
        less = _partition_below(words, rows, lo, hi, pivot, False)
        if k < less:
            hi = less
            continue
        greater = _partition_below(words, rows, less, hi, pivot, True)  # the pivot's own word: greater > less
        if k < greater:
            return
        lo = greater
    for i in range(lo + 1, hi):  # a short range: sorted whole
        word = words[i]
        row = rows[i]
        j = i - 1
        while j >= lo and words[j] > word:
            words[j + 1] = words[j]
            rows[j + 1] = rows[j]
            j -= 1
        words[j + 1] = word
        rows[j + 1] = row


@njit(nogil=True, cache=True)
def _least_at(words, lo, hi):
    """Return the position of the least word in ``words[lo:hi]`` (not empty)."""
    at = lo
    for i in range(lo + 1, hi):
        if words[i] < words[at]:
            at = i
    return at


@njit(nogil=True, cache=True)
def _greatest_at(words, lo, hi):
    """Return the position of the greatest word in ``words[lo:hi]`` (not empty)."""
    at = lo
    for i in range(lo + 1, hi):
        if words[i] > words[at]:
            at = i
    return at


@njit(nogil=True, cache=True)
def _select_ranks_cpu(starts, counts, first_ranks, second_ranks, bucket_words, bucket_rows, first_rows, second_rows):
    for g in range(counts.shape[0]):
        n = counts[g]
        if n == 0:
            continue
        lo = starts[g]
        hi = lo + n
        first = lo + first_ranks[g]
        _select(bucket_words, bucket_rows, lo, hi, first)
        first_rows[g] = bucket_rows[first]
        second = lo + second_ranks[g]
        if second == first + 1:  # the least word after `first` (a median of an even count): one scan
            second = _least_at(bucket_words, first + 1, hi)
        elif second == first - 1:
            second = _greatest_at(bucket_words, lo, first)
        elif second > first:  # every word after `first` is no smaller: its rank is among them
            _select(bucket_words, bucket_rows, first + 1, hi, second)
        elif second < first:
            _select(bucket_words, bucket_rows, lo, first, second)
        second_rows[g] = bucket_rows[second]


def group_rank_rows(device: Device, group_ids: Any, groups: int, words: Any, counts: Any, starts: Any,
                    first_ranks: Any, second_ranks: Any) -> tuple[Any, Any]:
    """Return, per group, the row holding its ``first_ranks``-th and its ``second_ranks``-th smallest value.

    Parameters
    ----------
    group_ids
        ``int64`` group of each row (every row counts: drop NULL values first).
    words
        ``(K, n)`` ``uint64`` sort words of the rows' values, primary word last
        (:func:`~gpu_engine.kernels.sort.sort_key_words`).
    counts, starts
        Each group's row count and the exclusive prefix sum of the counts.
    first_ranks, second_ranks
        ``int64`` ranks from 0 (below each group's count; anything for a group without rows).

    Returns
    -------
    first_rows, second_rows
        ``int64`` rows; 0 for a group without rows.
    """
    xp = device.xp
    if device.kernel_flavor == "cpu" and words.shape[0] == 1:
        rows = int(group_ids.shape[0])
        bucket_words = np.empty(rows, dtype=np.uint64)
        bucket_rows = np.empty(rows, dtype=np.int64)
        count_kernel_launch()
        _bucket_by_group_cpu(group_ids, words[0], starts, bucket_words, bucket_rows)
        return _selected_rows(groups, counts, starts, first_ranks, second_ranks, bucket_words, bucket_rows)
    # By value (the device's sort over all words), then stably by group: each group's values in order.
    order = xp.argsort(words[0]) if words.shape[0] == 1 else xp.lexsort(words)
    narrow = xp.int16 if groups <= 1 << 15 else xp.int64
    order = order[xp.argsort(group_ids[order].astype(narrow), kind="stable")]
    valid = counts > 0
    first_rows = xp.where(valid, order[xp.where(valid, starts + first_ranks, 0)], 0)
    second_rows = xp.where(valid, order[xp.where(valid, starts + second_ranks, 0)], 0)
    return first_rows.astype(xp.int64), second_rows.astype(xp.int64)


def _selected_rows(groups: int, counts: Any, starts: Any, first_ranks: Any, second_ranks: Any, bucket_words: Any,
                   bucket_rows: Any) -> tuple[Any, Any]:
    """Return the CPU's rows at each group's two ranks, its values already bucketed by group."""
    first_rows = np.zeros(groups, dtype=np.int64)
    second_rows = np.zeros(groups, dtype=np.int64)
    count_kernel_launch()
    _select_ranks_cpu(starts, counts, first_ranks.astype(np.int64, copy=False),
                      second_ranks.astype(np.int64, copy=False), bucket_words, bucket_rows, first_rows, second_rows)
    return first_rows, second_rows


def value_rank_rows(device: Device, group_ids: Any, groups: int, values: Column, counts: Any, starts: Any,
                    first_ranks: Any, second_ranks: Any) -> tuple[Any, Any]:
    """Return :func:`group_rank_rows` of ``values`` (no NULLs: drop them first) in ascending order.

    On the CPU doubles and integers of up to 64 bits become their sort words inside the bucketing pass; other
    columns, and other devices, go through :func:`~gpu_engine.kernels.sort.sort_key_words`.
    """
    data = values.data
    plain = (values.validity is None and not values.is_string and not values.is_dictionary and data.ndim == 1
             and (data.dtype == np.float64 or data.dtype.kind == "i"))  # dates, timestamps, decimals: signed
    if device.kernel_flavor != "cpu" or not plain:
        words = sort_key_words(device, [values], [True], [False])
        return group_rank_rows(device, group_ids, groups, words, counts, starts, first_ranks, second_ranks)
    rows = int(group_ids.shape[0])
    # read-only always: an Arrow column's buffer is, a computed one is not (one signature: launch.read_only)
    bits = read_only(np, (data if data.dtype == np.float64 else data.astype(np.int64, copy=False)).view(np.uint64))
    bucket_words = np.empty(rows, dtype=np.uint64)
    bucket_rows = np.empty(rows, dtype=np.int64)
    count_kernel_launch()
    _bucket_values_by_group_cpu(group_ids, bits, _FLOAT if data.dtype == np.float64 else _SIGNED, starts,
                                bucket_words, bucket_rows)
    return _selected_rows(groups, counts, starts, first_ranks, second_ranks, bucket_words, bucket_rows)
