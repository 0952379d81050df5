"""Build a join table over normalized key words and probe it for every matching pair (hash join kernels).

Why: a hash join must return *every* build row whose key equals a probe row's
key, and keys of any types and any number of columns. The build side reuses the
group-by machinery: :func:`~gpu_engine.kernels.group_by.normalize_keys` turns
keys into exact ``int64`` words and a
:class:`~gpu_engine.kernels.group_by.GroupByHashTable` gives each distinct key a
dense id. The build rows are then laid out per key id in CSR form (count rows
per id, exclusive scan, scatter), so the matches of one key are one contiguous
run. Probing looks each probe row's key id up, counts its matches, takes an
exclusive scan of the counts for output positions, and writes one
``(probe_row, build_row)`` pair per match: the operator turns these into gather
maps instead of copying columns.

Probes look keys up in a *packed* table built once from the distinct keys: a
row per slot holding the key's words and its id, so a probe row reads one
cache line (one memory sector on a GPU) where the group-by table's separate
slot, hash and key arrays cost three dependent reads. When every build key is
distinct (a join on a primary key, the common case), a match is that one
lookup: the pairs are the rows found and their key's one build row, without
counting and scanning matches.

SQL's ``NULL = NULL`` is not true, so rows with a NULL in any key column never
enter the table (the table remembers that it saw one, for the null-aware anti
join of ``NOT IN``); a NULL probe key's null-flag word is 0 and so never equals
a stored key, whose flags are all 1.

Most probe rows of a selective join find nothing (TPC-H Q3 probes 3.2M
lineitem rows into 147K orders keys and 1% match), and a miss in a table larger
than the caches costs a memory round trip. A blocked Bloom filter (16 bits per
key, three bits in one 64-bit word chosen by the key hash's high bits; about 1%
false positives) sits in front of the packed table: it is small enough to stay
in cache (L2 on a CPU and on a GPU), so a ruled-out key costs one cached read.
When most probes match, the filter only adds a read, so the table asks it only
while fewer than half of the last batch's probes matched; the CPU build does not
even make it: the first probe batch of which fewer than half the rows match does
(a join on a foreign key, where every probe matches, never pays for it).

The CPU build of a large hashed table runs on as many threads as the join has
build drivers (idle once their input ends): each thread inserts the rows whose
first slot lies in its share of the one table, so no two threads write a slot
(:meth:`JoinHashTable._insert_packed_parallel`). The CUDA build is parallel
already (the group-by table's concurrent insert).

A join on one integer-like key whose build values span a range no wider than
:data:`DIRECT_SPAN_PER_KEY` times the build rows (every TPC-H key: orders,
customers, parts, suppliers, nations) skips hashing altogether, as DuckDB's
perfect hash join does: a *direct* table holds, per value of ``[low, high]``,
the key id of that value (-1 where absent), and a bitmap of the same range
stands in for the Bloom filter (exact, and 32 times smaller than the table). A
build is one pass writing ids in row order; a probe is a range check and one
read. TPC-H Q21's 729K-key orders table took 52 ms to build hashed and takes a
few ms direct.

A one-integer-key build too sparse for a direct table but within
:data:`RANGE_BITMAP_SPAN_PER_KEY` times its keys (or
:data:`RANGE_BITMAP_SPAN_FLOOR` values) is hashed, with a *range bitmap* of its
values in place of the Bloom filter: exact, so only probes that match reach the
packed table, and read in order when the probe keys come sorted (lineitem's
order keys). TPC-H Q21 probes 6M lineitem rows into 73K order keys spread over
6M values: 6.3 ns a probe through the Bloom filter, ~2 ns through the bitmap.

Both twins give the same pairs as a set; the CPU twin emits the rows of a key in
build-row order, the CUDA twin's scatter (atomics) in any order.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.exec.buffer_recycler import give_array, take_array
from gpu_engine.host_allocator import advise_huge_pages
from gpu_engine.exec.device_counters import count_kernel_launch
from gpu_engine.exec.made_once import MadeOnce
from numba.extending import register_jitable

from gpu_engine.kernels.filter import selection_from_mask
from gpu_engine.kernels.fused_rows import KEY_HASH_SEED, finish_key_hash, key_word_bits, mix_key_word
from gpu_engine.kernels.gather import gather
from gpu_engine.kernels.group_by import FIXED_WIDTH_BLOCK, GroupByHashTable
from gpu_engine.kernels.hash import fixed_width_key_words
from gpu_engine.kernels.launch import launch_cuda, launch_twin, read_only
from gpu_engine.kernels.prefetch import PREFETCH_DISTANCE, prefetch_row, prefetch_row_end, worth_prefetching

__all__ = ["JoinHashTable", "null_key_rows", "align_key_words", "BLOOM_BITS_PER_KEY"]

#: The threads (beyond the caller's) of parallel CPU builds, one pool per size (:func:`_on_build_threads`).
#: A forked child starts without them (their threads stayed in the parent) and makes its own on its first build.
_build_pools: MadeOnce[int, ThreadPoolExecutor] = MadeOnce(forget_in_forked_child=True)


def _on_build_threads(threads: int, part: Callable[[int], Any]) -> list[Any]:
    """Return ``[part(0), ..., part(threads - 1)]``, run at once: part 0 on the calling thread, the others on a pool.

    The parts are numba kernels that release the GIL (``nogil``); a part's exception is raised here.
    """
    if threads == 1:
        return [part(0)]
    pool = _build_pools.get(threads - 1, lambda: ThreadPoolExecutor(max_workers=threads - 1,
                                                                    thread_name_prefix="gpu_engine-join-build"))
    futures = [pool.submit(part, t) for t in range(1, threads)]
    first = part(0)
    return [first] + [future.result() for future in futures]

#: Bloom filter size per distinct build key: three bits of one 64-bit word per key give about 1% false positives.
BLOOM_BITS_PER_KEY = 16
#: The CPU build sizes its packed table for this many keys at most at first (then doubles as keys come):
#: a build side of many rows with few keys (a join on a non-key column) does not allocate for every row.
PACKED_ROWS_BEFORE_GROWTH = 1 << 22
#: A CPU table that outgrows its start grows once, to its keys estimated from a sample of them: the rows whose key
#: hash has this many top bits zero (1 key in 256, all its rows; :meth:`JoinHashTable._estimated_keys`).
KEY_SAMPLE_BITS = 8
#: The CPU build prefetches the Bloom filter's words as it fills them only when the filter is this large.
BLOOM_PREFETCH_MIN_BYTES = 1 << 23
#: A CPU build of at least this many rows, told to use several threads (its build drivers'), fills its table from
#: them all at once, each thread inserting the rows whose first slot lies in its share of the slots
#: (:meth:`JoinHashTable._insert_packed_parallel`) ... Every thread reads every row, and the table is sized first
#: from a sample of its keys (a pass over the rows the one-thread build takes only when its table outgrows
#: :data:`PACKED_ROWS_BEFORE_GROWTH`): at 3M distinct keys the two threads' build took 1.47x the CPU of one's
#: (loaded, bench/results/2026-11-29-parbuild-s52.md), at 10M 0.94x.
PARALLEL_BUILD_MIN_ROWS = 1 << 22
#: ... when it has at least this many keys (estimated): a smaller table stays in cache, and one thread's insert,
#: a hash and a cached probe a row, is as fast as every thread's pass over all the rows ...
PARALLEL_BUILD_MIN_KEYS = 1 << 19
#: ... and at least this share of its rows are distinct keys: numbering the keys of duplicate rows in first-row
#: order afterwards reads at random (10M rows of 2.5M keys: 1.61x the CPU of one thread's build, loaded).
PARALLEL_BUILD_MIN_KEY_SHARE = 0.5
#: The first this many rows tell a build of a few keys (their keys under that share) before any sample is taken.
PARALLEL_BUILD_PREFIX_ROWS = 1 << 16
#: A thread's share of the slots takes keys up to this fraction of its slots, then the build goes serial.
PARALLEL_BUILD_MAX_LOAD = 0.75
#: A one-key integer build whose values span at most this many values per build row (or
#: :data:`DIRECT_SPAN_FLOOR`) gets a direct table (see the module docstring): 4 bytes per value of the range,
#: against 24 bytes per slot at under half load for the hashed table.
DIRECT_SPAN_PER_KEY = 16
#: Any span up to this many values may go direct, however few the build rows (a 4 KiB table).
DIRECT_SPAN_FLOOR = 1 << 10
#: A direct table reads its bitmap first (while most probes miss) when its ids take more bytes than this.
DIRECT_BITMAP_MIN_BYTES = 1 << 16
#: No direct table spans more values than this (512 MiB of ids); wider builds hash.
DIRECT_SPAN_LIMIT = 1 << 27
#: A hashed one-integer-key table keeps a bitmap of its value range in place of the Bloom filter when the
#: range is at most this many times its keys (4x the filter's bytes) ...
RANGE_BITMAP_SPAN_PER_KEY = 64
#: ... or at most this many values, however few the keys (a 1 MiB bitmap).
RANGE_BITMAP_SPAN_FLOOR = 1 << 23


# --------------------------------------------------------- shared row functions
@register_jitable
def _key_hash(words, i):
    """Return row ``i``'s key hash (the fused kernels' key hash): the packed slot and the Bloom block come from it."""
    return _leading_words_hash(words, i, words.shape[1])


@register_jitable
def _leading_words_hash(words, i, num_words):
    """Return the key hash of the first ``num_words`` words of row ``i`` (a packed row ends with its key id)."""
    h = np.uint64(KEY_HASH_SEED)
    for w in range(num_words):
        h = np.uint64(mix_key_word(h, np.uint64(key_word_bits(words[i, w]))))
    return np.uint64(finish_key_hash(h, np.uint64(num_words)))


@register_jitable
def _bloom_block(h, num_blocks):
    """Return the Bloom filter word of hash ``h``: its high 32 bits scaled to the word count (no power of two needed)."""
    return np.int64(((h >> np.uint64(32)) * np.uint64(num_blocks)) >> np.uint64(32))


@register_jitable
def _bloom_bits(h):
    """Return the three bits hash ``h`` sets in its Bloom word (bits 0-17 of the hash; the slot uses the low bits too,
    which is fine: a word holds the keys of one 32-bit high-hash range, whose low bits are unrelated)."""
    one = np.uint64(1)
    return ((one << (h & np.uint64(63))) | (one << ((h >> np.uint64(6)) & np.uint64(63)))
            | (one << ((h >> np.uint64(12)) & np.uint64(63))))


@register_jitable
def _slot_holds_row(packed, slot, words, i):
    """Return True when packed row ``slot`` holds the key words of row ``i``."""
    for w in range(words.shape[1]):
        if packed[slot, w] != words[i, w]:
            return False
    return True


@register_jitable
def _packed_find(words, i, packed, h):
    """Return the id stored with row ``i``'s key (hash ``h``) in ``packed``, or -1 when the key is not there."""
    num_words = words.shape[1]
    slot_mask = np.int64(packed.shape[0] - 1)
    slot = np.int64(h & np.uint64(slot_mask))
    while True:
        key_id = packed[slot, num_words]
        if key_id < 0:
            return -1
        if _slot_holds_row(packed, slot, words, i):
            return key_id
        slot = (slot + 1) & slot_mask


@register_jitable
def _prefetch_slot(packed, slot):
    """Prefetch packed row ``slot`` whole: a row of three words (24 bytes) starting 48 or 56 bytes into a cache line
    ends in the next line, which holds its id, read first (1M-10M keys, 12M probes: the probe 0.92-0.95x with both
    ends; bench/results/2026-11-29-joinbuild-s54.md)."""
    prefetch_row(packed, slot)
    prefetch_row_end(packed, slot)


@register_jitable
def _bloom_rules_out(bloom, h):
    """Return True when the Bloom filter says no build key has hash ``h`` (then no build key equals the probe's)."""
    bits = _bloom_bits(h)
    return (np.uint64(bloom[_bloom_block(h, bloom.shape[0])]) & bits) != bits


@register_jitable
def _fixed_width_key_hash(value):
    """Return :func:`_key_hash` of a non-null fixed-width key's normalized words ``(1, value)``, from the value."""
    h = np.uint64(mix_key_word(np.uint64(KEY_HASH_SEED), np.uint64(1)))
    h = np.uint64(mix_key_word(h, np.uint64(key_word_bits(value))))
    return np.uint64(finish_key_hash(h, np.uint64(2)))


@register_jitable
def _fixed_width_find(value, packed, h):
    """Return the id stored with the non-null fixed-width key ``value`` (hash ``h``) in ``packed``, or -1."""
    slot_mask = np.int64(packed.shape[0] - 1)
    slot = np.int64(h & np.uint64(slot_mask))
    while True:
        key_id = packed[slot, 2]
        if key_id < 0:
            return -1
        if packed[slot, 0] == 1 and packed[slot, 1] == value:
            return key_id
        slot = (slot + 1) & slot_mask


@register_jitable
def _ruled_out_by_range(value, is_null, low, high, bits, use_bits):
    """Return True when a probe value cannot match a table of the values ``low..high`` with bitmap ``bits``:
    NULL, outside the range, or (when ``use_bits``) its bit is clear. The CUDA twins' check; the CPU twins
    write it out (see :func:`_find_direct_keys_cpu`)."""
    if is_null or value < low or value > high:
        return True
    s = value - low
    return use_bits and (bits[s >> 6] >> np.uint64(s & 63)) & np.uint64(1) == 0


# ------------------------------------------------------------------- CPU twins
#: What a CPU lookup passes for a Bloom filter not made yet (never asked: ``use_bloom`` False with it).
_NO_BLOOM = np.zeros(1, dtype=np.uint64)


@njit(nogil=True, cache=True)
def _insert_packed_cpu(words, start, packed, num_keys, group_ids, first_rows):
    """Give each row from ``start`` on its key's id, adding unseen keys to ``packed`` (ids in first-row order).

    Stops when the table is half full and returns ``(row reached, keys)``: the caller doubles it and goes on.
    """
    num_words = words.shape[1]
    slot_mask = np.int64(packed.shape[0] - 1)
    max_keys = packed.shape[0] // 2
    n = words.shape[0]
    ahead = worth_prefetching(packed)
    for i in range(start, n):
        if ahead and i + PREFETCH_DISTANCE < n:
            _prefetch_slot(packed, np.int64(_key_hash(words, i + PREFETCH_DISTANCE) & np.uint64(slot_mask)))
        slot = np.int64(_key_hash(words, i) & np.uint64(slot_mask))
        while True:
            key_id = packed[slot, num_words]
            if key_id < 0:
                if num_keys >= max_keys:
                    return i, num_keys
                for w in range(num_words):
                    packed[slot, w] = words[i, w]
                packed[slot, num_words] = num_keys
                first_rows[num_keys] = i
                group_ids[i] = num_keys
                num_keys += 1
                break
            if _slot_holds_row(packed, slot, words, i):
                group_ids[i] = key_id
                break
            slot = (slot + 1) & slot_mask
    return words.shape[0], num_keys


@njit(nogil=True, cache=True)
def _insert_slot_range_cpu(words, packed, low, high, max_keys, first_of_row):
    """Insert the rows whose first slot lies in ``[low, high)`` (one build thread's share of the table): each new key
    stores its first row in place of an id, and every such row's ``first_of_row`` is its key's first row; a row
    whose probe would run past ``high`` (into another thread's slots) gets -1 there and is left for
    :func:`_insert_deferred_cpu`. Return the keys inserted, or -1 when the range took ``max_keys`` (too full).

    Rows are read in order, so a key's stored row is its first row: ids in first-row order follow by ranking them.
    The rows of a deferred key are all deferred: the key is absent, and the range only fills up. Each row is
    hashed once (every thread reads every row): the first slots of the next ``PREFETCH_DISTANCE`` rows wait in a
    ring, and those in this range are fetched ahead.
    """
    num_words = words.shape[1]
    slot_mask = np.int64(packed.shape[0] - 1)
    n = words.shape[0]
    ahead = worth_prefetching(packed)
    ring = np.empty(PREFETCH_DISTANCE, dtype=np.int64)
    for i in range(min(n, PREFETCH_DISTANCE)):
        ring[i] = np.int64(_key_hash(words, i) & np.uint64(slot_mask))
    num_keys = 0
    for i in range(n):
        slot = ring[i % PREFETCH_DISTANCE]
        if i + PREFETCH_DISTANCE < n:
            next_slot = np.int64(_key_hash(words, i + PREFETCH_DISTANCE) & np.uint64(slot_mask))
            ring[i % PREFETCH_DISTANCE] = next_slot
            if ahead and next_slot >= low and next_slot < high:
                _prefetch_slot(packed, next_slot)
        if slot < low or slot >= high:
            continue
        while True:
            if slot == high:
                first_of_row[i] = -1
                break
            first = packed[slot, num_words]
            if first < 0:
                if num_keys == max_keys:
                    return -1
                for w in range(num_words):
                    packed[slot, w] = words[i, w]
                packed[slot, num_words] = i
                first_of_row[i] = i
                num_keys += 1
                break
            if _slot_holds_row(packed, slot, words, i):
                first_of_row[i] = first
                break
            slot += 1
    return num_keys


@njit(nogil=True, cache=True)
def _insert_deferred_cpu(words, rows, packed, max_keys, first_of_row):
    """Insert the deferred ``rows`` (in row order) as :func:`_insert_slot_range_cpu` does, probing across ranges;
    return the keys added, or -1 when the table would pass ``max_keys`` keys added."""
    num_words = words.shape[1]
    slot_mask = np.int64(packed.shape[0] - 1)
    num_keys = 0
    for r in range(rows.shape[0]):
        i = rows[r]
        slot = np.int64(_key_hash(words, i) & np.uint64(slot_mask))
        while True:
            first = packed[slot, num_words]
            if first < 0:
                if num_keys == max_keys:
                    return -1
                for w in range(num_words):
                    packed[slot, w] = words[i, w]
                packed[slot, num_words] = i
                first_of_row[i] = i
                num_keys += 1
                break
            if _slot_holds_row(packed, slot, words, i):
                first_of_row[i] = first
                break
            slot = (slot + 1) & slot_mask
    return num_keys


@njit(nogil=True, cache=True)
def _number_keys_cpu(first_of_row):
    """Turn each row's first row of its key into its key's id, in place, numbering keys in first-row order.

    A first row (``first_of_row[i] == i``) takes the next id; a later row reads its first row's entry, already
    an id (fetched ahead: a build of duplicate keys in random order reads it at random).
    """
    n = first_of_row.shape[0]
    num_keys = 0
    for i in range(n):
        if i + PREFETCH_DISTANCE < n:
            prefetch_row(first_of_row, first_of_row[i + PREFETCH_DISTANCE])
        first = first_of_row[i]
        if first == i:
            first_of_row[i] = num_keys
            num_keys += 1
        else:
            first_of_row[i] = first_of_row[first]
    return num_keys


@njit(nogil=True, cache=True)
def _number_slot_range_cpu(packed, low, high, ids):
    """Replace the first rows stored in slots ``[low, high)`` by their keys' ids (``ids`` of the first row)."""
    num_words = packed.shape[1] - 1
    for s in range(low, high):
        if s + PREFETCH_DISTANCE < high and packed[s + PREFETCH_DISTANCE, num_words] >= 0:
            prefetch_row(ids, packed[s + PREFETCH_DISTANCE, num_words])
        first = packed[s, num_words]
        if first >= 0:
            packed[s, num_words] = ids[first]


@njit(nogil=True, cache=True)
def _sampled_rows_cpu(words, shift, sample):
    """Write the rows whose key hash is below ``2 ** shift`` to ``sample`` (every row of 1 key in 2 ** (64 - shift));
    return how many, or -1 when they do not fit (a few keys of many rows: the caller keeps its small table)."""
    count = 0
    for i in range(words.shape[0]):
        if (_key_hash(words, i) >> np.uint64(shift)) == 0:
            if count == sample.shape[0]:
                return -1
            sample[count] = i
            count += 1
    return count


@njit(nogil=True, cache=True)
def _repack_cpu(old, new):
    """Move every key of packed table ``old`` into the empty, larger ``new`` (ids kept)."""
    num_words = old.shape[1] - 1
    slot_mask = np.int64(new.shape[0] - 1)
    for s in range(old.shape[0]):
        if old[s, num_words] < 0:
            continue
        slot = np.int64(_leading_words_hash(old, s, num_words) & np.uint64(slot_mask))
        while new[slot, num_words] >= 0:
            slot = (slot + 1) & slot_mask
        for w in range(num_words + 1):
            new[slot, w] = old[s, w]


@njit(nogil=True, cache=True)
def _bloom_of_packed_cpu(packed, bloom):
    # A filter well past the L2s (10M keys: 20 MB) is written at random: the word of the key PREFETCH_DISTANCE
    # slots ahead is fetched first (10M keys, loaded: 0.54-0.60 -> 0.36-0.40 s). A smaller one is not: the
    # look-ahead's second hash cost more than it saved (1M keys, a 2 MB filter: the build 1.14x with it).
    num_words = packed.shape[1] - 1
    n = packed.shape[0]
    prefetching = bloom.size * bloom.itemsize >= BLOOM_PREFETCH_MIN_BYTES
    for s in range(n):
        if prefetching and s + PREFETCH_DISTANCE < n and packed[s + PREFETCH_DISTANCE, num_words] >= 0:
            ahead = _leading_words_hash(packed, s + PREFETCH_DISTANCE, num_words)
            prefetch_row(bloom, _bloom_block(ahead, bloom.shape[0]))
        if packed[s, num_words] >= 0:
            h = _leading_words_hash(packed, s, num_words)
            bloom[_bloom_block(h, bloom.shape[0])] |= _bloom_bits(h)


@njit(nogil=True, cache=True)
def _find_keys_cpu(words, packed, bloom, use_bloom, key_ids):
    # The Bloom test stays in the loop body: behind a call returning early, numba's code ran 6x slower.
    # Row i + PREFETCH_DISTANCE's first slot is fetched ahead when the filter (which stays in cache) lets it through.
    n = words.shape[0]
    slot_mask = np.int64(packed.shape[0] - 1)
    prefetching = worth_prefetching(packed)
    for i in range(n):
        if prefetching and i + PREFETCH_DISTANCE < n:
            ahead = _key_hash(words, i + PREFETCH_DISTANCE)
            if not (use_bloom and _bloom_rules_out(bloom, ahead)):
                _prefetch_slot(packed, np.int64(ahead & np.uint64(slot_mask)))
        h = _key_hash(words, i)
        if use_bloom and _bloom_rules_out(bloom, h):
            key_ids[i] = -1
            continue
        key_ids[i] = _packed_find(words, i, packed, h)


@njit(nogil=True, cache=True)
def _find_fixed_width_keys_cpu(values, valid, rows, packed, bloom, use_bloom, key_ids):
    # values: the key column's int64 words; valid: its validity (empty: no NULLs); rows: the batch's gather map
    # (empty: none). A NULL key matches nothing (the packed table holds no NULL keys). The row's body is
    # written out here and in the CUDA twin rather than shared through a helper returning early: that
    # helper made this loop 4x slower (Q5's probes 112 -> 447 ms), as it did _find_keys_cpu's.
    n = key_ids.shape[0]
    mapped = rows.shape[0] > 0
    has_valid = valid.shape[0] > 0
    slot_mask = np.int64(packed.shape[0] - 1)
    prefetching = worth_prefetching(packed)
    for i in range(n):
        if prefetching and i + PREFETCH_DISTANCE < n:
            a = rows[i + PREFETCH_DISTANCE] if mapped else i + PREFETCH_DISTANCE
            if not has_valid or valid[a]:
                ahead = _fixed_width_key_hash(values[a])
                if not (use_bloom and _bloom_rules_out(bloom, ahead)):
                    _prefetch_slot(packed, np.int64(ahead & np.uint64(slot_mask)))
        r = rows[i] if mapped else i
        if has_valid and not valid[r]:
            key_ids[i] = -1
            continue
        value = values[r]
        h = _fixed_width_key_hash(value)
        if use_bloom and _bloom_rules_out(bloom, h):
            key_ids[i] = -1
            continue
        key_ids[i] = _fixed_width_find(value, packed, h)


@njit(nogil=True, cache=True)
def _set_range_bits_cpu(values, low, bits):
    for i in range(values.shape[0]):
        s = values[i] - low
        bits[s >> 6] |= np.uint64(1) << np.uint64(s & 63)


@njit(nogil=True, cache=True)
def _find_fixed_width_keys_in_range_cpu(values, valid, rows, packed, low, high, bits, use_bits, key_ids):
    # _find_fixed_width_keys_cpu with the range bitmap in place of the Bloom filter: a value outside
    # [low, high] or whose bit is clear matches nothing; any other is in the packed table (the bitmap is
    # exact), and only those are hashed and prefetched. The row body is written out for the reason given there.
    n = key_ids.shape[0]
    mapped = rows.shape[0] > 0
    has_valid = valid.shape[0] > 0
    slot_mask = np.int64(packed.shape[0] - 1)
    prefetching = worth_prefetching(packed)
    for i in range(n):
        if prefetching and i + PREFETCH_DISTANCE < n:
            a = rows[i + PREFETCH_DISTANCE] if mapped else i + PREFETCH_DISTANCE
            ahead = values[a]
            if (not has_valid or valid[a]) and low <= ahead <= high:
                s = ahead - low
                if not use_bits or (bits[s >> 6] >> np.uint64(s & 63)) & np.uint64(1) != 0:
                    _prefetch_slot(packed, np.int64(_fixed_width_key_hash(ahead) & np.uint64(slot_mask)))
        r = rows[i] if mapped else i
        value = values[r]
        if (has_valid and not valid[r]) or value < low or value > high:
            key_ids[i] = -1
            continue
        s = value - low
        if use_bits and (bits[s >> 6] >> np.uint64(s & 63)) & np.uint64(1) == 0:
            key_ids[i] = -1
            continue
        key_ids[i] = _fixed_width_find(value, packed, _fixed_width_key_hash(value))


@njit(nogil=True, cache=True)
def _insert_direct_cpu(values, low, slots, bits, group_ids, first_rows):
    """Give each build row the id of its value (``slots[value - low]``), numbering unseen values in row order.

    Returns the number of distinct values; sets each one's bit in ``bits``.
    """
    num_keys = 0
    for i in range(values.shape[0]):
        s = values[i] - low
        key_id = slots[s]
        if key_id < 0:
            key_id = num_keys
            slots[s] = key_id
            first_rows[key_id] = i
            bits[s >> 6] |= np.uint64(1) << np.uint64(s & 63)
            num_keys += 1
        group_ids[i] = key_id
    return num_keys


@njit(nogil=True, cache=True)
def _find_direct_keys_cpu(values, valid, rows, slots, low, high, bits, use_bits, key_ids):
    # Like _find_fixed_width_keys_cpu, on a direct table of the values low..high; value - low is taken only
    # inside that range, where it cannot overflow. The row body is written out here and in the CUDA twin for
    # the reason given there: a one-return helper holding it (_direct_key_id) made this probe 3x slower
    # (3M rows into a 729k-key table: 24 -> 77 ms).
    n = key_ids.shape[0]
    mapped = rows.shape[0] > 0
    has_valid = valid.shape[0] > 0
    prefetching = worth_prefetching(slots)
    for i in range(n):
        if prefetching and i + PREFETCH_DISTANCE < n:
            ahead = values[rows[i + PREFETCH_DISTANCE] if mapped else i + PREFETCH_DISTANCE]
            if low <= ahead <= high:
                prefetch_row(slots, ahead - low)
        r = rows[i] if mapped else i
        value = values[r]
        if (has_valid and not valid[r]) or value < low or value > high:
            key_ids[i] = -1
            continue
        s = value - low
        if use_bits and (bits[s >> 6] >> np.uint64(s & 63)) & np.uint64(1) == 0:
            key_ids[i] = -1
            continue
        key_ids[i] = slots[s]


@njit(nogil=True, cache=True)
def _row_lists_cpu(group_ids, row_numbers, offsets, rows):
    for i in range(group_ids.shape[0]):
        offsets[group_ids[i] + 1] += 1
    for g in range(offsets.shape[0] - 1):
        offsets[g + 1] += offsets[g]
    cursor = offsets[:-1].copy()
    for i in range(group_ids.shape[0]):
        g = group_ids[i]
        rows[cursor[g]] = row_numbers[i]
        cursor[g] += 1


@njit(nogil=True, cache=True)
def _count_matches_cpu(group_ids, offsets, counts):
    for i in range(group_ids.shape[0]):
        g = group_ids[i]
        counts[i] = offsets[g + 1] - offsets[g] if g >= 0 else 0


@njit(nogil=True, cache=True)
def _emit_pairs_cpu(group_ids, offsets, rows, positions, probe_rows, build_rows):
    for i in range(group_ids.shape[0]):
        g = group_ids[i]
        if g < 0:
            continue
        first = offsets[g]
        out = positions[i]
        for j in range(offsets[g + 1] - first):
            probe_rows[out + j] = i
            build_rows[out + j] = rows[first + j]


@njit(nogil=True, cache=True)
def _value_bounds_cpu(offsets, rows, values, valid, lows, highs):
    has_valid = valid.shape[0] > 0
    for g in range(offsets.shape[0] - 1):
        low, high = lows[g], highs[g]
        for j in range(offsets[g], offsets[g + 1]):
            r = rows[j]
            if has_valid and not valid[r]:
                continue
            low = min(low, values[r])
            high = max(high, values[r])
        lows[g], highs[g] = low, high


@njit(nogil=True, cache=True)
def _add_value_bounds_cpu(key_ids, values, valid, lows, highs):
    has_valid = valid.shape[0] > 0
    for i in range(key_ids.shape[0]):
        g = key_ids[i]
        if g < 0 or (has_valid and not valid[i]):
            continue
        lows[g] = min(lows[g], values[i])
        highs[g] = max(highs[g], values[i])


# ------------------------------------------------------------------ CUDA twins
@cuda.jit
def _pack_keys_cuda(words, packed, bloom):
    num_words = words.shape[1]
    slot_mask = np.int64(packed.shape[0] - 1)
    for g in range(cuda.grid(1), words.shape[0], cuda.gridsize(1)):
        h = _key_hash(words, g)
        cuda.atomic.or_(bloom, _bloom_block(h, bloom.shape[0]), _bloom_bits(h))
        slot = np.int64(h & np.uint64(slot_mask))
        while cuda.atomic.cas(packed, (slot, num_words), np.int64(-1), np.int64(g)) != -1:
            slot = (slot + 1) & slot_mask
        for w in range(num_words):
            packed[slot, w] = words[g, w]


@cuda.jit
def _find_keys_cuda(words, packed, bloom, use_bloom, key_ids):
    for i in range(cuda.grid(1), words.shape[0], cuda.gridsize(1)):
        h = _key_hash(words, i)
        if use_bloom and _bloom_rules_out(bloom, h):
            key_ids[i] = -1
            continue
        key_ids[i] = _packed_find(words, i, packed, h)


@cuda.jit
def _find_fixed_width_keys_cuda(values, valid, rows, packed, bloom, use_bloom, key_ids):
    mapped = rows.shape[0] > 0
    has_valid = valid.shape[0] > 0
    for i in range(cuda.grid(1), key_ids.shape[0], cuda.gridsize(1)):
        r = rows[i] if mapped else i
        if has_valid and not valid[r]:
            key_ids[i] = -1
            continue
        value = values[r]
        h = _fixed_width_key_hash(value)
        if use_bloom and _bloom_rules_out(bloom, h):
            key_ids[i] = -1
            continue
        key_ids[i] = _fixed_width_find(value, packed, h)


@cuda.jit
def _set_range_bits_cuda(values, low, bits):
    for i in range(cuda.grid(1), values.shape[0], cuda.gridsize(1)):
        s = values[i] - low
        cuda.atomic.or_(bits, s >> 6, np.uint64(1) << np.uint64(s & 63))


@cuda.jit
def _find_fixed_width_keys_in_range_cuda(values, valid, rows, packed, low, high, bits, use_bits, key_ids):
    mapped = rows.shape[0] > 0
    has_valid = valid.shape[0] > 0
    for i in range(cuda.grid(1), key_ids.shape[0], cuda.gridsize(1)):
        r = rows[i] if mapped else i
        value = values[r]
        if _ruled_out_by_range(value, has_valid and not valid[r], low, high, bits, use_bits):
            key_ids[i] = -1
        else:
            key_ids[i] = _fixed_width_find(value, packed, _fixed_width_key_hash(value))


@cuda.jit
def _pack_direct_cuda(values, first_rows, low, slots, bits):
    for g in range(cuda.grid(1), first_rows.shape[0], cuda.gridsize(1)):
        s = values[first_rows[g]] - low
        slots[s] = g
        cuda.atomic.or_(bits, s >> 6, np.uint64(1) << np.uint64(s & 63))


@cuda.jit
def _find_direct_keys_cuda(values, valid, rows, slots, low, high, bits, use_bits, key_ids):
    mapped = rows.shape[0] > 0
    has_valid = valid.shape[0] > 0
    for i in range(cuda.grid(1), key_ids.shape[0], cuda.gridsize(1)):
        r = rows[i] if mapped else i
        value = values[r]
        if _ruled_out_by_range(value, has_valid and not valid[r], low, high, bits, use_bits):
            key_ids[i] = -1
        else:
            key_ids[i] = slots[value - low]


@cuda.jit
def _count_rows_cuda(group_ids, counts):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(counts, group_ids[i], 1)


@cuda.jit
def _scatter_rows_cuda(group_ids, row_numbers, cursor, rows):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        position = cuda.atomic.add(cursor, group_ids[i], 1)
        rows[position] = row_numbers[i]


@cuda.jit
def _count_matches_cuda(group_ids, offsets, counts):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        g = group_ids[i]
        counts[i] = offsets[g + 1] - offsets[g] if g >= 0 else 0


@cuda.jit
def _emit_pairs_cuda(group_ids, offsets, rows, positions, probe_rows, build_rows):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        g = group_ids[i]
        if g >= 0:
            first = offsets[g]
            out = positions[i]
            for j in range(offsets[g + 1] - first):
                probe_rows[out + j] = i
                build_rows[out + j] = rows[first + j]


@cuda.jit
def _value_bounds_cuda(offsets, rows, values, valid, lows, highs):
    has_valid = valid.shape[0] > 0
    for g in range(cuda.grid(1), offsets.shape[0] - 1, cuda.gridsize(1)):
        low, high = lows[g], highs[g]
        for j in range(offsets[g], offsets[g + 1]):
            r = rows[j]
            if not (has_valid and not valid[r]):
                value = values[r]  # comparisons: min()/max() here did not compile to PTX (test_driver_launch_abi)
                if value < low:
                    low = value
                if value > high:
                    high = value
        lows[g] = low
        highs[g] = high


@cuda.jit
def _add_value_bounds_cuda(key_ids, values, valid, lows, highs):
    has_valid = valid.shape[0] > 0
    for i in range(cuda.grid(1), key_ids.shape[0], cuda.gridsize(1)):
        g = key_ids[i]
        if g >= 0 and not (has_valid and not valid[i]):
            cuda.atomic.min(lows, g, values[i])
            cuda.atomic.max(highs, g, values[i])


# ---------------------------------------------------------------- entry points
def null_key_rows(device: Device, keys: Any, widths: Sequence[int]) -> Any:
    """Return a bool per row, True where any key column is NULL (its block's flag word is 0)."""
    # Column by column, each flag word compared in place: gathering the flag columns first and reducing them
    # along rows took three passes (10M build rows of one key: 21 -> 9 ms, on the last build driver alone).
    starts = np.cumsum([0, *widths[:-1]]).tolist()
    nulls = keys[:, starts[0]] != 1
    for start in starts[1:]:
        nulls |= keys[:, start] != 1
    return nulls


def align_key_words(device: Device, keys: Any, widths: Sequence[int], table_widths: Sequence[int]) -> Any:
    """Return probe key words laid out with ``table_widths`` (string blocks cut to the table's width).

    Why: :func:`~gpu_engine.kernels.group_by.normalize_keys` widens a string
    block when a probe batch has longer strings than the build side had. Such
    a string cannot equal any build string, and its length word (kept: it is
    the block's second word) already differs from every stored length, so
    cutting the block's trailing byte words keeps the comparison exact.
    """
    widths, table_widths = tuple(widths), tuple(table_widths)
    if widths == table_widths:
        return keys
    if len(widths) != len(table_widths) or any(w < t for w, t in zip(widths, table_widths)):
        raise ValueError(f"cannot align key blocks {widths} to {table_widths}")
    columns: list[int] = []
    first = 0
    for width, table_width in zip(widths, table_widths):
        columns.extend(range(first, first + table_width))
        first += width
    return device.xp.ascontiguousarray(keys[:, columns])


class JoinHashTable:
    """Hold a join's build keys: a key-id table plus the build rows of each key id in CSR form.

    Parameters
    ----------
    device
        Where the arrays live; selects the twins.
    keys
        ``int64`` matrix ``(n, W)`` of every build row's normalized key.
    widths
        The block widths ``keys`` was normalized with.
    threads
        Threads the CPU build may fill a large hashed table from (the join's build drivers, idle by now).

    Attributes
    ----------
    num_rows
        Build rows (NULL-key rows included, though they never match).
    has_null_key
        True when some build row has a NULL in a key column.
    widths
        Block widths probe keys must be aligned to (:func:`align_key_words`).
    """

    def __init__(self, device: Device, keys: Any, widths: Sequence[int], threads: int = 1):
        xp = device.xp
        self.device = device
        self._threads = max(1, int(threads))
        self.widths = tuple(int(w) for w in widths)
        self.num_rows = int(keys.shape[0])
        null_rows = null_key_rows(device, keys, self.widths) if self.num_rows else xp.zeros(0, dtype=xp.bool_)
        self.has_null_key = device.any(null_rows) if self.num_rows else False
        row_numbers = xp.arange(self.num_rows, dtype=xp.int32)
        if self.has_null_key:
            row_numbers = selection_from_mask(device, ~null_rows)
            keys = keys[row_numbers]
        keys = xp.ascontiguousarray(keys)
        #: A direct table's lowest key value, ids per value and bitmap (see the module docstring), else None.
        self._direct_low = self._slots = self._bits = None
        #: The hashed table's packed slots and Bloom filter, else None.
        self._packed = self._bloom = None
        #: Held while a CPU table's Bloom filter is made on a probe's demand (:meth:`_note_match_rate`); None when
        #: the table made it at build (CUDA) or needs none (direct tables, range bitmaps).
        self._bloom_lock: threading.Lock | None = None
        #: A hashed table's range bitmap (its values' bits over ``[_range_low, _range_high]``), else None.
        self._range_low = self._range_high = None
        key_range = self._key_range(keys)
        if key_range is not None and key_range[1] <= self._direct_span_limit(int(keys.shape[0])):
            group_ids = self._insert_direct(keys, *key_range)
        elif device.kernel_flavor == "cpu":
            group_ids, self._packed = self._insert_packed(keys)
            if not self._fill_range_bitmap(keys, key_range):
                self._bloom_lock = threading.Lock()  # the filter is made when a probe batch shows it pays
        else:
            distinct = GroupByHashTable(device, self.widths, initial_capacity=max(16, 2 * int(row_numbers.shape[0])))
            group_ids, first_rows = distinct.insert(keys)
            self.num_keys = distinct.num_groups
            self._packed, self._bloom = self._pack(keys[first_rows])
            self._fill_range_bitmap(keys, key_range)
        #: Every build key is distinct: key id g's one build row is ``_rows[g]``.
        self.unique_keys = self.num_keys == int(row_numbers.shape[0])
        #: ``_rows[g] == g`` for every key id (set by :meth:`_row_lists`): a match's key id is its build row.
        self._rows_are_ids = False
        self._offsets, self._rows = self._row_lists(group_ids, row_numbers)
        #: Whether lookups ask the Bloom filter first; updated from each probe batch's match rate (see ``match``).
        self.use_bloom = True

    @property
    def is_direct(self) -> bool:
        """Return True when keys are found by value in a direct table rather than by hash (module docstring)."""
        return self._direct_low is not None

    @property
    def has_range_bitmap(self) -> bool:
        """Return True when a hashed table rules probes out by a bitmap of its value range (module docstring)."""
        return self._range_low is not None

    def _key_range(self, keys: Any) -> tuple[int, int] | None:
        """Return ``(low, span)`` of a one-integer-key build's values, else None (other keys, or no rows)."""
        if self.widths != (FIXED_WIDTH_BLOCK,) or int(keys.shape[0]) == 0:
            return None
        values = keys[:, 1]
        low, high = self.device.read_scalars([values.min(), values.max()])
        return low, high - low + 1

    @staticmethod
    def _direct_span_limit(rows: int) -> int:
        """Return the widest value range a direct table of ``rows`` build rows may span."""
        return min(DIRECT_SPAN_LIMIT, max(DIRECT_SPAN_FLOOR, DIRECT_SPAN_PER_KEY * rows))

    def _fill_range_bitmap(self, keys: Any, key_range: tuple[int, int] | None) -> bool:
        """Give a hashed table the bitmap of its values when their range is narrow enough; return whether it did."""
        if key_range is None:
            return False
        low, span = key_range
        if span > min(DIRECT_SPAN_LIMIT, max(RANGE_BITMAP_SPAN_FLOOR, RANGE_BITMAP_SPAN_PER_KEY * self.num_keys)):
            return False
        xp = self.device.xp
        self._range_low, self._range_high = np.int64(low), np.int64(low + span - 1)
        self._bits = self._filled((-(-span // 64),), xp.uint64, 0)
        values = xp.ascontiguousarray(keys[:, 1])
        launch_twin(self.device, int(values.shape[0]), _set_range_bits_cpu, _set_range_bits_cuda,
                    values, self._range_low, self._bits)
        return True

    def _insert_direct(self, keys: Any, low: int, span: int) -> Any:
        """Fill the direct table (ids in first-row order, as the hashed build numbers them); return each row's id."""
        device, xp = self.device, self.device.xp
        values = xp.ascontiguousarray(keys[:, 1])
        self._direct_low, self._direct_high = np.int64(low), np.int64(low + span - 1)
        self._slots = self._filled((span,), xp.int32, -1)
        self._bits = self._filled((-(-span // 64),), xp.uint64, 0)
        #: The bitmap is read before the ids only where the ids outgrow the first-level cache and the bitmap,
        #: 32 times smaller, does not (TPC-H Q22's 600 KB of customer ids: probes 9.1 -> 6.4 ms with it).
        self._bits_pay = int(self._slots.nbytes) > DIRECT_BITMAP_MIN_BYTES
        if device.kernel_flavor == "cpu":
            n = int(values.shape[0])
            group_ids = xp.empty(n, dtype=xp.int32)
            first_rows = xp.empty(n, dtype=xp.int32)
            count_kernel_launch()
            self.num_keys = _insert_direct_cpu(values, self._direct_low, self._slots, self._bits, group_ids, first_rows)
            return group_ids
        distinct = GroupByHashTable(device, self.widths, initial_capacity=max(16, 2 * int(values.shape[0])))
        group_ids, first_rows = distinct.insert(keys)
        self.num_keys = distinct.num_groups
        launch_cuda(device, _pack_direct_cuda, self.num_keys, values, first_rows, self._direct_low,
                    self._slots, self._bits)
        return group_ids

    def _lookup_values(self, values: Any, valid: Any, rows: Any, n: int) -> Any:
        """Return the key ids of ``n`` probe values (read through ``rows`` when non-empty) in a table of one
        fixed-width key: direct, or hashed behind its range bitmap or Bloom filter."""
        key_ids = self.device.xp.empty(n, dtype=self.device.xp.int32)
        # read-only always: a Parquet column's values and a computed or widened key's share one CPU signature
        values = read_only(self.device.xp, values)
        if self.is_direct:
            launch_twin(self.device, n, _find_direct_keys_cpu, _find_direct_keys_cuda, values, valid, rows,
                        self._slots, self._direct_low, self._direct_high, self._bits,
                        self.use_bloom and self._bits_pay, key_ids)
        elif self.has_range_bitmap:
            launch_twin(self.device, n, _find_fixed_width_keys_in_range_cpu, _find_fixed_width_keys_in_range_cuda,
                        values, valid, rows, self._packed, self._range_low, self._range_high, self._bits,
                        self.use_bloom, key_ids)
        else:
            bloom, use_bloom = self._bloom_to_ask()
            launch_twin(self.device, n, _find_fixed_width_keys_cpu, _find_fixed_width_keys_cuda,
                        values, valid, rows, self._packed, bloom, use_bloom, key_ids)
        return key_ids

    def _insert_packed(self, keys: Any) -> tuple[Any, Any]:
        """Return each row's key id and the packed table, built in one pass over the rows (the CPU path).

        Why: on a CPU the general group-by table followed by packing its
        distinct keys touched two tables at random (TPC-H Q21's 729K-row build
        took 600 ms); inserting straight into the packed table touches one. The
        CUDA path keeps the group-by table, whose kernels number new keys
        densely under concurrent inserts.
        """
        xp = self.device.xp
        n = int(keys.shape[0])
        start_keys = min(n, PACKED_ROWS_BEFORE_GROWTH)
        estimated = False
        if (self._threads > 1 and n >= PARALLEL_BUILD_MIN_ROWS
                and self._prefix_key_share(keys) >= PARALLEL_BUILD_MIN_KEY_SHARE):
            estimated = True  # sized first, from a sample of the keys: a few keys of many rows stay serial
            start_keys = self._estimated_keys(keys) or start_keys
            if start_keys >= max(PARALLEL_BUILD_MIN_KEYS, PARALLEL_BUILD_MIN_KEY_SHARE * n):
                built = self._insert_packed_parallel(keys, start_keys)
                if built is not None:
                    return built
        first_capacity = 1 << max(2 * start_keys - 1, 1).bit_length()
        packed = self._filled((first_capacity, keys.shape[1] + 1), xp.int64, -1)
        group_ids = xp.empty(n, dtype=xp.int32)
        first_rows = xp.empty(n, dtype=xp.int32)
        row, self.num_keys = 0, 0
        while True:
            count_kernel_launch()
            row, self.num_keys = _insert_packed_cpu(keys, row, packed, self.num_keys, group_ids, first_rows)
            if row == n:
                return group_ids, packed
            capacity = 2 * packed.shape[0]
            if not estimated:  # more keys than the table started for: grow once to the estimate of them all
                estimated = True
                capacity = max(capacity, 1 << max(2 * self._estimated_keys(keys) - 1, 1).bit_length())
            grown = self._filled((capacity, packed.shape[1]), xp.int64, -1)
            count_kernel_launch()
            _repack_cpu(packed, grown)
            give_array(xp, packed)
            packed = grown

    def _insert_packed_parallel(self, keys: Any, expected_keys: int) -> tuple[Any, Any] | None:
        """Return :meth:`_insert_packed`'s ids and table, filled by ``self._threads`` threads at once; None when a
        thread's share of the slots filled up (more keys than ``expected_keys``: the caller builds it serially).

        Why: the last build driver built the table alone while the others, done with their input, idled (10M
        distinct keys: ~1.2 s of one core, most of the join's wall against DuckDB's; radixjoin-s51 results).
        The table, sized for ``expected_keys`` at the serial table's load, is cut into one range of slots per
        thread; every thread reads all the rows and inserts those whose first slot is in its range (no two
        threads write a slot: no atomics, which numba's CPU twin lacks), storing a key's first row in place of
        its id. A row whose probe would cross into the next range is left to one serial pass afterwards (a few
        rows at the ranges' ends). Ids in first-row order, as the serial build numbers them, are the ranks of the
        first rows: distinct keys (the common case) need no renumbering at all, each row being its key's first.
        """
        xp = self.device.xp
        n, threads = int(keys.shape[0]), self._threads
        capacity = 1 << max(2 * expected_keys - 1, 1).bit_length()
        packed = self._filled((capacity, keys.shape[1] + 1), xp.int64, -1)
        first_of_row = xp.empty(n, dtype=xp.int32)
        bounds = [capacity * t // threads for t in range(threads + 1)]

        def insert(t: int) -> int:
            share = bounds[t + 1] - bounds[t]
            return _insert_slot_range_cpu(keys, packed, bounds[t], bounds[t + 1],
                                          int(share * PARALLEL_BUILD_MAX_LOAD), first_of_row)

        count_kernel_launch(threads)  # here: the counters are the calling (driver) thread's
        inserted = _on_build_threads(threads, insert)
        if min(inserted) >= 0:
            deferred = xp.flatnonzero(first_of_row < 0)
            count_kernel_launch()
            added = _insert_deferred_cpu(keys, deferred, packed,
                                         int(capacity * PARALLEL_BUILD_MAX_LOAD) - sum(inserted), first_of_row)
            if added >= 0:
                self.num_keys = sum(inserted) + added
                if self.num_keys < n:  # ids in first-row order (distinct keys: each row is its own first)
                    count_kernel_launch()
                    _number_keys_cpu(first_of_row)

                    def number(t: int) -> None:
                        _number_slot_range_cpu(packed, bounds[t], bounds[t + 1], first_of_row)

                    count_kernel_launch(threads)
                    _on_build_threads(threads, number)
                return first_of_row, packed
        give_array(xp, packed)
        return None

    def _prefix_key_share(self, keys: Any) -> float:
        """Return the distinct keys of the first :data:`PARALLEL_BUILD_PREFIX_ROWS` rows (a cached table's insert)
        per row.

        Why: the parallel build's sample of the keys passes over every row (10M rows: ~0.06 s); a build whose
        first rows already repeat their keys (a few keys of many rows) is built by one thread without it.
        """
        xp = self.device.xp
        prefix = keys[:PARALLEL_BUILD_PREFIX_ROWS]
        rows = int(prefix.shape[0])
        small = xp.full((1 << max(2 * rows - 1, 1).bit_length(), keys.shape[1] + 1), -1, dtype=xp.int64)
        ids, firsts = xp.empty(rows, dtype=xp.int32), xp.empty(rows, dtype=xp.int32)
        count_kernel_launch()
        return _insert_packed_cpu(prefix, 0, small, 0, ids, firsts)[1] / max(rows, 1)

    def _estimated_keys(self, keys: Any) -> int:
        """Return the distinct keys of a build estimated from a sample of its keys (0: none sampled, or too many rows).

        Why: the table starts at :data:`PACKED_ROWS_BEFORE_GROWTH` keys; doubling as keys came moved every key
        at each doubling (10M distinct keys grew twice: 0.25-0.57 s of a 2.2 s build,
        bench/results/2026-11-29-radixjoin-s51.md). At its first growth the table grows once to this estimate
        instead. The sample is of keys, not rows (:data:`KEY_SAMPLE_BITS`: every row whose key hash's top bits
        are zero, copied and inserted into a small table with the same kernel), so 1 in 256 keys is counted
        exactly however many rows each has. It is taken only when the table must grow: a build of a few keys of many rows
        never pays its pass over the rows (10M rows of 1,000 keys: 1.31x with the pass before the insert).
        The estimate is 1/8 generous for its error; should it still fall short, the table doubles as before.
        """
        xp = self.device.xp
        n, threads = int(keys.shape[0]), self._threads
        bounds = [n * t // threads for t in range(threads + 1)]  # the rows are read by every build thread at once
        samples = [xp.empty(((bounds[t + 1] - bounds[t]) >> (KEY_SAMPLE_BITS - 2)) + 1024, dtype=xp.int64)
                   for t in range(threads)]  # 4x its share

        def take(t: int) -> int:
            return _sampled_rows_cpu(keys[bounds[t]:bounds[t + 1]], 64 - KEY_SAMPLE_BITS, samples[t])

        count_kernel_launch(threads)  # here: the counters are the calling (driver) thread's
        counts = _on_build_threads(threads, take)
        if min(counts) < 0:
            return 0
        taken = sum(counts)
        if taken == 0:
            return 0
        sample = xp.concatenate([samples[t][:counts[t]] + bounds[t] for t in range(threads)])
        small = xp.full((1 << max(2 * taken - 1, 1).bit_length(), keys.shape[1] + 1), -1, dtype=xp.int64)
        sampled = xp.ascontiguousarray(keys[sample[:taken]])  # the sampled rows' words: n / 256 rows or so
        ids, firsts = xp.empty(taken, dtype=xp.int32), xp.empty(taken, dtype=xp.int32)
        count_kernel_launch()
        _, sampled_keys = _insert_packed_cpu(sampled, 0, small, 0, ids, firsts)
        estimate = sampled_keys << KEY_SAMPLE_BITS
        return min(n, estimate + estimate // 8)

    def _bloom_words(self) -> int:
        """Return the 64-bit words of the table's Bloom filter (:data:`BLOOM_BITS_PER_KEY` a key)."""
        return max(1, -(-self.num_keys * BLOOM_BITS_PER_KEY // 64))

    def _new_bloom(self) -> Any:
        return self.device.xp.zeros(self._bloom_words(), dtype=self.device.xp.uint64)

    def _pack(self, distinct_keys: Any) -> tuple[Any, Any]:
        """Return the packed probe table of the distinct keys (row g holds key id g) and their Bloom filter."""
        xp = self.device.xp
        capacity = 1 << max(2 * self.num_keys - 1, 1).bit_length()
        packed = self._filled((capacity, distinct_keys.shape[1] + 1), xp.int64, -1)
        bloom = self._new_bloom()
        # Only the CUDA path packs distinct keys afterwards; the CPU build inserts rows straight in (_insert_packed).
        launch_cuda(self.device, _pack_keys_cuda, self.num_keys, distinct_keys, packed, bloom)
        return packed, bloom

    def _filled(self, shape: tuple[int, ...], dtype: Any, value: int) -> Any:
        """Return an array of ``shape`` holding ``value``, in memory a released table left when there is some.

        A table of 32 MiB or more is advised huge pages before the fill touches it
        (:func:`~gpu_engine.host_allocator.advise_huge_pages`): probes read it at random, and on 4 KiB pages nearly
        every one also missed the TLB (3M build keys, 6M probes: 0.93 -> 0.63 s CPU with the advice;
        bench/results/2026-11-28-dbbench3-huge-page-tables.md).
        """
        array = take_array(self.device.xp, shape, dtype)
        advise_huge_pages(array)
        array.fill(value)
        return array

    def release(self) -> None:
        """Hand the key table's large arrays to the buffer recycler; the table answers no lookup afterwards.

        Why: the packed table or direct slots of a large build side (TPC-H Q9's 320K keys: 24 MB;
        Q21's direct table: 23 MB) are allocated by the one build driver that finishes last, while the
        other drivers wait. Fresh, they page-fault: on this project's VM 50-70 ms of kernel time in
        some runs, against 6-10 ms for the whole build when the memory was touched before. The last
        probe driver to close calls this (:meth:`~gpu_engine.exec.join_bridge.HashJoinBridge.prober_closed`),
        so the next query's build reuses the memory.
        """
        xp = self.device.xp
        for name in ("_packed", "_slots", "_bits"):
            array = getattr(self, name)
            if array is not None:
                give_array(xp, array)
            setattr(self, name, None)
        self.num_keys = 0  # lookups see an empty table instead of reading memory now reused elsewhere

    @property
    def nbytes(self) -> int:
        """Return the bytes the table's arrays hold (what the join reserves in its memory pool), a CPU table's Bloom
        filter counted before a probe makes it (:meth:`_make_bloom`): the join reserves once, when it publishes."""
        arrays = (self._offsets, self._rows, self._packed, self._bloom, self._slots, self._bits)
        unmade = self._bloom is None and self._bloom_lock is not None
        return sum(int(array.nbytes) for array in arrays if array is not None) + (self._bloom_words() * 8 if unmade
                                                                                   else 0)

    def _row_lists(self, group_ids: Any, row_numbers: Any) -> tuple[Any, Any]:
        """Return CSR ``offsets`` (``int64``, one more than keys) and build ``rows`` (``int32``) by key id."""
        xp = self.device.xp
        n = int(group_ids.shape[0])
        if self.device.kernel_flavor == "cpu" and self.num_keys == n:
            # Every key distinct: the CPU builds number keys in row order, so key g's one row is row g's.
            # Counting and scattering 10M rows cost 0.2-0.35 s of a 2.2 s build (radixjoin-s51 results).
            self._rows_are_ids = not self.has_null_key  # the row numbers are 0..n-1 when no NULL key was dropped
            return xp.arange(n + 1, dtype=xp.int64), xp.ascontiguousarray(row_numbers, dtype=xp.int32)
        rows = xp.empty(n, dtype=xp.int32)
        if self.device.kernel_flavor == "cpu":
            offsets = xp.zeros(self.num_keys + 1, dtype=xp.int64)
            if n:
                count_kernel_launch()  # the CPU twin runs in place of the CUDA launches below
                _row_lists_cpu(group_ids, row_numbers, offsets, rows)
            return offsets, rows
        counts = xp.zeros(self.num_keys, dtype=xp.int32)
        launch_cuda(self.device, _count_rows_cuda, n, group_ids, counts)
        offsets = xp.zeros(self.num_keys + 1, dtype=xp.int64)
        offsets[1:] = xp.cumsum(counts)
        cursor = offsets[:-1].astype(xp.int32)
        launch_cuda(self.device, _scatter_rows_cuda, n, group_ids, row_numbers, cursor, rows)
        return offsets, rows

    def _bloom_to_ask(self) -> tuple[Any, bool]:
        """Return the Bloom filter a hashed lookup passes its kernel and whether to ask it (not while it is unmade)."""
        bloom = self._bloom  # read once: another probe driver may publish the filter meanwhile, made in full
        if bloom is None:
            return _NO_BLOOM, False
        return bloom, self.use_bloom

    def _make_bloom(self) -> None:
        """Make a CPU table's Bloom filter now that a probe batch showed it pays, unless another driver is making it.

        Why: the filter cost every hashed CPU build a pass writing it at random (10M keys: 0.36 s of one core),
        and a probe that mostly matches turns it off after its first batch (:meth:`_note_match_rate`): a join
        on a foreign key, the common case, never read it. So the build leaves it out and the first probe batch
        of which fewer than half the rows match makes it; until then, and on the other drivers while it is made,
        lookups go to the packed table (a miss costs one more read there, for a batch or two).
        """
        if not self._bloom_lock.acquire(blocking=False):
            return  # another probe driver is making it; this one goes on without
        try:
            if self._bloom is None and self._packed is not None:
                bloom = self._new_bloom()
                count_kernel_launch()
                _bloom_of_packed_cpu(self._packed, bloom)
                self._bloom = bloom
        finally:
            self._bloom_lock.release()

    def _note_lookups(self, key_ids: Any) -> None:
        """Note the match rate of a lookup that forms no pairs while the table's Bloom filter is not made yet."""
        if self._bloom is None and self._bloom_lock is not None and int(key_ids.shape[0]):
            self._note_match_rate(int(key_ids.shape[0]), int(self.device.xp.count_nonzero(key_ids >= 0)))

    def lookup(self, keys: Any, widths: Sequence[int]) -> Any:
        """Return each probe row's key id (``int32``), or -1 where no build row has its key."""
        key_ids = self._find(keys, widths)
        self._note_lookups(key_ids)
        return key_ids

    def _find(self, keys: Any, widths: Sequence[int]) -> Any:
        """:meth:`lookup` without noting the match rate (:meth:`_pairs` notes it)."""
        xp = self.device.xp
        words = xp.ascontiguousarray(align_key_words(self.device, keys, widths, self.widths))
        if self.is_direct or self.has_range_bitmap:
            # one fixed-width block: (flag, value) words, the flag 1 where the key is not NULL
            return self._lookup_values(xp.ascontiguousarray(words[:, 1]), words[:, 0] == 1,
                                       xp.zeros(0, dtype=xp.int32), int(words.shape[0]))
        key_ids = xp.empty(words.shape[0], dtype=xp.int32)
        bloom, use_bloom = self._bloom_to_ask()
        launch_twin(self.device, words.shape[0], _find_keys_cpu, _find_keys_cuda,
                    words, self._packed, bloom, use_bloom, key_ids)
        return key_ids

    def _note_match_rate(self, probes: int, matches: int) -> None:
        """Ask the Bloom filter first while fewer than half the probes match (a benign race between drivers); make
        a CPU table's filter the first time that happens (:meth:`_make_bloom`)."""
        self.use_bloom = 2 * matches < probes
        if self.use_bloom and self._bloom is None and self._bloom_lock is not None:
            self._make_bloom()

    def match(self, keys: Any, widths: Sequence[int]) -> tuple[Any, Any]:
        """Return every matching pair as ``(probe_rows, build_rows)``, two ``int32`` arrays of equal length.

        Parameters
        ----------
        keys, widths
            The probe batch's normalized keys (:func:`~gpu_engine.kernels.group_by.normalize_keys`).
        """
        xp = self.device.xp
        n = int(keys.shape[0])
        if n == 0 or self.num_keys == 0:
            return xp.empty(0, dtype=xp.int32), xp.empty(0, dtype=xp.int32)
        return self._pairs(self._find(keys, widths))

    def lookup_fixed_width(self, column: Any, gather_map: Any | None) -> Any:
        """Return :meth:`lookup` of one fixed-width key column read through ``gather_map``, without normalizing it
        (see :meth:`_find_fixed_width`)."""
        key_ids = self._find_fixed_width(column, gather_map)
        self._note_lookups(key_ids)
        return key_ids

    def _find_fixed_width(self, column: Any, gather_map: Any | None) -> Any:
        """:meth:`lookup_fixed_width` without noting the match rate (:meth:`_pairs` notes it).

        Why the column is not normalized: a probe on one integer (or date, decimal, float) key is most joins (every TPC-H one), and
        normalizing it wrote a 16-byte-a-row word matrix (three passes) after gathering the column;
        here the kernel hashes the values as the normalized words would hash. Only for tables whose
        key is one fixed-width block (``widths == (FIXED_WIDTH_BLOCK,)``).
        """
        xp = self.device.xp
        values = xp.ascontiguousarray(fixed_width_key_words(self.device, column).view(xp.int64))
        n = int(values.shape[0]) if gather_map is None else int(gather_map.shape[0])
        valid = column.validity if column.validity is not None else xp.zeros(0, dtype=xp.bool_)
        rows = gather_map if gather_map is not None else xp.zeros(0, dtype=xp.int32)
        return self._lookup_values(values, valid, rows, n)

    def match_fixed_width(self, column: Any, gather_map: Any | None) -> tuple[Any, Any]:
        """Return :meth:`match` of one fixed-width key column read through ``gather_map`` (see :meth:`lookup_fixed_width`)."""
        xp = self.device.xp
        n = int(column.data.shape[0]) if gather_map is None else int(gather_map.shape[0])
        if n == 0 or self.num_keys == 0:
            return xp.empty(0, dtype=xp.int32), xp.empty(0, dtype=xp.int32)
        return self._pairs(self._find_fixed_width(column, gather_map))

    def rows_of_keys(self, key_flags: Any) -> Any:
        """Return a ``bool`` flag per build row: True where its key id is flagged in ``key_flags`` (one per key id).

        Why: a join that only asks which build rows matched (``right_semi`` / ``right_anti``) marks key ids
        per probe row instead of emitting every pair; with duplicate build keys the pairs were the probe rows
        times the rows per key (TPC-DS q95: 6.6M probe rows x 12 build rows a key, 5 s to mark 80M pairs).
        """
        xp = self.device.xp
        flags = xp.zeros(self.num_rows, dtype=xp.bool_)
        if self.num_keys and int(self._rows.shape[0]):
            # the key id of each CSR position: positions offsets[g] .. offsets[g+1]-1 hold key g's rows
            positions = xp.arange(int(self._rows.shape[0]), dtype=xp.int64)
            key_of_position = xp.searchsorted(self._offsets[1:], positions, side="right")
            flags[self._rows[key_flags[key_of_position]]] = True
        return flags

    def value_bounds(self, values: Any, valid: Any | None) -> tuple[Any, Any]:
        """Return the lowest and highest non-NULL ``values`` (``int64``, one per build row) of each key id's rows,
        as two ``int64`` arrays of ``num_keys + 1``; a key without such a value, and the last entry (where a
        miss's key id -1 reads), hold an empty range (low > high).

        Why: a semi or anti join whose extra condition is ``probe.c <> build.c`` matches a probe row iff its
        key's build rows hold a non-NULL ``c`` other than the probe's, i.e. iff its non-NULL ``c`` differs from
        the key's low or high; with these bounds it needs no pairs (TPC-DS q16, q94, q95 formed every
        (order line, line of the same order) pair to find one in another warehouse).
        """
        xp = self.device.xp
        lows = xp.full(self.num_keys + 1, np.iinfo(np.int64).max, dtype=xp.int64)
        highs = xp.full(self.num_keys + 1, np.iinfo(np.int64).min, dtype=xp.int64)
        valid = valid if valid is not None else xp.zeros(0, dtype=xp.bool_)
        launch_twin(self.device, self.num_keys, _value_bounds_cpu, _value_bounds_cuda,
                    self._offsets, self._rows, read_only(xp, values), valid, lows, highs)
        return lows, highs

    def empty_bounds(self) -> Any:
        """Return ``(2, num_keys + 1)`` ``int64`` bounds, lows over highs, every range empty (:meth:`value_bounds`)."""
        xp = self.device.xp
        bounds = xp.empty((2, self.num_keys + 1), dtype=xp.int64)
        bounds[0] = np.iinfo(np.int64).max
        bounds[1] = np.iinfo(np.int64).min
        return bounds

    def add_value_bounds(self, bounds: Any, key_ids: Any, values: Any, valid: Any | None) -> None:
        """Widen ``bounds`` (:meth:`empty_bounds`) by each probe row's non-NULL value at its key id (a miss: none).

        Why: a right_semi / right_anti join on ``build.c <> probe.c`` matches a build row iff the probe rows of
        its key hold a non-NULL ``c`` other than its own: the probe side's bounds per key tell, no pairs formed.
        """
        xp = self.device.xp
        valid = valid if valid is not None else xp.zeros(0, dtype=xp.bool_)
        launch_twin(self.device, int(key_ids.shape[0]), _add_value_bounds_cpu, _add_value_bounds_cuda,
                    key_ids, read_only(xp, values), valid, bounds[0], bounds[1])

    def rows_differing(self, bounds: Any, values: Any, valid: Any | None) -> Any:
        """Return a ``bool`` per build row: True where its non-NULL value differs from its key's low or high in
        ``bounds`` (a build row with a NULL key or value: False)."""
        xp = self.device.xp
        flags = xp.zeros(self.num_rows, dtype=xp.bool_)
        if self.num_keys and int(self._rows.shape[0]):
            positions = xp.arange(int(self._rows.shape[0]), dtype=xp.int64)
            key_of_position = xp.searchsorted(self._offsets[1:], positions, side="right")
            rows = self._rows
            low, high, value = bounds[0][key_of_position], bounds[1][key_of_position], values[rows]
            differs = (low <= high) & ((low != value) | (high != value))
            flags[rows] = differs if valid is None else differs & valid[rows]
        return flags

    def _pairs(self, group_ids: Any) -> tuple[Any, Any]:
        """Return the matching ``(probe_rows, build_rows)`` of probe rows whose key ids are ``group_ids``."""
        xp = self.device.xp
        n = int(group_ids.shape[0])
        if self.unique_keys:  # at most one match per probe row: the rows found, and their key's build row
            probe_rows = selection_from_mask(self.device, group_ids >= 0)
            self._note_match_rate(n, int(probe_rows.shape[0]))
            found = gather(self.device, group_ids, probe_rows)
            # A key id that is its build row (:attr:`_rows_are_ids`) is not looked up in ``_rows``: that read is at
            # random, a cache miss a probe row once ``_rows`` outgrows the caches (10M build rows: 40 MB).
            return probe_rows, found if self._rows_are_ids else gather(self.device, self._rows, found)
        counts = xp.empty(n, dtype=xp.int64)
        launch_twin(self.device, n, _count_matches_cpu, _count_matches_cuda, group_ids, self._offsets, counts)
        ends = xp.cumsum(counts)
        positions = ends - counts
        total = int(self.device.read_scalar(ends, -1))
        self._note_match_rate(n, total)
        probe_rows = xp.empty(total, dtype=xp.int32)
        build_rows = xp.empty(total, dtype=xp.int32)
        if total:
            launch_twin(self.device, n, _emit_pairs_cpu, _emit_pairs_cuda,
                        group_ids, self._offsets, self._rows, positions, probe_rows, build_rows)
        return probe_rows, build_rows
