"""Make a bad numba disk-cache entry a cache miss: the kernel compiles again and the entry is dropped.

Why: numba's ``FunctionCache`` treats only a missing index or data file as a
miss; anything else it meets while loading is raised out of the dispatcher's
call, so one bad entry fails every later query that reaches that kernel, in
every process that shares the cache folder, until someone deletes the files
by hand. Seen: an entry written while a module was imported under another
name (``kernels.group_by`` instead of ``gpu_engine.kernels.group_by``:
numba's cache is keyed by the source file, and unpickling the entry imports
the module it names, ``ModuleNotFoundError`` everywhere else); also possible:
an index or data file truncated by a full disk or a killed process, a file
of another numba build under the same name, a folder another process is
evicting (:mod:`gpu_engine.codegen.cache_eviction`) or that is not writable
when a compiled kernel is saved. Here, for the numba CPU dispatchers of the
engine's modules (``gpu_engine.*`` and generated ``gpu_engine_generated_*``;
other code's functions keep numba's own cache, as in
:mod:`gpu_engine.codegen.lazy_numba_cache`):

- an index that cannot be read is an empty one (numba's next save writes a
  whole new index over it);
- an entry whose data file cannot be unpickled, or whose compiled result
  cannot be rebuilt, is removed from the index (under the index's lock,
  :mod:`gpu_engine.codegen.numba_cache_lock`, and only if the index still
  names that data file) and reported once as a warning; the dispatcher then
  compiles as on any miss, and its save writes a good entry;
- a save that fails leaves the kernel compiled in this process, uncached (a
  warning says why once), instead of failing the query that compiled it.

A crash inside LLVM on damaged object code is not guarded (numba checks
nothing there); entries are written by renaming whole files, so a damaged
one has to come from outside the engine.

:func:`install` is idempotent and is called when ``gpu_engine.kernels`` is
imported, before any kernel module: it replaces ``FunctionCache`` where
numba's dispatchers (and :mod:`gpu_engine.codegen.lazy_numba_cache`) find it;
for a function outside the engine that class makes numba's ``FunctionCache``.
"""

from __future__ import annotations

import threading
import warnings

from numba.core import caching

from gpu_engine.codegen.lazy_numba_cache import _ENGINE_MODULES

__all__ = ["GuardedFunctionCache", "GuardedIndexDataCacheFile", "install"]

_INSTALLED = False
_WARNED: set[tuple[str, str]] = set()  # (what, index path): each bad entry is reported once per process
_WARNED_LOCK = threading.Lock()
_MAX_WARNED = 1024


def _warn_once(what: str, index_path: str, error: BaseException) -> None:
    key = (what, index_path)
    with _WARNED_LOCK:
        if key in _WARNED:
            return
        if len(_WARNED) >= _MAX_WARNED:
            _WARNED.clear()
        _WARNED.add(key)
    warnings.warn(f"gpu_engine: numba cache entry {index_path}: {what} ({type(error).__name__}: {error}); "
                  "compiling it again", RuntimeWarning, stacklevel=3)


class GuardedIndexDataCacheFile(caching.IndexDataCacheFile):
    """numba's index and data files, with an unreadable index or data file taken as a miss and dropped."""

    def _load_index(self):
        try:
            return super()._load_index()
        except Exception as error:  # truncated, not a pickle, another build's objects
            _warn_once("unreadable index", self._index_path, error)
            return {}

    def load(self, key):
        """Return the entry of ``key``, or None when it is missing or cannot be read (then it is dropped)."""
        overloads = self._load_index()
        data_name = overloads.get(key)
        if data_name is None:
            return None
        try:
            return self._load_data(data_name)
        except OSError:  # removed while the index still names it (numba's own miss)
            return None
        except Exception as error:  # names a module this process cannot import, truncated, not a pickle
            _warn_once("unreadable entry", self._index_path, error)
            self.drop(key, data_name)
            return None

    def drop(self, key, data_name: str | None = None) -> None:
        """Remove ``key`` from the index if it still names ``data_name`` (any name when None); never raises."""
        from gpu_engine.codegen.numba_cache_lock import index_lock

        try:
            with index_lock(self._index_path + ".lock"):
                overloads = self._load_index()
                if key not in overloads or (data_name is not None and overloads[key] != data_name):
                    return  # another process wrote it again meanwhile
                del overloads[key]
                self._save_index(overloads)
        except Exception:  # a folder that is not writable or is being evicted: the next save replaces the entry
            pass


class GuardedFunctionCache(caching.FunctionCache):
    """numba's ``FunctionCache`` whose bad entries are misses and whose failed saves leave the kernel uncached."""

    def __new__(cls, py_func):
        if cls is GuardedFunctionCache and not getattr(py_func, "__module__", "").startswith(_ENGINE_MODULES):
            return caching.FunctionCache(py_func)  # other code's functions: numba's own (made, not ours to init)
        return super().__new__(cls)

    def __init__(self, py_func):
        super().__init__(py_func)
        self._cache_file.__class__ = GuardedIndexDataCacheFile  # same fields; made by numba's __init__

    def _load_overload(self, sig, target_context):
        if not self._enabled:
            return None
        key = self._index_key(sig, target_context.codegen())
        data = self._cache_file.load(key)
        if data is None:
            return None
        try:
            return self._impl.rebuild(target_context, data)
        except Exception as error:
            _warn_once("entry cannot be rebuilt", self._cache_file._index_path, error)
            self._cache_file.drop(key)
            return None

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except Exception as error:  # a full disk, a folder removed or made read-only meanwhile
            _warn_once("not saved", self._cache_file._index_path, error)


def install() -> None:
    """Have numba's CPU dispatchers made from now on use :class:`GuardedFunctionCache` (once per process)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from numba.core import dispatcher

    dispatcher.FunctionCache = GuardedFunctionCache
    _INSTALLED = True
