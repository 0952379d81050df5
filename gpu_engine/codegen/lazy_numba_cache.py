"""Make an engine kernel's numba disk cache on its first compile, not when its module is imported.

Why: ``@njit(cache=True)`` builds a ``FunctionCache`` as it decorates: it
finds the cache folder (making it and creating and deleting a temporary file
there to see that it is writable), stats the source file and names the index.
The engine's kernel modules hold ~160 such dispatchers and a new process
imports most of them before its first query (``Session`` imports the
operators), while a query uses a few dozen: ~0.1 ms each of CPU and file
system calls, paid by every new process (the CLI, a Spark executor, a test
worker) for kernels it never runs (issue 29 item 4, "load lazily, per kernel
used"; the machine code itself was already loaded per kernel, at its first
call). Here the dispatchers of the engine's own modules (``gpu_engine.*`` and
generated ``gpu_engine_generated_*``) get a stand-in that builds the real
cache the first time numba asks it anything (a compile, a cache load, a
flush). Other code's dispatchers are left as numba makes them, so a function
numba cannot cache still fails where it is decorated.

The source file's stamp (modification time and size: what numba keys the
index with) is still read at import (one ``stat``): if the file has changed
when the cache is made, the function in memory is not the file's any more, so
its cache is made disabled (nothing loaded, nothing saved). Else a process
that imported a kernel module before someone edited it (a long benchmark in a
shared checkout) would save machine code of the old source under the new
file's stamp, and every later process would run it.

:func:`install` is idempotent and is called when ``gpu_engine.kernels`` is
imported, before any kernel module.
"""

from __future__ import annotations

import os
import threading

__all__ = ["LazyFunctionCache", "install", "source_stamp"]

_INSTALLED = False
#: Modules whose dispatchers get the stand-in: the engine's kernels and its generated kernels.
_ENGINE_MODULES = ("gpu_engine.", "gpu_engine_generated_")


class LazyFunctionCache:
    """Stand in for ``numba.core.caching.FunctionCache(py_func)`` until something asks it anything."""

    def __init__(self, py_func, make, stamp=None):
        """``make(py_func)`` makes the real cache; ``stamp``: the source's :func:`source_stamp` when the function
        was made (None: not checked)."""
        self._py_func = py_func
        self._make = make
        self._stamp = stamp
        self._cache = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        """Return whether the real cache has been made."""
        return self._cache is not None

    def _real(self):
        cache = self._cache
        if cache is None:
            with self._lock:
                cache = self._cache
                if cache is None:
                    cache = self._make(self._py_func)
                    if self._stamp is not None and source_stamp(self._py_func) != self._stamp:
                        cache.disable()  # the file was edited since the import: its entries are not this code's
                    self._cache = cache
        return cache

    def __getattr__(self, name: str):
        # Only numba's questions go to the real cache: a dunder (copy and pickle look for __setstate__ on an
        # instance made without __init__) or this object's own fields must not recurse into _real().
        if name.startswith("__") or name in ("_py_func", "_make", "_stamp", "_cache", "_lock"):
            raise AttributeError(name)
        return getattr(self._real(), name)

    def __reduce__(self):
        return LazyFunctionCache, (self._py_func, self._make, self._stamp)  # a copy starts unmade, its own lock

    def __repr__(self) -> str:
        return repr(self._cache) if self._cache is not None else f"<LazyFunctionCache py_func={self._py_func!r}>"


def source_stamp(py_func) -> tuple | None:
    """Return ``(modification time, size)`` of ``py_func``'s source file (numba's stamp), or None if unreadable."""
    try:
        found = os.stat(py_func.__code__.co_filename)
    except (OSError, AttributeError):
        return None
    return found.st_mtime, found.st_size


def install() -> None:
    """Have numba's CPU dispatchers of the engine's modules make their disk cache on first use (once per process)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from numba.core import dispatcher

    eager = dispatcher.Dispatcher.enable_caching

    def enable_caching(self):
        if getattr(self.py_func, "__module__", "").startswith(_ENGINE_MODULES):
            self._cache = LazyFunctionCache(self.py_func, dispatcher.FunctionCache, source_stamp(self.py_func) or ())
        else:
            eager(self)

    enable_caching.__doc__ = eager.__doc__
    enable_caching.__wrapped__ = eager
    dispatcher.Dispatcher.enable_caching = enable_caching
    _INSTALLED = True
