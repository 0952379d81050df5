"""Task state between the pipelines of a local exchange: LocalExchangeQueue (Velox's LocalExchangeQueue).

LocalPartition drivers (producers) enqueue each destination's batch; LocalExchange
drivers (consumers) read their destination's queue. The queue caps its buffered
bytes: above the cap producers block on ``WAIT_FOR_CONSUMER`` until consumers
drain it. What it buffers is also reserved in a memory pool of the Task (named
after the LocalPartition node), so queued batches count against the query's
memory cap. It is Task state, so it lives in ``exec/``; the operators are in
:mod:`gpu_engine.operators.local_partition`.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future

from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.driver_stream import synchronize_for_handoff
from gpu_engine.exec.memory_pool import MemoryPool

__all__ = ["LocalExchangeQueue"]


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
