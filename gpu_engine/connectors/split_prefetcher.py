"""Decode a scan's next split pieces on a few threads while its driver converts, copies and computes the current one.

Why: on a GPU the host is the bottleneck of a cold scan. Decoding Parquet
(pyarrow releases the interpreter lock while it decodes) and converting Arrow
to the engine's layout (NumPy, mostly outside the lock too) can run on other
cores while the driver's thread packs the previous batch into pinned memory,
queues its copy and launches kernels on it. A :class:`SplitPrefetcher` keeps up
to ``depth`` pieces (:class:`~gpu_engine.connectors.data_source.SplitPiece`)
in flight on a pool of ``depth`` threads of its own, and hands their results
back in order; with ``depth`` 0 it runs each piece on the calling thread when
asked for it, so a scan has one code path either way.

The driver never waits on a thread: :meth:`SplitPrefetcher.next_result`
returns the oldest piece's future when it is not done yet, and the TableScan
blocks on it (``WAIT_FOR_SPLIT``), so the driver leaves its thread until the
piece is ready. A piece that fails re-raises in the driver, which fails the
Task. :meth:`SplitPrefetcher.close` (the TableScan's ``close``, which every
driver calls when it ends, normally or not) drops pieces not started yet and
waits for the running ones, so no thread outlives its Task.
"""

from __future__ import annotations

import itertools
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Generic, Iterable, TypeVar

from gpu_engine.exec.cancel_points import current_task, running_task

__all__ = ["SplitPrefetcher", "PREFETCH_THREAD_PREFIX"]

#: Name prefix of prefetch threads (tests look for leftovers by it).
PREFETCH_THREAD_PREFIX = "gpu-engine-scan-prefetch"

T = TypeVar("T")
_pool_ids = itertools.count()


def _run_in_task(task, read: Callable[[], T]) -> T:
    if task is None:
        return read()
    with running_task(task):
        return read()


class SplitPrefetcher(Generic[T]):
    """Run queued reads ahead of their consumer on ``depth`` threads; hand results back in queue order.

    One prefetcher belongs to one operator of one driver (it is not
    thread-safe); its threads only run the reads.

    Parameters
    ----------
    depth
        Reads in flight at most (and threads). 0: each read runs on the
        caller's thread inside :meth:`next_result`.
    """

    def __init__(self, depth: int):
        if depth < 0:
            raise ValueError(f"prefetch depth must be 0 or more, got {depth}")
        self.depth = depth
        self._queued: deque[Callable[[], T]] = deque()
        self._in_flight: deque[Future] = deque()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def add(self, reads: Iterable[Callable[[], T]]) -> None:
        """Queue reads, run in this order (the next ones start at once where there is room)."""
        if self._closed:
            raise RuntimeError("the prefetcher is closed")
        self._queued.extend(reads)
        self._start_queued()

    @property
    def pending(self) -> int:
        """Return the reads queued or running whose results were not handed back yet."""
        return len(self._queued) + len(self._in_flight)

    @property
    def has_room(self) -> bool:
        """Return True when nothing is queued and fewer than ``depth`` reads run: time to queue more."""
        return not self._queued and len(self._in_flight) < self.depth

    def next_result(self) -> tuple[T | None, Future | None]:
        """Return ``(result, None)`` of the oldest read, ``(None, future)`` to wait on, or ``(None, None)`` when idle.

        A read's exception is raised here, in the consumer.
        """
        self._start_queued()
        if not self._in_flight:
            if not self._queued:
                return None, None
            return self._queued.popleft()(), None  # depth 0: read on this thread
        future = self._in_flight[0]
        if not future.done():
            return None, future
        self._in_flight.popleft()
        self._start_queued()  # refill before the consumer works on this result
        return future.result(), None

    def _start_queued(self) -> None:
        while self._queued and len(self._in_flight) < self.depth:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self.depth,
                                                    thread_name_prefix=f"{PREFETCH_THREAD_PREFIX}-{next(_pool_ids)}")
            # The read runs as part of the consumer's Task (None outside one): its cancel points watch it, and it
            # sees the Task's file versions (gpu_engine.connectors.file_versions) as the driver's own reads do.
            self._in_flight.append(self._executor.submit(_run_in_task, current_task(), self._queued.popleft()))

    def close(self) -> None:
        """Drop queued reads, cancel those not started, wait for running ones and stop the threads."""
        self._closed = True
        self._queued.clear()
        for future in self._in_flight:
            future.cancel()
        self._in_flight.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
