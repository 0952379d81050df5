"""Compile each disk-cached numba function once per test run, not once per pytest-xdist worker.

Why: the workers share one numba cache folder (tests/conftest.py), but a
worker only finds a kernel there once the other has saved it. Both start on
an empty cache (a fresh clone's CI) and need the same static kernels (hashing,
joins, grouping, sorting, Parquet decoding) and many of the same generated
ones, so both could compile one at the same time, a kernel being ~0.3-2 s of
CPU on a 2-core machine. Measured on a fresh cache: two processes running the
same compile-heavy test used 64.3 s of CPU without the lock and 38.2 s with it;
two running different SQL tests never met at one kernel (no wait, no gain). With :func:`install`, a worker about to compile a
function that has a disk cache takes an exclusive ``flock`` on
``<index>.compiling`` beside numba's cache index first; a worker that finds it
held waits, then numba's own cache lookup (which runs under the lock, before
compiling) loads what the other saved.

Only the test workers do this: in the engine a driver must not wait on the
background compile process, which runs at idle priority
(:mod:`gpu_engine.codegen.background_compiles`). A function already compiled in
this process, or uncached, never touches the lock. The lock is taken under
numba's process-wide compiler lock, so a thread never holds a file lock while
it waits for another thread of its process; nested compiles of callees take
their own locks (call graphs have no cycles); a wait longer than
:data:`WAIT_LIMIT_S` compiles anyway, so a stuck worker costs time, never a hang.
"""

from __future__ import annotations

import fcntl
import os
import time

__all__ = ["WAIT_LIMIT_S", "install", "waits"]

#: How long a worker waits for another's compile of one function before compiling it itself.
WAIT_LIMIT_S = 120.0
_POLL_S = 0.02
_HELD: set[str] = set()
_WAITS: list[float] = []
_INSTALLED: list[bool] = []


def waits() -> list[float]:
    """Return the seconds each wait for another worker's compile took in this process."""
    return list(_WAITS)


def _lock(handle: int) -> None:
    """Take the exclusive lock on ``handle``, polling up to :data:`WAIT_LIMIT_S`; record how long it waited."""
    start = time.monotonic()
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() - start > WAIT_LIMIT_S:
                break
            time.sleep(_POLL_S)
    waited = time.monotonic() - start
    if waited >= _POLL_S:
        _WAITS.append(waited)


def install() -> None:
    """Wrap numba's ``Dispatcher.compile`` so a cached function compiles in one process at a time (once per process)."""
    if _INSTALLED:
        return
    from numba.core import dispatcher, sigutils
    from numba.core.compiler_lock import global_compiler_lock

    compile_here = dispatcher.Dispatcher.compile

    def compile(self, sig):
        index = getattr(getattr(self._cache, "_cache_file", None), "_index_path", None)
        if index is None:  # no disk cache: nothing another process could hand over
            return compile_here(self, sig)
        args, _ = sigutils.normalize_signature(sig)
        if self.overloads.get(tuple(args)) is not None:  # compiled or loaded here already
            return compile_here(self, sig)
        with global_compiler_lock:
            path = index + ".compiling"
            if path in _HELD:  # a recursive compile of the same function in this process
                return compile_here(self, sig)
            try:
                handle = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
            except OSError:  # a read-only cache folder
                return compile_here(self, sig)
            try:
                _lock(handle)
                _HELD.add(path)
                try:
                    return compile_here(self, sig)
                finally:
                    _HELD.discard(path)
            finally:
                os.close(handle)  # closing releases the lock

    compile.__doc__ = compile_here.__doc__
    compile.__wrapped__ = compile_here
    dispatcher.Dispatcher.compile = compile
    _INSTALLED.append(True)
