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
name whose file is not written yet is a cache miss.

:func:`install` is idempotent and is called when ``gpu_engine.kernels`` is
imported, before any kernel is compiled.
"""

from __future__ import annotations

import fcntl
import os

__all__ = ["install"]

_INSTALLED = False


def install() -> None:
    """Wrap numba's ``IndexDataCacheFile.save`` in an exclusive file lock next to the index (once per process)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from numba.core import caching

    unlocked_save = caching.IndexDataCacheFile.save

    def save(self, key, data):
        lock_path = self._index_path + ".lock"
        try:
            handle = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError:  # a read-only cache folder: numba's own save fails or skips as before
            return unlocked_save(self, key, data)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            return unlocked_save(self, key, data)
        finally:
            os.close(handle)  # closing releases the lock

    save.__doc__ = unlocked_save.__doc__
    save.__wrapped__ = unlocked_save
    caching.IndexDataCacheFile.save = save
    _INSTALLED = True
