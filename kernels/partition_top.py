"""Keep each partition's first ``limit`` rows in sort-word order with one pass over the rows, on the CPU.

Why: TopNRowNumber's cut ranked its buffer by sorting it (the sort words, then stably by partition id) and kept
the rows numbered ``<= limit``; for db-benchmark's top-2 per group (10M rows, 100k partitions) those two sorts
of each cut's ~400k rows were about half of the query's CPU. Keeping a few rows per partition needs no order
over all of them: each row is compared with its partition's kept rows (at most ``limit``, best first) and
slides in where it sorts, pushing the last one out: ``O(rows * limit)`` word comparisons, in input order.
A row enters only when it sorts strictly before a kept row (ties keep the earlier row), which is what
``row_number`` allows (peers' order among themselves is free) and what TopNRowNumber's bounds assume.

That loop is sequential per partition; a GPU sorts cheaply instead, so on other devices, and where the
slots (``partitions * limit``) would outgrow the rows, :func:`partition_first_rows` answers None and the
caller sorts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_kernel_launch

__all__ = ["SLOT_LIMIT", "partition_first_rows"]

#: The largest ``limit`` kept in slots: each entering row shifts up to ``limit`` slots of its partition.
SLOT_LIMIT = 64


@njit(nogil=True, cache=True)
def _first_rows_cpu(partition_ids, words, limit, slots, counts):
    """Fill ``slots[p * limit:]`` with partition ``p``'s first rows in word order (primary word last)."""
    num_words = words.shape[0]
    for row in range(partition_ids.shape[0]):
        partition = partition_ids[row]
        base = partition * limit
        count = counts[partition]
        at = count
        while at > 0:  # move up past every kept row this row sorts strictly before
            other = slots[base + at - 1]
            before = False
            for word in range(num_words - 1, -1, -1):
                mine = words[word, row]
                theirs = words[word, other]
                if mine != theirs:
                    before = mine < theirs
                    break
            if not before:
                break
            at -= 1
        if at >= limit:
            continue
        last = count if count < limit else limit - 1
        for slot in range(last, at, -1):
            slots[base + slot] = slots[base + slot - 1]
        slots[base + at] = row
        if count < limit:
            counts[partition] = count + 1


def partition_first_rows(device: Device, partition_ids: Any, words: Any, limit: int,
                         partitions: int) -> tuple[Any, Any] | None:
    """Return the rows each partition keeps under ``row_number() <= limit`` and their numbers, or None.

    Parameters
    ----------
    partition_ids
        Each row's partition, ``0 <= id < partitions``.
    words
        ``(K, n)`` ``uint64`` :func:`~gpu_engine.kernels.sort.sort_key_words` (primary last; ``K`` may be 0).
    limit
        Rows kept per partition (``>= 1``).

    Returns
    -------
    (kept, numbers) or None
        ``int64`` row positions grouped by partition id ascending, best first within a partition, and each
        kept row's row number from 1; None where the caller should sort instead (a device other than the
        CPU, ``limit`` above :data:`SLOT_LIMIT`, or more slots than a few times the rows).
    """
    rows = int(partition_ids.shape[0])
    if device.kernel_flavor != "cpu" or not 1 <= limit <= SLOT_LIMIT or partitions * limit > 8 * rows + (1 << 16):
        return None
    slots = np.empty(partitions * limit, dtype=np.int64)
    counts = np.zeros(partitions, dtype=np.int64)
    if rows:
        count_kernel_launch()
        _first_rows_cpu(np.ascontiguousarray(partition_ids), np.ascontiguousarray(words), np.int64(limit), slots,
                        counts)
    filled = np.arange(limit, dtype=np.int64)[None, :] < counts[:, None]
    numbers = np.broadcast_to(np.arange(1, limit + 1, dtype=np.int64), (partitions, limit))[filled]
    return slots.reshape(partitions, limit)[filled], numbers
