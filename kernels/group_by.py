"""Map each row's grouping key to a dense group id, inserting unseen keys (hash aggregation's table).

Why: aggregation needs, per batch, one int32 group id per row so accumulators
can be updated by id (:mod:`gpu_engine.kernels.aggregate`). Keys of any types
are first normalized into fixed-width ``int64`` words (:func:`normalize_keys`),
so one table compares every key type with plain word equality. The table is
open addressing with linear probing over a 64-bit hash of those words; slots
hold group ids, and the key words are stored per group id, which keeps rehashing
and widening (a later batch with longer strings) simple.

Both twins assign ids to new keys in order of their first row in the batch, so
they produce identical group ids: the CPU twin by a sequential loop; the CUDA
twin by claiming slots with compare-and-swap, electing the smallest row per new
key with an atomic max on the slot's marker, then numbering elected rows with a
stream compaction.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
from numba import cuda, njit

from gpu_engine.columnar.column import Column
from gpu_engine.columnar.types import is_interval, is_string
from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_host_sync, count_kernel_launch
from gpu_engine.kernels.filter import selection_from_mask
from gpu_engine.kernels.gather import dictionary_row_validity, gather, rows_or_dictionary
from gpu_engine.kernels.hash import fixed_width_key_words, fmix64
from gpu_engine.kernels.launch import launch_cuda, launch_twin
from gpu_engine.kernels.prefetch import PREFETCH_DISTANCE, prefetch_row, worth_prefetching

__all__ = ["normalize_keys", "GroupByHashTable", "StringInterner"]

EMPTY = np.int32(-1)
FIXED_WIDTH_BLOCK = 2
#: A narrow key's block under ``normalize_keys(..., narrow=True)``: one word holding the null flag (bit 32) and the
#: value's low 32 bits (see :func:`_is_narrow`).
NARROW_BLOCK = 1
#: The key types :data:`NARROW_BLOCK` holds: decided by type, never by a batch's array, so every batch of one key
#: gets the same block (a table never widens a narrow block).
_NARROW_TYPES = frozenset({pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32(), pa.date32(),
                           pa.bool_()})
#: The most cells a CPU table's direct index of narrow keys may have (int32 each: 256 KiB, within a core's L2).
DENSE_CELLS_LIMIT = 1 << 16
#: The most narrow key blocks a direct index combines (a key row of more words is hashed).
DENSE_MAX_KEYS = 4
#: An INTERVAL key's block: the flag word, then its normalized months, days and microseconds, so intervals DuckDB
#: equates (1 month = 30 days) share one block (:func:`gpu_engine.expressions.intervals.normalized_fields`).
INTERVAL_BLOCK = 4
_KEY_SEED = np.uint64(0x13198A2E03707344)
_MURMUR_1 = np.uint64(0x87C37B91114253D5)
_MURMUR_2 = np.uint64(0x4CF5AD432745937F)
_MURMUR_ADD = np.uint64(0x52DCE729)
_U5 = np.uint64(5)
_U27 = np.uint64(27)
_U31 = np.uint64(31)
_U33 = np.uint64(33)
_U37 = np.uint64(37)


# --------------------------------------------------------- shared scalar math
@njit(nogil=True, cache=True)
def _mix_key_word(h, word):
    """Fold one key word into a running hash (murmur3's 64-bit block step)."""
    k = word * _MURMUR_1
    k = (k << _U31) | (k >> _U33)
    h ^= k * _MURMUR_2
    h = (h << _U27) | (h >> _U37)
    return h * _U5 + _MURMUR_ADD


@njit(nogil=True, cache=True)
def _finish_key_hash(h, num_words):
    return fmix64(h ^ np.uint64(num_words))


@njit(nogil=True, cache=True)
def _first_slot(h, capacity):
    return np.int64(h & np.uint64(capacity - 1))


# ------------------------------------------------------------------- CPU twins
@njit(nogil=True, cache=True)
def _pack_strings_cpu(offsets, chars, validity, has_validity, out, first_column, block_width):
    for i in range(out.shape[0]):
        if has_validity and not validity[i]:
            continue
        start = offsets[i]
        stop = offsets[i + 1]
        out[i, first_column] = np.uint64(1)
        out[i, first_column + 1] = np.uint64(stop - start)
        for w in range(block_width - 2):
            word = np.uint64(0)
            first = start + 8 * w
            for k in range(8):
                if first + k < stop:
                    word |= np.uint64(chars[first + k]) << np.uint64(8 * k)
            out[i, first_column + 2 + w] = word


@njit(nogil=True, cache=True)
def _hash_rows_cpu(words, hashes):
    for i in range(words.shape[0]):
        h = _KEY_SEED
        for j in range(words.shape[1]):
            h = np.uint64(_mix_key_word(h, words[i, j]))
        hashes[i] = _finish_key_hash(h, words.shape[1])


@njit(nogil=True, cache=True)
def _rows_equal(left, left_row, right, right_row):
    for j in range(left.shape[1]):
        if left[left_row, j] != right[right_row, j]:
            return False
    return True


@njit(nogil=True, cache=True)
def _rehash_cpu(group_hashes, num_groups, slots):
    capacity = slots.shape[0]
    for g in range(num_groups):
        slot = _first_slot(group_hashes[g], capacity)
        while slots[slot] != EMPTY:
            slot = (slot + 1) & (capacity - 1)
        slots[slot] = g


@njit(nogil=True, cache=True)
def _prefetching(slots, group_keys):
    """Return True when the table is large enough for prefetching its probes to pay (``worth_prefetching``).

    Why the CPU twins below then prefetch row ``i + PREFETCH_DISTANCE``'s first slot, and the group in row
    ``i + PREFETCH_DISTANCE // 2``'s first slot (read now: it was fetched half the distance ago): the three
    dependent reads of a probe overlap. Decided once a call and written out in each loop, not a helper called a
    row: that call, passing the table's arrays, cost ~7 ns a row even where it returned at once (2M rows over
    10K groups, a table in cache: 15.2 -> 9.0 ns a row; 131K groups: 13.8 -> 6.8).
    """
    return worth_prefetching(slots) or worth_prefetching(group_keys)


@njit(nogil=True, cache=True)
def _insert_rows_cpu(words, hashes, start, slots, group_keys, group_hashes, num_groups, group_ids, new_rows, num_new):
    """Insert rows from ``start`` on; stop early (returning the row reached) when the table must grow."""
    capacity = slots.shape[0]
    max_groups = min(group_keys.shape[0], capacity // 2)
    prefetching = _prefetching(slots, group_keys)  # the table grows only between calls
    n = words.shape[0]
    for i in range(start, n):
        if prefetching:  # written out, not called (see _prefetching)
            if i + PREFETCH_DISTANCE < n:
                prefetch_row(slots, _first_slot(hashes[i + PREFETCH_DISTANCE], capacity))
            if i + PREFETCH_DISTANCE // 2 < n:
                ahead = slots[_first_slot(hashes[i + PREFETCH_DISTANCE // 2], capacity)]
                if ahead != EMPTY:
                    prefetch_row(group_hashes, ahead)
                    prefetch_row(group_keys, ahead)
        h = hashes[i]
        slot = _first_slot(h, capacity)
        while True:
            g = slots[slot]
            if g == EMPTY:
                if num_groups >= max_groups:
                    return i, num_groups, num_new
                g = num_groups
                num_groups += 1
                group_keys[g, :] = words[i, :]
                group_hashes[g] = h
                slots[slot] = g
                new_rows[num_new] = i
                num_new += 1
                break
            if group_hashes[g] == h and _rows_equal(group_keys, g, words, i):
                break
            slot = (slot + 1) & (capacity - 1)
        group_ids[i] = g
    return n, num_groups, num_new


@njit(nogil=True, cache=True)
def _lookup_rows_cpu(words, hashes, slots, group_keys, group_hashes, group_ids):
    capacity = slots.shape[0]
    prefetching = _prefetching(slots, group_keys)
    n = words.shape[0]
    for i in range(n):
        if prefetching:  # written out, not called (see _prefetching)
            if i + PREFETCH_DISTANCE < n:
                prefetch_row(slots, _first_slot(hashes[i + PREFETCH_DISTANCE], capacity))
            if i + PREFETCH_DISTANCE // 2 < n:
                ahead = slots[_first_slot(hashes[i + PREFETCH_DISTANCE // 2], capacity)]
                if ahead != EMPTY:
                    prefetch_row(group_hashes, ahead)
                    prefetch_row(group_keys, ahead)
        h = hashes[i]
        slot = _first_slot(h, capacity)
        while True:
            g = slots[slot]
            if g == EMPTY or (group_hashes[g] == h and _rows_equal(group_keys, g, words, i)):
                group_ids[i] = g
                break
            slot = (slot + 1) & (capacity - 1)


# ------------------------------------------------------------------ CUDA twins
@njit(nogil=True, cache=True)
def _insert_dense_rows_cpu(words, start, lows, spans, strides, cells, group_keys, num_groups, group_ids, new_rows,
                           num_new):
    """Insert rows of narrow key words from ``start`` on through a direct index instead of a hash table.

    Each word is a :data:`NARROW_BLOCK` (bit 32 the flag, the value's low 32 bits; 0 a NULL): block ``k``'s value
    ``v`` sits at ``v - lows[k]`` in ``[0, spans[k])``, a NULL at ``spans[k]``, and the row's cell is the sum of
    those times ``strides[k]``. ``cells`` holds each cell's group (EMPTY before its first row). Returns the row
    reached, the groups, the new rows and whether that row stopped outside the index (else the key storage is
    full: the host grows it and calls again).
    """
    n = words.shape[0]
    width = words.shape[1]
    max_groups = group_keys.shape[0]
    for i in range(start, n):
        cell = np.int64(0)
        for k in range(width):
            word = words[i, k]
            if word == 0:
                at = spans[k]
            else:
                value = np.int64(word & np.uint64(0xFFFFFFFF))
                if value >= np.int64(1 << 31):  # the low 32 bits as a signed value (date32, negative int32)
                    value -= np.int64(1 << 32)
                at = value - lows[k]
                if at < 0 or at >= spans[k]:
                    return i, num_groups, num_new, True
            cell += at * strides[k]
        g = cells[cell]
        if g == EMPTY:
            if num_groups >= max_groups:
                return i, num_groups, num_new, False
            g = num_groups
            num_groups += 1
            for k in range(width):
                group_keys[g, k] = words[i, k]
            cells[cell] = g
            new_rows[num_new] = i
            num_new += 1
        group_ids[i] = g
    return n, num_groups, num_new, False


@cuda.jit
def _pack_strings_cuda(offsets, chars, validity, has_validity, out, first_column, block_width):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        if has_validity and not validity[i]:
            continue
        start = offsets[i]
        stop = offsets[i + 1]
        out[i, first_column] = np.uint64(1)
        out[i, first_column + 1] = np.uint64(stop - start)
        for w in range(block_width - 2):
            word = np.uint64(0)
            first = start + 8 * w
            for k in range(8):
                if first + k < stop:
                    word |= np.uint64(chars[first + k]) << np.uint64(8 * k)
            out[i, first_column + 2 + w] = word


@cuda.jit
def _hash_rows_cuda(words, hashes):
    for i in range(cuda.grid(1), words.shape[0], cuda.gridsize(1)):
        h = _KEY_SEED
        for j in range(words.shape[1]):
            h = np.uint64(_mix_key_word(h, words[i, j]))
        hashes[i] = _finish_key_hash(h, words.shape[1])


@cuda.jit
def _rehash_cuda(group_hashes, num_groups, slots):
    capacity = slots.shape[0]
    for g in range(cuda.grid(1), num_groups, cuda.gridsize(1)):
        slot = _first_slot(group_hashes[g], capacity)
        while cuda.atomic.cas(slots, slot, EMPTY, g) != EMPTY:
            slot = (slot + 1) & (capacity - 1)


@cuda.jit
def _claim_slots_cuda(words, hashes, slots, group_keys, group_hashes, row_slots):
    """Find or claim each row's slot; a claimed slot holds ``-(row + 2)`` of the key's smallest row."""
    capacity = slots.shape[0]
    for i in range(cuda.grid(1), words.shape[0], cuda.gridsize(1)):
        h = hashes[i]
        marker = -(i + 2)
        slot = _first_slot(h, capacity)
        while True:
            current = slots[slot]
            if current == EMPTY:
                current = cuda.atomic.cas(slots, slot, EMPTY, marker)
                if current == EMPTY:
                    break
            if current >= 0:
                same = group_hashes[current] == h
                j = 0
                while same and j < words.shape[1]:
                    same = group_keys[current, j] == words[i, j]
                    j += 1
                if same:
                    break
            else:
                other = -current - 2
                same = hashes[other] == h
                j = 0
                while same and j < words.shape[1]:
                    same = words[other, j] == words[i, j]
                    j += 1
                if same:
                    cuda.atomic.max(slots, slot, marker)
                    break
            slot = (slot + 1) & (capacity - 1)
        row_slots[i] = slot


@cuda.jit
def _flag_first_rows_cuda(slots, row_slots, is_first):
    for i in range(cuda.grid(1), row_slots.shape[0], cuda.gridsize(1)):
        is_first[i] = slots[row_slots[i]] == -(i + 2)


@cuda.jit
def _number_new_groups_cuda(new_rows, words, hashes, row_slots, first_group, slots, group_keys, group_hashes):
    for j in range(cuda.grid(1), new_rows.shape[0], cuda.gridsize(1)):
        row = new_rows[j]
        g = first_group + j
        slots[row_slots[row]] = g
        group_hashes[g] = hashes[row]
        for w in range(words.shape[1]):
            group_keys[g, w] = words[row, w]


@cuda.jit
def _read_group_ids_cuda(slots, row_slots, group_ids):
    for i in range(cuda.grid(1), row_slots.shape[0], cuda.gridsize(1)):
        group_ids[i] = slots[row_slots[i]]


@cuda.jit
def _lookup_rows_cuda(words, hashes, slots, group_keys, group_hashes, group_ids):
    capacity = slots.shape[0]
    for i in range(cuda.grid(1), words.shape[0], cuda.gridsize(1)):
        h = hashes[i]
        slot = _first_slot(h, capacity)
        while True:
            g = slots[slot]
            if g == EMPTY:
                break
            if group_hashes[g] == h:
                same = True
                j = 0
                while same and j < words.shape[1]:
                    same = group_keys[g, j] == words[i, j]
                    j += 1
                if same:
                    break
            slot = (slot + 1) & (capacity - 1)
        group_ids[i] = g


# ------------------------------------------------------------ key normalizing
def _string_block_widths(device: Device, columns: Sequence[Column]) -> list[int]:
    """Return the block width each string column needs, reading every longest length in one host sync."""
    xp = device.xp
    longest = [(column.offsets[1:] - column.offsets[:-1]).max() if len(column) else xp.zeros(1, dtype=xp.int64)
               for column in columns]
    return [2 + (max_length + 7) // 8 for max_length in device.read_scalars(longest)]


def _pack_strings(device: Device, column: Column, validity: Any, out: Any, first_column: int, block_width: int) -> None:
    xp = device.xp
    n = len(column)
    if n == 0:
        return
    has_validity = validity is not None
    validity = xp.ascontiguousarray(validity) if has_validity else xp.zeros(1, dtype=xp.bool_)
    offsets = xp.ascontiguousarray(column.offsets.astype(xp.int64, copy=False))
    chars = column.data if column.data.shape[0] else xp.zeros(1, dtype=xp.uint8)
    launch_twin(device, n, _pack_strings_cpu, _pack_strings_cuda,
                offsets, chars, validity, has_validity, out, first_column, block_width)


def _is_narrow(column: Column) -> bool:
    """Return True for an integer, date or bool key of at most 32 bits: its value and null flag fit one word."""
    return column.dtype in _NARROW_TYPES and not column.is_dictionary and column.data.ndim == 1


def _narrow_key_words(device: Device, column: Column) -> Any:
    """Return a narrow key's words: ``1 << 32 | low 32 bits`` for a value, 0 for a NULL (distinct from any value)."""
    xp = device.xp
    low = column.data.astype(xp.int64, copy=False) & np.int64(0xFFFFFFFF)
    words = (low | np.int64(1 << 32)).view(xp.uint64)
    if column.validity is None:
        return words
    return xp.where(column.validity, words, np.uint64(0))


def normalize_keys(device: Device, columns: Sequence[Column],
                   widths: Sequence[int] | None = None, narrow: bool = False) -> tuple[Any, tuple[int, ...]]:
    """Encode grouping keys as an exact ``(n, W)`` matrix of ``int64`` words.

    Why: equal keys must give equal rows and different keys different rows, so
    the table can hash and compare words without knowing types. Each column
    becomes a block: a null-flag word (1 valid, 0 null; the value words of a null
    are 0), then one value word for fixed-width types (int64 value; normalized
    float bits; bool 0/1), or for strings a length word and the bytes packed 8
    per word, zero padded.

    Parameters
    ----------
    device
        Where the columns live.
    columns
        Key columns of equal length.
    widths
        Block width (in words, flag included) to use at least, per column; keeps
        one layout across batches. A string block grows past it when this
        batch has longer strings.

    Returns
    -------
    keys, widths
        The ``int64`` matrix (C-contiguous) and the block widths actually used
        (each at least the given one). When these are wider than a
        :class:`GroupByHashTable`'s, call its :meth:`~GroupByHashTable.widen` first.
    narrow
        Write an integer, date or bool key of at most 32 bits as one word (:data:`NARROW_BLOCK`: the flag
        in bit 32 above the value's 32 bits) instead of a flag word and a value word. Why: hashing and
        comparing a key row costs its words; TPC-DS q39 groups 180K rows by four 32-bit keys (its string
        key interned to ids), eight words a row, four narrow. Only for a table whose every batch is
        normalized this way (a hash aggregation's own); a join's build and probe sides may differ in
        type (int32 against int64) and must keep the wide block, which equates them.
    """
    xp = device.xp
    n = len(columns[0]) if columns else 0
    if widths is not None and len(widths) != len(columns):
        raise ValueError(f"normalize_keys got {len(widths)} widths for {len(columns)} columns")
    columns = [rows_or_dictionary(device, column) for column in columns]  # a dictionary's values if fewer than rows
    string_tables = [(column.dictionary if column.is_dictionary else column) for column in columns if column.is_string]
    string_widths = iter(_string_block_widths(device, string_tables))
    used = []
    for i, column in enumerate(columns):
        needed = next(string_widths) if column.is_string else INTERVAL_BLOCK if is_interval(column.dtype) \
            else NARROW_BLOCK if narrow and _is_narrow(column) else FIXED_WIDTH_BLOCK
        used.append(max(needed, int(widths[i])) if widths is not None else needed)
    matrix = xp.zeros((n, sum(used)), dtype=xp.uint64)
    first = 0
    for column, width in zip(columns, used):
        if column.is_dictionary:
            validity = dictionary_row_validity(device, column)
            dictionary = column.dictionary
            if len(dictionary):
                encoded = xp.zeros((len(dictionary), width), dtype=xp.uint64)
                _pack_strings(device, dictionary, None, encoded, 0, width)
                matrix[:, first:first + width] = encoded[column.data]
                if validity is not None:
                    matrix[:, first:first + width] *= validity[:, None]
        elif is_string(column.dtype):
            _pack_strings(device, column, column.validity, matrix, first, width)
        elif is_interval(column.dtype):
            _pack_interval(device, column, matrix, first)
        elif width == NARROW_BLOCK:
            matrix[:, first] = _narrow_key_words(device, column)
        elif column.validity is None:
            matrix[:, first] = 1
            matrix[:, first + 1] = fixed_width_key_words(device, column)
        else:
            matrix[:, first] = column.validity
            matrix[:, first + 1] = xp.where(column.validity, fixed_width_key_words(device, column), np.uint64(0))
        first += width
    return matrix.view(xp.int64), tuple(used)


def _pack_interval(device: Device, column: Column, out: Any, first_column: int) -> None:
    """Write an INTERVAL key's block: its flag, then its normalized fields (zeros for a NULL)."""
    from gpu_engine.expressions.intervals import normalized_fields

    xp = device.xp
    validity = column.validity
    out[:, first_column] = 1 if validity is None else validity
    for offset, values in enumerate(normalized_fields(xp, column.data), 1):
        words = xp.ascontiguousarray(values.astype(xp.int64)).view(xp.uint64)
        out[:, first_column + offset] = words if validity is None else xp.where(validity, words, np.uint64(0))


# ------------------------------------------------------------------- the table
def _next_power_of_two(value: int) -> int:
    return 1 << max(4, (int(value) - 1).bit_length())


def new_keys_after_sample(sample_rows: int, sample_keys: int, rows: int) -> int:
    """Return the distinct keys ``rows`` more rows are expected to add to ``sample_keys`` seen in ``sample_rows``.

    Why: with ``K`` equally likely keys, ``m`` rows hold ``K * (1 - exp(-m / K))`` distinct ones on average;
    the sample's count gives ``K`` (found by bisection: the count grows with ``K``), and the rows after it add
    what ``sample_rows + rows`` draws hold beyond the sample's. Skewed keys make ``K`` an underestimate: the
    kernel then leaves the extra keys' rows pending and the table grows once, as before. Shared by the fused
    aggregation's sample and :meth:`GroupByHashTable._groups_to_come`.
    """
    if sample_keys >= sample_rows:
        return rows
    if sample_keys <= 0:  # no row of the sample made a key (all filtered out): it says nothing; the table grows
        return 0

    def distinct(keys: float, draws: int) -> float:
        return keys * -math.expm1(-draws / keys)

    low, high = float(sample_keys), float(sample_keys)
    while distinct(high, sample_rows) < sample_keys:
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if distinct(middle, sample_rows) < sample_keys else (low, middle)
    return max(0, min(rows, math.ceil(distinct(high, sample_rows + rows) - sample_keys)))


class GroupByHashTable:
    """Assign dense group ids to normalized keys, batch after batch; state lives on the device.

    Parameters
    ----------
    device
        Where the table's arrays live; selects the twin.
    widths
        Block widths of the key layout (see :func:`normalize_keys`).
    initial_capacity
        Slots to start with (rounded up to a power of two); the table grows to
        keep at most half of its slots full.

    On the CPU, keys of at most :data:`DENSE_MAX_KEYS` narrow blocks (small integers, dates, interned string
    ids: :func:`normalize_keys` with ``narrow``) whose first batch's values span few combinations find their
    group through a direct index (a cell per combination, NULL its own value, :data:`DENSE_CELLS_LIMIT` at most)
    with room for each key's range to double: no hash, no probe, no key comparison. Why: db-benchmark's q9 groups
    10M rows by an interned string id and an integer (100 values each); hashing the two words and probing a
    10K-group table was ~20% of its grouping step. The first row outside the index moves the groups into the
    hash table (their hashes computed then, ids unchanged) and the rest hash as before. Ids follow each key's
    first row either way; the CUDA twins always hash.
    """

    def __init__(self, device: Device, widths: tuple[int, ...], initial_capacity: int = 1024):
        self.device = device
        self._widths = tuple(int(w) for w in widths)
        xp = device.xp
        capacity = _next_power_of_two(initial_capacity)
        self._slots = xp.full(capacity, EMPTY, dtype=xp.int32)
        self._group_keys = xp.zeros((capacity // 2, self.num_words), dtype=xp.uint64)
        self._group_hashes = xp.zeros(capacity // 2, dtype=xp.uint64)
        self._num_groups = 0
        #: The direct index (lows, spans, strides, cells) while the keys take it (see the class docstring).
        self._dense: tuple[Any, Any, Any, Any] | None = None
        self._dense_refused = device.kernel_flavor != "cpu"

    @property
    def widths(self) -> tuple[int, ...]:
        """Return the block widths of the key layout the table stores."""
        return self._widths

    @property
    def num_words(self) -> int:
        """Return the words per key row (the sum of :attr:`widths`)."""
        return sum(self._widths)

    @property
    def num_groups(self) -> int:
        """Return how many distinct keys the table holds."""
        return self._num_groups

    @property
    def capacity(self) -> int:
        """Return the number of slots."""
        return int(self._slots.shape[0])

    @property
    def nbytes(self) -> int:
        """Return the bytes the table's arrays hold (what its owner reserves in its memory pool)."""
        dense = 0 if self._dense is None else int(self._dense[3].nbytes)
        return int(self._slots.nbytes) + int(self._group_keys.nbytes) + int(self._group_hashes.nbytes) + dense

    def reset(self) -> None:
        """Forget every group (a partial aggregation's flush), keeping the allocated arrays."""
        self._slots[...] = EMPTY
        if self._dense is not None:
            self._dense[3][...] = EMPTY
        self._num_groups = 0

    def widen(self, widths: Sequence[int]) -> None:
        """Pad stored keys to wider blocks, so keys normalized with ``widths`` can be inserted.

        Zero words appended to a block encode the same key (string bytes are
        zero padded), but hashes change, so the groups are rehashed.
        """
        widths = tuple(int(w) for w in widths)
        if len(widths) != len(self._widths) or any(new < old for new, old in zip(widths, self._widths)):
            raise ValueError(f"cannot widen key blocks {self._widths} to {widths}")
        if widths == self._widths:
            return
        self._leave_dense()
        xp = self.device.xp
        keys = xp.zeros((self._group_keys.shape[0], sum(widths)), dtype=xp.uint64)
        old_first = new_first = 0
        for old, new in zip(self._widths, widths):
            keys[:, new_first:new_first + old] = self._group_keys[:, old_first:old_first + old]
            old_first += old
            new_first += new
        self._group_keys = keys
        self._widths = widths
        if self._num_groups:
            self._group_hashes[: self._num_groups] = self._hash_rows(keys[: self._num_groups])
        self._rebuild_slots(self.capacity)

    def insert(self, keys: Any) -> tuple[Any, Any]:
        """Look up each key row, inserting unseen keys.

        Parameters
        ----------
        keys
            ``int64`` matrix ``(n, W)`` from :func:`normalize_keys` with this table's widths.

        Returns
        -------
        group_ids, new_group_rows
            ``int32`` group id per row, and ``int32`` rows of this batch that
            created the new groups: ``new_group_rows[j]`` created group
            ``num_groups_before + j``. New ids follow the order of each new
            key's first row, on every device.
        """
        xp = self.device.xp
        if keys.ndim != 2 or keys.shape[1] != self.num_words:
            raise ValueError(f"keys of shape {keys.shape} do not match the table's {self.num_words} words per row")
        n = keys.shape[0]
        if n == 0:
            return xp.empty(0, dtype=xp.int32), xp.empty(0, dtype=xp.int32)
        words = xp.ascontiguousarray(keys).view(xp.uint64)
        if self._takes_dense(words):
            return self._insert_dense_cpu(words)
        hashes = self._hash_rows(words)
        if self.device.kernel_flavor == "cpu":
            return self._insert_cpu(words, hashes)
        return self._insert_cuda(words, hashes)

    def lookup(self, keys: Any) -> Any:
        """Return each key row's group id, or -1 where the table does not hold the key; inserts nothing.

        Why: a hash join probes the table its build side filled; probe rows
        must not add groups, and several probe drivers read one table at once
        (a lookup only reads the table's arrays).

        Parameters
        ----------
        keys
            ``int64`` matrix ``(n, W)`` from :func:`normalize_keys` with this table's widths.

        Returns
        -------
        array
            ``int32`` group id per row, ``-1`` for keys not in the table.
        """
        xp = self.device.xp
        if keys.ndim != 2 or keys.shape[1] != self.num_words:
            raise ValueError(f"keys of shape {keys.shape} do not match the table's {self.num_words} words per row")
        n = keys.shape[0]
        group_ids = xp.empty(n, dtype=xp.int32)
        if n == 0:
            return group_ids
        self._leave_dense()  # (only narrow blocks take one: a hash aggregation's own table, never a join's)
        words = xp.ascontiguousarray(keys).view(xp.uint64)
        launch_twin(self.device, n, _lookup_rows_cpu, _lookup_rows_cuda, words, self._hash_rows(words),
                    self._slots, self._group_keys, self._group_hashes, group_ids)
        return group_ids

    # ----------------------------------------------------------------- internals
    def _hash_rows(self, words: Any) -> Any:
        xp = self.device.xp
        hashes = xp.empty(words.shape[0], dtype=xp.uint64)
        if words.shape[0] == 0:
            return hashes
        launch_twin(self.device, words.shape[0], _hash_rows_cpu, _hash_rows_cuda, xp.ascontiguousarray(words), hashes)
        return hashes

    def _reserve_groups(self, total: int) -> None:
        """Make room for ``total`` groups: key storage and at least twice as many slots."""
        xp = self.device.xp
        if self._group_keys.shape[0] < total:
            rows = max(total, 2 * self._group_keys.shape[0])
            keys = xp.zeros((rows, self.num_words), dtype=xp.uint64)
            keys[: self._num_groups] = self._group_keys[: self._num_groups]
            hashes = xp.zeros(rows, dtype=xp.uint64)
            hashes[: self._num_groups] = self._group_hashes[: self._num_groups]
            self._group_keys, self._group_hashes = keys, hashes
        if self.capacity < 2 * total and self._dense is None:  # a direct index has no slots to keep
            self._rebuild_slots(_next_power_of_two(2 * total))

    def _rebuild_slots(self, capacity: int) -> None:
        xp = self.device.xp
        self._slots = xp.full(capacity, EMPTY, dtype=xp.int32)
        if self._num_groups == 0:
            return
        launch_twin(self.device, self._num_groups, _rehash_cpu, _rehash_cuda,
                    self._group_hashes, self._num_groups, self._slots)

    def _takes_dense(self, words: Any) -> bool:
        """Return True when a batch's rows go through the direct index: the table has one, or this first batch
        of narrow keys spans few enough combinations to make one (see the class docstring)."""
        if self._dense is not None:
            return True
        if self._dense_refused or self._num_groups:
            return False
        self._dense_refused = True  # decided once, on the first batch
        if not 0 < len(self._widths) <= DENSE_MAX_KEYS or any(w != NARROW_BLOCK for w in self._widths):
            return False
        # Each narrow word read as two int32 halves: its value's low 32 bits as signed, and its null flag (1: a
        # value, 0: NULL, whose word is 0). Reading the halves in place, the spans stop at the first that cannot
        # fit: a refused first batch cost a masked copy and three passes per key (TPC-DS q39's 360K rows of four
        # keys, 6.1 of the table's 19.7 ms insert; now ~1.7 ms).
        halves = words.view(np.int32)
        value_half, flag_half = (0, 1) if sys.byteorder == "little" else (1, 0)
        lows, spans, cells = [], [], 1
        for k in range(words.shape[1]):
            values, flags = halves[:, 2 * k + value_half], halves[:, 2 * k + flag_half]
            if int(flags.min()) == 0:  # a NULL: its 0 is no value
                values = values[flags != 0]
            if not values.shape[0]:
                lows.append(0)
                spans.append(1)
            else:
                low, high = int(values.min()), int(values.max())
                lows.append(low)
                spans.append(2 * (high - low + 1))  # room for the range to double (interned ids grow upward)
            cells *= spans[-1] + 1
            if cells > DENSE_CELLS_LIMIT:
                return False
        strides = [math.prod(span + 1 for span in spans[k + 1:]) for k in range(len(spans))]
        self._dense = (np.asarray(lows, dtype=np.int64), np.asarray(spans, dtype=np.int64),
                       np.asarray(strides, dtype=np.int64), np.full(cells, EMPTY, dtype=np.int32))
        return True

    def _leave_dense(self) -> None:
        """Move the groups of the direct index into the hash table (ids unchanged); later rows hash."""
        if self._dense is None:
            return
        self._dense = None
        groups = self._num_groups
        if groups:
            self._group_hashes[:groups] = self._hash_rows(self._group_keys[:groups])
        self._rebuild_slots(max(self.capacity, _next_power_of_two(2 * groups)))

    def _insert_dense_cpu(self, words: Any) -> tuple[Any, Any]:
        n = words.shape[0]
        group_ids = np.empty(n, dtype=np.int32)
        new_rows = np.empty(n, dtype=np.int32)
        row, num_new = 0, 0
        lows, spans, strides, cells = self._dense
        count_host_sync()  # as _insert_cpu
        while row < n:
            count_kernel_launch()
            row, self._num_groups, num_new, outside = _insert_dense_rows_cpu(
                words, row, lows, spans, strides, cells, self._group_keys, self._num_groups, group_ids, new_rows,
                num_new)
            if outside:
                self._leave_dense()
                return self._insert_cpu(words, self._hash_rows(words), row, group_ids, new_rows, num_new)
            if row < n:
                self._reserve_groups(self._num_groups + self._groups_to_come(row, n, num_new))
        return group_ids, new_rows[:num_new].copy()

    def _insert_cpu(self, words: Any, hashes: Any, row: int = 0, group_ids: Any = None, new_rows: Any = None,
                    num_new: int = 0) -> tuple[Any, Any]:
        """Insert the rows from ``row`` on (before it: ``group_ids`` / ``new_rows`` filled by the direct index)."""
        n = words.shape[0]
        xp = self.device.xp
        if group_ids is None:
            group_ids = xp.empty(n, dtype=xp.int32)
            new_rows = xp.empty(n, dtype=xp.int32)
            count_host_sync()  # the CPU twin returns the new-group count that the CUDA path reads back
        while row < n:
            count_kernel_launch()  # each CPU twin call stands for the CUDA path's launches
            row, self._num_groups, num_new = _insert_rows_cpu(
                words, hashes, row, self._slots, self._group_keys, self._group_hashes,
                self._num_groups, group_ids, new_rows, num_new)
            if row < n:
                self._reserve_groups(self._num_groups + self._groups_to_come(row, n, num_new))
        return group_ids, new_rows[:num_new].copy()

    def _groups_to_come(self, row: int, n: int, num_new: int) -> int:
        """Return room to make when a batch of ``n`` rows stopped at ``row`` having made ``num_new`` new groups.

        Why predicted, not doubling from 1,024: a batch of many groups (TPC-DS q39's 180k rows, 45k groups)
        stopped six times, each stop copying the keys and rehashing every group. Why by the distinct keys the
        rows so far suggest (:func:`new_keys_after_sample`), not by their rate of new groups: the first stop
        comes after ~512 rows, nearly all new whenever the keys number thousands, so the rate said every later
        row was new: db-benchmark q9's 131,072-row batches of 10K groups sized 131K groups (a 262,144-slot,
        ~4 MB table, out of cache; its inserts 14.6 ns a row) where 10K need 32,768 slots. A quarter to spare
        (the estimate from ~30 repeated keys runs ~15% either way, as the fused aggregation's); at least doubling
        still (amortized when the estimate falls short), never more than the rows to come.
        """
        rest = n - row
        predicted = new_keys_after_sample(row, num_new, rest) if row else rest
        return min(rest, max(self._num_groups, 1024, predicted + predicted // 4))

    def _insert_cuda(self, words: Any, hashes: Any) -> tuple[Any, Any]:
        xp = self.device.xp
        n = words.shape[0]
        self._reserve_groups(self._num_groups + n)
        device = self.device
        row_slots = xp.empty(n, dtype=xp.int64)
        launch_cuda(device, _claim_slots_cuda, n, words, hashes, self._slots, self._group_keys, self._group_hashes,
                    row_slots)
        is_first = xp.empty(n, dtype=xp.bool_)
        launch_cuda(device, _flag_first_rows_cuda, n, self._slots, row_slots, is_first)
        new_rows = selection_from_mask(device, is_first)
        num_new = int(new_rows.shape[0])
        launch_cuda(device, _number_new_groups_cuda, num_new, new_rows, words, hashes, row_slots, self._num_groups,
                    self._slots, self._group_keys, self._group_hashes)
        group_ids = xp.empty(n, dtype=xp.int32)
        launch_cuda(device, _read_group_ids_cuda, n, self._slots, row_slots, group_ids)
        self._num_groups += num_new
        return group_ids, new_rows


class StringInterner:
    """Give every distinct string a stable int64 id, batch after batch, looking at dictionaries only.

    Why: a dictionary-encoded key (Parquet's low-cardinality strings, a fused step's interned keys) would
    otherwise be packed into several words for every row. Interning the dictionary values and gathering
    their ids by code turns the key into one fixed-width word per row, and the ids stay the same across
    batches whose dictionaries differ. A plain string batch is interned row by row, so a key may mix both
    encodings; so is a dictionary batch of fewer rows than dictionary values
    (:func:`~gpu_engine.kernels.gather.rows_or_dictionary`). The strings go to a
    :class:`~gpu_engine.kernels.string_keys.StringKeyTable`, which hashes and compares their bytes in place: a
    dictionary of up to ``SERIAL_ROWS`` values costs one launch and no host read on cuda (packing them into key
    words first read every batch's longest string back, and inserting the words read back the new count: two
    syncs per string key per batch).
    """

    def __init__(self, device: Device):
        from gpu_engine.kernels.string_keys import StringKeyTable  # built on this module's slot kernels

        self.device = device
        self._table = StringKeyTable(device)

    @property
    def nbytes(self) -> int:
        """Return the bytes of the interner's table."""
        return self._table.nbytes

    def values(self) -> Column:
        """Return every interned string at the position of its id (the groups' key values at emit)."""
        return self._table.values()

    def intern(self, column: Column) -> Column:
        """Return an ``int64`` column of ids (NULL where ``column`` is NULL) for a string column."""
        validity = dictionary_row_validity(self.device, column) if column.is_dictionary else column.validity
        return Column(pa.int64(), self._table.intern(column), validity)
