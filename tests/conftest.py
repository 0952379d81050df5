"""Parametrize tests over the devices this machine can run.

Without a GPU, numba's CUDA simulator is switched on before anything imports
``numba.cuda``, so every test runs on ``cpu`` and on ``cuda-sim`` (the CUDA
kernels interpreted on NumPy arrays). With a GPU (CuPy sees one and
``NUMBA_ENABLE_CUDASIM`` is not set) the devices are ``cpu`` and ``cuda``; the
``cuda`` cases carry the ``gpu`` marker.

Tests never write into the user's ``~/.cache``: :func:`pytest_configure` points
every cache folder the engine writes (generated kernel modules, PTX, TPC-H
data, matplotlib's font cache) at one test folder, ``.pytest_cache/d/gpu_engine``
(kept between runs of a checkout, so kernels compile and data generates once),
or a temporary folder when the cache plugin is off (``-p no:cacheprovider``).
A variable the user set already is left alone: a configured folder is theirs.

``--fast`` (``make test-fast``) keeps the quick part of the suite: ``cpu`` cases
only (no ``cuda-sim`` or ``cuda`` cases, nothing named after CUDA, PTX or the
simulator), no ``spark`` tests and no ``slow`` ones (:data:`SLOW_TESTS`).
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest


def _gpu_present() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


GPU_PRESENT = _gpu_present()

#: The xdist workers share one numba cache under the checkout's pytest cache, so a kernel one worker compiled the
#: other loads (a fresh clone's make test compiled ~180 static kernel specializations and ~250 generated kernels
#: in both workers). Saves are safe between processes: gpu_engine.codegen.numba_cache_lock holds a file lock
#: around numba's index update (without it, "can't unbox array": one's index named the other's object code).
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _XDIST_WORKER and not os.environ.get("NUMBA_CACHE_DIR"):
    os.environ["NUMBA_CACHE_DIR"] = str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "d" / "gpu_engine"
                                        / "numba")
if not GPU_PRESENT:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
#: Tests compile generated kernels on the driver at first use (deterministic counts of compilations, launches and
#: fused batches); tests/codegen/test_background_compiles.py runs the background and alternate modes explicitly,
#: and ``GPU_ENGINE_COMPILE_MODE=alternate make test`` runs the whole suite through both tiers.
os.environ.setdefault("GPU_ENGINE_COMPILE_MODE", "inline")

DEVICE_PARAMS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda" if GPU_PRESENT else "cuda-sim", id="cuda" if GPU_PRESENT else "cuda-sim",
                 marks=[pytest.mark.gpu] if GPU_PRESENT else []),
]


@pytest.fixture(params=DEVICE_PARAMS)
def device_name(request) -> str:
    """Yield each device name this machine runs: ``cpu`` and ``cuda-sim`` (or ``cuda``)."""
    return request.param


#: Python's thread switch interval while a ``cuda-sim`` case runs (its default is 5 ms). The simulator runs each
#: CUDA thread of a block as a Python thread and ends a ``cuda.syncthreads()`` barrier only once its polling
#: thread, which spins holding the GIL, has seen every lane arrive: at the default interval a barrier costs
#: about 5 ms a lane (the fused aggregation's kernels wait at two barriers a launch: 70 ms a launch against
#: 10 ms at 0.5 ms; kernels without barriers take as long at either).
SIMULATOR_SWITCH_INTERVAL = 5e-4
_SHARED_ARRAYS_LOCKED: list[bool] = []


def _lock_the_simulators_shared_arrays() -> None:
    """Make numba's simulated ``cuda.shared.array`` hand every thread of a block the same array, as CUDA does.

    Why: the simulator makes a block's shared array when its first thread reaches the line, looked up and stored
    without a lock, so threads switching in between each get an array of their own (wrong partial results, or
    lanes that never meet: seen in the fused aggregation at short switch intervals, and rarely at the default).
    Keyed as numba keys it (the calling line); looked up and made under one lock.
    """
    if _SHARED_ARRAYS_LOCKED:
        return
    import sys
    import threading

    import numpy as np
    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    simulated = kernelapi.FakeCUDAShared.array
    lock = threading.Lock()

    def array(self, shape, dtype):
        if shape == 0 or not hasattr(self, "_allocations"):  # dynamic shared memory: one buffer, no lookup
            return simulated(self, shape, dtype)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with lock:
            found = self._allocations.get(caller)
            if found is None:
                found = self._allocations[caller] = np.empty(shape, dtype)
        return found

    kernelapi.FakeCUDAShared.array = array
    _SHARED_ARRAYS_LOCKED.append(True)


@pytest.fixture(autouse=True)
def _short_thread_switches_on_the_simulator(request):
    """Switch Python threads every :data:`SIMULATOR_SWITCH_INTERVAL` seconds in a ``cuda-sim`` case, then restore
    (with the simulator's shared arrays made under a lock: :func:`_lock_the_simulators_shared_arrays`)."""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    if "cuda-sim" not in request.node.nodeid and not any(isinstance(value, str) and value == "cuda-sim"
                                                         for value in params.values()):
        yield
        return
    import sys

    _lock_the_simulators_shared_arrays()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(SIMULATOR_SWITCH_INTERVAL)
    yield
    sys.setswitchinterval(interval)


@pytest.fixture
def parquet_reader(device_name) -> str:
    """Yield the Parquet reader of a scan test: the engine's device decoder on ``cuda-sim`` and ``cuda`` (``cuda``'s
    default without cuDF), so CI runs the path a GPU takes; ``"auto"`` (the host decoder) on ``cpu``."""
    return "auto" if device_name == "cpu" else "device"


@pytest.fixture
def device(device_name):
    """Yield the :class:`gpu_engine.device.Device` for :func:`device_name`."""
    from gpu_engine.device import get_device

    return get_device(device_name)


#: Environment variable -> folder under the test cache root; each names where the engine (or a tool) writes a cache.
TEST_CACHE_VARIABLES = {
    "GPU_ENGINE_CACHE_DIR": ".",          # generated kernel modules (and numba's cache of them): <root>/generated
    "GPU_ENGINE_PTX_CACHE": "ptx",        # compiled PTX (gpu_engine.kernels.ptx_cache)
    "GPU_ENGINE_DATA": ".",               # TPC-H Parquet: <root>/tpch/sf<N>
    "MPLCONFIGDIR": "matplotlib",         # matplotlib's font cache (the bench charts)
}
_TEMPORARY_CACHE_ROOT: list[str] = []


def pytest_addoption(parser):
    parser.addoption("--fast", action="store_true", default=False,
                     help="gpu_engine: run cpu cases only (no cuda-sim/cuda cases, no spark or slow tests)")


def pytest_configure(config):
    """Point the engine's cache folders at the test cache root unless the user configured them."""
    config.addinivalue_line("markers", "cpu_case_in(name): the function's cpu case runs queries the test function "
                                       "`name` of its module runs on cpu at the same settings; it is left out")
    cache = getattr(config, "cache", None)
    if cache is not None:
        root = Path(cache.mkdir("gpu_engine"))
    else:  # -p no:cacheprovider: a temporary folder, removed at the end of the run
        root = Path(tempfile.mkdtemp(prefix="gpu_engine-tests-"))
        _TEMPORARY_CACHE_ROOT.append(str(root))
    for variable, folder in TEST_CACHE_VARIABLES.items():
        if not os.environ.get(variable):
            os.environ[variable] = str((root / folder).resolve())
    if _XDIST_WORKER:  # the workers share one numba cache: each cached kernel compiles in one of them at a time
        from compile_once_per_run import install

        install()
    import ci_timeline  # under pytest-xdist: where the run's wall time went, at the end of the log

    ci_timeline.register(config, scheduling_unit)


def pytest_sessionfinish(session, exitstatus):
    """Collect the run's garbage now and freeze what survives, so that pytest's own collection at unconfigure
    (its unraisable-exception plugin's ``gc.collect()``) traverses nothing old.

    Why: an xdist worker unconfigures after it told the controller it finished, and execnet sends the worker
    SIGINT when its execution goes on 5 s after the shutdown (``gateway_base._terminate_execution``). A full
    collection over a worker's heap (numba dispatchers and types, plans, Arrow tables: 1.3-2.6 s of wall at
    load 28 over one or two test folders, more over the whole suite) ran there, so the SIGINT landed in
    hypothesis's gc callback: the CI log's ``PytestUnraisableExceptionWarning`` (``KeyboardInterrupt`` in
    ``gc_callback``). Collected here, before xdist says ``workerfinished`` (its hookwrapper sends it after
    this hook), the unraisable exceptions of the run's garbage are reported as before.
    """
    gc.collect()
    gc.freeze()


def pytest_unconfigure(config):
    while _TEMPORARY_CACHE_ROOT:
        shutil.rmtree(_TEMPORARY_CACHE_ROOT.pop(), ignore_errors=True)


#: Tests that take 10 s or more on ``cpu`` (``make test`` durations on a 2-core VM): marked ``slow``, so
#: ``--fast`` and ``-m "not slow"`` leave them to the full run. Node id prefixes.
SLOW_TESTS = (
    "tests/codegen/test_row_lowering.py::test_random_expressions_fused_unfused_and_duckdb_agree",  # ~110 s
    "tests/test_cli.py::test_a_cold_kernel_cache_prints_a_compiling_line",  # two processes, one compiling: ~16 s
)
#: Words in a node id that mean CUDA work even without a device parameter (PTX compiles, the simulator).
_CUDA_WORDS = ("cuda", "simulator", "ptx")


def pytest_collection_modifyitems(config, items):
    """Mark :data:`SLOW_TESTS` ``slow``, leave out the cases outside :data:`SIMULATOR_PAIRS` and
    :data:`UNFUSED_CASE`; with ``--fast``, keep only the plain ``cpu`` cases (module docstring)."""
    for item in items:
        if item.nodeid.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("spark"):
            # Under pytest-xdist (``make test`` runs ``-n 2 --dist loadgroup``) every Spark test runs in one
            # worker, so Spark's JVM starts once per run, not once per worker (see pytest_xdist_make_scheduler).
            item.add_marker(pytest.mark.xdist_group("spark"))
    if not config.getoption("--fast"):
        # The Spark group (about 5 minutes) goes first: xdist hands out work in collection order, so it can
        # never be handed out last and leave one worker running it alone while the other idles. (A fresh
        # clone's make test took 15m35s with this against 15m46s without: no loss, a guard more than a gain.)
        items.sort(key=lambda item: item.get_closest_marker("spark") is None)
    _deselect(config, items, _outside_the_chosen_pairs)
    _deselect(config, items, _cpu_case_run_by_another_test)
    if config.getoption("--fast"):
        _deselect(config, items, _not_a_fast_case)


def _not_a_fast_case(item) -> bool:
    """Return True for what ``--fast`` leaves out: CUDA work (cuda-sim, cuda, PTX), Spark, slow and gpu tests."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    cuda_case = any(value in ("cuda-sim", "cuda") for value in params.values() if isinstance(value, str))
    cuda_case = cuda_case or any(word in item.nodeid.lower() for word in _CUDA_WORDS)
    heavy = item.get_closest_marker("spark") or item.get_closest_marker("slow") or item.get_closest_marker("gpu")
    return bool(cuda_case or heavy)


#: The (drivers, batch_rows) pairs a test parametrized over both runs on ``cuda-sim``. The simulator
#: interprets each CUDA thread in Python (half of the suite's time went to it), so there the driver
#: counts and batch sizes run as one pair, many batches over several drivers (partial/final merges,
#: grid-stride loops over more rows than the simulator's 16 threads); ``cpu`` runs three pairs (below)
#: and ``cuda`` all four. The kernels' CPU twins come from the same generated source. A test marked
#: ``simulator_values(name=(values...))`` runs only those values of its parameter ``name`` on cuda-sim;
#: one marked ``simulator_pairs((drivers, batch_rows), ...)`` runs those pairs there instead of these.
SIMULATOR_PAIRS = frozenset({(4, "small_batches")})


#: The (drivers, batch_rows) pair a test parametrized over both leaves out on ``cpu``: one driver over many
#: small batches. (4, small_batches) already sends many batches through each driver (and through partial/final
#: merges), (1, large_batches) runs the single-driver path, and (4, large_batches) drivers that get no batch at
#: all; the fourth pair was ~10% of the suite's time, mostly compiling again what the others compile (CI time).
#: A GPU's ``cuda`` cases keep all four.
CPU_LEFT_OUT_PAIR = (1, "small_batches")


#: Where the operator suite's unfused cases run (tests/operators/conftest.py ``fuse``): parameter ->
#: the one value it takes in an unfused case: the eager operators on ``cpu``, many batches over several
#: drivers (a test without one of these parameters runs unfused at its own values).
UNFUSED_CASE = {"device_name": "cpu", "drivers": 4, "batch_rows": "small_batches"}


def _outside_the_chosen_pairs(item) -> bool:
    """Return True for a case left out: a ``cuda-sim`` pair not in :data:`SIMULATOR_PAIRS` or a value outside
    its ``simulator_values`` marker, the ``cpu`` pair :data:`CPU_LEFT_OUT_PAIR`, or an unfused operator case
    outside :data:`UNFUSED_CASE`."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if params.get("fuse") is False:
        if any(name in params and params[name] != value for name, value in UNFUSED_CASE.items()):
            return True
    marker = item.get_closest_marker("simulator_values")
    if marker and params.get("device_name") == "cuda-sim":
        if any(name in params and params[name] not in values for name, values in marker.kwargs.items()):
            return True
    if "drivers" not in params or "batch_rows" not in params:
        return False
    pair = (params["drivers"], params["batch_rows"])
    if params.get("device_name") == "cpu":
        return pair == CPU_LEFT_OUT_PAIR
    pairs = item.get_closest_marker("simulator_pairs")
    return params.get("device_name") == "cuda-sim" and pair not in (set(pairs.args) if pairs else SIMULATOR_PAIRS)


def _cpu_case_run_by_another_test(item) -> bool:
    """Return True for the ``cpu`` case of a function marked ``cpu_case_in(name)``: a device function whose cpu case
    runs a subset of what the module's function ``name`` runs on cpu, through the same session settings (the
    SQL files' ``..._on_each_device`` beside ``..._on_cpu``), so it checks nothing the other does not (CI time).
    The named function must exist in the module: a rename cannot leave the cpu case out unchecked."""
    marker = item.get_closest_marker("cpu_case_in")
    if marker is None:
        return False
    if not callable(getattr(item.module, marker.args[0], None)):
        raise pytest.UsageError(f"{item.nodeid}: cpu_case_in names {marker.args[0]!r}, not a function of its module")
    return getattr(getattr(item, "callspec", None), "params", {}).get("device_name") == "cpu"


def _deselect(config, items, leave_out) -> None:
    """Deselect (report to pytest, remove) the items for which ``leave_out(item)`` is true."""
    dropped = [item for item in items if leave_out(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not leave_out(item)]


#: Where the Spark tests live: every test under it runs in the one worker that holds the Spark JVM.
SPARK_TESTS = "tests/spark/"
#: Modules whose test functions share one expensive module-scoped fixture: each is one scheduling unit, so one
#: worker runs the fixture. test_driver_launch_abi's compiles every CUDA kernel to PTX in two new processes
#: (~20 s of a clean clone's CI); module-scoped, it runs again in every worker that gets one of its three functions.
ONE_UNIT_MODULES = ("tests/kernels/test_driver_launch_abi.py",)
#: Scheduling units (test functions, or a module above) with a single call of 10 s or more in a clean clone's CI
#: (pytest --durations, 7900260 and bfdb273; the SQL files' since their cuts, in-process CPU on a cold cache): handed
#: out right after the Spark group, not last among the one-case units (xdist hands out the largest units first),
#: where one of them could leave the other worker idle at the end of the run. A name that no longer matches is
#: harmless.
LONG_UNITS = (
    "tests/codegen/test_row_lowering.py::test_random_expressions_fused_unfused_and_duckdb_agree",  # 19-29 s
    "tests/sql/test_grouping_sets.py::test_grouping_sets_match_duckdb_on_each_device",  # ~25 s (7 queries fused)
    "tests/kernels/test_driver_launch_abi.py",  # 19-24 s (its fixture)
    "tests/sql/test_differential_fuzz.py::test_generated_queries_fused",  # 14-20 s
    "tests/sql/test_window_sql.py::test_window_sql_matches_duckdb_on_cpu",  # ~20 s (the window static kernels)
    "tests/sql/test_set_operations.py::test_set_operations_match_duckdb_on_cpu",  # ~15 s
    "tests/sql/test_grouping_sets.py::test_grouping_sets_match_duckdb_on_cpu",  # ~13 s
    "tests/sql/test_set_operations.py::test_set_operations_match_duckdb_on_each_device",  # ~13 s
    # One-case units of the top-level files, which are collected last, so xdist hands them out last of all: each
    # runs subprocesses (CLI, demo, bench scripts), 14-26 s in-process at load 27 where the other top-level
    # tests took 0.1-9 s; handed out early they cannot be the test one worker runs alone at the end of the run.
    "tests/test_cli.py::test_a_cold_kernel_cache_prints_a_compiling_line_once_and_a_warm_one_none",
    "tests/test_cli.py::test_demo_end_to_end",
    "tests/test_import_footprint.py::test_a_cpu_process_s_first_queries_import_neither_pandas_nor_numba_cuda_"
    "and_cuda_sim_can_follow",
    "tests/test_concurrent_queries_bench.py::test_concurrent_queries_bench_reports_both_sides",
    "tests/test_cli.py::test_tpch_command_runs_queries_and_prints_a_summary",
    "tests/test_bench_reports.py::test_run_bench_writes_the_chart_next_to_its_report",
    "tests/test_readme.py::test_the_python_examples_run_as_written",
)


def scheduling_unit(nodeid: str) -> str:
    """Return the unit of work ``make test`` hands a worker ``nodeid`` in: the Spark group, a module of
    :data:`ONE_UNIT_MODULES`, or the test function (all its cases)."""
    if nodeid.startswith(SPARK_TESTS):
        return "spark"
    module = nodeid.split("::", 1)[0]
    return module if module in ONE_UNIT_MODULES else nodeid.split("[", 1)[0]


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: a run without pytest-xdist never calls it
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``, schedule every Spark test in one worker, first, then :data:`LONG_UNITS`, and the
    rest by test function (a module of :data:`ONE_UNIT_MODULES` as one unit).

    Why not just the ``xdist_group`` marker: xdist (3.8) tells the controller a test's group by appending
    ``@group`` to the worker's node id, which pytest 9 no longer lets a plugin change, so the marker was
    silently ignored: both workers started a Spark JVM and the GPU-assignment cluster ran twice (~95 s each).
    The controller only sees node ids, so the group is read from the path here.

    Why by function: a test function's cases (devices, drivers, batch sizes, fused or not) mostly run the same
    generated kernels, and each worker compiles a kernel it has not compiled itself; handed out case by case,
    both workers compiled most of them (test_filter_project.py: 13% less CPU in two workers by function). The
    xdist queue goes largest unit first; the Spark group (5 minutes) is moved to its front, so it never starts
    late and leaves one worker running it alone.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class SparkInOneWorker(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid)

        def _assign_work_unit(self, node) -> None:
            for unit in reversed(("spark",) + LONG_UNITS):  # the Spark group first, then the long units in order
                if unit in self.workqueue:
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return SparkInOneWorker(config, log)


@pytest.fixture(scope="session")
def tpch_data():
    """Return a function: scale factor -> folder of TPC-H Parquet files, generated at most once.

    The one place tests get TPC-H data: ``$GPU_ENGINE_DATA/tpch``, which :func:`pytest_configure`
    sets to the test cache root (kept between sessions) unless the user set it.
    """
    from gpu_engine.connectors.tpch_data import ensure_tpch

    root = Path(os.environ["GPU_ENGINE_DATA"]) / "tpch"
    folders: dict[float, Path] = {}

    def folder_for(scale_factor: float) -> Path:
        if scale_factor not in folders:
            folders[scale_factor] = ensure_tpch(scale_factor, root, progress=False)
        return folders[scale_factor]

    return folder_for
