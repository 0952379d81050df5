"""Task state shared by a Task's Exchange drivers: ExchangeQueue and its ExchangeSources (Velox's ExchangeClient).

All Exchange drivers of a Task share one :class:`ExchangeQueue`: whichever
driver takes a split from the Task adds an :class:`ExchangeSource` for it, and
every driver takes the next page from the queue, whatever source it came from.
An ExchangeSource asks the :class:`~gpu_engine.exec.output_buffer_manager.OutputBufferManager`
for pages with a future (in process, as Presto's ``PrestoExchangeSource`` asks
over HTTP), hands what arrives to the queue and acknowledges it at once, so the
producer frees it. The queue asks its sources for more only while it holds
fewer bytes than ``exchange_max_bytes``; taking pages out lets it ask again.

The queue is Task state, like Velox's ``ExchangeClient`` owned by the Task, so
it lives in ``exec/`` and the operator (:mod:`gpu_engine.operators.exchange`)
only reads from it.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, InvalidStateError

from gpu_engine.exec.output_buffer_manager import OutputBufferManager
from gpu_engine.exec.serialized_page import SerializedPage
from gpu_engine.exec.split import RemoteSplit

__all__ = ["ExchangeQueue", "ExchangeSource", "first_of", "wake"]


class ExchangeSource:
    """Pull one producer Task's pages for one destination from the OutputBufferManager."""

    def __init__(self, queue: "ExchangeQueue", manager: OutputBufferManager, split: RemoteSplit):
        self.queue = queue
        self.manager = manager
        self.task_id = split.task_id
        self.destination = split.destination
        self.sequence = 0
        self.at_end = False
        self.in_flight = False

    def request(self, max_bytes: int) -> None:
        """Ask for pages from the next sequence on; the answer arrives through a future's callback."""
        future = self.manager.get_data_future(self.task_id, self.destination, max_bytes, self.sequence)
        future.add_done_callback(self._on_data)

    def _on_data(self, future: Future) -> None:
        error = future.exception()
        if error is not None:
            self.queue.fail(error)
            return
        pages, next_sequence, at_end = future.result()
        if pages:
            self.manager.acknowledge(self.task_id, self.destination, next_sequence)
        self.queue.receive(self, pages, next_sequence, at_end)


class ExchangeQueue:
    """Pages fetched for one Exchange node of a Task, shared by its drivers, capped in bytes."""

    def __init__(self, manager: OutputBufferManager, max_bytes: int):
        self.manager = manager
        self.max_bytes = max(1, int(max_bytes))
        self._lock = threading.Lock()
        self._intake_lock = threading.Lock()
        self._pages: deque[SerializedPage] = deque()
        self._bytes = 0
        self._sources: list[ExchangeSource] = []
        self._no_more_sources = False
        self._waiters: list[Future] = []
        self._error: BaseException | None = None
        self._aborted = False
        self.peak_bytes = 0
        self.received_pages = 0
        self.received_bytes = 0

    # ---------------------------------------------------------------- intake
    def take_splits(self, task, node: ExchangeNode) -> tuple[int, Future | None]:
        """Add a source per remote split the Task has for ``node``; one driver at a time.

        Returns how many were added and the Task's split future (None once
        ``no_more_splits`` was said: then the queue knows all its sources).
        Taking splits and adding their sources under one lock keeps another
        driver from seeing "no more splits" before a split it did not see is
        added.
        """
        added = 0
        with self._intake_lock:
            while True:
                split, future = task.get_split_or_future(node.id)
                if split is None:
                    if future is None:
                        self.no_more_sources()
                    return added, future
                if not isinstance(split, RemoteSplit):
                    raise TypeError(f"{node.label} reads RemoteSplits, got {split.describe()}")
                self.add_source(split)
                added += 1

    def add_source(self, split: RemoteSplit) -> None:
        """Start reading one producer Task's destination."""
        with self._lock:
            if self._no_more_sources:
                raise ValueError("remote split after no_more_sources")
            self._sources.append(ExchangeSource(self, self.manager, split))
        self._fetch_more()

    def no_more_sources(self) -> None:
        """Learn that every producer is known; the queue ends once all of them ended."""
        with self._lock:
            if self._no_more_sources:
                return
            self._no_more_sources = True
            woken = self._take_waiters_locked() if self._at_end_locked() else []
        wake(woken)

    def receive(self, source: ExchangeSource, pages: list[SerializedPage], next_sequence: int, at_end: bool) -> None:
        """Take a source's answer (from its future's callback), wake readers and fetch more."""
        with self._lock:
            source.in_flight = False
            if self._aborted:
                return
            source.sequence = next_sequence
            source.at_end = at_end
            for page in pages:
                self._pages.append(page)
                self._bytes += page.size
                self.received_pages += 1
                self.received_bytes += page.size
            self.peak_bytes = max(self.peak_bytes, self._bytes)
            woken = self._take_waiters_locked() if (pages or self._at_end_locked()) else []
        wake(woken)
        self._fetch_more()

    def fail(self, error: BaseException) -> None:
        """Keep a source's error; readers raise it."""
        with self._lock:
            if self._error is None:
                self._error = error
            woken = self._take_waiters_locked()
        wake(woken)

    def abort(self) -> None:
        """Drop every page and wake every reader (the Task failed or was cancelled)."""
        with self._lock:
            self._aborted = True
            self._pages.clear()
            self._bytes = 0
            woken = self._take_waiters_locked()
        wake(woken)

    # --------------------------------------------------------------- reading
    def next(self) -> tuple[SerializedPage | None, Future | None, bool]:
        """Return ``(page, None, False)``, ``(None, future, False)`` to wait, or ``(None, None, True)`` at end."""
        with self._lock:
            if self._error is not None:
                raise self._error
            if self._pages:
                page = self._pages.popleft()
                self._bytes -= page.size
                result = (page, None, False)
            elif self._aborted or self._at_end_locked():
                result = (None, None, True)
            else:
                future: Future = Future()
                self._waiters.append(future)
                result = (None, future, False)
        if result[0] is not None:
            self._fetch_more()
        return result

    @property
    def buffered_bytes(self) -> int:
        """Return the bytes of pages fetched and not yet read."""
        return self._bytes

    # ------------------------------------------------------------- internals
    def _at_end_locked(self) -> bool:
        return self._no_more_sources and not self._pages and all(s.at_end for s in self._sources)

    def _take_waiters_locked(self) -> list[Future]:
        woken, self._waiters = self._waiters, []
        return woken

    def _fetch_more(self) -> None:
        """Ask every idle source for pages while the queue is under its byte cap."""
        with self._lock:
            if self._aborted or self._error is not None or self._bytes >= self.max_bytes:
                return
            room = self.max_bytes - self._bytes
            idle = [s for s in self._sources if not s.in_flight and not s.at_end]
            for source in idle:
                source.in_flight = True
        for source in idle:
            source.request(room)


def wake(futures: list[Future]) -> None:
    for future in futures:
        if not future.done():
            try:
                future.set_result(None)
            except InvalidStateError:  # completed by another thread meanwhile
                pass


def first_of(first: Future, second: Future) -> Future:
    """Return a future completed as soon as either of two futures is."""
    combined: Future = Future()

    def done(_future: Future) -> None:
        wake([combined])

    first.add_done_callback(done)
    second.add_done_callback(done)
    return combined
