"""Compile generated kernels into numba's disk cache, in a process of its own (the compile worker's main loop).

Why a process: numba's compiler holds the interpreter lock for most of its
work, so a compile on a thread of the query's process stalls the drivers it
is meant to serve (on a 2-core machine, all of them). The worker runs at the
lowest CPU priority (``SCHED_IDLE`` on Linux), imports each generated module
from its file (the same file and module name as the engine's process, so
numba's cache index is the same), compiles the asked signature and lets numba save it
(``cache=True``), then keeps the cache folder under its size bound (the scan
the engine's drivers skip for files this process compiles). A job may also
name a static kernel's module (``gpu_engine.kernels...``: one a fused tier
runs on the host, asked before a batch is bound, see ``TierSwitch``): it is
imported by name and compiled the same way; the engine's
process then loads the machine code from the cache
(:mod:`gpu_engine.codegen.background_compiles`).

On ``cuda`` a job may instead be a generated kernel's PTX entry
(``(job_id, PtxJob)``, :class:`gpu_engine.kernels.ptx_cache.PtxJob`): the
CUDA twin is imported the same way, compiled with ``numba.cuda.compile_ptx``
for the job's compute capability (no GPU touched) and written where the
engine's launcher will read it (:meth:`~gpu_engine.kernels.ptx_cache.PtxCache.write_job`).

Protocol: the parent starts it with its own ``sys.path`` (:func:`worker_command`)
and writes length-prefixed pickles to its stdin, jobs
``(job_id, module_name, path, function, signature)`` or ``(job_id, PtxJob)``;
the worker answers each with ``(job_id, error_or_None, seconds, cpu_seconds)`` on stdout (wall and its own
CPU time: the CPU is what a compile takes from queries on a machine with no spare core, and what the parent's
pause policy weighs against the lowest tier's time).
The worker ends when its stdin closes, so it never outlives the engine's process.

Pausing: the parent also hands it the read end of a control pipe, on which it
writes :data:`PAUSE` or :data:`RUN` (the last one written counts), and follows
each :data:`PAUSE` with a stop request
(:data:`~gpu_engine.codegen.numba_cache_lock.STOP_REQUEST`). The request's
handler reads the pipe and, while the last word read is :data:`PAUSE`, waits
in a blocking read for the next one: the worker compiles nothing until the
parent writes :data:`RUN` (or dies: the pipe's end wakes it too, and its input
closes next). Why not ``SIGSTOP``/``SIGCONT``: a handler runs only between
bytecodes of the main thread, so a request that arrived during a long LLVM
call was honoured after the parent's ``SIGCONT`` had already been sent, and the
worker stopped itself for good (the CI hang of stop 43: a benchmark waiting
for compiles waited 300 s); a word in a pipe is never lost. A stopped process
also never sees its parent die.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import sys
import time

__all__ = ["PAUSE", "RUN", "main", "read_message", "worker_command", "write_message"]

#: The words of the control pipe (see the module docstring): the last one written says whether to compile.
PAUSE, RUN = b"P", b"R"

_LENGTH = struct.Struct("<Q")
#: How generated modules' names start (:class:`gpu_engine.codegen.compiled_modules.GeneratedFile`); a job for
#: any other module is a static kernel, imported by its name.
GENERATED_PREFIX = "gpu_engine_generated_"


def read_message(stream):
    """Return the next pickled message of ``stream``, or None at its end."""
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(header)
    body = stream.read(length)
    if len(body) < length:
        return None
    return pickle.loads(body)


def write_message(stream, message) -> None:
    """Write ``message`` to ``stream`` as one length-prefixed pickle and flush it."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(body)) + body)
    stream.flush()


def worker_command(control_fd: int | None = None) -> list[str]:
    """Return the command that starts a worker with this interpreter and this process's import path.

    ``control_fd``: the worker's descriptor of the control pipe's read end (passed to it open), or None for
    a worker that is never paused.
    """
    # The lowest priority is taken before anything is imported: the interpreter's own imports (its start-up,
    # this module's) would otherwise run at normal priority beside the query whose first batches started it.
    bootstrap = ("import os, sys\n"
                 "if hasattr(os, 'SCHED_IDLE'):\n"
                 "    try: os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
                 "    except OSError: pass\n"
                 f"sys.path[:] = {sys.path!r}\n"
                 f"from gpu_engine.codegen.compile_worker import main; main({control_fd!r})")
    return [sys.executable, "-c", bootstrap]


def _module(module_name: str, path: str | None):
    """Return the module ``module_name``: a generated one imported from its file ``path``, else by its name."""
    generated = module_name.startswith(GENERATED_PREFIX)
    module = sys.modules.get(module_name)
    if module is None and not generated:  # a static kernel (one a fused tier runs on the host): its package's
        import importlib

        module = importlib.import_module(module_name)
    if module is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # numba's cache finds the functions' globals through it
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
    return module


def _bound_generated_cache(module_name: str, path: str | None) -> None:
    """Keep the generated-kernel cache under its size bound (this process does it, not a driver)."""
    if not module_name.startswith(GENERATED_PREFIX) or path is None:
        return  # static kernels' files are not the generated-kernel cache's to bound
    from pathlib import Path

    from gpu_engine.codegen.compiled_modules import bound_cache_size

    bound_cache_size(Path(path))


def _compile(module_name: str, path: str, function: str, signature) -> None:
    getattr(_module(module_name, path), function).compile(signature)
    _bound_generated_cache(module_name, path)  # numba's files of it are written


def _compile_ptx(job) -> None:
    """Write the PTX entry ``job`` names (:class:`~gpu_engine.kernels.ptx_cache.PtxJob`) from this process's import."""
    from gpu_engine.kernels.ptx_cache import PtxCache

    kernel = _module(job.module, job.module_path)
    for part in job.function.split("."):
        kernel = getattr(kernel, part)
    PtxCache.write_job(job, kernel)
    _bound_generated_cache(job.module, job.module_path)


def _lowest_priority() -> None:
    """Let the query's drivers come first: compile on cycles they leave idle.

    ``SCHED_IDLE`` where Linux has it (a weight of 3 against a normal thread's 1024: nice 19 still has 15,
    so on a busy 2-core machine it took a share from the drivers), else nice 19.
    """
    try:
        os.nice(19)
    except OSError:
        pass
    if hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass


def wait_while_paused(control_fd: int) -> None:
    """Read the control pipe's words; while the last one read is :data:`PAUSE`, wait for the next.

    Returns once every word written so far is read and the last is :data:`RUN`, or the pipe has ended
    (the engine closed it or died).
    """
    paused = False
    while True:
        ready, _, _ = select.select([control_fd], [], [], None if paused else 0)
        if not ready:
            return
        try:
            words = os.read(control_fd, 4096)
        except BlockingIOError:
            continue
        if not words:
            return
        paused = words.endswith(PAUSE)


def pause_on_request(control_fd: int | None) -> None:
    """Make a stop request (:data:`~gpu_engine.codegen.numba_cache_lock.STOP_REQUEST`) wait while paused.

    The request is held back while this process holds numba's cache lock
    (:mod:`gpu_engine.codegen.numba_cache_lock`): a worker waiting inside it would leave every other process
    that saves into the same index waiting as long. A request that arrives while the handler already waits
    returns at once: the waiting read sees its word.
    """
    import signal

    from gpu_engine.codegen import numba_cache_lock

    if numba_cache_lock.STOP_REQUEST is None or control_fd is None:
        return
    waiting = []

    def on_request(number, frame) -> None:
        if waiting:
            return
        if numba_cache_lock.held():
            numba_cache_lock.defer_stop_request()
            return
        waiting.append(True)
        try:
            wait_while_paused(control_fd)
        finally:
            waiting.clear()

    signal.signal(numba_cache_lock.STOP_REQUEST, on_request)


def main(control_fd: int | None = None) -> None:
    """Serve compile jobs from stdin until it closes, pausing as the control pipe ``control_fd`` says."""
    pause_on_request(control_fd)
    if control_fd is not None:  # a pause asked before the handler was in place (the request was ignored)
        wait_while_paused(control_fd)
    _lowest_priority()
    incoming, outgoing = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything a module prints must not corrupt the answers
    import gpu_engine.kernels  # noqa: F401  (numba's cache writes take their lock: numba_cache_lock)

    while True:
        job = read_message(incoming)
        if job is None:
            return
        job_id, started, cpu_started, error = job[0], time.perf_counter(), time.process_time(), None
        try:
            if len(job) == 2:  # (job_id, PtxJob)
                _compile_ptx(job[1])
            else:
                _compile(*job[1:])
        except BaseException as failure:  # reported to the parent, which keeps the lowest tier for it
            error = f"{type(failure).__name__}: {failure}"
        write_message(outgoing, (job_id, error, time.perf_counter() - started, time.process_time() - cpu_started))


if __name__ == "__main__":
    main()
