"""Repartition rows between the pipelines of one Task: LocalPartition, LocalExchange and their queue.

The producer side (LocalPartition, a sink) hashes the partitioning keys on the
device and builds one gather map per destination over the same base columns,
with a counting sort (:func:`gpu_engine.kernels.partition.partition_gather_maps`).
Each destination gets a :class:`~gpu_engine.columnar.batch.Batch` that shares
the base columns and carries its own gather map, as Velox wraps the input in
dictionary vectors instead of copying. The consumer side (LocalExchange, a
source) reads its destination's queue. The queue caps its buffered bytes:
above the cap producers block on ``WAIT_FOR_CONSUMER`` until consumers drain it.
What it buffers is also reserved in a memory pool of the Task (named after the
LocalPartition node), so queued batches count against the query's memory cap.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future

from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.driver_stream import synchronize_for_handoff
from gpu_engine.exec.memory_pool import MemoryPool
from gpu_engine.exec.operator import BlockingReason, Operator, OperatorCtx
from gpu_engine.plans.nodes import LocalPartitionNode

__all__ = ["LocalExchangeQueue", "LocalPartition", "LocalExchange"]


class LocalExchangeQueue:
    """Per-destination queues of batches between producer and consumer drivers of one Task.

    End of data: each producer driver calls :meth:`no_more_data` once; when all
    ``num_producers`` have, every destination is at end after its queue drains.
    """

    def __init__(self, num_partitions: int, num_producers: int, max_bytes: int):
        self.num_partitions = num_partitions
        self.num_producers = num_producers
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._queues: list[deque[Batch]] = [deque() for _ in range(num_partitions)]
        self._bytes = 0
        self._producers_done = 0
        self._aborted = False
        self._consumer_waiters: list[list[Future]] = [[] for _ in range(num_partitions)]
        self._producer_waiters: list[Future] = []
        self._closed: set[int] = set()
        self.peak_bytes = 0
        self.memory_pool: MemoryPool | None = None  # set by the first LocalPartition; None: not accounted

    @property
    def buffered_bytes(self) -> int:
        """Return the bytes queued and not yet taken."""
        return self._bytes

    def enqueue(self, items: list[tuple[int, Batch]]) -> Future | None:
        """Queue batches for destinations; return a future to wait on when over the byte cap."""
        synchronize_for_handoff()  # consumers read them on their own CUDA streams
        woken: list[Future] = []
        with self._lock:
            if self._aborted:
                return None
            items = [(partition, batch) for partition, batch in items if partition not in self._closed]
            if self.memory_pool is not None:
                self.memory_pool.reserve(sum(batch.nbytes for _, batch in items))
            for partition, batch in items:
                self._queues[partition].append(batch)
                self._bytes += batch.nbytes
                woken.extend(self._consumer_waiters[partition])
                self._consumer_waiters[partition] = []
            self.peak_bytes = max(self.peak_bytes, self._bytes)
            future = None
            if self._bytes > self.max_bytes:
                future = Future()
                self._producer_waiters.append(future)
        for waiter in woken:
            waiter.set_result(None)
        return future

    def no_more_data(self) -> None:
        """Count one producer driver out; wake every consumer once all are."""
        with self._lock:
            self._producers_done += 1
            woken = [w for ws in self._consumer_waiters for w in ws] if self._producers_done >= self.num_producers else []
            if woken:
                self._consumer_waiters = [[] for _ in range(self.num_partitions)]
        for waiter in woken:
            waiter.set_result(None)

    def close_partition(self, partition: int) -> None:
        """Drop a destination whose consumer finished early (a Limit, a join with no build rows).

        Its queued batches are freed and later ones discarded, so producers
        blocked on the byte cap are released and the Task cannot hang on a
        consumer that no longer reads.
        """
        released: list[Future] = []
        with self._lock:
            self._closed.add(partition)
            freed = sum(batch.nbytes for batch in self._queues[partition])
            self._bytes -= freed
            self._release(freed)
            self._queues[partition].clear()
            if self._bytes <= self.max_bytes:
                released, self._producer_waiters = self._producer_waiters, []
        for waiter in released:
            waiter.set_result(None)

    def next(self, partition: int) -> tuple[Batch | None, Future | None, bool]:
        """Return ``(batch, None, False)``, ``(None, future, False)`` to wait, or ``(None, None, True)`` at end."""
        released: list[Future] = []
        with self._lock:
            queue = self._queues[partition]
            if queue:
                batch = queue.popleft()
                self._bytes -= batch.nbytes
                self._release(batch.nbytes)
                if self._bytes <= self.max_bytes:
                    released, self._producer_waiters = self._producer_waiters, []
                result = (batch, None, False)
            elif self._producers_done >= self.num_producers or self._aborted:
                result = (None, None, True)
            else:
                future: Future = Future()
                self._consumer_waiters[partition].append(future)
                result = (None, future, False)
        for waiter in released:
            waiter.set_result(None)
        return result

    def _release(self, nbytes: int) -> None:
        if self.memory_pool is not None and nbytes:
            self.memory_pool.release(nbytes)

    def abort(self) -> None:
        """Drop everything and wake all waiters (the Task failed or was cancelled)."""
        with self._lock:
            self._aborted = True
            woken = [w for ws in self._consumer_waiters for w in ws] + self._producer_waiters
            self._consumer_waiters = [[] for _ in range(self.num_partitions)]
            self._producer_waiters = []
            self._queues = [deque() for _ in range(self.num_partitions)]
            self._release(self._bytes)
            self._bytes = 0
        for waiter in woken:
            if not waiter.done():
                waiter.set_result(None)


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
