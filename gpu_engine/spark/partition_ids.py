"""Compute each row's shuffle destination on the engine's device, for Spark to route by.

Why: a PartitionedOutput boundary becomes a Spark shuffle, but Spark's own
``repartition(n, keys)`` hashes with Murmur3 on the JVM after the rows left the
engine. Instead the producing fragment computes the destination where the rows
already are (on the GPU when there is one), with the engine's hash kernel, and
Spark's ``DataFrame.repartitionById(n, column)`` (Spark 4.1) only moves rows to
the partition the engine named. The destination is exactly the one the
engine's :class:`~gpu_engine.operators.partitioned_output.PartitionedOutput`
picks for the same row: the 64-bit key hash rotated by 32 bits, modulo ``n``
(the rotation keeps the remote partition independent of the low bits a
LocalPartition downstream spreads rows over drivers with).
"""

from __future__ import annotations

from typing import Any, Sequence

from gpu_engine.columnar.batch import Batch
from gpu_engine.device import Device

__all__ = ["PARTITION_ID_COLUMN", "partition_ids"]

#: The column a producing fragment appends for ``repartitionById``; Spark drops it after the shuffle.
PARTITION_ID_COLUMN = "__gpu_engine_partition_id"


def partition_ids(device: Device, batch: Batch, keys: Sequence[str], num_partitions: int) -> Any:
    """Return the ``int32`` destination in ``[0, num_partitions)`` of every row of ``batch``, on ``device``."""
    from gpu_engine.kernels.hash import hash_columns

    xp = device.xp
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    if not keys or num_partitions == 1:
        return xp.zeros(batch.num_rows, dtype=xp.int32)
    hashes = hash_columns(device, [batch.column(key) for key in keys])
    shift = xp.uint64(32)
    rotated = (hashes >> shift) | (hashes << shift)
    return (rotated % xp.uint64(num_partitions)).astype(xp.int32)
