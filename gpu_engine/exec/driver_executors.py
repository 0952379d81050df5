"""Keep the driver threads of finished queries for the next ones (the process's driver thread pools).

Why: a query's drivers run on a thread pool of their own (a Task waits for
its drivers, and a driver that blocks gives its thread back, so queries must
not share one bounded pool). Starting those threads was a large part of a
small query's time: ``Thread.start`` waits until the new thread runs, which on
a busy two-core machine took milliseconds per thread, four threads per query
(TPC-H at SF 0.01: about a third of the time the calling thread spent in a
query once its plan was kept). A pool whose query finished has idle threads
and no work, so the session hands it to its next query instead.

Each query still has a pool to itself while it runs (queries on several
threads take several pools); a pool comes back only from a query that
finished, so a failed or cancelled query's threads, which may still be
closing its operators, are shut down and joined as before. At most ``keep``
idle pools per width are kept; the threads of a pool no session holds end
when the pool is freed (``ThreadPoolExecutor`` wakes them then). A forked
child drops the kept pools: their threads stayed in the parent, and drivers
queued on them would never run.

The kept pools are the process's (:func:`process_executors`), not each
Session's: a new Session (a notebook cell, a bench pass, a Spark task's
session) runs its first query on the threads an earlier session's finished
query left, instead of starting its own (issue 29 item 4: what a new session
pays). Idle threads hold no query state; ``concurrent.futures`` wakes and joins
them at interpreter exit.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

__all__ = ["DriverExecutors", "DRIVER_THREAD_PREFIX", "process_executors", "working_driver_threads"]

#: The name prefix of driver threads.
DRIVER_THREAD_PREFIX = "gpu-engine-driver"

_pool_ids = itertools.count()
#: The name prefixes of pools given back idle and not taken since (their session may be gone and their threads
#: ending): no query runs on their threads.
_parked: set[str] = set()
_parked_lock = threading.Lock()
#: Every DriverExecutors alive, so a forked child can drop the pools whose threads it does not have.
_every: "weakref.WeakSet[DriverExecutors]" = weakref.WeakSet()


def _forget_pools_after_fork() -> None:
    """Drop every kept pool in a forked child: its threads stayed in the parent, so its queue would never be read."""
    global _parked_lock
    _parked_lock = threading.Lock()
    _parked.clear()
    for executors in list(_every):
        executors._lock = threading.Lock()
        executors._idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools_after_fork)


def working_driver_threads() -> list[threading.Thread]:
    """Return the driver threads that are not idle in a kept pool: those of queries running or of pools shutting down.

    What a finished, failed or cancelled query must leave none of: its
    threads either went back idle to its session or were joined.
    """
    drivers = [t for t in threading.enumerate() if t.name.startswith(DRIVER_THREAD_PREFIX)]
    with _parked_lock:
        _parked.intersection_update(t.name.rsplit("_", 1)[0] for t in drivers)  # forget pools whose threads ended
        return [t for t in drivers if t.name.rsplit("_", 1)[0] not in _parked]


class DriverExecutors:
    """Hand out driver thread pools by width, taking back those of finished queries."""

    def __init__(self, keep: int = 2):
        self.keep = keep
        self._lock = threading.Lock()
        self._idle: dict[int, list[tuple[str, ThreadPoolExecutor]]] = {}
        self._prefixes: "weakref.WeakKeyDictionary[ThreadPoolExecutor, str]" = weakref.WeakKeyDictionary()
        _every.add(self)

    def take(self, threads: int) -> ThreadPoolExecutor:
        """Return an idle pool of ``threads`` workers, or a new one."""
        with self._lock:
            idle = self._idle.get(threads)
            if idle:
                prefix, executor = idle.pop()
                with _parked_lock:
                    _parked.discard(prefix)
                return executor
        # A name per pool (its threads are "<prefix>_<n>"), so working_driver_threads can tell idle ones.
        prefix = f"{DRIVER_THREAD_PREFIX}-{next(_pool_ids)}"
        executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=prefix)
        with self._lock:
            self._prefixes[executor] = prefix
        return executor

    def give_back(self, executor: ThreadPoolExecutor, threads: int, finished: bool) -> None:
        """Keep ``executor`` for a later query when its query ``finished``; else shut it down, joining its threads."""
        if finished:
            with self._lock:
                idle = self._idle.setdefault(threads, [])
                if len(idle) < self.keep:
                    prefix = self._prefixes.get(executor, "")
                    with _parked_lock:
                        _parked.add(prefix)
                    idle.append((prefix, executor))
                    return
        executor.shutdown(wait=True)

    def close(self) -> None:
        """Shut every kept pool down, joining its threads."""
        with self._lock:
            pools = [e for idle in self._idle.values() for _, e in idle]
            self._idle.clear()
        for executor in pools:
            executor.shutdown(wait=True)  # its prefix leaves _parked once its threads are gone


_process_executors: list[DriverExecutors] = []
_process_executors_lock = threading.Lock()


def process_executors() -> DriverExecutors:
    """The driver thread pools every Session of this process takes from and gives back to."""
    if not _process_executors:
        with _process_executors_lock:
            if not _process_executors:
                _process_executors.append(DriverExecutors())
    return _process_executors[0]
