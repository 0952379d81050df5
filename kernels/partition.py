"""Split rows into hash partitions as gather maps (a counting sort by ``hash % n``).

Why: LocalPartition and PartitionedOutput hand each destination the same base
columns plus its own slice of one index array, instead of copying columns per
destination. A counting sort builds all those slices in two passes.

On the GPU the two passes avoid global atomics: each block takes one
contiguous chunk of rows and counts its partitions in shared memory
(``block_counts[p, b]``); an exclusive scan of those counts, partition-major,
gives every (partition, block) pair its own range of the output; the second
pass re-reads the hashes and each block writes its rows into its ranges
through shared-memory cursors. So the only traffic is the hashes read twice
and the indices written once (20 bytes a row), and a block's rows of one
partition land next to each other. More partitions than fit in shared memory
(:data:`MAX_SHARED_PARTITIONS`) fall back to global atomic counters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, int32, int64, njit

from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_kernel_launch
from gpu_engine.kernels.launch import launch_cuda

__all__ = ["partition_gather_maps", "MAX_SHARED_PARTITIONS"]

#: Partitions the shared-memory kernels count per block (4 KB of int32 counts, 8 KB of int64 cursors).
MAX_SHARED_PARTITIONS = 1024


@njit(nogil=True, cache=True)
def _partition_of(h, num_partitions):
    return np.int64(h % np.uint64(num_partitions))


# ------------------------------------------------------------------- CPU twin
@njit(nogil=True, cache=True)
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
def _block_histogram_cuda(hashes, num_partitions, chunk, block_counts):
    """Count the partitions of block ``b``'s chunk of rows into ``block_counts[:, b]``."""
    counts = cuda.shared.array(MAX_SHARED_PARTITIONS, dtype=int32)
    thread, block, width = cuda.threadIdx.x, cuda.blockIdx.x, cuda.blockDim.x
    for p in range(thread, num_partitions, width):
        counts[p] = 0
    cuda.syncthreads()
    start = block * chunk
    stop = min(start + chunk, hashes.shape[0])
    for i in range(start + thread, stop, width):
        cuda.atomic.add(counts, _partition_of(hashes[i], num_partitions), 1)
    cuda.syncthreads()
    for p in range(thread, num_partitions, width):
        block_counts[p, block] = counts[p]


@cuda.jit
def _block_scatter_cuda(hashes, num_partitions, chunk, block_starts, indices):
    """Write block ``b``'s rows of partition ``p`` from ``block_starts[p, b]`` on."""
    cursors = cuda.shared.array(MAX_SHARED_PARTITIONS, dtype=int64)
    thread, block, width = cuda.threadIdx.x, cuda.blockIdx.x, cuda.blockDim.x
    for p in range(thread, num_partitions, width):
        cursors[p] = block_starts[p, block]
    cuda.syncthreads()
    start = block * chunk
    stop = min(start + chunk, hashes.shape[0])
    for i in range(start + thread, stop, width):
        position = cuda.atomic.add(cursors, _partition_of(hashes[i], num_partitions), 1)
        indices[position] = i


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
        count_kernel_launch()  # the CPU twin runs in place of the CUDA launches below
        _partition_cpu(hashes, num_partitions, indices, offsets)
        return indices, offsets
    if num_partitions <= MAX_SHARED_PARTITIONS:
        _partition_by_blocks(device, hashes, num_partitions, indices, offsets)
        return indices, offsets
    partitions = xp.empty(n, dtype=xp.int32)
    counts = xp.zeros(num_partitions, dtype=xp.int32)
    launch_cuda(device, _histogram_cuda, n, hashes, num_partitions, partitions, counts)
    offsets[1:] = xp.cumsum(counts)
    cursors = offsets[:-1].copy()
    launch_cuda(device, _scatter_cuda, n, partitions, cursors, indices)
    return indices, offsets


def _partition_by_blocks(device: Device, hashes: Any, num_partitions: int, indices: Any, offsets: Any) -> None:
    """Fill ``indices`` and ``offsets`` with the shared-memory kernels (see the module docstring)."""
    xp = device.xp
    n = hashes.shape[0]
    blocks, _ = device.launch_shape(n)  # launch_cuda launches this same shape for n items: one chunk per block
    chunk = -(-n // blocks)
    block_counts = xp.empty((num_partitions, blocks), dtype=xp.int32)
    launch_cuda(device, _block_histogram_cuda, n, hashes, num_partitions, chunk, block_counts)
    counts = block_counts.reshape(-1)
    ends = xp.cumsum(counts, dtype=xp.int64)
    block_starts = (ends - counts).reshape(num_partitions, blocks)
    offsets[:-1] = block_starts[:, 0]
    offsets[-1] = n
    launch_cuda(device, _block_scatter_cuda, n, hashes, num_partitions, chunk, block_starts, indices)
