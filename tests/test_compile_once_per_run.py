"""A cached numba function another test worker is compiling is waited for and loaded, not compiled again
(tests/compile_once_per_run.py, installed in every pytest-xdist worker by tests/conftest.py)."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import sys
import threading
import time

import compile_once_per_run
from numba.core import types

SOURCE = "from numba import njit\n\n\n@njit(cache=True)\ndef plus_one(x):\n    return x + 1\n"
HOLD_S = 0.3


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.plus_one


def _waiting_for_the_lock(thread: threading.Thread) -> bool:
    """Return True once ``thread`` is in compile_once_per_run's lock wait, its clock started."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "_lock" and frame.f_code.co_filename == compile_once_per_run.__file__:
            return "start" in frame.f_locals
        frame = frame.f_back
    return False


def test_a_worker_waits_for_anothers_compile_of_a_cached_function_and_loads_it(tmp_path):
    compile_once_per_run.install()
    path = tmp_path / "cached_function.py"
    path.write_text(SOURCE)
    other = _load(path, "cached_function_of_the_other_worker")
    mine = _load(path, "cached_function_of_this_worker")
    index = mine._cache._cache_file._index_path
    assert index == other._cache._cache_file._index_path  # one cache entry for both
    # The other worker holds the lock while it compiles, then saves (its compile bypasses this process's lock).
    handle = os.open(index + ".compiling", os.O_CREAT | os.O_RDWR)
    fcntl.flock(handle, fcntl.LOCK_EX)
    compile_here = type(other).compile
    getattr(compile_here, "__wrapped__", compile_here)(other, (types.int64,))
    results = []
    caller = threading.Thread(target=lambda: results.append(mine(41)))
    waits_before = len(compile_once_per_run.waits())
    caller.start()
    # Hold the lock HOLD_S from when the caller waits for it, not from its start: a thread may reach the lock
    # late on a loaded machine, and its wait, timed from there, then came out shorter than HOLD_S.
    deadline = time.monotonic() + 30
    while not _waiting_for_the_lock(caller) and caller.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(HOLD_S)
    try:
        assert caller.is_alive() and not results  # waiting for the lock, not compiling nor loading yet
    finally:
        os.close(handle)  # releases the lock
    caller.join(30)
    assert results == [42]
    assert not mine.stats.cache_misses and sum(mine.stats.cache_hits.values()) == 1  # loaded, not compiled
    assert compile_once_per_run.waits()[waits_before:][0] >= HOLD_S
