"""Give back the memory kept for reuse once no Task has run in the process for a while.

Why: two things keep freed host memory resident so the next allocation skips
the kernel's page faults: the buffer recycler's large arrays
(:mod:`gpu_engine.exec.buffer_recycler`, up to a quarter of memory) and glibc's heap with the
raised trim threshold (:mod:`gpu_engine.host_allocator`). Both pay off while
queries run (batch after batch, partial emit after partial emit, and query
after query: releasing them at the end of every query made TPC-H SF1's Q18
30-70% and Q10 30% more CPU, each query page-faulting through fresh tables);
kept after the last query they are memory no one uses, held by a process that
users run beside other programs (TPC-H SF10 through ``Session.sql`` kept
several GB between queries). So Tasks count themselves in and out here, and
once the process has had no running Task for :data:`IDLE_RELEASE_SECONDS`, or
for as long as the Tasks just ended ran if that is longer (at most
:data:`IDLE_RELEASE_MAX_SECONDS`; due from the last one to end, on one waiting
thread; a Task starting meanwhile cancels it), the recycler keeps at most
:data:`IDLE_KEPT_BYTES` and the heap is trimmed.

Why as long as they ran: a burst is queries whose gaps are short next to the
queries themselves, and a fixed 5 s is short next to a loaded machine's runs
(db-bench q10 at 10M ran 13.6 s wall under load, DuckDB's run between two of
them 6.5 s: every engine run found its tables released and paid their first
touch again, +5% CPU with huge pages). Kept that long, an idle process holds
the memory at most half of its time, as a fixed delay after short queries did.
This is jemalloc's decay of dirty pages (10 s by default) at the level of a
query engine: queries in a burst reuse memory, an idle process gives it back.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

from gpu_engine.exec import buffer_recycler
from gpu_engine.host_allocator import trim_host_heap

__all__ = ["IDLE_KEPT_BYTES", "IDLE_RELEASE_SECONDS", "IDLE_RELEASE_MAX_SECONDS", "idle_release_delay",
           "task_started", "task_ended", "running_tasks", "release_idle_memory", "release_on_idle"]

#: Bytes the buffer recycler keeps once the process is idle.
IDLE_KEPT_BYTES = 0
#: Seconds without a running Task after which the kept memory is released (0: as the last Task ends).
IDLE_RELEASE_SECONDS = 5.0
#: The longest the kept memory waits: the release is due after the Tasks' busy time when that is longer than
#: :data:`IDLE_RELEASE_SECONDS` (0 here: always IDLE_RELEASE_SECONDS).
IDLE_RELEASE_MAX_SECONDS = 60.0

_lock = threading.Condition()
_running = 0
_generation = 0  # counts Task starts: a release due before the latest start finds it changed and does nothing
_due: tuple[float, int] | None = None  # (monotonic time, generation) of the pending release
_busy_since = 0.0  # monotonic time the running Tasks' busy period began (the first of them started)
_releaser: threading.Thread | None = None
_idle_releases: list[Callable[[], object]] = []  # release_on_idle's callbacks


def task_started() -> None:
    """Count a Task in (before its drivers run)."""
    global _running, _generation, _busy_since
    with _lock:
        if not _running:
            _busy_since = time.monotonic()
        _running += 1
        _generation += 1


def task_ended() -> None:
    """Count a Task out (after its last driver ended and its pool was released); the last one sets the release due."""
    global _running, _due, _releaser
    with _lock:
        _running -= 1
        if _running:
            return
        generation = _generation
        if IDLE_RELEASE_SECONDS > 0:
            now = time.monotonic()
            _due = (now + idle_release_delay(now - _busy_since), generation)
            if _releaser is None:  # one waiting thread for the process, not one per query
                _releaser = threading.Thread(target=_release_when_due, name="idle-memory-release", daemon=True)
                _releaser.start()
            _lock.notify()
            return
    _release_if_idle(generation)


def idle_release_delay(busy_seconds: float) -> float:
    """Return the seconds kept memory waits after Tasks that ran ``busy_seconds``: as long as they ran, at least
    :data:`IDLE_RELEASE_SECONDS` and at most :data:`IDLE_RELEASE_MAX_SECONDS`."""
    return max(IDLE_RELEASE_SECONDS, min(busy_seconds, IDLE_RELEASE_MAX_SECONDS))


def _release_when_due() -> None:
    global _due
    while True:
        with _lock:
            while _due is None:
                _lock.wait()
            at, generation = _due
            left = at - time.monotonic()
            if left > 0:
                _lock.wait(left)  # woken early by a newer due time: look again
                continue
            _due = None
        _release_if_idle(generation)


def _release_if_idle(generation: int) -> bool:
    """Release when no Task started since the release was set due (``generation``) and none runs; True if done."""
    with _lock:
        if _running or generation != _generation:
            return False
    release_idle_memory()
    return True
def _forget_releaser_in_child() -> None:
    """A forked child has no copy of the waiting thread: it starts its own when its last Task ends."""
    global _lock, _releaser, _due
    _lock, _releaser, _due = threading.Condition(), None, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_releaser_in_child)


def release_on_idle(release: Callable[[], object]) -> None:
    """Have ``release()`` called each time the process goes idle, before the heap is trimmed.

    Why a registry: what else keeps memory for reuse lives in modules this one must not import (the bounded pool
    of mapped Parquet pages, :mod:`gpu_engine.connectors.file_pages`, registers itself).
    """
    _idle_releases.append(release)


def release_idle_memory() -> None:
    """Run the registered releases, drop the recycler's buffers beyond :data:`IDLE_KEPT_BYTES`, trim the heap."""
    for release in tuple(_idle_releases):
        release()
    buffer_recycler.release_kept(IDLE_KEPT_BYTES)
    trim_host_heap()


def running_tasks() -> int:
    """Return how many Tasks are running in this process."""
    return _running
