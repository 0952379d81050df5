"""Repartition rows between the pipelines of one Task: LocalPartition and LocalExchange.

The producer side (LocalPartition, a sink) hashes the partitioning keys on the
device and builds one gather map per destination over the same base columns,
with a counting sort (:func:`gpu_engine.kernels.partition.partition_gather_maps`).
Each destination gets a :class:`~gpu_engine.columnar.batch.Batch` that shares
the base columns and carries its own gather map, as Velox wraps the input in
dictionary vectors instead of copying. The consumer side (LocalExchange, a
source) reads its destination's
:class:`~gpu_engine.exec.local_exchange_queue.LocalExchangeQueue` (Task state, in ``exec/``). The queue caps its buffered bytes:
above the cap producers block on ``WAIT_FOR_CONSUMER`` until consumers drain it.
What it buffers is also reserved in a memory pool of the Task (named after the
LocalPartition node), so queued batches count against the query's memory cap.
"""

from __future__ import annotations

from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.driver_stream import synchronize_for_handoff
from gpu_engine.exec.local_exchange_queue import LocalExchangeQueue
from gpu_engine.exec.operator import BlockingReason, Operator, OperatorCtx
from gpu_engine.plans.nodes import LocalPartitionNode

__all__ = ["LocalPartition", "LocalExchange"]


class LocalPartition(Operator):
    """Sink: split each input batch into per-destination gather maps and queue them."""

    def __init__(self, ctx: OperatorCtx, node: LocalPartitionNode):
        super().__init__(ctx, node)
        self.queue: LocalExchangeQueue = ctx.task.local_exchange_queues[node.id]
        self.keys = tuple(node.keys)
        self.round_robin = node.partition_kind == "arbitrary"
        self._next_partition = ctx.driver_id % max(1, self.queue.num_partitions)  # drivers start apart
        if self.queue.memory_pool is None:  # operators are created on one thread, in Task.start
            self.queue.memory_pool = ctx.task.pool.add_child(f"{self.operator_type}[{node.id}]", where="local exchange queue",
                                                             operator=self.operator_type, plan_node_id=node.id)

    def needs_input(self) -> bool:
        return not self.no_more_input_received and not self.is_waiting

    def add_input(self, batch: Batch) -> None:
        partitions = self.queue.num_partitions
        if partitions > 1 and self.round_robin:  # whole batches, in turn: no hashing, no host sync
            items = [(self._next_partition, batch)]
            self._next_partition = (self._next_partition + 1) % partitions
        elif partitions == 1 or not self.keys:
            items = [(0, batch)]
        else:
            from gpu_engine.kernels.hash import hash_columns
            from gpu_engine.kernels.partition import partition_gather_maps

            hashes = hash_columns(self.device, [batch.column(k) for k in self.keys])
            indices, offsets = partition_gather_maps(self.device, hashes, partitions)
            bounds = self.device.to_host(offsets).tolist()
            items = [
                (p, batch.with_gather_map(indices[bounds[p]:bounds[p + 1]]))
                for p in range(partitions)
                if bounds[p + 1] > bounds[p]
            ]
        self.block_on(BlockingReason.WAIT_FOR_CONSUMER, self.queue.enqueue(items))
        self.stats.peak_memory_bytes = self.queue.memory_pool.peak_bytes

    def get_output(self) -> Batch | None:
        return None

    def no_more_input(self) -> None:
        super().no_more_input()
        self.queue.no_more_data()

    def is_finished(self) -> bool:
        return self.no_more_input_received


class LocalExchange(Operator):
    """Source: read this driver's destination of a LocalExchangeQueue until all producers are done."""

    def __init__(self, ctx: OperatorCtx, node: LocalPartitionNode):
        super().__init__(ctx, node)
        self.queue: LocalExchangeQueue = ctx.task.local_exchange_queues[node.id]
        self.partition = ctx.driver_id
        self._at_end = False
        self._in_use: Batch | None = None

    def needs_input(self) -> bool:
        return False

    def get_output(self) -> Batch | None:
        if self._at_end:
            return None
        self._release_in_use()
        batch, future, at_end = self.queue.next(self.partition)
        self.block_on(BlockingReason.WAIT_FOR_PRODUCER, future)
        self._at_end = at_end
        if batch is not None and self.device.is_gpu:
            self._in_use = batch
        return batch

    def _release_in_use(self) -> None:
        """Drop the last batch handed on only once this driver's stream is done with it.

        Its buffers were allocated on the producer's stream, and CuPy's pool
        gives freed memory straight back to that stream, which may reuse it
        at once; kernels still queued on this driver's stream must not read it
        afterwards. By the next call the whole pipeline has queued its work on
        the batch, so one wait here covers it.
        """
        if self._in_use is not None:
            synchronize_for_handoff()
            self._in_use = None

    def is_finished(self) -> bool:
        return self._at_end

    def close(self) -> None:
        self._release_in_use()
        self.queue.close_partition(self.partition)
        super().close()
