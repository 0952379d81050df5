"""One slot table (huge pages) against radix-partitioned small tables for a FINAL aggregation of many groups.

Why (issue 31 item 3): DuckDB's and Velox's aggregations of millions of groups first partition their rows by
high hash bits so each partition's table stays in cache. Here both strategies run the same work as numba loops
of the shape the fused FINAL kernel has (db-benchmark q10: ``keys`` int64 key words a row, two aggregate inputs,
a ``width``-word slot row: occupancy, keys, states; linear probing at most half full), one thread (a driver):

- ``table``: every row probes one table of ``slots_for_groups(groups)`` rows, advised huge pages
  (:func:`gpu_engine.host_allocator.advise_huge_pages`, as ``FusedAggregation._new_table`` does), then the
  occupied slots are compacted (the emit's scan).
- ``radix``: one pass hashes each row and counts its partition (the hash's top ``bits`` bits), a scan gives each
  partition its range, a second pass scatters every key word, aggregate input and hash into that range
  (sequential reads, one write stream a partition); then each partition in turn runs the same probe loop into a
  table sized for its rows (reused, zeroed per partition: it stays in L2/L3) and is compacted.

Both sides' answers are checked equal (groups, sums, counts). Sides alternate; CPU time (thread) per side,
medians reported with the load. Usage::

    python -m bench.radix_tables_ab --groups 5e5 1.5e6 5e6 --rows-per-group 1 --rounds 5 --bits 0 6 8 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from numba import njit

from gpu_engine.host_allocator import advise_huge_pages

WIDTH = 12
KEYS = 6


@njit(inline="always")
def _fmix(h):
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@njit(inline="always")
def _hash_row(keys, i):
    h = np.uint64(0x9E3779B97F4A7C15)
    for k in range(keys.shape[0]):
        h = _fmix(h ^ np.uint64(keys[k, i]))
    return h


@njit(inline="always")
def _insert(table, mask, h, keys, i, value, groups):
    """Probe from h's slot; add value and 1 into the row's group; return the new group count."""
    slot = np.int64(h & np.uint64(mask))
    nkeys = keys.shape[0]
    while True:
        if table[slot, 0] == 0:
            table[slot, 0] = 1
            for k in range(nkeys):
                table[slot, 1 + k] = keys[k, i]
            table[slot, 1 + nkeys] = value
            table[slot, 2 + nkeys] = 1
            return groups + 1
        same = True
        for k in range(nkeys):
            if table[slot, 1 + k] != keys[k, i]:
                same = False
                break
        if same:
            table[slot, 1 + nkeys] += value
            table[slot, 2 + nkeys] += 1
            return groups
        slot = (slot + 1) & mask


@njit(nogil=True, cache=True)
def _one_table(keys, values, table):
    mask = table.shape[0] - 1
    groups = 0
    for i in range(values.shape[0]):
        groups = _insert(table, mask, _hash_row(keys, i), keys, i, values[i], groups)
    return groups


@njit(nogil=True, cache=True)
def _compact(table, out, start):
    """Copy the occupied rows' key 0, sum and count to out[start:]; return the next free position."""
    nkeys = KEYS
    j = start
    for s in range(table.shape[0]):
        if table[s, 0] != 0:
            out[0, j] = table[s, 1]
            out[1, j] = table[s, 1 + nkeys]
            out[2, j] = table[s, 2 + nkeys]
            j += 1
    return j


@njit(nogil=True, cache=True)
def _radix_scatter(keys, values, bits, hashes, counts, out_keys, out_values, out_hashes):
    n = values.shape[0]
    shift = np.uint64(64 - bits)
    parts = counts.shape[0] - 1
    for i in range(n):
        h = _hash_row(keys, i)
        hashes[i] = h
        p = np.int64(h >> shift) if bits > 0 else 0
        counts[p + 1] += 1
    for p in range(parts):
        counts[p + 1] += counts[p]
    cursors = counts[:-1].copy()
    nkeys = keys.shape[0]
    for i in range(n):
        h = hashes[i]
        p = np.int64(h >> shift) if bits > 0 else 0
        d = cursors[p]
        cursors[p] = d + 1
        for k in range(nkeys):
            out_keys[k, d] = keys[k, i]
        out_values[d] = values[i]
        out_hashes[d] = h


@njit(nogil=True, cache=True)
def _partition_tables(out_keys, out_values, out_hashes, counts, table, out):
    parts = counts.shape[0] - 1
    j = 0
    total = 0
    for p in range(parts):
        lo, hi = counts[p], counts[p + 1]
        slots = 1024
        while slots < 2 * (hi - lo):
            slots *= 2
        part = table[:slots]
        part[:, :] = 0
        mask = slots - 1
        groups = 0
        for i in range(lo, hi):
            groups = _insert(part, mask, out_hashes[i], out_keys, i, out_values[i], groups)
        total += groups
        j = _compact(part, out, j)
    return total


def _slots(groups: int) -> int:
    slots = 1024
    while slots < 2 * groups:
        slots *= 2
    return slots


def _data(groups: int, rows: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2 ** 62, size=(KEYS, groups), dtype=np.int64)
    base[3:] %= 100_000  # small integer keys beside wide ones, as q10's id4..id6
    pick = np.concatenate((np.arange(groups), rng.integers(0, groups, rows - groups))) if rows > groups else np.arange(rows)
    rng.shuffle(pick)
    keys = np.ascontiguousarray(base[:, pick])
    values = rng.integers(0, 100, size=rows, dtype=np.int64)
    return keys, values


def run_table(keys, values, groups):
    table = np.empty((_slots(groups), WIDTH), dtype=np.int64)
    advise_huge_pages(table)
    table.fill(0)
    out = np.empty((3, groups), dtype=np.int64)
    t = time.thread_time()
    found = _one_table(keys, values, table)
    n = _compact(table, out, 0)
    return time.thread_time() - t, found, out[:, :n]


def run_radix(keys, values, groups, bits, buffers):
    n = values.shape[0]
    parts = 1 << bits
    hashes, out_keys, out_values, out_hashes, table, out = buffers
    t = time.thread_time()
    counts = np.zeros(parts + 1, dtype=np.int64)
    _radix_scatter(keys, values, bits, hashes, counts, out_keys, out_values, out_hashes)
    found = _partition_tables(out_keys, out_values, out_hashes, counts, table, out)
    return time.thread_time() - t, found, out[:, :found]


def _radix_buffers(n: int, groups: int, bits: int):
    largest = _slots(int(2 * n / (1 << bits)) + 1024)  # a partition's rows, with room for skew
    table = np.empty((max(largest, _slots(n) if bits == 0 else 0), WIDTH), dtype=np.int64)
    advise_huge_pages(table)
    return (np.empty(n, np.uint64), np.empty((KEYS, n), np.int64), np.empty(n, np.int64), np.empty(n, np.uint64),
            table, np.empty((3, groups), np.int64))


def _canon(out):
    order = np.lexsort(out[::-1])
    return out[:, order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=float, nargs="+", default=[5e5, 1.5e6, 5e6])
    parser.add_argument("--rows-per-group", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bits", type=int, nargs="+", default=[6, 8, 10])
    args = parser.parse_args()
    print(f"load {os.getloadavg()}")
    for g in args.groups:
        groups = int(g)
        rows = int(groups * args.rows_per_group)
        keys, values = _data(groups, rows)
        # warm (compile) and check
        _, found, reference = run_table(keys, values, groups)
        reference = _canon(reference)
        buffers = {b: _radix_buffers(rows, groups, b) for b in args.bits}
        for b in args.bits:
            _, f2, other = run_radix(keys, values, groups, b, buffers[b])
            assert f2 == found and np.array_equal(_canon(other), reference), (b, f2, found)
        times = {"table": []} | {f"radix{b}": [] for b in args.bits}
        for _ in range(args.rounds):
            times["table"].append(run_table(keys, values, groups)[0])
            for b in args.bits:
                times[f"radix{b}"].append(run_radix(keys, values, groups, b, buffers[b])[0])
        base = statistics.median(times["table"])
        print(f"groups {groups:,} rows {rows:,} (table {_slots(groups) * WIDTH * 8 / 2**20:.0f} MiB) load {os.getloadavg()[0]:.1f}")
        for side, ts in times.items():
            m = statistics.median(ts)
            print(f"  {side:8s} median {m * 1e3:8.1f} ms  {m / rows * 1e9:6.1f} ns/row  x{m / base:.2f}  "
                  f"runs {' '.join(f'{t * 1e3:.0f}' for t in ts)}")


if __name__ == "__main__":
    main()
