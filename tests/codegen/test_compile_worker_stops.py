"""The compile process pauses on a request it honours itself, as its control pipe says, never holding numba's cache lock.

Why: the engine pauses its compile process while a query is young
(:mod:`gpu_engine.codegen.background_compiles`, on by default). A plain
``SIGSTOP`` could land inside numba's cache save, which holds an ``flock`` on
the function's index (:mod:`gpu_engine.codegen.numba_cache_lock`): every other
process saving into that index (test workers, Spark executors, the engine's
own inline compiles) would then wait for as long as the worker stays stopped.
And a worker that stopped itself on a request could stop after the engine's
``SIGCONT`` (a handler waits for a long C call to return): the CI hang of
stop 43. The words of the control pipe are never lost.
"""

from __future__ import annotations

import os
import select
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


def test_a_stop_request_while_the_lock_is_held_by_another_thread_is_raised_again_on_release(tmp_path):
    """A handler that finds the lock held (a request delivered to another thread) defers it to the release."""
    raised = []
    previous = signal.signal(numba_cache_lock.STOP_REQUEST, lambda number, frame: raised.append(number))
    try:
        with numba_cache_lock.index_lock(str(tmp_path / "kernel.nbi.lock")):
            assert numba_cache_lock.held()
            numba_cache_lock.defer_stop_request()
            assert raised == []
        assert raised == [numba_cache_lock.STOP_REQUEST] and not numba_cache_lock.held()
    finally:
        signal.signal(numba_cache_lock.STOP_REQUEST, previous)


def _stand_in_worker(busy: str = "pass"):
    """Start a process with the worker's pause handler and a stand-in main loop: each line read from stdin is
    answered with ``busy`` run in between (as a compile's long C call), then the line echoed."""
    control_read, control_write = os.pipe()
    bootstrap = (f"import sys, hashlib; sys.path[:] = {sys.path!r}; "
                 "from gpu_engine.codegen.compile_worker import pause_on_request, wait_while_paused; "
                 f"pause_on_request({control_read}); wait_while_paused({control_read}); "
                 "print('ready', flush=True)\n"
                 "for line in sys.stdin:\n"
                 "    print('busy', flush=True)\n"
                 f"    {busy}\n"
                 "    print(line.strip(), flush=True)")
    process = subprocess.Popen([sys.executable, "-c", bootstrap], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               pass_fds=(control_read,))
    os.close(control_read)
    assert process.stdout.readline() == b"ready\n"
    return process, control_write


def _ask(process, control_write: int, word: bytes) -> None:
    """As the engine does (BackgroundCompiler._tell): the word first, then, for a pause, the request."""
    from gpu_engine.codegen.compile_worker import PAUSE

    os.write(control_write, word)
    if word == PAUSE:
        os.kill(process.pid, numba_cache_lock.STOP_REQUEST)


def _finish(process, control_write: int) -> None:
    try:
        os.close(control_write)
    except OSError:
        pass
    if process.poll() is None:
        process.kill()
    process.wait()


def test_a_paused_worker_waits_until_the_engine_says_run():
    from gpu_engine.codegen.compile_worker import PAUSE, RUN

    process, control_write = _stand_in_worker()
    try:
        _ask(process, control_write, PAUSE)
        process.stdin.write(b"job\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        assert ready == []  # paused: the request was handled before the line's first bytecode ran
        _ask(process, control_write, RUN)
        assert process.stdout.readline() == b"busy\n" and process.stdout.readline() == b"job\n"
        process.stdin.close()
        assert process.wait(timeout=60) == 0
    finally:
        _finish(process, control_write)


def test_a_run_sent_before_the_worker_handled_its_pause_is_never_lost():
    """The request lands while the worker is inside a long C call (its handler runs after it returns), and
    the engine's RUN comes before that: the worker must go on (a worker that stopped itself with SIGSTOP
    there stayed stopped for good, after the engine's SIGCONT had come and gone)."""
    from gpu_engine.codegen.compile_worker import PAUSE, RUN

    process, control_write = _stand_in_worker("hashlib.pbkdf2_hmac('sha256', b'x', b'y', 1_500_000)")
    try:
        process.stdin.write(b"job\n")
        process.stdin.flush()
        assert process.stdout.readline() == b"busy\n"
        _ask(process, control_write, PAUSE)
        time.sleep(0.2)  # delivered inside the C call: sent at once, a following SIGCONT would discard it
        _ask(process, control_write, RUN)
        assert process.stdout.readline() == b"job\n"
        process.stdin.close()
        assert process.wait(timeout=60) == 0
    finally:
        _finish(process, control_write)


def test_a_paused_worker_whose_engine_is_gone_goes_on_and_ends_with_its_input():
    """The control pipe's end (the engine closed it, or died) ends a pause: a paused worker is never left behind."""
    from gpu_engine.codegen.compile_worker import PAUSE

    process, control_write = _stand_in_worker()
    try:
        _ask(process, control_write, PAUSE)
        process.stdin.write(b"job\n")
        process.stdin.flush()
        os.close(control_write)
        assert process.stdout.readline() == b"busy\n" and process.stdout.readline() == b"job\n"
        process.stdin.close()
        assert process.wait(timeout=60) == 0
    finally:
        _finish(process, control_write)


def test_a_caller_waiting_for_the_compiles_raises_the_worker_to_normal_priority_and_back(monkeypatch):
    """``wait_idle`` (benchmarks settling the compiled tier, tests) runs no query: the idle-class worker would
    otherwise wait for CPUs other processes keep busy (a CI machine's test workers: a 300 s timeout)."""
    import threading

    import gpu_engine.codegen.background_compiles as background_compiles

    calls = []
    monkeypatch.setattr(background_compiles, "_set_worker_priority", lambda pid, urgent: calls.append((pid, urgent)))

    class Worker:  # stands for the compile process, compiling one job
        pid = 123456789

        def poll(self):
            return None

    compiler = background_compiles.BackgroundCompiler()
    compiler._process, compiler._outstanding = Worker(), ("module", "kernel", ())

    def finish():
        with compiler._lock:
            while not calls:
                compiler._lock.wait(0.01)
            compiler._outstanding = None
            compiler._lock.notify_all()

    finisher = threading.Thread(target=finish)
    finisher.start()
    assert compiler.wait_idle(timeout=60)
    finisher.join()
    assert calls[0] == (Worker.pid, True) and calls[-1] == (Worker.pid, False)
    assert {urgent for _, urgent in calls[:-1]} == {True}


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling classes")
def test_the_worker_priority_is_raised_where_permitted_and_lowered_again():
    import gpu_engine.codegen.background_compiles as background_compiles

    process = subprocess.Popen([sys.executable, "-c", "import os, sys; os.nice(19); "
                                "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0)); sys.stdin.read()"],
                               stdin=subprocess.PIPE)
    try:
        while os.sched_getscheduler(process.pid) != os.SCHED_IDLE:  # it lowers itself first
            assert process.poll() is None
        background_compiles._set_worker_priority(process.pid, urgent=True)
        if os.geteuid() == 0:  # elsewhere only with CAP_SYS_NICE
            assert os.sched_getscheduler(process.pid) == os.SCHED_OTHER
            assert os.getpriority(os.PRIO_PROCESS, process.pid) == 0
        background_compiles._set_worker_priority(process.pid, urgent=False)
        assert os.sched_getscheduler(process.pid) == os.SCHED_IDLE
        assert os.getpriority(os.PRIO_PROCESS, process.pid) == 19
    finally:
        process.kill()
        process.wait()
