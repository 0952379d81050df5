"""Split rows into hash partitions as gather maps (a counting sort by ``hash % n``).

Why: LocalPartition and PartitionedOutput hand each destination the same base
columns plus its own slice of one index array, instead of copying columns per
destination. A counting sort builds all those slices in two passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.kernels.launch import launch_cuda

__all__ = ["partition_gather_maps"]


@njit(nogil=True, cache=False)
def _partition_of(h, num_partitions):
    return np.int64(h % np.uint64(num_partitions))


# ------------------------------------------------------------------- CPU twin
@njit(nogil=True, cache=False)
def _partition_cpu(hashes, num_partitions, indices, offsets):
    n = hashes.shape[0]
    partitions = np.empty(n, dtype=np.int32)
    for i in range(n):
        p = _partition_of(hashes[i], num_partitions)
        partitions[i] = p
        offsets[p + 1] += 1
    for p in range(num_partitions):
        offsets[p + 1] += offsets[p]
    cursors = offsets[:-1].copy()
    for i in range(n):
        p = partitions[i]
        indices[cursors[p]] = i
        cursors[p] += 1


# ------------------------------------------------------------------ CUDA twin
@cuda.jit
def _histogram_cuda(hashes, num_partitions, partitions, counts):
    for i in range(cuda.grid(1), hashes.shape[0], cuda.gridsize(1)):
        p = _partition_of(hashes[i], num_partitions)
        partitions[i] = p
        cuda.atomic.add(counts, p, 1)


@cuda.jit
def _scatter_cuda(partitions, cursors, indices):
    for i in range(cuda.grid(1), partitions.shape[0], cuda.gridsize(1)):
        position = cuda.atomic.add(cursors, partitions[i], 1)
        indices[position] = i


def partition_gather_maps(device: Device, hashes: Any, num_partitions: int) -> tuple[Any, Any]:
    """Return the rows of each partition ``hash % num_partitions`` as one index array plus offsets.

    Parameters
    ----------
    device
        Where ``hashes`` lives; selects the twin.
    hashes
        ``uint64`` row hashes (see :func:`gpu_engine.kernels.hash.hash_columns`).
    num_partitions
        Number of partitions, at least 1.

    Returns
    -------
    indices, offsets
        ``int32`` indices of ``len(hashes)`` and ``int64`` offsets of
        ``num_partitions + 1``: partition ``p``'s rows are
        ``indices[offsets[p]:offsets[p + 1]]``. The CPU twin keeps rows of a
        partition in increasing order; the CUDA twin scatters with atomic
        cursors, so the order *within* a partition is arbitrary there (the set
        of rows per partition is the same on both).
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    xp = device.xp
    n = hashes.shape[0]
    indices = xp.empty(n, dtype=xp.int32)
    offsets = xp.zeros(num_partitions + 1, dtype=xp.int64)
    if n == 0:
        return indices, offsets
    hashes = xp.ascontiguousarray(hashes)
    if device.kernel_flavor == "cpu":
        _partition_cpu(hashes, num_partitions, indices, offsets)
        return indices, offsets
    partitions = xp.empty(n, dtype=xp.int32)
    counts = xp.zeros(num_partitions, dtype=xp.int32)
    launch_cuda(device, _histogram_cuda, n, hashes, num_partitions, partitions, counts)
    offsets[1:] = xp.cumsum(counts)
    cursors = offsets[:-1].copy()
    launch_cuda(device, _scatter_cuda, n, partitions, cursors, indices)
    return indices, offsets
