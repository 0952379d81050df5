"""Radix-partition rows by the high bits of their key hashes: each row's destination, and the partitions' offsets.

Why: an aggregation of millions of groups probes a slot table of hundreds of megabytes at random, a cache (and
TLB) miss for nearly every row. Partitioning the rows first by the top ``bits`` bits of their key hash (as
DuckDB's radix-partitioned aggregate hash table and Velox's spill partitions do) lets each partition be
aggregated in turn into a table that stays in cache: the random accesses become two sequential passes (count,
then scatter into one write stream a partition). The high bits are used because a LocalPartition repartition
routes by ``hash % drivers`` (the low bits): a driver's rows share those, not the high ones.

The destinations form a scatter map (``out[dest[i]] = value[i]``), not a gather map: a gather of partitioned
rows reads its source at stride ``2**bits`` rows, a pass over the whole column for every partition, while a
scatter reads each column once in order (see ``bench/radix_tables_ab.py``).

CPU twin: a stable counting sort (rows keep their order within a partition). CUDA twin: a histogram with
atomic counters, then each row takes its position from its partition's atomic cursor (the order within a
partition is arbitrary there; the rows of each partition are the same).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.kernels.launch import launch_twin

__all__ = ["radix_destinations", "radix_bits_for"]


@njit(nogil=True, cache=True)
def _radix_counts_cpu(hashes, shift, counts):
    for i in range(hashes.shape[0]):
        counts[np.int64(hashes[i] >> shift) + 1] += 1


@njit(nogil=True, cache=True)
def _radix_destinations_cpu(hashes, shift, cursors, destinations):
    for i in range(hashes.shape[0]):
        p = np.int64(hashes[i] >> shift)
        destinations[i] = cursors[p]
        cursors[p] += 1


@cuda.jit
def _radix_counts_cuda(hashes, shift, counts):
    for i in range(cuda.grid(1), hashes.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(counts, np.int64(hashes[i] >> shift) + 1, 1)


@cuda.jit
def _radix_destinations_cuda(hashes, shift, cursors, destinations):
    for i in range(cuda.grid(1), hashes.shape[0], cuda.gridsize(1)):
        destinations[i] = cuda.atomic.add(cursors, np.int64(hashes[i] >> shift), 1)


def radix_destinations(device: Device, hashes: Any, bits: int) -> tuple[Any, Any]:
    """Return each row's position in the rows ordered by partition (``hashes``' top ``bits`` bits), and offsets.

    Parameters
    ----------
    device
        Where ``hashes`` lives; selects the twin.
    hashes
        ``uint64`` row hashes (:func:`gpu_engine.kernels.hash.hash_columns`).
    bits
        Partition bits, 0 to 16: ``2**bits`` partitions.

    Returns
    -------
    destinations, offsets
        ``int64`` of ``len(hashes)`` (a permutation of the rows' positions) and ``int64`` of ``2**bits + 1``, on
        ``device``: partition ``p``'s rows land at ``offsets[p]:offsets[p + 1]``. Two launches, no host read.
    """
    if not 0 <= bits <= 16:
        raise ValueError(f"radix partition bits must be 0 to 16, got {bits}")
    xp = device.xp
    n = int(hashes.shape[0])
    parts = 1 << bits
    counts = xp.zeros(parts + 1, dtype=xp.int64)
    destinations = xp.empty(n, dtype=xp.int64)
    if n == 0:
        return destinations, counts
    hashes = xp.ascontiguousarray(hashes).view(xp.uint64)
    # 64 - 0 would shift by the word's width (undefined): zero bits shift by 63 of a cleared top bit instead.
    shift = np.uint64(64 - bits) if bits else np.uint64(63)
    source = hashes if bits else xp.zeros(n, dtype=xp.uint64)
    launch_twin(device, n, _radix_counts_cpu, _radix_counts_cuda, source, shift, counts)
    offsets = xp.cumsum(counts)
    cursors = offsets[:-1].copy()
    launch_twin(device, n, _radix_destinations_cpu, _radix_destinations_cuda, source, shift, cursors, destinations)
    return destinations, offsets


def radix_bits_for(groups: int, row_bytes: int, table_bytes: int) -> int:
    """Return the partition bits that leave each partition's slot table at most ``table_bytes`` (0 to 12).

    ``groups`` is the expected number of groups; a partition's table holds ``groups / 2**bits`` of them at most
    half full (the fused kernel's load), ``row_bytes`` each. At most 4096 partitions: more write streams than
    that thrash the scatter's TLB and write-combining buffers (DuckDB caps its radix fan-out alike).
    """
    bits = 0
    while bits < 12 and 2 * groups * row_bytes / (1 << bits) > table_bytes:
        bits += 1
    return bits
