"""Is a join probe into a large build side faster radix-partitioned than through the one prefetched table? (issue 31 item 3)

``python -m bench.radix_join_micro --build 1e6 3e6 1e7 --probe 1e7 --rounds 5``: per build size N (N distinct
random int64 keys: hashed, no range bitmap), the probe side M rows drawn from the build keys in random order
(every probe matches: a foreign key in random order, the worst case for the one table). Sides, each the CPU
time of one thread (``time.thread_time``: the machine is shared), alternating per round, medians:

* ``table build`` / ``table probe``: the engine's :class:`~gpu_engine.kernels.hash_join.JoinHashTable` (the
  packed table with its software prefetch, huge pages), probed through ``match_fixed_width`` (HashProbe's call)
  a batch of ``--batch`` rows at a time (the scan's 262,144 on cpu): the (probe row, build row) pairs.
* ``radix build`` / ``radix probe (held)``: a prototype of the textbook radix join, written here in numba (no
  engine code): the build keys scattered into 2^b partitions by the hash's high bits, one open-addressing
  table per partition sized to stay in L2 (<= ``--partition-kib``); the *whole* probe side held, scattered by
  partition (keys and row numbers), then each partition probed against its table in cache, the build row
  written back per probe row, then the pairs taken as the table's are (rows found, their build rows). Its probe is the best case of a Grace-style join (no spill, no payload moved).
* ``radix probe (streamed)``: the same per batch, without holding the probe side (what a streamed HashProbe
  could do): each batch is scattered by partition and each partition's table touched by batch/P rows.

The answer per probe row is checked equal between the sides. ns per probe row = CPU / M.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from numba import njit

from gpu_engine.columnar.column import Column
from gpu_engine.device import get_device
from gpu_engine.kernels.group_by import normalize_keys
from gpu_engine.kernels.hash_join import JoinHashTable, _fixed_width_key_hash
from gpu_engine.kernels.prefetch import PREFETCH_DISTANCE, prefetch_row

import pyarrow as pa


@njit(nogil=True, cache=True)
def _partition_of(values, shift, parts, counts):
    for i in range(values.shape[0]):
        p = np.int64(_fixed_width_key_hash(values[i]) >> np.uint64(shift))
        parts[i] = p
        counts[p + 1] += 1
    for p in range(counts.shape[0] - 1):
        counts[p + 1] += counts[p]


@njit(nogil=True, cache=True)
def _scatter(values, parts, offsets, out_values, out_rows, base):
    cursor = offsets[:-1].copy()
    for i in range(values.shape[0]):
        p = parts[i]
        out_values[cursor[p]] = values[i]
        out_rows[cursor[p]] = base + i
        cursor[p] += 1


@njit(nogil=True, cache=True)
def _build_partitions(values, rows, offsets, slot_bits, table_keys, table_ids):
    """Per partition p (its keys values[offsets[p]:offsets[p+1]]), an open-addressing table of 2^slot_bits slots
    at table_keys/ids[p << slot_bits ...]; the id stored is the build row."""
    size = np.int64(1) << slot_bits
    mask = size - 1
    for p in range(offsets.shape[0] - 1):
        base = np.int64(p) << slot_bits
        for j in range(offsets[p], offsets[p + 1]):
            v = values[j]
            s = np.int64(_fixed_width_key_hash(v)) & mask
            while table_ids[base + s] >= 0:
                s = (s + 1) & mask
            table_keys[base + s] = v
            table_ids[base + s] = rows[j]


@njit(nogil=True, cache=True)
def _probe_partitions(values, rows, offsets, slot_bits, table_keys, table_ids, key_ids):
    size = np.int64(1) << slot_bits
    mask = size - 1
    for p in range(offsets.shape[0] - 1):
        base = np.int64(p) << slot_bits
        for j in range(offsets[p], offsets[p + 1]):
            v = values[j]
            s = np.int64(_fixed_width_key_hash(v)) & mask
            found = -1
            while True:
                i = table_ids[base + s]
                if i < 0:
                    break
                if table_keys[base + s] == v:
                    found = i
                    break
                s = (s + 1) & mask
            key_ids[rows[j]] = found


def radix_build(values, shift, partitions, slot_bits):
    n = values.shape[0]
    parts = np.empty(n, np.int64)
    offsets = np.zeros(partitions + 1, np.int64)
    _partition_of(values, shift, parts, offsets)
    pv, pr = np.empty(n, np.int64), np.empty(n, np.int32)
    _scatter(values, parts, offsets, pv, pr, 0)
    keys = np.empty(partitions << slot_bits, np.int64)
    ids = np.full(partitions << slot_bits, -1, np.int32)
    _build_partitions(pv, pr, offsets, slot_bits, keys, ids)
    return keys, ids


def radix_probe(values, shift, partitions, slot_bits, keys, ids, batch):
    n = values.shape[0]
    key_ids = np.empty(n, np.int32)
    for start in range(0, n, batch):
        part = values[start:start + batch]
        m = part.shape[0]
        parts = np.empty(m, np.int64)
        offsets = np.zeros(partitions + 1, np.int64)
        _partition_of(part, shift, parts, offsets)
        pv, pr = np.empty(m, np.int64), np.empty(m, np.int32)
        _scatter(part, parts, offsets, pv, pr, start)
        _probe_partitions(pv, pr, offsets, slot_bits, keys, ids, key_ids)
        matched = np.flatnonzero(key_ids[start:start + m] >= 0).astype(np.int32)  # the pairs, as the table's
        key_ids[start:start + m][matched].copy()
    return key_ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=float, nargs="+", default=[1e6, 3e6, 1e7])
    parser.add_argument("--probe", type=float, default=1e7)
    parser.add_argument("--batch", type=int, default=1 << 18)
    parser.add_argument("--partition-kib", type=int, default=512, help="a partition's table at most this (L2: 1 MiB)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    device = get_device("cpu")
    rng = np.random.default_rng(7)
    m = int(args.probe)
    print(f"load before {os.getloadavg()}", flush=True)
    for n in (int(b) for b in args.build):
        build = np.unique(rng.integers(0, 1 << 62, int(n * 1.01)))[:n]
        build = rng.permutation(build)
        probe = build[rng.integers(0, n, m)]
        words, widths = normalize_keys(device, [Column.from_arrow(pa.array(build), device)])
        probe_batches = [Column.from_arrow(pa.array(probe[s:s + args.batch]), device) for s in range(0, m, args.batch)]
        # a partition table of 2^slot_bits slots (12 bytes a slot) at <= 50% load, within --partition-kib
        slot_bits = int(np.log2(args.partition_kib * 1024 // 12))
        partitions = 1 << max(0, int(np.ceil(np.log2(2 * n / (1 << slot_bits)))))
        shift = 64 - int(np.log2(partitions))

        def table_side():
            t0 = time.thread_time()
            table = JoinHashTable(device, words, widths)
            t1 = time.thread_time()
            pairs = [table.match_fixed_width(column, None) for column in probe_batches]  # the HashProbe's call
            t2 = time.thread_time()
            rows = np.full(m, -1, np.int32)  # the build row of each probe row, to compare with the radix side
            for start, (probe_rows, build_rows) in zip(range(0, m, args.batch), pairs):
                rows[start + probe_rows] = build_rows
            table.release()
            return t1 - t0, t2 - t1, rows

        def radix_side():
            t0 = time.thread_time()
            keys, ids = radix_build(build, shift, partitions, slot_bits)
            t1 = time.thread_time()
            streamed = radix_probe(probe, shift, partitions, slot_bits, keys, ids, args.batch)
            t2 = time.thread_time()
            held = radix_probe(probe, shift, partitions, slot_bits, keys, ids, m)
            t3 = time.thread_time()
            assert np.array_equal(streamed, held)
            return t1 - t0, t3 - t2, t2 - t1, held

        _, _, expected = table_side()
        _, _, _, got = radix_side()
        assert np.array_equal(expected, got), "radix prototype disagrees with the table"
        samples: dict[str, list[float]] = {}
        for r in range(args.rounds):
            for side in (("table", "radix") if r % 2 == 0 else ("radix", "table")):
                if side == "table":
                    b, p, _ = table_side()
                    samples.setdefault("table build", []).append(b)
                    samples.setdefault("table probe", []).append(p)
                else:
                    b, held, streamed, _ = radix_side()
                    samples.setdefault("radix build", []).append(b)
                    samples.setdefault("radix probe (held)", []).append(held)
                    samples.setdefault("radix probe (streamed)", []).append(streamed)
        print(f"\nbuild {n:,} keys, probe {m:,} rows, {partitions} partitions of 2^{slot_bits} slots, "
              f"load {os.getloadavg()[0]:.1f}")
        for name, values in samples.items():
            med = statistics.median(values)
            per = f"{med / m * 1e9:.1f} ns a probe row" if "probe" in name else f"{med / n * 1e9:.1f} ns a build row"
            print(f"| {name} | {' '.join(f'{v:.3f}' for v in values)} | {med:.3f} s | {per} |", flush=True)


if __name__ == "__main__":
    main()
