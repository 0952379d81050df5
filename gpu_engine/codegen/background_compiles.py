"""Compile generated kernels off the drivers: a compile process fills numba's cache while batches run on the lowest tier.

Why: a fused operator's generated kernel compiles on its first batch, and
numba takes seconds per kernel (a new TPC-H query shape 1-4 s, a 400-term
predicate minutes) while the query waits, although the engine can answer the
same batch without it: the eager expression evaluator and the static kernels
(compiled once per machine) are a complete lower tier. So, as in *Adaptive
Execution of Compiled Queries* (Kohn, Leis, Neumann, ICDE 2018), a batch whose
kernel is not compiled yet runs on the lowest tier, and the kernel compiles in
the background; later batches (and later queries) switch to it as soon as it
is ready. Velox never compiles at all; this engine compiles only where it pays.

Where it compiles: in a separate process (:mod:`gpu_engine.codegen.compile_worker`),
not a thread, because numba's compiler holds the interpreter lock for most of
its work and would stall the drivers; the worker runs at the lowest CPU
priority, so on a busy machine it takes only idle cycles, and where the
machine has no core to spare for it beside the running queries' drivers it
is stopped while they run (the pause policy, :meth:`BackgroundCompiler._apply_hold`:
even an idle-priority process on a CPU delays the drivers, by keeping Linux
from handing a waiting driver the CPU another driver leaves), so that
compiling does not make a query slower than its lowest tier alone; a program
shape whose batches have waited on the lowest tier longer than the compiles
ahead of its kernels are estimated to take lets it run anyway. It writes numba's disk cache
(writes are locked between processes: :mod:`gpu_engine.codegen.numba_cache_lock`);
the engine's process loads the machine code from there (~3 ms of CPU a kernel),
on the thread that reads the worker's answers, before the kernel counts as
ready: a driver neither compiles nor loads a kernel the worker compiled.

Modes (``EngineConfig.compile_mode``, default from ``$GPU_ENGINE_COMPILE_MODE``,
else ``"background"``):

``"background"``
    as above;
``"inline"``
    compile on the driver at first use, the batch waits (deterministic: what
    tests that count compilations and launches use);
``"alternate"``
    odd batches of each operator run on the lowest tier, even ones on the
    generated kernel (compiled inline): a check that both tiers' results
    combine exactly, on every device;
``"lowest"``
    every batch runs on the lowest tier and nothing is generated for a batch
    or compiled: the lowest tier alone, which a first run in ``"background"``
    mode must not be slower than (``bench/first_runs.py`` measures both).

On ``cuda`` the same tiers, with PTX (issue 29's "PTX compiled off the
driver's thread"; built and tested without a GPU, not run on one yet). Before
the batch that would first launch a generated kernel's CUDA twin,
:func:`kernel_state` asks the process's driver launcher
(:class:`gpu_engine.kernels.driver_launch.KernelLauncher`) whether it has the
launch plan for the signature it derives from the batch's device arrays. If
not, the entry the launcher would read from :mod:`gpu_engine.kernels.ptx_cache`
(its path: the twin's code fingerprint, that signature, the compute capability,
the compile options, the toolchain; ``PtxCache.path_for``) becomes a job for
the compile process above (:class:`~gpu_engine.kernels.ptx_cache.PtxJob`): it
needs no GPU (``compile_ptx`` takes the compute capability), imports the twin,
checks that its own import keys to the same path, and writes the entry. The
thread of this process that reads the worker's answers then loads the module
(the driver's PTX-to-SASS step, ``cuModuleLoadData``) holding no lock of the
launcher's, and only then is the kernel ready; an entry an earlier process
wrote is only loaded, on a thread of its own. Meanwhile the batches run on the
lowest tier and switch at the same points as on ``cpu``, so the results are the
same. Before this, ``numba.cuda.compile_ptx`` (seconds per generated kernel,
holding the interpreter lock) and the module load ran on the driver inside the
launcher's lock, where every other driver needing a new launch plan waited too:
what the H100's long TPC-DS first runs paid
(bench/results/2026-11-27-gpu-h100-7900260-tpcds-sf1-partial.log). ``"inline"``
still compiles there. Static kernels are not asked (they compile once per
machine, or come from a PTX cache compiled ahead: ``bench/ptx_ahead.py``), nor
are launches the driver path leaves to numba's dispatcher. On ``cuda-sim``
nothing moves: the simulator interprets the kernel's Python and compiles
nothing, so every mode but ``"lowest"`` and ``"alternate"`` launches at once
(``"alternate"`` applies on every device).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import subprocess
import sys
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Hashable, Iterable

from gpu_engine.codegen.compile_worker import PAUSE, RUN
from gpu_engine.codegen.numba_cache_lock import STOP_REQUEST

__all__ = ["COMPILE_MODES", "COMPILE_POLICIES", "DEFAULT_COMPILE_ESTIMATE", "DEFAULT_PAUSE_SECONDS", "FAILED", "MODE_VARIABLE", "PAUSE_VARIABLE", "PENDING", "POLICY_VARIABLE", "READY", "BackgroundCompiler",
           "TierSwitch", "TwinRef", "background_compiler", "default_compile_mode", "hold_compiles_during_call",
           "hold_compiles_while", "kernel_ready",
           "kernel_state", "shape_once"]

COMPILE_MODES = ("background", "inline", "alternate", "lowest")
#: What :meth:`BackgroundCompiler.state` says of a kernel: runnable now, being compiled, or never (lowest tier).
READY, PENDING, FAILED = "ready", "pending", "failed"
MODE_VARIABLE = "GPU_ENGINE_COMPILE_MODE"
#: Program shapes a compiler remembers as waiting for their kernels (see TierSwitch); more start anew.
_MAX_WAITING_SHAPES = 1024
#: Jobs queued (or compiling) from which on a new program shape's kernels are not prepared yet (TierSwitch).
_MAX_QUEUED_JOBS = 4
#: Times a dead compile worker is started again before every later job is marked failed.
_MAX_RESTARTS = 3
#: Twins found READY for arguments of one kind (see TierSwitch._state), process-wide; more start anew.
_MAX_READY_KINDS = 4096
_ready_kinds: dict = {}
#: Seconds of each query's start during which the compile process is paused (see BackgroundCompiler.pause_seconds).
PAUSE_VARIABLE = "GPU_ENGINE_COMPILE_PAUSE"
#: The pause when ``$GPU_ENGINE_COMPILE_PAUSE`` is unset or not a number: longer than a TPC-DS SF1 first run
#: (0.05-1.5 s on 2 cores), shorter than a kernel's compile is worth waiting for in a long query.
DEFAULT_PAUSE_SECONDS = 2.0


#: How the compile process is paused (``$GPU_ENGINE_COMPILE_POLICY``; see BackgroundCompiler._apply_pause):
#: ``"hold"`` (default) stops it while the running queries' drivers fill the CPUs this process may use, for as
#: long as they run, unless a program shape has waited longer than its compiles are estimated to take;
#: ``"young"`` (stop 47's) stops it during each query's first ``pause_seconds``, then lets it run as long.
POLICY_VARIABLE = "GPU_ENGINE_COMPILE_POLICY"
COMPILE_POLICIES = ("hold", "young")
#: CPU seconds one compile job is taken to cost before this process has timed one (a new TPC-H shape's kernel
#: takes 1-4 s on 2 loaded cores): the price in the hold policy's rule until the worker reports its own.
DEFAULT_COMPILE_ESTIMATE = 2.0


def _compile_policy() -> str:
    policy = os.environ.get(POLICY_VARIABLE, "").strip()
    return policy if policy in COMPILE_POLICIES else "hold"


def _usable_cpus() -> int:
    """Return how many CPUs this process may run on (its affinity mask; the core count where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _pause_seconds() -> float:
    value = os.environ.get(PAUSE_VARIABLE, "").strip()
    try:
        seconds = float(value) if value else DEFAULT_PAUSE_SECONDS
    except ValueError:
        seconds = DEFAULT_PAUSE_SECONDS
    if STOP_REQUEST is None:  # no signals to stop a process with (Windows): never paused
        return 0.0
    return min(max(0.0, seconds), 1e9)  # NaN -> 0; "inf" -> a timer threading accepts


def default_compile_mode() -> str:
    """Return ``$GPU_ENGINE_COMPILE_MODE`` when it names a mode, else ``"background"``."""
    mode = os.environ.get(MODE_VARIABLE, "").strip()
    return mode if mode in COMPILE_MODES else "background"


def _load_cached(dispatcher, signature: tuple) -> bool:
    """Install ``dispatcher``'s specialization for ``signature`` from numba's disk cache; return whether it was there.

    The steps of ``Dispatcher.compile`` after its cache lookup, without its fall-through to the compiler
    (numba 0.68; tests cover it): a miss here must never compile on the caller's thread.
    """
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        if signature in dispatcher.overloads:
            return True
        cres = dispatcher._cache.load_overload(signature, dispatcher.targetctx)
        if cres is None:
            return False
        if not cres.objectmode:
            dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        dispatcher.add_overload(cres)
        return True


def _set_worker_priority(pid: int, urgent: bool) -> None:
    """Give the compile process ``pid`` normal priority (``urgent``) or its own, the lowest (as it sets itself).

    Raising needs root or ``CAP_SYS_NICE`` (leaving ``SCHED_IDLE`` and lowering a nice value); without them it
    stays where it is. A process that has exited meanwhile is no error.
    """
    if not hasattr(os, "sched_setscheduler") or not hasattr(os, "SCHED_IDLE"):
        return
    try:
        if urgent:
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
            os.setpriority(os.PRIO_PROCESS, pid, 0)
        else:
            os.setpriority(os.PRIO_PROCESS, pid, 19)
            os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except OSError:
        pass


class BackgroundCompiler:
    """The process-wide queue of compile jobs and the compile worker that runs them, one at a time.

    A job is a generated module's function and an argument signature. States:
    absent (never asked), ``"pending"``, ``"done"`` (in numba's cache) and
    ``"failed"`` (the worker raised; the lowest tier keeps running that kernel's
    batches, and a warning says so once).
    """

    def __init__(self, environment: dict[str, str] | None = None):
        """``environment`` is the compile process's (None: this process's; tests start one without the
        simulator, so that it compiles PTX as on a GPU machine)."""
        self._environment = environment
        self._lock = threading.Condition()
        self._states: dict[tuple, str] = {}
        self._queue: collections.deque = collections.deque()  # (key, the message sent to the worker)
        #: PTX jobs' keys -> what loads the compiled module into the launcher (see state_ptx).
        self._loads: dict[tuple, Callable[[], None]] = {}
        self._loading = 0  # module loads running (a job counts as pending until its load ends)
        self._outstanding: tuple | None = None  # the job the worker is compiling
        self._process: subprocess.Popen | None = None
        #: The write end of the worker's control pipe (see compile_worker: PAUSE / RUN), or None.
        self._control: int | None = None
        self._restarts = 0
        self.compiled = 0
        self.compile_seconds = 0.0
        #: The worker's own CPU seconds for the jobs it compiled (its answers' fourth field; a pause inside a
        #: compile counts in ``compile_seconds``, not here): the hold policy's estimate of what a job costs.
        self.compile_cpu_seconds = 0.0
        self.failures: dict[tuple, str] = {}
        #: Program shapes whose kernels an operator found compiling -> ``finished`` then (see TierSwitch).
        self.waiting_shapes: dict[Hashable, int] = {}
        #: Program shapes whose kernels an operator asked for (queued or found ready), in this process.
        self.asked_shapes: set[Hashable] = set()
        #: Jobs finished (compiled or failed, the worker's exit included) so far: a kernel found pending
        #: cannot be ready before this grows.
        self.finished = 0
        #: The pause policy (``$GPU_ENGINE_COMPILE_POLICY``, :data:`COMPILE_POLICIES`): see :meth:`_apply_pause`.
        self.policy = _compile_policy()
        #: CPUs this process may use; the hold policy stops the worker while running queries' drivers fill them.
        self.cpus = _usable_cpus()
        #: Times a program shape's wait on the lowest tier outlasted the compiles ahead of it (hold policy): each
        #: let the worker run while queries did, until the jobs then queued were finished.
        self.owed_runs = 0
        #: Program shape -> [seconds waited in earlier busy stretches, this stretch's first wait, its last wait,
        #: the stretch] (hold policy; see query_waits).
        self._waits: dict[Hashable, list] = {}
        #: Busy stretches so far (a stretch ends when no query of the process runs), and whether one is on.
        self._stretch = 0
        self._busy = False
        #: ``finished`` count below which the worker runs during queries (a shape's wait paid for its compiles).
        self._owed_until: int | None = None
        #: Callers of wait_idle waiting now: the compiles are wanted at once, so the worker is not held.
        self._urgent = 0
        #: ``"young"`` policy: while a query of this process has run less than this many seconds, the worker is paused (a
        #: ``PAUSE`` word on its control pipe and :data:`~gpu_engine.codegen.numba_cache_lock.STOP_REQUEST`, on
        #: which it waits for ``RUN``; see :mod:`~gpu_engine.codegen.compile_worker`); 0 never pauses it. Why: ``SCHED_IDLE`` keeps the worker from taking a CPU a
        #: driver is running on, but not from delaying the drivers: a CPU running it is not idle, so when
        #: a driver there blocks (the interpreter lock, a queue) Linux does no new-idle balancing
        #: (``balance_fair`` skips it while the run queue holds any task), and a driver queued behind
        #: another one on the other CPU waits for the next periodic balance or the end of a slice. First
        #: runs over TPC-DS SF1 waited 2.6-5.6 s more for a CPU than the lowest tier alone (quiet rounds,
        #: stop 41-42) and ran 1.12-1.28x its time; with the worker stopped during each query's first
        #: 0.5 s, TPC-H SF1's first runs waited as long as the lowest tier (0.71-0.72 s against 0.60-0.82;
        #: 1.21-1.24 s without). A short query gains nothing from a kernel ready after it ended (a compile
        #: takes 1-4 s): its kernels compile between queries, or once it has run long enough for a
        #: switch of tiers to pay. ``$GPU_ENGINE_COMPILE_PAUSE`` sets it (default
        #: :data:`DEFAULT_PAUSE_SECONDS`). A pause lasts this long at most, and the worker then runs as long
        #: before it pauses again: queries that follow one another, each shorter than the pause, would
        #: otherwise keep it paused for as long as they come (a dashboard's stream, a benchmark's warm runs),
        #: and their kernels would never compile. Under either policy 0 turns pausing off (the worker runs
        #: beside queries at idle priority); the hold policy uses no other value of it.
        self.pause_seconds = _pause_seconds()
        self.paused = False
        self.pauses = 0
        #: CPU seconds the worker ran between a PAUSE and the RUN after it (Linux's per-thread schedstat): what a
        #: stopped worker still took from the queries. The pause is honoured between bytecodes of the worker's
        #: main thread, so a PAUSE that finds it inside one long call (LLVM's optimization of a module) waits for
        #: the call to return; the bench reports it per query (bench/first_runs.py).
        self.held_cpu_seconds = 0.0
        self._cpu_at_pause: int | None = None
        #: id(task) -> (a weak reference to the task, started): every started Task of the process counts (the
        #: pause is on by default), and one abandoned unfinished must not be kept alive by this.
        self._queries: dict[int, tuple[Any, float]] = {}
        #: When the pause must be looked at again (the youngest running query grows old, the pause has lasted
        #: its longest, or the worker's run between pauses ends), and the one thread that waits for it
        #: (see _watch_pause).
        self._look_at: float | None = None
        #: When the present stretch of pauses began (pauses less than ``pause_seconds`` apart are one), when
        #: the last pause ended, and until when the worker runs before it may pause again.
        self._paused_since = 0.0
        self._resumed_at = float("-inf")
        self._runs_until = float("-inf")
        self._watcher: threading.Thread | None = None

    # ------------------------------------------------------------ queries
    def ready(self, dispatcher, signature: tuple) -> bool:
        """Return whether ``dispatcher`` runs ``signature`` without compiling; else make sure it is being compiled."""
        return self.state(dispatcher, signature) == READY

    def state(self, dispatcher, signature: tuple) -> str:
        """Return :data:`READY` when ``dispatcher`` runs ``signature`` without compiling, else :data:`PENDING`
        (queued for the worker, queued here if it was not) or :data:`FAILED`."""
        key = (dispatcher.py_func.__module__, dispatcher.py_func.__name__, signature)
        with self._lock:
            state = self._states.get(key)
            if state == "pending" or state == "failed":
                return PENDING if state == "pending" else FAILED
        if _load_cached(dispatcher, signature):
            with self._lock:
                self._states[key] = "done"
            return READY
        with self._lock:
            state = self._states.get(key)
            if state == "done":  # compiled, yet not loadable: numba could not cache it (keep the lowest tier)
                self._fail(key, "numba did not cache the compiled kernel")
                return FAILED
            if state is None:
                module = dispatcher.py_func.__globals__
                self._states[key] = "pending"
                self._loads[key] = lambda: _load_cached(dispatcher, signature)  # once compiled: see _read_answers
                self._queue.append((key, (key, module["__name__"], module["__file__"], key[1], key[2])))
                self._send_next()
            return FAILED if self._states[key] == "failed" else PENDING

    def ready_new(self, file, function: str, signature: tuple) -> bool:
        """Return True once a job of a file this process wrote is done (then load it as any other); else queue it."""
        return self.state_new(file, function, signature) == READY

    def state_new(self, file, function: str, signature: tuple) -> str:
        """Return the state of a job of a file this process wrote (:data:`READY` once done), queueing it if new."""
        key = (file.name, function, signature)
        with self._lock:
            state = self._states.get(key)
            if state is None:
                self._states[key] = "pending"
                # Once compiled, imported and loaded here, off the drivers (see _read_answers).
                self._loads[key] = lambda: _load_cached(getattr(file.module, function), signature)
                self._queue.append((key, (key, file.name, str(file.path), function, signature)))
                self._send_next()
                state = self._states[key]
            return READY if state == "done" else FAILED if state == "failed" else PENDING

    def state_ptx(self, job, load: Callable[[], None]) -> str:
        """Return the state of a CUDA kernel's PTX entry and module load (:data:`READY` once both are done).

        ``job`` is a :class:`~gpu_engine.kernels.ptx_cache.PtxJob`; ``load()`` makes the launch plan from the
        entry on disk (the driver's PTX-to-SASS step). A new job whose entry an earlier process wrote only
        loads, on a thread of its own; else the compile process writes the entry and this process's thread
        that reads its answers loads it, before the job counts as done. Neither is a driver, and neither
        holds a lock of the launcher's while loading.
        """
        key = (job.module, job.function, job.path)
        with self._lock:
            state = self._states.get(key)
            if state is None:
                self._states[key] = "pending"
                if job.written():
                    self._loading += 1
                    threading.Thread(target=self._finish_load, args=(key, load), name="gpu_engine-ptx-load",
                                     daemon=True).start()
                else:
                    self._loads[key] = load
                    self._queue.append((key, (key, job)))
                    self._send_next()
                state = self._states[key]
            return READY if state == "done" else FAILED if state == "failed" else PENDING

    def _finish_load(self, key: tuple, load: Callable[[], Any]) -> None:
        """Run a job's load (holding no lock), then mark the job done, or failed (lowest tier).

        A PTX job's load makes its launch plan; a CPU job's imports its generated module and installs the
        compiled specialization from numba's cache (a miss there is left to the driver's :meth:`state`,
        which fails the job: numba could not cache it).
        """
        try:
            load()
            error = None
        except Exception as failure:
            error = f"loading it failed: {type(failure).__name__}: {failure}"
        with self._lock:
            self._loading -= 1
            if error is None:
                self._states[key] = "done"
                self.finished += 1
            else:
                self._fail(key, error)
            if self._owed_until is not None:  # a paid-for run ends once its jobs are finished
                self._apply_pause()
            self._lock.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every job asked so far is done or failed; return False on timeout (bench and tests).

        Meanwhile the worker runs at normal priority where this process may raise it (root or
        ``CAP_SYS_NICE``): its idle class spares running queries, and a caller that waits for it runs none;
        at idle priority on a machine busy with other processes (a test suite's workers) it could wait for
        minutes. Back to idle priority when the wait ends.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        raised: set[int] = set()
        with self._lock:
            self._urgent += 1  # a paused worker goes on (hold policy) however long the queries run
            self._apply_pause()
        try:
            with self._lock:
                while self._outstanding is not None or self._queue or self._loading:
                    process = self._process
                    if process is not None and process.poll() is None:  # again each second: a new
                        raised.add(process.pid)  # worker lowers itself as it starts
                        _set_worker_priority(process.pid, urgent=True)
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._lock.wait(remaining if remaining is None or remaining < 1.0 else 1.0)
            return True
        finally:
            with self._lock:
                self._urgent -= 1
                self._apply_pause()
            for pid in raised:
                _set_worker_priority(pid, urgent=False)

    def pending(self) -> int:
        """Return the number of jobs not finished yet."""
        with self._lock:
            return len(self._queue) + (self._outstanding is not None) + self._loading

    # ------------------------------------------------------------ pausing
    def query_started(self, task) -> None:
        """Stop the worker as the policy says while ``task`` runs (see :func:`hold_compiles_while`)."""
        with self._lock:
            self._queries[id(task)] = (weakref.ref(task), time.monotonic(), _driver_width(task))
            self._apply_pause()

    def query_ended(self, task) -> None:
        """Let the worker run again once the policy says so (a Task listener)."""
        with self._lock:
            self._queries.pop(id(task), None)
            self._apply_pause()

    def query_waits(self, shape: Hashable) -> None:
        """Note that a batch of program shape ``shape`` ran on the lowest tier waiting for its kernels (a driver,
        via TierSwitch); under the hold policy, let the worker run once the shape has waited long enough.

        The rule (ski rental: pay for compiling once waiting has cost as much): a shape's batches have waited
        for as long as its operators ran on the lowest tier while its kernels were pending: per busy stretch
        of the process, from its first such batch to its last, summed over stretches. Its kernels are
        ready only after every job queued before them (one worker, first in first out), so their price is
        ``pending jobs x CPU seconds a job took on average`` (:data:`DEFAULT_COMPILE_ESTIMATE` before one
        is timed). Once the wait reaches the price, the worker runs during queries until those jobs are
        finished: a query that runs long on the lowest tier (or a shape that comes back again and again: a
        dashboard, a benchmark's warm runs) gets its kernels, having lost at most as much time to the
        compiles as it had already spent waiting (at most twice the best choice made knowing the future),
        while a shape that runs once and briefly (a first run, a new query) never pays for a compile that
        could not help it: its kernels compile between queries.
        """
        if not self.paused or self.policy != "hold":  # read unlocked: the worker runs, nothing to weigh
            return
        with self._lock:
            if not self.paused or self._owed_until is not None:
                return
            now = time.monotonic()
            entry = self._waits.get(shape)
            if entry is None:
                if len(self._waits) >= _MAX_WAITING_SHAPES:
                    self._waits.clear()
                entry = self._waits[shape] = [0.0, now, now, self._stretch]
            elif entry[3] != self._stretch:  # a new busy stretch: the gap between them is no wait
                entry[:] = [entry[0] + entry[2] - entry[1], now, now, self._stretch]
            else:
                entry[2] = now
            pending = len(self._queue) + (self._outstanding is not None) + self._loading
            if pending == 0 or entry[0] + entry[2] - entry[1] < pending * self._compile_estimate():
                return
            del self._waits[shape]
            self._owed_until = self.finished + pending
            self.owed_runs += 1
            self._apply_pause()

    def _compile_estimate(self) -> float:
        """Return the CPU seconds a compile job is taken to cost: the mean of this process's, else the default."""
        if self.compiled and self.compile_cpu_seconds > 0:
            return self.compile_cpu_seconds / self.compiled
        return DEFAULT_COMPILE_ESTIMATE

    def _apply_pause(self) -> None:
        """Stop or continue the worker as the policy says (caller holds the lock): :meth:`_apply_hold` or
        :meth:`_apply_young`."""
        if self.policy == "hold":
            self._apply_hold()
        else:
            self._apply_young()

    def _apply_hold(self) -> None:
        """The hold policy: stop the worker while queries run whose drivers fill the CPUs, for as long as they run.

        Why: on a machine with no spare core even an idle-priority worker delays the drivers (see
        :attr:`pause_seconds`): the lowest tier of the TPC-DS SF1 queries took 19.9 s beside the worker under
        the young policy, which lets it run half of a stream of queries' time, against 14.3 s alone (stop 47,
        an idle 2-core machine). So while the
        running queries' drivers (each query's widest pipeline) are at least as many as the CPUs this
        process may use, the worker is stopped, whatever the queries' ages; a query then runs as its lowest
        tier alone would, and the kernels compile between queries and while no query runs. With a core to
        spare (a GPU machine's 16 beside 2 drivers) it runs beside them, at idle priority, as it always
        did. Two exceptions keep kernels from never compiling: a shape that waited longer than its
        compiles' price (:meth:`query_waits`), and a caller waiting for the compiles (:meth:`wait_idle`).
        """
        for key, (reference, _, _) in list(self._queries.items()):
            task = reference()
            if task is None or task.is_done:
                del self._queries[key]
        if self._queries:
            self._busy = True
        elif self._busy:  # the process went idle: a shape's next wait starts a new stretch
            self._busy = False
            self._stretch += 1
        if self._owed_until is not None and self.finished >= self._owed_until:
            self._owed_until = None
        drivers = sum(self.cpus if width is None else width for _, _, width in self._queries.values())
        hold = (bool(self._queries) and drivers >= self.cpus and self._owed_until is None
                and self._urgent == 0)
        process = self._process
        if process is not None and process.poll() is None and hold and not self.paused:
            self._tell(process, PAUSE)  # it waits, never holding numba's cache lock
            self.paused = True
            self.pauses += 1
        elif self.paused and not hold:
            if process is not None:
                self._tell(process, RUN)
            self.paused = False
            self._resumed_at = time.monotonic()
        self._look_at = None  # nothing to time: queries' ends, waits and finished jobs decide

    def _apply_young(self) -> None:
        """The young policy: stop the worker while a running query is younger than :attr:`pause_seconds` (caller
        holds the lock), at most that long at a time, then let it run as long."""
        now = time.monotonic()
        for key, (reference, started, _) in list(self._queries.items()):
            task = reference()  # gone, ended before its listener was added, or no longer young: forgotten
            if task is None or task.is_done or now >= started + self.pause_seconds:
                del self._queries[key]
        young = [started + self.pause_seconds for _, started, _ in self._queries.values()]
        process = self._process
        if process is not None and process.poll() is None and young != [] and not self.paused:
            if now >= self._runs_until:
                if now - self._resumed_at >= self.pause_seconds:  # else the pauses of queries in a row: one
                    self._paused_since = now
                if now < self._paused_since + self.pause_seconds:
                    self._tell(process, PAUSE)  # it waits, never holding numba's cache lock
                    self.paused = True
                    self.pauses += 1
                else:  # that stretch of pauses has lasted its longest: run first
                    self._runs_until = now + self.pause_seconds
        elif self.paused and (young == [] or process is None):
            if process is not None:
                self._tell(process, RUN)
            self.paused = False
            self._resumed_at = now
        elif self.paused and now >= self._paused_since + self.pause_seconds:  # young queries in a row
            self._tell(process, RUN)
            self.paused = False
            self._resumed_at = now
            self._runs_until = now + self.pause_seconds
        if not young:
            self._look_at = None
        elif self.paused:  # the youngest grows old, or the pause has lasted its longest
            self._look_at = min(max(young), self._paused_since + self.pause_seconds) + 0.001
        else:  # running between pauses while queries are young: pause again when the run ends
            self._look_at = self._runs_until + 0.001 if now < self._runs_until else None
        if self._look_at is not None:
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch_pause, name="gpu_engine-compile-pause",
                                                 daemon=True)
                self._watcher.start()
            self._lock.notify_all()

    def _watch_pause(self) -> None:
        """Pause and let go of the worker when the times _apply_pause set come; end after 30 s with nothing to watch.

        One thread for a stretch of queries: a timer thread per query (as before) made each query start a
        thread on its main thread, holding this lock, and ``Thread.start`` waits until the new thread runs,
        which on a loaded machine is a wait for a CPU in every query.
        """
        with self._lock:
            while True:
                if self._look_at is None:
                    if not self._lock.wait(30.0) and self._look_at is None:
                        self._watcher = None
                        return
                    continue
                remaining = self._look_at - time.monotonic()
                if remaining > 0:  # a pause_seconds of inf (set directly) makes it inf: wait within what
                    self._lock.wait(min(remaining, threading.TIMEOUT_MAX))  # threading accepts
                else:
                    self._apply_pause()

    def _tell(self, process: subprocess.Popen, word: bytes) -> None:
        """Write ``word`` (PAUSE or RUN) on the worker's control pipe; a PAUSE also sends the stop request.

        The word goes first: the request's handler reads it, and a RUN written after it (however soon) is
        read by the same wait, so a pause never outlasts the query that asked for it.
        """
        if self._control is None:
            return
        try:
            os.write(self._control, word)
        except OSError:  # the worker exited (or 64 KiB of words unread: it is not running to read them)
            return
        cpu = _worker_cpu_ns(process.pid)
        if word == PAUSE:
            self._cpu_at_pause = cpu
        elif self._cpu_at_pause is not None and cpu is not None:
            self.held_cpu_seconds += max(0, cpu - self._cpu_at_pause) / 1e9
            self._cpu_at_pause = None
        if word == PAUSE:
            try:
                os.kill(process.pid, STOP_REQUEST)
            except OSError:  # it exited meanwhile: _read_answers restarts or fails its job
                pass

    def _close_control(self) -> None:
        """Close the control pipe: a waiting worker reads its end and goes on (to see its input close)."""
        if self._control is not None:
            try:
                os.close(self._control)
            except OSError:
                pass
            self._control = None

    # ------------------------------------------------------------- worker
    def _send_next(self) -> None:
        """Hand the worker the next queued job when it is idle (caller holds the lock)."""
        from gpu_engine.codegen.compile_worker import write_message

        while self._outstanding is None and self._queue:
            key, message = self._queue.popleft()
            if not self._start_worker():
                self._fail(key, "the compile worker could not be started")
                continue
            try:
                write_message(self._process.stdin, message)
            except (OSError, ValueError):
                self._process = None
                self._queue.appendleft((key, message))
                continue
            self._outstanding = key

    def _start_worker(self) -> bool:
        if self._process is not None and self._process.poll() is None:
            return True
        if self._process is not None:
            self._restarts += 1
        if self._restarts > _MAX_RESTARTS:
            return False
        from gpu_engine.codegen.compile_worker import worker_command

        self._close_control()
        control_read = None
        if STOP_REQUEST is not None and self.pause_seconds > 0:
            control_read, self._control = os.pipe()  # neither end is inherited by other children
            os.set_blocking(self._control, False)  # a query's thread never waits to pause the worker
        try:
            process = subprocess.Popen(worker_command(control_read), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, close_fds=True, env=self._environment,
                                       pass_fds=() if control_read is None else (control_read,))
        except OSError:
            self._restarts += 1
            self._close_control()
            return False
        finally:
            if control_read is not None:
                os.close(control_read)
        self._process = process
        self.paused = False
        self._apply_pause()  # started while a young query runs: it waits, as a running one would
        threading.Thread(target=self._read_answers, args=(process,), name="gpu_engine-compile-answers",
                         daemon=True).start()
        return True

    def _read_answers(self, process: subprocess.Popen) -> None:
        """Read the worker's answers; load each compiled job's result into this process before it counts as done.

        Why here: a CPU kernel the worker compiled was imported and loaded by the first driver batch that
        found it done (the generated module's source compiled and its numba dispatchers built, numba's index
        unpickled, the object code linked: tens of milliseconds a kernel on a loaded 2-core machine), in the
        middle of a query whose other batches ran on the lowest tier. Loaded by this thread, a switch of
        tiers costs a driver only the check that the specialization is there; the hold policy lets the worker
        compile mostly while no query runs, so its loads then land between queries too. A PTX job's
        module load (PTX to SASS) is done here for the same reason.
        """
        from gpu_engine.codegen.compile_worker import read_message

        while True:
            try:
                answer = read_message(process.stdout)
            except Exception:
                answer = None
            load = None
            with self._lock:
                if answer is None:  # the worker exited (or was stopped): its job failed, the queue goes on
                    if self._process is process:
                        self._process = None
                        if self._outstanding is not None:
                            self._loads.pop(self._outstanding, None)
                            self._fail(self._outstanding, "the compile worker exited")
                            self._outstanding = None
                        self._send_next()
                    self._lock.notify_all()
                    return
                key, error, seconds = answer[:3]
                if key == self._outstanding:
                    self._outstanding = None
                load = self._loads.pop(key, None)
                if error is None:
                    self.compiled += 1
                    self.compile_seconds += seconds
                    self.compile_cpu_seconds += answer[3] if len(answer) > 3 else seconds
                    if load is None:
                        self._states[key] = "done"
                        self.finished += 1
                    else:
                        self._loading += 1
                else:
                    load = None
                    self._fail(key, error)
                self._send_next()
                if self._owed_until is not None:  # a paid-for run ends once its jobs are finished
                    self._apply_pause()
                self._lock.notify_all()
            if load is not None:  # loaded here, while the worker compiles the next (see below)
                self._finish_load(key, load)

    def _fail(self, key: tuple, reason: str) -> None:
        """Mark ``key`` failed (caller holds the lock) and warn once: its batches stay on the lowest tier.

        A failure counts as a finished job (``finished``): operators waiting for one look again.
        """
        self._states[key] = "failed"
        self.finished += 1
        if key not in self.failures:
            self.failures[key] = reason
            warnings.warn(f"gpu_engine: compiling {key[0]}.{key[1]} in the background failed ({reason}); "
                          "its batches run on the lowest tier", RuntimeWarning, stacklevel=4)

    def close(self) -> None:
        """Stop the worker (at exit): a compile in progress is abandoned; its cache entry is simply not written."""
        with self._lock:
            process, self._process = self._process, None
            self._queue.clear()
            self._loads.clear()
            self._outstanding = None
            self._close_control()  # a paused worker goes on, to read the end of its input
            self.paused = False
            self._look_at = None
            self._lock.notify_all()
        if process is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
            try:
                process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            except BaseException:  # a Ctrl-C while waiting: the worker does not go on compiling for nobody
                process.kill()
                raise


def _worker_cpu_ns(pid: int) -> int | None:
    """Return the CPU nanoseconds process ``pid``'s main thread ran so far (Linux's schedstat), or None."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as stat:
            return int(stat.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None


def _driver_width(task) -> int | None:
    """Return how many of ``task``'s drivers can run at once (its widest pipeline's), or None when it does not say.

    Pipelines of a query mostly run one after another (a join's build, then its probe), so the widest one,
    not their sum, is what a query keeps busy; None counts as filling the machine.
    """
    widths = getattr(task, "pipeline_drivers", None)
    if not isinstance(widths, dict) or not widths:
        return None
    return max(1, max(widths.values()))


def _close_at_exit(compiler: BackgroundCompiler) -> None:
    """Stop ``compiler``'s worker as the interpreter exits; a Ctrl-C meanwhile ends the process as interrupted.

    Why: waiting for the worker (up to 0.5 s) is where a Ctrl-C pressed as a program finishes lands, and an
    exception in an atexit callback is only printed ('Exception ignored in atexit callback', a traceback)
    while the process exits 0. Here the worker is killed and the process ends with 130, as a shell reports
    an interrupted command, printing nothing (stdout and stderr flushed first).
    """
    try:
        compiler.close()
    except KeyboardInterrupt:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed or broken stream: nothing more can be written
                pass
        os._exit(130)


_COMPILER: BackgroundCompiler | None = None
_COMPILER_LOCK = threading.Lock()


def background_compiler() -> BackgroundCompiler:
    """Return the process's background compiler (created on first use; its worker starts with the first job)."""
    global _COMPILER
    if _COMPILER is None:
        with _COMPILER_LOCK:
            if _COMPILER is None:
                _COMPILER = BackgroundCompiler()
                atexit.register(_close_at_exit, _COMPILER)
    return _COMPILER


def hold_compiles_while(task) -> None:
    """Stop the compile process while ``task`` (a started Task) runs, as the pause policy says
    (:meth:`BackgroundCompiler._apply_pause`: by default for the whole query where its drivers fill the CPUs).

    Nothing happens where pausing is off. The Task counts even before the process's compiler exists: the
    compile process a query's first batches start (importing numba and the static kernels, seconds of
    CPU) starts paused while that query runs, as it would if it had started before.
    """
    compiler = _COMPILER
    if compiler is None and _pause_seconds() > 0:
        compiler = background_compiler()  # no process yet: only the queue and the young queries
    if compiler is None or compiler.pause_seconds <= 0:
        return
    compiler.query_started(task)
    task.add_listener(compiler.query_ended)


class _Call:
    """A call that plans and runs a query (see :func:`hold_compiles_during_call`), counted as a query of its width."""

    is_done = False

    def __init__(self, drivers: int):
        self.pipeline_drivers = {0: max(1, drivers)}


@contextlib.contextmanager
def hold_compiles_during_call(drivers: int):
    """Hold the compile process, as the pause policy holds it for a running Task of ``drivers`` drivers, for a
    whole call: planning, its Tasks (a shared CTE's first) and turning the result into Arrow.

    Why: the Task's hold (:func:`hold_compiles_while`) starts once its operators exist, so the worker compiled
    while each query planned (single-threaded: a CPU to spare), and a compile then inside one long LLVM call
    ran on into the query's drivers (a pause is honoured between the worker's bytecodes). With the call held,
    the worker compiles between calls. Where the query leaves CPUs to spare (a GPU machine's 16 cores beside 2
    drivers) nothing is held, as for its Task.
    """
    compiler = _COMPILER
    if compiler is None and _pause_seconds() > 0:
        compiler = background_compiler()  # no process yet: the queue and the running calls only
    if compiler is None or compiler.pause_seconds <= 0:
        yield
        return
    call = _Call(drivers)
    compiler.query_started(call)
    try:
        yield
    finally:
        call.is_done = True
        compiler.query_ended(call)


def _forget_in_child() -> None:
    """Give a forked child (a Spark worker forked from its daemon) a compiler of its own: the pipes are the parent's.

    The control pipe's write end is closed in the child: held open there, it would keep the parent's worker
    from seeing the parent die while paused.
    """
    global _COMPILER
    if _COMPILER is not None and _COMPILER._control is not None:
        try:
            os.close(_COMPILER._control)
        except OSError:
            pass
    _COMPILER = None


os.register_at_fork(after_in_child=_forget_in_child)


class TwinRef:
    """A CPU twin named by its generated file and function, so that asking whether it is ready imports nothing.

    A file this process has just written (:class:`~gpu_engine.codegen.compiled_modules.GeneratedFile`,
    ``new``) cannot be compiled anywhere yet: its job is queued straight from the arguments' types.
    """

    def __init__(self, file, function: str):
        self.file = file
        self.function = function

    @property
    def dispatcher(self):
        """Return the numba dispatcher (importing the module)."""
        return getattr(self.file.module, self.function)

    @property
    def cuda_dispatcher(self):
        """Return the CUDA twin of the same module (``<name>_cpu``'s is ``<name>_cuda``), importing the module."""
        return getattr(self.file.module, self.function.removesuffix("_cpu") + "_cuda")


def _argument_type(value):
    """Return numba's type of ``value`` as an argument (what ``Dispatcher.typeof_pyval`` gives)."""
    from numba.core import types
    from numba.core.typing.typeof import Purpose, typeof

    try:
        found = typeof(value, Purpose.argument)
    except ValueError:
        return types.pyobject
    return types.pyobject if found is None else found


def kernel_ready(device, mode: str, cpu_twin, arguments: Iterable[Any]) -> bool:
    """Return whether ``cpu_twin`` can run ``arguments`` on ``device`` without compiling on this thread.

    ``cpu_twin`` is a numba dispatcher or a :class:`TwinRef`. In ``"background"`` mode on ``cpu`` a
    kernel that is neither loaded nor in numba's cache is queued for the compile worker and False comes
    back: the caller runs the batch on its lowest tier. Otherwise True (the caller's launch compiles
    inline if it must).
    """
    return kernel_state(device, mode, cpu_twin, arguments) == READY


def kernel_state(device, mode: str, cpu_twin, arguments: Iterable[Any]) -> str:
    """Return :data:`READY`, :data:`PENDING` or :data:`FAILED` for ``cpu_twin`` with ``arguments`` (see
    :func:`kernel_ready`).

    On ``cuda`` a generated twin (a :class:`TwinRef`) is asked of the driver launch path instead: see
    :func:`_cuda_kernel_state`. On ``cuda-sim`` (nothing compiles) and in the other modes: :data:`READY`.
    """
    if mode != "background":
        return READY
    if device.kernel_flavor != "cpu":
        return _cuda_kernel_state(cpu_twin, arguments) if device.is_gpu else READY
    if isinstance(cpu_twin, TwinRef):
        if not cpu_twin.file.loaded and cpu_twin.file.new:
            signature = tuple(_argument_type(argument) for argument in arguments)
            state = background_compiler().state_new(cpu_twin.file, cpu_twin.function, signature)
            if state != READY:
                return state
        cpu_twin = cpu_twin.dispatcher
    signature = tuple(cpu_twin.typeof_pyval(argument) for argument in arguments)
    if signature in cpu_twin.overloads:
        return READY
    return background_compiler().state(cpu_twin, signature)


def _cuda_kernel_state(twin, arguments: Iterable[Any]) -> str:
    """Return whether the CUDA twin of ``twin`` launches with ``arguments`` without compiling or loading on a driver.

    READY when the process's launcher has its launch plan (or cannot use one: numba's dispatcher
    launches it, as for static kernels, which compile inline or come from the PTX cache); else the
    PTX entry the launcher will read (:meth:`~gpu_engine.kernels.driver_launch.KernelLauncher.ptx_job`) is
    compiled by the compile process when no earlier process wrote it, and the module is loaded off
    the drivers (:meth:`BackgroundCompiler.state_ptx`), meanwhile PENDING.
    """
    if not isinstance(twin, TwinRef):
        return READY
    from gpu_engine.kernels.driver_launch import process_launcher

    launcher = process_launcher()
    if launcher is None:
        return READY
    kernel = twin.cuda_dispatcher
    arguments = tuple(arguments)
    if launcher.ready(kernel, arguments):
        return READY
    job = launcher.ptx_job(kernel, arguments, str(twin.file.path))
    if job is None:
        return READY
    return background_compiler().state_ptx(job, lambda: launcher.load_plan(kernel, job.signature))


_SHAPE_KEYS = None  # a MadePerNode, made on first use (gpu_engine.exec imports this module)


def shape_once(owner: object, make: Callable[[], Hashable], variant: Hashable = None) -> Hashable:
    """Return ``make()``, the program shape key a :class:`TierSwitch` is given, made once per ``owner`` object.

    Why: ``owner`` is the program a plan node's set-up made once (shared by every driver's operator and every
    run of the plan), and its key is a ``repr`` of the program's shape (and of a fused aggregation's
    functions), which walked every expression for every operator: half of the tier switches' own CPU in
    a TPC-DS first run (SF 0.1, bench/results/2026-11-29-firstruns.md), work the lowest tier never does.
    Keyed by the owner's identity (:class:`~gpu_engine.exec.made_once.MadePerNode`), never by equality.
    """
    global _SHAPE_KEYS
    if _SHAPE_KEYS is None:
        from gpu_engine.exec.made_once import MadePerNode

        _SHAPE_KEYS = MadePerNode()
    return _SHAPE_KEYS.get(owner, make, variant)


class TierSwitch:
    """Decide for one operator, batch by batch, whether its generated kernels run or its lowest tier does.

    ``sticky`` operators (an aggregation step whose state cannot be split
    between tiers: SINGLE, INTERMEDIATE, FINAL) decide once, at their first
    batch, and keep that tier. The counts go to explain-analyze.

    While the kernels a batch needed are being compiled, later batches run on the lowest tier without
    binding their inputs (the caller's ``launches`` is not called) until the compile process finishes
    a job: binding a batch to a generated kernel evaluates its lifted string expressions and interns
    its string keys, work the lowest tier does again its own way, so asking every batch cost a
    first run a quarter of its time on 2 cores (TPC-H SF 0.1). Operators of one program shape share
    that wait (``shape``): the other drivers' first batches, and later queries' of the same shape,
    are not bound either. A batch of a new layout in that stretch runs on the lowest tier too; its
    kernel is queued at the next batch asked. A shape never asked for in this process waits the same
    way while the compile process has :data:`_MAX_QUEUED_JOBS` jobs queued: the first runs of the 99
    TPC-DS queries (SF 0.01, a loaded machine) prepared 441 kernels, ~7.5 ms of driver time each, of
    which the compile process finished one during those runs.
    """

    def __init__(self, device, mode: str, sticky: bool = False, shape: Callable[[], Hashable] | None = None):
        """``shape()`` names what the operator's kernels are generated from (their program's shape): operators
        of one shape (each driver's, and later queries' with other constants) share the wait for its kernels."""
        if mode not in COMPILE_MODES:
            raise ValueError(f"compile_mode must be one of {', '.join(map(repr, COMPILE_MODES))}, got {mode!r}")
        self.device = device
        self.mode = mode
        self.sticky = sticky
        self.batches = 0
        self._decided: bool | None = None
        #: Twins found not ready -> (the background compiler's ``finished`` count then, their state): until a
        #: job finishes they stay so, and a batch does not look at their arguments' types again.
        self._waiting: dict = {}
        #: The compiler's ``finished`` count when every kernel the last batch needed was ready or pending
        #: and one was pending (None otherwise): until it grows, no batch is bound to ask again.
        self._pending_since: int | None = None
        #: Whether every static twin ``use_generated``'s ``prerequisites`` named was found ready (never asked again).
        self._prerequisites_ready = False
        self._shape = shape

    @property
    def compiles_in_background(self) -> bool:
        """Return whether this operator's kernels compile in the compile process (not on a driver, at launch):
        ``"background"`` mode on ``cpu`` and on ``cuda`` (PTX), not on ``cuda-sim`` (nothing compiles)."""
        return self.mode == "background" and (self.device.kernel_flavor == "cpu" or self.device.is_gpu)

    def use_generated(self, launches: Callable[[], Iterable[tuple[Any, Iterable[Any]]]],
                      prerequisites: Callable[[], Iterable[tuple[Any, Iterable[Any]]]] | None = None) -> bool:
        """Return True to run this batch on the generated kernels, False for the lowest tier.

        ``launches()`` pairs each CPU twin the batch would launch with its arguments; it is called only
        when the answer depends on whether they are compiled (``"background"`` on ``cpu``, and not while
        the kernels the last batch asked for are still compiling), so the other modes and devices, and
        batches waiting on the compiler, pay no host work for it.

        ``prerequisites()`` pairs the *static* CPU twins the generated tier runs on the host (binding a
        batch interns its string keys; emitting compacts the slot table) with arguments of their types.
        They are asked first, and ``launches()`` (which binds the batch, running some of them) only once
        all are ready: on a machine that never ran them they are compiled by the compile process as the
        generated kernels are, never on a driver (after ``gpu-engine precompile``, which runs the lowest
        tier only, a first fused query compiled them on its drivers).
        """
        self.batches += 1
        if self.sticky and self._decided is not None:
            return self._decided
        if self.mode == "lowest":
            decided = False
        elif self.mode == "alternate":
            decided = self.batches % 2 == 0
        elif not self.compiles_in_background:
            decided = True  # the launch compiles inline if it must (see kernel_ready)
        else:
            decided = self._decide(launches, prerequisites)
        if self.sticky:
            self._decided = decided
        return decided

    def _decide(self, launches, prerequisites=None) -> bool:
        compiler = background_compiler()
        finished = compiler.finished  # read first: a job finishing during the checks counts as new
        if self._pending_since == finished:
            if self._shape is not None and not callable(self._shape):
                compiler.query_waits(self._shape)  # this batch waits on the lowest tier (the pause policy)
            return False
        if callable(self._shape):
            self._shape = self._shape()
        shapes = compiler.waiting_shapes
        if self._shape is not None and shapes.get(self._shape) == finished:
            compiler.query_waits(self._shape)
            return False
        if self._shape is not None and self._shape not in compiler.asked_shapes \
                and compiler.pending() >= _MAX_QUEUED_JOBS:
            # A new shape while the compile process has work queued: its kernels would not be compiled
            # before long, so preparing them now (generating, binding a batch, writing the file) only
            # costs the drivers. Ask again once a job finished.
            self._pending_since = finished
            compiler.query_waits(self._shape)
            return False
        states = []
        if prerequisites is not None and not self._prerequisites_ready:  # static twins stay loaded once they are
            states = [self._state(twin, arguments) for twin, arguments in prerequisites()]
            self._prerequisites_ready = all(state == READY for state in states)
        if all(state == READY for state in states):  # the static twins binding runs are loaded: bind the batch
            states += [self._state(twin, arguments) for twin, arguments in launches()]
        if self._shape is not None:
            if len(compiler.asked_shapes) >= _MAX_WAITING_SHAPES:
                compiler.asked_shapes.clear()
            compiler.asked_shapes.add(self._shape)
        decided = all(state == READY for state in states)
        waiting = PENDING in states and FAILED not in states
        self._pending_since = finished if waiting else None
        if self._shape is not None:
            if waiting:
                if len(shapes) >= _MAX_WAITING_SHAPES:
                    shapes.clear()
                shapes[self._shape] = finished
                compiler.query_waits(self._shape)
            else:
                shapes.pop(self._shape, None)
        return decided

    def _state(self, twin, arguments) -> str:
        identity = (twin.file.digest, twin.function) if isinstance(twin, TwinRef) else id(twin)
        arguments = tuple(arguments)
        kinds = _argument_kinds(arguments)
        # By the objects asked of (kept alive with the answer, so their ids stay theirs): a generated file made
        # anew (another cache folder, an evicted module) is asked again.
        owner = id(twin.file) if isinstance(twin, TwinRef) else id(twin)
        ready = None if kinds is None else (self.device.name, owner, identity, kinds)
        if ready is not None and ready in _ready_kinds:
            return READY
        finished = background_compiler().finished
        waiting = self._waiting.get(identity)
        if waiting is not None and waiting[0] == finished:
            return waiting[1]
        state = kernel_state(self.device, self.mode, twin, arguments)
        if state == READY:
            self._waiting.pop(identity, None)
            if ready is not None:
                if len(_ready_kinds) >= _MAX_READY_KINDS:
                    _ready_kinds.clear()
                _ready_kinds[ready] = twin
        else:
            self._waiting[identity] = (finished, state)
        return state


def _argument_kinds(arguments: tuple) -> tuple | None:
    """Return what numba's type of each argument depends on, or None for an argument not described here.

    Why: every batch of a fused operator asked :func:`kernel_state` of its twins, which types each of
    ~30 arguments with numba's ``typeof`` even once the kernels were loaded (900 typeofs, a quarter of
    the CPU of a TPC-DS q74 re-aggregation's batches at SF 0.1). A twin READY for arguments of these
    kinds stays READY (a loaded overload is never dropped), so :meth:`TierSwitch._state` remembers it
    by them. A kind that maps two numba types together would at worst make a launch compile inline.
    """
    import numpy as np

    kinds = []
    for argument in arguments:
        if isinstance(argument, np.ndarray):
            flags = argument.flags
            kinds.append((argument.dtype.str, argument.ndim, flags.c_contiguous, flags.f_contiguous,
                          flags.writeable, flags.aligned))
        elif isinstance(argument, np.generic):
            kinds.append((type(argument), argument.dtype.str))
        elif isinstance(argument, (bool, float)):
            kinds.append((type(argument),))
        elif isinstance(argument, int):
            kinds.append((int, -(2**63) <= argument < 2**63))
        else:
            return None
    return tuple(kinds)
