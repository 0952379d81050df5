"""The compile process is paused by a stop request it honours itself, never while holding numba's cache lock.

Why: the engine stops its compile process while a query is young
(:mod:`gpu_engine.codegen.background_compiles`, on by default). A plain
``SIGSTOP`` could land inside numba's cache save, which holds an ``flock`` on
the function's index (:mod:`gpu_engine.codegen.numba_cache_lock`): every other
process saving into that index (test workers, Spark executors, the engine's
own inline compiles) would then wait for as long as the worker stays stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gpu_engine.codegen import numba_cache_lock

pytestmark = pytest.mark.skipif(numba_cache_lock.STOP_REQUEST is None or not hasattr(signal, "pthread_sigmask"),
                                reason="needs POSIX signals")


def test_a_cache_save_holds_back_stop_requests_until_the_lock_is_released(tmp_path):
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    with numba_cache_lock.index_lock(str(tmp_path / "kernel.nbi.lock")) as locked:
        inside = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    after = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    assert locked and numba_cache_lock.STOP_REQUEST in inside  # held back while the lock is held
    assert after == before and numba_cache_lock.STOP_REQUEST not in after  # the thread's mask restored


def test_numbas_cache_saves_take_that_lock(monkeypatch):
    from numba.core import caching

    numba_cache_lock.install()
    taken = []

    class Taken(Exception):
        pass

    def index_lock(path):  # the wrapper looks it up at each save: record the path, stop before numba's save
        taken.append(path)
        raise Taken

    monkeypatch.setattr(numba_cache_lock, "index_lock", index_lock)
    index = type("Index", (), {"_index_path": "/nowhere/kernel.nbi"})()
    with pytest.raises(Taken):
        caching.IndexDataCacheFile.save(index, "key", b"data")
    assert taken == ["/nowhere/kernel.nbi.lock"]


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc")
def test_the_compile_worker_stops_itself_on_a_stop_request_and_continues():
    """The worker's handler (installed first thing in ``main``) stops the process; ``SIGCONT`` continues it,
    and it still ends when its input closes. A stand-in main loop: reading stdin, as the worker waits for jobs."""
    bootstrap = (f"import sys; sys.path[:] = {sys.path!r}; "
                 "from gpu_engine.codegen.compile_worker import _stop_on_request; _stop_on_request(); "
                 "print('ready', flush=True); sys.stdin.read()")
    process = subprocess.Popen([sys.executable, "-c", bootstrap], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdout.readline() == b"ready\n"
        os.kill(process.pid, numba_cache_lock.STOP_REQUEST)
        deadline = time.monotonic() + 60
        while _state(process.pid) != "T" and time.monotonic() < deadline:  # waits for the state, not a time
            time.sleep(0.01)
        assert _state(process.pid) == "T"
        os.kill(process.pid, signal.SIGCONT)
        process.stdin.close()
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
