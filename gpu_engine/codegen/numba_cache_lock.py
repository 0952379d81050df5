"""Make numba's disk-cache writes safe between processes: an index update holds a file lock.

Why: numba saves a compiled specialization by reading the function's cache
index, picking the first free data-file name, writing the index back, then
the data file. Two processes saving specializations of one function at once
both pick the same name: the index then names the other process's object code
(seen as "can't unbox array" in a pytest-xdist run, and worse if the two
signatures happen to be compatible). The engine compiles in a separate process
while its drivers keep running (:mod:`gpu_engine.codegen.background_compiles`),
and test workers and Spark executors share one cache folder, so every process
that compiles takes an exclusive ``flock`` on ``<index>.lock`` around the
whole read-pick-write sequence. Loads need no lock: numba writes index and
data files by renaming complete temporary files, and a load that finds a
name whose file is not written yet is a cache miss. The lock is never held
by a paused process: the engine pauses its compile process with
:data:`STOP_REQUEST`, which a save holds back until it released the lock
(the thread's signal mask, and :func:`held` for a request another thread took).

:func:`install` is idempotent and is called when ``gpu_engine.kernels`` is
imported, before any kernel is compiled.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading

__all__ = ["STOP_REQUEST", "defer_stop_request", "held", "index_lock", "install"]

_INSTALLED = False
#: Index locks this process holds now, and whether a stop request came meanwhile (raised again on release).
_held = 0
_deferred = False
_state_lock = threading.RLock()  # re-entered by a signal handler on the thread that holds it
#: The signal that asks a compile process to pause (:mod:`gpu_engine.codegen.compile_worker` waits on its control
#: pipe on it). It is held back while a save holds the lock: a process paused there would leave every other process
#: that saves into the same index (the engine's drivers, test workers, Spark executors) waiting until it goes on.
#: ``SIGURG`` because its default action is to ignore it: a request that reaches the worker before its handler is
#: installed does nothing (the worker reads its control pipe once the handler is in place), and a terminal's
#: ``SIGTSTP`` (Ctrl-Z) still stops the worker with the rest of its process group.
STOP_REQUEST = signal.SIGURG if hasattr(signal, "SIGURG") else None


def _hold_stop_requests():
    """Block :data:`STOP_REQUEST` on this thread; return the mask to restore (None where signals have no masks)."""
    if STOP_REQUEST is None or not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, {STOP_REQUEST})


@contextlib.contextmanager
def index_lock(lock_path: str):
    """Hold the exclusive lock ``lock_path`` (yield True), with :data:`STOP_REQUEST` held back on this thread.

    Yields False without a lock where the file cannot be made (a read-only cache folder: numba's own save
    fails or skips as before).
    """
    try:
        handle = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError:
        yield False
        return
    global _held, _deferred
    mask = _hold_stop_requests()
    with _state_lock:
        _held += 1
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(handle)  # closing releases the lock
        with _state_lock:
            _held -= 1
            raise_again = _deferred and _held == 0
            if raise_again:
                _deferred = False
        if mask is not None:  # a stop asked meanwhile is delivered now, with the lock released
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if raise_again:
            os.kill(os.getpid(), STOP_REQUEST)


def held() -> bool:
    """Return whether this process holds an index lock now (a stop request must wait until it does not)."""
    return _held > 0


def defer_stop_request() -> None:
    """Have the last index lock this process releases raise :data:`STOP_REQUEST` again (a handler's deferral)."""
    global _deferred
    with _state_lock:
        if _held > 0:
            _deferred = True
            return
    os.kill(os.getpid(), STOP_REQUEST)  # released meanwhile: ask again now


def install() -> None:
    """Wrap numba's ``IndexDataCacheFile.save`` in an exclusive file lock next to the index (once per process)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from numba.core import caching

    unlocked_save = caching.IndexDataCacheFile.save

    def save(self, key, data):
        with index_lock(self._index_path + ".lock"):
            return unlocked_save(self, key, data)

    save.__doc__ = unlocked_save.__doc__
    save.__wrapped__ = unlocked_save
    caching.IndexDataCacheFile.save = save
    _INSTALLED = True
