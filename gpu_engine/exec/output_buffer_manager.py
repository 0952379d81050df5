"""Keep the pages Tasks produce until consumer Tasks take them (Velox's ``OutputBufferManager``).

Every Task whose plan ends in a PartitionedOutput has one output buffer here,
keyed by its task id: one queue of :class:`SerializedPage` per destination,
each page numbered by a per-destination sequence. A consumer asks for pages
from a sequence number on; asking also acknowledges (frees) every earlier page,
so a page is freed only once its consumer has it, and a consumer that retries
gets the same pages again. Consumers that find nothing wait on a future (never
by sleeping); it completes when a page or the end marker arrives.

Back-pressure: :meth:`OutputBufferManager.enqueue` always accepts a page, and
returns a future once the Task's buffered bytes pass the cap; the future
completes when acknowledgements bring them below 90 % of it. A producer that
hands over one page at a time and waits on that future keeps the buffer within
one page of the cap.

End of data: the buffer knows how many drivers produce into it; each calls
:meth:`~OutputBufferManager.no_more_data` once, and after the last one every
destination reports ``at_end`` once its consumer has read all its pages.

A broadcast buffer gives every page to every destination and frees it when the
last destination acknowledged it, so a destination that starts reading late
still sees every page. Deleting a Task's results frees everything it holds and
fails consumers still waiting on it. One manager serves a whole cluster, in
process; it replaces the HTTP result endpoint of Presto's workers.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass

from gpu_engine.errors import ExecutionError
from gpu_engine.exec.serialized_page import SerializedPage

__all__ = ["OutputBufferManager", "OutputBufferStats", "DataResult", "OUTPUT_BUFFER_KINDS"]

OUTPUT_BUFFER_KINDS = ("partitioned", "broadcast", "arbitrary")
_RELEASE_FRACTION = 0.9

DataResult = tuple[list[SerializedPage], int, bool]
"""What a consumer gets: the pages, the sequence number to ask from next, and whether it is at the end."""


@dataclass(frozen=True)
class OutputBufferStats:
    """What one Task's output buffer saw: pages and bytes in, the peak it held and its cap."""

    task_id: str
    kind: str
    num_destinations: int
    pages: int
    rows: int
    bytes: int
    buffered_bytes: int
    peak_bytes: int
    max_bytes: int
    max_page_bytes: int
    blocked_count: int


class _Entry:
    """A page and how many destinations still hold it (more than one only for a broadcast)."""

    __slots__ = ("page", "holders")

    def __init__(self, page: SerializedPage, holders: int):
        self.page = page
        self.holders = holders


class _Destination:
    __slots__ = ("entries", "first_sequence", "waiters")

    def __init__(self):
        self.entries: deque[_Entry] = deque()
        self.first_sequence = 0
        self.waiters: list[tuple[int, int, Future]] = []


class _TaskBuffer:
    """One Task's destinations; created by the producer, or first by an early consumer."""

    def __init__(self, task_id: str):
        self.task_id = task_id
        self.kind: str | None = None
        self.num_destinations = 0
        self.num_drivers = 0
        self.drivers_done = 0
        self.max_bytes = 0
        self.destinations: dict[int, _Destination] = {}
        self.bytes = 0
        self.peak_bytes = 0
        self.pages = 0
        self.rows = 0
        self.total_bytes = 0
        self.blocked_count = 0
        self.max_page_bytes = 0
        self.producer_waiters: list[Future] = []

    @property
    def initialized(self) -> bool:
        return self.kind is not None

    @property
    def finished(self) -> bool:
        return self.initialized and self.drivers_done >= self.num_drivers

    def destination(self, number: int) -> _Destination:
        if number < 0 or (self.initialized and number >= self.num_destinations):
            raise ExecutionError(f"task {self.task_id} has no output destination {number} "
                                 f"(it has {self.num_destinations})")
        return self.destinations.setdefault(number, _Destination())


class OutputBufferManager:
    """Per-Task, per-destination page queues with sequence numbers, acknowledgement and back-pressure."""

    def __init__(self):
        self._lock = threading.Lock()
        self._buffers: dict[str, _TaskBuffer] = {}
        self._deleted: set[str] = set()

    # ------------------------------------------------------------- producers
    def initialize_task(self, task_id: str, kind: str, num_destinations: int, num_drivers: int,
                        max_bytes: int) -> None:
        """Create a Task's buffer: its kind, destinations, producing drivers and byte cap."""
        if kind not in OUTPUT_BUFFER_KINDS:
            raise ValueError(f"output buffer kind must be one of {OUTPUT_BUFFER_KINDS}, got {kind!r}")
        if num_destinations < 1 or num_drivers < 1:
            raise ValueError("an output buffer needs at least one destination and one driver")
        with self._lock:
            buffer = self._buffer_locked(task_id)
            if buffer.initialized:
                raise ValueError(f"task {task_id} already has an output buffer")
            early = [n for n in buffer.destinations if n >= num_destinations]
            if early:
                raise ExecutionError(f"task {task_id}: a consumer asked for destination {early[0]} "
                                     f"of {num_destinations}")
            buffer.kind, buffer.num_destinations, buffer.num_drivers = kind, num_destinations, num_drivers
            buffer.max_bytes = max(1, int(max_bytes))
            for number in range(num_destinations):
                buffer.destination(number)

    def enqueue(self, task_id: str, destination: int, page: SerializedPage) -> Future | None:
        """Queue a page for a destination (any number for a broadcast: it goes to all).

        Always accepts the page. Returns None, or a future when the Task's
        buffered bytes are over its cap: the producer should not enqueue more
        until it completes.
        """
        with self._lock:
            buffer = self._initialized_locked(task_id)
            if buffer.finished:
                raise ExecutionError(f"task {task_id}: page enqueued after every driver said no more data")
            targets = list(range(buffer.num_destinations)) if buffer.kind == "broadcast" else [destination]
            entry = _Entry(page, len(targets))
            for number in targets:
                buffer.destination(number).entries.append(entry)
            buffer.bytes += page.size
            buffer.peak_bytes = max(buffer.peak_bytes, buffer.bytes)
            buffer.pages += 1
            buffer.rows += page.num_rows
            buffer.total_bytes += page.size
            buffer.max_page_bytes = max(buffer.max_page_bytes, page.size)
            ready = [r for number in targets for r in self._serve_waiters_locked(buffer, number)]
            blocked = self._space_future_locked(buffer)
        _complete(ready)
        return blocked

    def wait_for_space(self, task_id: str) -> Future | None:
        """Return a future to wait on while the Task's buffer is over its cap, else None."""
        with self._lock:
            return self._space_future_locked(self._initialized_locked(task_id))

    def no_more_data(self, task_id: str) -> None:
        """Count one producing driver out; after the last, every destination gets its end marker."""
        with self._lock:
            buffer = self._initialized_locked(task_id)
            buffer.drivers_done += 1
            ready = []
            if buffer.finished:
                for number in list(buffer.destinations):
                    ready += self._serve_waiters_locked(buffer, number)
        _complete(ready)

    # ------------------------------------------------------------- consumers
    def get_data(self, task_id: str, destination: int, max_bytes: int, sequence: int) -> DataResult:
        """Return pages of ``destination`` from ``sequence`` on (at least one, up to ``max_bytes``).

        Acknowledges every page before ``sequence``. Returns the pages, the
        next sequence to ask for, and ``at_end``: True once the producer is
        done and nothing after the returned pages is left.
        """
        with self._lock:
            buffer = self._buffer_locked(task_id)
            result, released = self._get_locked(buffer, destination, max_bytes, sequence)
        _complete(released)
        return result

    def get_data_future(self, task_id: str, destination: int, max_bytes: int, sequence: int) -> Future:
        """Return a future of :meth:`get_data`'s answer, completed once there is a page or the end.

        Acknowledges every page before ``sequence`` at once. The future fails
        when the Task's results are deleted before it completes.
        """
        future: Future = Future()
        with self._lock:
            try:
                buffer = self._buffer_locked(task_id)
                result, released = self._get_locked(buffer, destination, max_bytes, sequence)
            except ExecutionError as error:
                future.set_exception(error)
                return future
            if result[0] or result[2]:
                ready = [(future, result)]
            else:
                buffer.destination(destination).waiters.append((sequence, max_bytes, future))
                ready = []
        _complete(released)
        _complete(ready)
        return future

    def acknowledge(self, task_id: str, destination: int, sequence: int) -> None:
        """Free the pages of ``destination`` before ``sequence`` (the consumer has them)."""
        with self._lock:
            buffer = self._buffers.get(task_id)
            if buffer is None:
                return
            released = self._acknowledge_locked(buffer, buffer.destination(destination), sequence)
        _complete(released)

    # ------------------------------------------------------------- lifecycle
    def delete_results(self, task_id: str) -> None:
        """Free every page of a Task; consumers still waiting on it fail, blocked producers go on."""
        with self._lock:
            buffer = self._buffers.pop(task_id, None)
            self._deleted.add(task_id)
            if buffer is None:
                return
            waiters = [w for d in buffer.destinations.values() for (_, _, w) in d.waiters]
            producers = buffer.producer_waiters
            buffer.destinations.clear()
            buffer.producer_waiters = []
            buffer.bytes = 0
        error = ExecutionError(f"the results of task {task_id} were deleted")
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)
        _complete([(p, None) for p in producers])

    def has_task(self, task_id: str) -> bool:
        """Return True while a Task's buffer exists (created and not deleted)."""
        with self._lock:
            return task_id in self._buffers

    def buffered_bytes(self, task_id: str) -> int:
        """Return the bytes of a Task's pages not yet acknowledged by every consumer."""
        with self._lock:
            buffer = self._buffers.get(task_id)
            return 0 if buffer is None else buffer.bytes

    def stats(self, task_id: str) -> OutputBufferStats:
        """Return what a Task's buffer has seen so far."""
        with self._lock:
            b = self._buffer_locked(task_id)
            return OutputBufferStats(task_id, b.kind or "uninitialized", b.num_destinations, b.pages, b.rows,
                                     b.total_bytes, b.bytes, b.peak_bytes, b.max_bytes, b.max_page_bytes,
                                     b.blocked_count)

    # ------------------------------------------------------------- internals
    def _buffer_locked(self, task_id: str) -> _TaskBuffer:
        if task_id in self._deleted:
            raise ExecutionError(f"the results of task {task_id} were deleted")
        buffer = self._buffers.get(task_id)
        if buffer is None:
            buffer = self._buffers[task_id] = _TaskBuffer(task_id)
        return buffer

    def _initialized_locked(self, task_id: str) -> _TaskBuffer:
        buffer = self._buffer_locked(task_id)
        if not buffer.initialized:
            raise ExecutionError(f"task {task_id} has no output buffer: initialize_task was not called")
        return buffer

    def _space_future_locked(self, buffer: _TaskBuffer) -> Future | None:
        if buffer.bytes <= buffer.max_bytes:
            return None
        future: Future = Future()
        buffer.producer_waiters.append(future)
        buffer.blocked_count += 1
        return future

    def _acknowledge_locked(self, buffer: _TaskBuffer, destination: _Destination, sequence: int) -> list:
        last = destination.first_sequence + len(destination.entries)
        if sequence > last:
            raise ExecutionError(f"task {buffer.task_id}: sequence {sequence} is past the last page ({last})")
        while destination.first_sequence < sequence:
            entry = destination.entries.popleft()
            destination.first_sequence += 1
            entry.holders -= 1
            if entry.holders == 0:
                buffer.bytes -= entry.page.size
        if buffer.producer_waiters and buffer.bytes < _RELEASE_FRACTION * buffer.max_bytes:
            released, buffer.producer_waiters = buffer.producer_waiters, []
            return [(f, None) for f in released]
        return []

    def _get_locked(self, buffer: _TaskBuffer, number: int, max_bytes: int, sequence: int):
        destination = buffer.destination(number)
        sequence = max(sequence, destination.first_sequence)  # a retry of pages already acknowledged
        released = self._acknowledge_locked(buffer, destination, sequence)
        pages: list[SerializedPage] = []
        size = 0
        for entry in destination.entries:
            if pages and size + entry.page.size > max_bytes:
                break
            pages.append(entry.page)
            size += entry.page.size
        next_sequence = sequence + len(pages)
        at_end = buffer.finished and len(pages) == len(destination.entries)
        return (pages, next_sequence, at_end), released

    def _serve_waiters_locked(self, buffer: _TaskBuffer, number: int) -> list:
        destination = buffer.destinations.get(number)
        if destination is None or not destination.waiters:
            return []
        ready, waiting = [], []
        for sequence, max_bytes, future in destination.waiters:
            result, released = self._get_locked(buffer, number, max_bytes, sequence)
            ready += released
            if result[0] or result[2]:
                ready.append((future, result))
            else:
                waiting.append((sequence, max_bytes, future))
        destination.waiters = waiting
        return ready


def _complete(ready: list) -> None:
    """Complete futures outside the manager's lock (their callbacks may call back into it)."""
    for future, value in ready:
        if not future.done():
            future.set_result(value)
