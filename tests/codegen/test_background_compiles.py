"""Tiered execution: generated kernels compile in a process of their own while batches run on the lowest tier.

Issue 29 item 2. A first run over kernels numba has never compiled must not
compile on its drivers (``kernels_compiled`` 0), must answer exactly as DuckDB
does, and later runs must switch to the kernels once the compile worker has
put them in numba's cache (loaded, not compiled: ``kernels_compiled`` 0 again).
``compile_mode="alternate"`` runs odd batches on the lowest tier and even ones
on the generated kernels, so both tiers' partial results meet in one final
aggregation on every device.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pyarrow as pa
import pytest

from tests.duckdb_reference import assert_same_rows, duckdb_table


def duckdb_query(sql: str, tables: dict) -> pa.Table:
    """Return DuckDB's answer to ``sql`` over in-memory Arrow tables."""
    import duckdb

    connection = duckdb.connect()
    for name, table in tables.items():
        connection.register(name, table)
    return duckdb_table(connection, sql)

_QUERIES = {
    "fused aggregation": "SELECT g, sum(v * 7 + g) AS s, count(*) AS n, avg(w) AS a FROM t WHERE v % 5 <> 1 GROUP BY g",
    "global aggregation": "SELECT sum(v * 3) AS s, min(w) AS lo, count(*) AS n FROM t WHERE w > 0.25",
    "filter and projection": "SELECT v * 11 - g AS x, w * 2 AS y FROM t WHERE v % 3 = 1 AND w < 0.9",
    "join filter": "SELECT t.v, u.z FROM t JOIN u ON t.g = u.g WHERE t.v + u.z > 500",
}


def _tables(rows: int = 3000):
    rng = np.random.default_rng(7)
    t = pa.table({"g": pa.array(np.arange(rows) % 13), "v": pa.array(np.arange(rows)),
                  "w": pa.array(rng.random(rows))})
    u = pa.table({"g": pa.array(np.arange(13)), "z": pa.array(np.arange(13) * 40)})
    return {"t": t, "u": u}


def _fresh_generated_kernels(tmp_path, monkeypatch):
    """Point the generated-kernel cache at an empty folder: every generated kernel is new to numba."""
    from gpu_engine.codegen import compiled_modules

    monkeypatch.setenv("GPU_ENGINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiled_modules, "_MODULES", {})


def _runtime(stats, name: str) -> int:
    return sum(int(s.runtime.get(name, 0)) for p in stats.pipelines for s in p.operators)


@pytest.mark.parametrize("query", list(_QUERIES), ids=list(_QUERIES))
def test_a_first_run_compiles_nothing_on_its_drivers_and_later_runs_load_the_compiled_kernels(
        tmp_path, monkeypatch, query):
    from gpu_engine import Session
    from gpu_engine.codegen.background_compiles import background_compiler

    _fresh_generated_kernels(tmp_path, monkeypatch)
    tables = _tables()
    sql = _QUERIES[query]
    expected = duckdb_query(sql, tables)
    # The static kernels the lowest tier runs are compiled once per machine (during set-up): here, unfused.
    static = Session(device="cpu", drivers=2, fuse=False, batch_rows=500)
    session = Session(device="cpu", drivers=2, compile_mode="background", batch_rows=500)
    for name, table in tables.items():
        static.register(name, table, split_rows=500)
        session.register(name, table, split_rows=500)
    assert_same_rows(static.sql(sql), expected)

    assert_same_rows(session.sql(sql), expected)
    first = session.last_stats()
    assert first.kernels_compiled == 0  # nothing compiled on a driver
    assert _runtime(first, "lowest_tier_batches") > 0

    # A run on the generated kernels can hand the next operator batches of another layout (a fused PARTIAL
    # step's columns are laid out unlike HashAggregation's), whose kernel then compiles in turn: a few runs.
    for _ in range(3):
        assert background_compiler().wait_idle(timeout=300)
        assert not background_compiler().failures
        assert_same_rows(session.sql(sql), expected)
        later = session.last_stats()
        assert later.kernels_compiled == 0  # loaded from numba's cache, which the worker wrote
        if _runtime(later, "lowest_tier_batches") == 0:
            break
    assert _runtime(later, "lowest_tier_batches") == 0


@pytest.mark.parametrize("query", ["fused aggregation", "filter and projection"])
def test_batches_waiting_for_the_compiler_are_not_bound_to_its_kernels(tmp_path, monkeypatch, query):
    """While a kernel compiles, batches run on the lowest tier without binding their inputs to it.

    Binding evaluates lifted string expressions and interns string keys, work the lowest tier does again
    its own way: only the first batch of each kernel's shape may pay it, not every batch of every driver.
    """
    from gpu_engine import Session
    from gpu_engine.codegen import background_compiles
    from gpu_engine.codegen.kernel_inputs import KernelInputs

    _fresh_generated_kernels(tmp_path, monkeypatch)
    compiler = background_compiles.BackgroundCompiler()
    monkeypatch.setattr(compiler, "_send_next", lambda: None)  # a compile process that never finishes a job
    monkeypatch.setattr(background_compiles, "_COMPILER", compiler)
    binds = []
    bind = KernelInputs.bind
    monkeypatch.setattr(KernelInputs, "bind", lambda self, batch: binds.append(1) or bind(self, batch))
    tables = _tables()
    sql = _QUERIES[query]
    session = Session(device="cpu", drivers=2, compile_mode="background", batch_rows=100)
    for name, table in tables.items():
        session.register(name, table, split_rows=100)
    for _ in range(2):  # a second run of the same shapes waits for the same kernels: binds nothing
        assert_same_rows(session.sql(sql), duckdb_query(sql, tables))
    stats = session.last_stats()
    assert _runtime(stats, "lowest_tier_batches") >= 30 and stats.kernels_compiled == 0
    assert compiler.pending() >= 1
    # At most each driver's first batch of each kernel's shape (both drivers may ask at once): 2 x 2.
    assert len(binds) <= 4, f"{len(binds)} batches were bound to kernels still compiling"


def test_a_new_shape_prepares_no_kernel_while_the_compile_process_has_a_queue(tmp_path, monkeypatch):
    """A new shape's kernels are not generated or bound while jobs are queued: they would not compile soon."""
    from gpu_engine import Session
    from gpu_engine.codegen import background_compiles
    from gpu_engine.codegen.kernel_inputs import KernelInputs

    _fresh_generated_kernels(tmp_path, monkeypatch)
    compiler = background_compiles.BackgroundCompiler()
    monkeypatch.setattr(compiler, "_send_next", lambda: None)
    monkeypatch.setattr(background_compiles, "_COMPILER", compiler)
    for k in range(background_compiles._MAX_QUEUED_JOBS):  # other queries' jobs, still queued
        compiler._states[("queued", "f", (k,))] = "pending"
        compiler._queue.append((("queued", "f", (k,)), "queued", "queued.py"))
    binds = []
    bind = KernelInputs.bind
    monkeypatch.setattr(KernelInputs, "bind", lambda self, batch: binds.append(1) or bind(self, batch))
    tables = _tables(rows=600)
    sql = _QUERIES["fused aggregation"]
    session = Session(device="cpu", drivers=2, compile_mode="background", batch_rows=100)
    for name, table in tables.items():
        session.register(name, table, split_rows=100)
    assert_same_rows(session.sql(sql), duckdb_query(sql, tables))
    assert _runtime(session.last_stats(), "lowest_tier_batches") > 0
    assert binds == [] and compiler.pending() == background_compiles._MAX_QUEUED_JOBS


@pytest.mark.parametrize("drivers", [1, 2])
@pytest.mark.parametrize("query", list(_QUERIES), ids=list(_QUERIES))
def test_both_tiers_in_one_query_answer_as_duckdb(device_name, drivers, query):
    from gpu_engine import Session

    tables = _tables(rows=600 if device_name == "cpu" else 90)
    session = Session(device=device_name, drivers=drivers, compile_mode="alternate", batch_rows=40)
    for name, table in tables.items():
        session.register(name, table, split_rows=40)
    sql = _QUERIES[query]
    assert_same_rows(session.sql(sql), duckdb_query(sql, tables))
    stats = session.last_stats()
    assert _runtime(stats, "lowest_tier_batches") > 0


@pytest.mark.parametrize("query, device_name", [(query, "cpu") for query in _QUERIES]
                         + [("fused aggregation", "cuda-sim")])  # the simulator interprets: one query
def test_the_lowest_mode_answers_without_generating_a_kernel_file(device_name, tmp_path, monkeypatch, query):
    """``compile_mode="lowest"``: the lowest tier alone (what a first run is measured against) writes no kernel."""
    from gpu_engine import Session

    _fresh_generated_kernels(tmp_path, monkeypatch)
    tables = _tables(rows=600 if device_name == "cpu" else 90)
    session = Session(device=device_name, drivers=2, compile_mode="lowest", batch_rows=40)
    for name, table in tables.items():
        session.register(name, table, split_rows=40)
    sql = _QUERIES[query]
    session.sql(sql)  # static kernels missing from numba's cache (a cold cache, this test run first) compile here
    assert_same_rows(session.sql(sql), duckdb_query(sql, tables))
    stats = session.last_stats()
    assert _runtime(stats, "lowest_tier_batches") > 0 and stats.kernels_compiled == 0
    assert not list(tmp_path.rglob("*.py")), "a generated kernel was written"


def test_an_empty_input_gives_one_row_for_an_aggregation_without_keys_on_either_tier():
    from gpu_engine import Session

    tables = _tables()
    sql = "SELECT count(*) AS n, sum(v) AS s FROM t WHERE v < 0"
    for mode in ("alternate", "background", "inline", "lowest"):
        session = Session(device="cpu", drivers=2, compile_mode=mode)
        session.register("t", tables["t"])
        assert_same_rows(session.sql(sql), duckdb_query(sql, tables))


def test_a_kernel_the_worker_cannot_compile_keeps_the_lowest_tier_and_warns(tmp_path, monkeypatch):
    from gpu_engine.codegen.background_compiles import BackgroundCompiler
    from gpu_engine.codegen.compiled_modules import generated_module

    _fresh_generated_kernels(tmp_path, monkeypatch)
    module = generated_module("from numba import njit\n\n@njit(cache=True)\ndef broken_cpu(a):\n"
                              "    return a.no_such_attribute\n", stem="broken")
    compiler = BackgroundCompiler()
    try:
        signature = (module.broken_cpu.typeof_pyval(np.zeros(3)),)
        assert not compiler.ready(module.broken_cpu, signature)
        with pytest.warns(RuntimeWarning, match="broken_cpu"):
            assert compiler.wait_idle(timeout=120)
        assert not compiler.ready(module.broken_cpu, signature)  # failed: asked once, never again
        assert compiler.pending() == 0 and len(compiler.failures) == 1
    finally:
        compiler.close()


def test_the_compile_worker_keeps_the_cache_under_its_bound_after_a_compile(tmp_path, monkeypatch):
    """A driver writing a module to compile in the background does not scan the cache; the worker does, after."""
    import os

    from gpu_engine.codegen.background_compiles import BackgroundCompiler
    from gpu_engine.codegen.compiled_modules import generated_file

    _fresh_generated_kernels(tmp_path, monkeypatch)
    monkeypatch.setenv("GPU_ENGINE_CACHE_MAX_MB", "0.002")  # ~2 KB: the old module must go
    old = generated_file("from numba import njit\n\n@njit(cache=True)\ndef old_cpu(a):\n    return a.sum()\n"
                         + "#" * 3000 + "\n", stem="evicted", evict=False)
    os.utime(old.path, (1_000_000, os.stat(old.path).st_mtime))  # used long ago
    new = generated_file("from numba import njit\n\n@njit(cache=True)\ndef new_cpu(a):\n    return a.max()\n",
                         stem="kept", evict=False)
    assert old.path.exists() and new.path.exists()  # written without a scan on this (the driver's) thread
    compiler = BackgroundCompiler()  # a worker of its own: it starts with this test's cache settings
    try:
        from numba import typeof

        assert not compiler.ready_new(new, "new_cpu", (typeof(np.zeros(3)),))
        assert compiler.wait_idle(timeout=120) and not compiler.failures
        assert compiler.ready_new(new, "new_cpu", (typeof(np.zeros(3)),))
    finally:
        compiler.close()
    assert new.path.exists() and not old.path.exists()


def test_the_compile_worker_ends_with_its_parent_and_leaves_no_thread(tmp_path):
    script = f"""
import threading, numpy as np, os
os.environ["GPU_ENGINE_CACHE_DIR"] = {str(tmp_path)!r}
from gpu_engine.codegen.compiled_modules import generated_module
from gpu_engine.codegen.background_compiles import background_compiler
module = generated_module("from numba import njit\\n\\n@njit(cache=True)\\ndef slow_cpu(a):\\n    return a.sum()\\n", stem="exit")
background_compiler().ready(module.slow_cpu, (module.slow_cpu.typeof_pyval(np.zeros(3)),))
print(background_compiler()._process.pid, flush=True)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])
    deadline = __import__("time").monotonic() + 10
    while __import__("time").monotonic() < deadline:
        try:
            __import__("os").kill(pid, 0)
        except ProcessLookupError:
            break
        __import__("time").sleep(0.1)
    else:
        pytest.fail(f"the compile worker {pid} outlived its parent")
    assert all(t.name != "gpu_engine-compile-answers" or not t.is_alive() for t in threading.enumerate()
               if t is threading.current_thread())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE is Linux's")
def test_the_compile_worker_runs_at_idle_priority():
    """On Linux the worker is SCHED_IDLE (policy 5): nice 19 alone still took a share from busy drivers."""
    import os
    import time

    from gpu_engine.codegen.compile_worker import worker_command

    worker = subprocess.Popen(worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        deadline, policy = time.monotonic() + 30, None
        while time.monotonic() < deadline and policy != os.SCHED_IDLE:
            policy = os.sched_getscheduler(worker.pid)
            time.sleep(0.05)
        assert policy == os.SCHED_IDLE
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE is Linux's")
def test_the_compile_worker_is_at_idle_priority_before_it_imports_the_engine(tmp_path, monkeypatch):
    """Its imports (the engine's modules, numba) run beside the query whose first batches started it."""
    import os

    from gpu_engine.codegen.compile_worker import worker_command

    fake = tmp_path / "gpu_engine"  # found first by the worker: reports its scheduling policy as it is imported
    fake.mkdir()
    (fake / "__init__.py").write_text("import os, sys\nprint(os.sched_getscheduler(0), flush=True)\nos._exit(0)\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    done = subprocess.run(worker_command(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == [str(os.SCHED_IDLE)], (done.stdout, done.stderr[-2000:])


def test_a_numba_cache_write_waits_for_the_lock_another_process_holds(tmp_path):
    """numba picks a data-file name from the index it read: two writers at once could give one name two codes."""
    import fcntl
    import os
    import select

    (tmp_path / "shared_kernels.py").write_text("from numba import njit\n\n@njit(cache=True)\ndef twice(a):\n"
                                                "    return a * 2\n")
    script = f"""
import sys, numpy as np
sys.path.insert(0, {str(tmp_path)!r})
import gpu_engine.kernels  # installs the cache lock
import shared_kernels
print(shared_kernels.twice._cache._cache_file._index_path, flush=True)
sys.stdin.readline()
shared_kernels.twice(np.ones(2))
print("saved", flush=True)
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        index_path = child.stdout.readline().strip()
        os.makedirs(os.path.dirname(index_path), exist_ok=True)
        handle = os.open(index_path + ".lock", os.O_CREAT | os.O_RDWR)
        fcntl.flock(handle, fcntl.LOCK_EX)
        child.stdin.write("go\n")
        child.stdin.flush()
        ready, _, _ = select.select([child.stdout], [], [], 3.0)  # compiles, then waits for the lock
        assert not ready, "the cache write did not wait for the lock"
        os.close(handle)
        ready, _, _ = select.select([child.stdout], [], [], 120.0)
        assert ready and child.stdout.readline().strip() == "saved"
        assert child.wait(timeout=60) == 0
        assert os.path.exists(index_path)
    finally:
        child.kill()


def test_a_forked_child_gets_a_compiler_of_its_own():
    import os

    from gpu_engine.codegen import background_compiles

    parent = background_compiles.background_compiler()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new compiler, never the parent's pipes
        os.close(reader)
        os.write(writer, b"1" if background_compiles.background_compiler() is not parent else b"0")
        os._exit(0)
    os.close(writer)
    assert os.read(reader, 1) == b"1"
    os.close(reader)
    os.waitpid(pid, 0)
    assert background_compiles.background_compiler() is parent


def _fresh_dispatcher(dispatcher):
    """Return a new numba dispatcher of ``dispatcher``'s function and options: nothing loaded in this process yet."""
    import numba

    options = {k: v for k, v in dispatcher.targetoptions.items() if k != "nopython"}
    return numba.njit(cache=True, **options)(dispatcher.py_func)


def test_the_static_kernels_a_fused_tier_runs_on_the_host_compile_off_the_drivers(tmp_path, monkeypatch):
    """A machine that never ran the fused tier's host kernels (string-key interning, slot compaction) compiles
    them in the compile process, not on a driver: no batch is bound (binding interns the keys) until they are in.

    ``gpu-engine precompile`` runs the lowest tier only, so after it a first fused query with a string
    grouping key compiled ``_hash_strings_cpu``, ``_intern_rows_cpu`` and ``_occupied_columns_cpu`` on its drivers.
    Since the lowest tier's HashAggregation interns string keys too (beadf66), set-up's unfused pass compiles the
    interning kernel itself; slot compaction, which only the fused tier runs, and the hash pass, which only a table
    out of the caches runs, still wait for the compile process.
    """
    from gpu_engine import Session
    from gpu_engine.codegen import background_compiles
    from gpu_engine.codegen.kernel_inputs import KernelInputs
    from gpu_engine.kernels import slot_compaction, string_keys

    _fresh_generated_kernels(tmp_path, monkeypatch)
    compiler = background_compiles.BackgroundCompiler()
    monkeypatch.setattr(compiler, "_send_next", lambda: None)  # a compile process that never finishes a job
    monkeypatch.setattr(background_compiles, "_COMPILER", compiler)
    # Not compiled on this machine: dispatchers with nothing loaded, and numba's disk cache answers nothing.
    monkeypatch.setattr(background_compiles, "_load_cached", lambda dispatcher, signature: False)
    static = {(string_keys, "_hash_strings_cpu"), (string_keys, "_intern_rows_cpu"),
              (slot_compaction, "_occupied_columns_cpu")}
    for module, name in static:
        monkeypatch.setattr(module, name, _fresh_dispatcher(getattr(module, name)))
    binds = []
    bind = KernelInputs.bind
    monkeypatch.setattr(KernelInputs, "bind", lambda self, batch: binds.append(1) or bind(self, batch))
    rows = 600
    tables = {"t": pa.table({"s": pa.array([f"key{i % 7}" for i in range(rows)]), "v": pa.array(np.arange(rows))})}
    sql = "SELECT s, sum(v * 3) AS total, count(*) AS n FROM t GROUP BY s"
    expected = duckdb_query(sql, tables)
    # The static kernels the lowest tier runs are compiled once per machine (during set-up): here, unfused.
    unfused = Session(device="cpu", drivers=2, fuse=False, batch_rows=100)
    session = Session(device="cpu", drivers=2, compile_mode="background", batch_rows=100)
    for each in (unfused, session):
        each.register("t", tables["t"], split_rows=100)
    assert_same_rows(unfused.sql(sql), expected)
    assert_same_rows(session.sql(sql), expected)
    stats = session.last_stats()
    assert stats.kernels_compiled == 0  # nothing compiled on a driver
    assert _runtime(stats, "lowest_tier_batches") > 0
    assert binds == [], f"{len(binds)} batches were bound (their string keys interned) before the kernels compiled"
    queued = {(key[0], key[1]) for key, state in compiler._states.items() if state == "pending"}
    compiled_by_set_up = {(module.__name__, name) for module, name in static if getattr(module, name).signatures}
    # (the hash pass only runs for a table out of the caches: this one's few keys hash in the probe loop)
    assert compiled_by_set_up == {(string_keys.__name__, "_intern_rows_cpu")}
    assert {(module.__name__, name) for module, name in static} - compiled_by_set_up <= queued
    assert (slot_compaction.__name__, "_occupied_columns_cpu") in queued


def test_the_host_twins_a_tier_switch_asks_for_are_the_ones_the_launches_run(monkeypatch):
    """The placeholder arguments of the host twins give the signatures interning and compaction really launch."""
    from gpu_engine.columnar.column import Column
    from gpu_engine.device import get_device
    from gpu_engine.kernels import slot_compaction, string_keys

    for module, name in [(string_keys, "_hash_strings_cpu"), (string_keys, "_intern_rows_cpu"),
                         (slot_compaction, "_occupied_columns_cpu")]:
        monkeypatch.setattr(module, name, _fresh_dispatcher(getattr(module, name)))
    device = get_device("cpu")
    table = string_keys.StringKeyTable(device)
    slots = np.zeros((16, 3), dtype=np.int64)
    twins = [*table.cpu_twins(), slot_compaction.occupied_columns_twin(slots, 2)]
    for dispatcher, arguments in twins:  # loaded from numba's cache (or compiled once on this machine)
        dispatcher.compile(tuple(dispatcher.typeof_pyval(argument) for argument in arguments))
        assert len(dispatcher.overloads) == 1
    plain = pa.array(["a", "bb", None, "a", "ccc"] * 50)
    for column in (plain, plain.dictionary_encode(), pa.array(["x", "y"] * 30), plain.slice(7, 90)):
        table.intern(Column.from_arrow(column, device))
    slots[[3, 9], 0] = 2
    slot_compaction.occupied_slot_columns(device, slots, 2, 2)
    # Every launch ran a signature a tier switch asked for: nothing else was compiled or loaded.
    assert [len(dispatcher.overloads) for dispatcher, _ in twins] == [1] * len(twins)


def test_the_compile_worker_compiles_a_static_kernel_by_module_name_and_scans_no_cache_for_it(tmp_path, monkeypatch):
    """A static kernel's job imports its module by name and leaves the kernels' folder alone (no eviction scan)."""
    from gpu_engine.codegen import compile_worker, compiled_modules
    from gpu_engine.kernels import slot_compaction

    _fresh_generated_kernels(tmp_path, monkeypatch)
    scans = []
    monkeypatch.setattr(compiled_modules, "bound_cache_size", lambda path: scans.append(path))
    dispatcher, arguments = slot_compaction.occupied_columns_twin(np.zeros((4, 2), dtype=np.int64), 2)
    signature = tuple(dispatcher.typeof_pyval(argument) for argument in arguments)
    compile_worker._compile(slot_compaction.__name__, slot_compaction.__file__, "_occupied_columns_cpu", signature)
    assert signature in dispatcher.overloads and scans == []
    generated = compiled_modules.generated_file("from numba import njit\n\n@njit(cache=True)\ndef one_cpu(a):\n"
                                                "    return a + 1\n", stem="scanned", evict=False)
    compile_worker._compile(generated.name, str(generated.path), "one_cpu", (dispatcher.typeof_pyval(1),))
    assert scans == [generated.path]  # a generated module's job keeps the cache under its bound


def test_static_host_twins_found_ready_are_not_asked_again():
    """Once the static twins a fused tier runs on the host are loaded, later batches do not look at them again."""
    from gpu_engine.codegen.background_compiles import TierSwitch
    from gpu_engine.device import get_device
    from gpu_engine.kernels import slot_compaction

    twin = slot_compaction.occupied_columns_twin(np.zeros((8, 3), dtype=np.int64), 2)
    twin[0].compile(tuple(twin[0].typeof_pyval(argument) for argument in twin[1]))  # loaded (or compiled once)
    asked = []
    tiers = TierSwitch(get_device("cpu"), "background")
    for _ in range(5):
        assert tiers.use_generated(lambda: [], lambda: asked.append(1) or [twin])
    assert len(asked) == 1


def test_the_compile_process_is_paused_while_a_young_query_runs(monkeypatch):
    """The young policy: with ``$GPU_ENGINE_COMPILE_PAUSE`` set, a query's first seconds run without the compile
    process (its idle-priority compiles still cost a first run's drivers wall time on 2 cores); it goes on once no
    running query is young, and when it is closed (its control pipe closes: a paused worker reads the end)."""
    import io
    import os
    import signal
    import time

    import gpu_engine.codegen.background_compiles as background_compiles
    from gpu_engine.codegen.compile_worker import PAUSE, RUN

    sent = []  # the words written on the worker's control pipe
    monkeypatch.setattr(background_compiles.BackgroundCompiler, "_tell",
                        lambda self, process, word: sent.append(word))
    monkeypatch.setenv(background_compiles.PAUSE_VARIABLE, "0.2")
    monkeypatch.setenv(background_compiles.POLICY_VARIABLE, "young")  # stop 47's policy (the default is "hold")

    class Clock:  # the queries' ages run on this clock, advanced by the test: a stalled test thread ages nothing
        now = time.monotonic()

        def monotonic(self):
            return self.now

        def __getattr__(self, name):
            return getattr(time, name)

    clock = Clock()
    monkeypatch.setattr(background_compiles, "time", clock)

    class Worker:  # stands for the compile process
        pid, stdin = 123456789, io.BytesIO()

        def poll(self):
            return None

        def wait(self, timeout=None):
            return 0

    class Query:  # stands for a started Task
        is_done = False

        def __init__(self):
            self.listeners = []

        def add_listener(self, listener):
            self.listeners.append(listener)

    compiler = background_compiles.BackgroundCompiler()
    monkeypatch.setattr(background_compiles, "_COMPILER", compiler)
    compiler._process = Worker()
    short, long = Query(), Query()
    background_compiles.hold_compiles_while(short)
    assert sent == [PAUSE] and compiler.paused
    background_compiles.hold_compiles_while(long)
    assert sent == [PAUSE]  # stopped once
    short.listeners[0](short)  # the short query ends; the long one is still young
    assert sent == [PAUSE]
    clock.now += 0.3
    deadline = time.monotonic() + 30
    while compiler.paused and time.monotonic() < deadline:  # the long query grows old: the worker continues
        time.sleep(0.02)
    assert sent == [PAUSE, RUN] and not compiler.paused
    clock.now += 0.3  # a query a while later (one at once would meet the run that follows a pause's longest)
    third = Query()
    background_compiles.hold_compiles_while(third)
    compiler._control = os.open(os.devnull, os.O_WRONLY)  # stands for the control pipe's write end
    compiler.close()  # the control pipe closed before its input: the paused worker reads its end
    assert sent == [PAUSE, RUN, PAUSE] and compiler.pauses == 2 and compiler._control is None
    assert not compiler.paused


def test_a_query_started_before_the_compile_process_keeps_it_paused_by_default(monkeypatch):
    """Pausing is on by default (an idle-priority compile process still delayed first runs' drivers: a CPU
    running it does no new-idle balancing), and a query that starts before the process's compiler exists
    counts: the compile process its first batches start (importing numba, seconds of CPU) starts stopped.
    A query dropped unfinished is not kept alive by the pause, and stops holding the worker."""
    import gc
    import io
    import os
    import signal
    import subprocess
    import types
    import weakref

    import gpu_engine.codegen.background_compiles as background_compiles
    from gpu_engine.codegen.compile_worker import PAUSE, RUN

    sent = []  # the words written on the worker's control pipe
    monkeypatch.setattr(background_compiles.BackgroundCompiler, "_tell",
                        lambda self, process, word: sent.append(word))
    monkeypatch.delenv(background_compiles.PAUSE_VARIABLE, raising=False)
    monkeypatch.delenv(background_compiles.POLICY_VARIABLE, raising=False)
    monkeypatch.setattr(background_compiles, "_COMPILER", None)

    class Worker:  # stands for the compile process
        pid, stdin, stdout = 123456789, io.BytesIO(), io.BytesIO()

        def poll(self):
            return None

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(background_compiles, "subprocess", types.SimpleNamespace(
        Popen=lambda *args, **kwargs: Worker(), PIPE=subprocess.PIPE, DEVNULL=subprocess.DEVNULL,
        TimeoutExpired=subprocess.TimeoutExpired))

    class Query:  # stands for a started Task
        is_done = False

        def __init__(self):
            self.listeners = []

        def add_listener(self, listener):
            self.listeners.append(listener)

    first = Query()
    background_compiles.hold_compiles_while(first)
    compiler = background_compiles._COMPILER
    assert compiler is not None and compiler.pause_seconds == background_compiles.DEFAULT_PAUSE_SECONDS > 0
    assert compiler._process is None and sent == []  # no process before a job asks for one
    monkeypatch.setattr(compiler, "_read_answers", lambda process: None)
    with compiler._lock:  # as a job queued by a driver starts it
        assert compiler._start_worker()
    assert sent == [PAUSE] and compiler.paused  # started during the young query: stopped at once
    assert compiler.policy == "hold" and compiler._watcher is None  # the default policy times nothing
    first.listeners[0](first)
    assert sent == [PAUSE, RUN] and not compiler.paused

    abandoned = Query()
    background_compiles.hold_compiles_while(abandoned)
    assert sent[-1] == PAUSE
    gone = weakref.ref(abandoned)
    del abandoned
    gc.collect()
    assert gone() is None  # the compiler held no reference to it
    third = Query()
    background_compiles.hold_compiles_while(third)
    third.listeners[0](third)  # the last live query ends: the dropped one holds the worker no longer
    assert sent[-1] == RUN and not compiler.paused
    compiler.close()


def test_a_pause_of_zero_never_stops_the_compile_process(monkeypatch):
    """``$GPU_ENGINE_COMPILE_PAUSE=0`` turns pausing off: a started query makes no compiler and stops nothing."""
    import gpu_engine.codegen.background_compiles as background_compiles

    monkeypatch.setenv(background_compiles.PAUSE_VARIABLE, "0")
    monkeypatch.setattr(background_compiles, "_COMPILER", None)
    background_compiles.hold_compiles_while(object())
    assert background_compiles._COMPILER is None
    monkeypatch.setenv(background_compiles.PAUSE_VARIABLE, "inf")
    assert background_compiles._pause_seconds() == 1e9  # a timer threading accepts
    monkeypatch.setenv(background_compiles.PAUSE_VARIABLE, "soon")
    assert background_compiles._pause_seconds() == background_compiles.DEFAULT_PAUSE_SECONDS


def test_a_twin_found_ready_is_not_typed_again_for_arguments_of_the_same_kinds(monkeypatch):
    """Once a twin is READY for arguments of some dtypes and layouts, a later batch (of any operator) asks no
    ``typeof`` of them: each fused batch typed its ~30 arguments again. Arguments of a new kind are typed."""
    from gpu_engine.codegen import background_compiles
    from gpu_engine.codegen.background_compiles import TierSwitch
    from gpu_engine.device import get_device
    from gpu_engine.kernels import slot_compaction

    monkeypatch.setattr(background_compiles, "_ready_kinds", {})  # as in a new process
    dispatcher, arguments = slot_compaction.occupied_columns_twin(np.zeros((8, 3), dtype=np.int64), 2)
    dispatcher.compile(tuple(dispatcher.typeof_pyval(argument) for argument in arguments))  # loaded
    typed = []
    original = dispatcher.typeof_pyval
    monkeypatch.setattr(dispatcher, "typeof_pyval", lambda value: typed.append(value) or original(value),
                        raising=False)
    for rows in (8, 16, 32):  # one operator per batch, as each driver's and query's are
        tiers = TierSwitch(get_device("cpu"), "background")
        table = np.zeros((rows, 3), dtype=np.int64)
        assert tiers.use_generated(lambda: [(dispatcher, slot_compaction.occupied_columns_twin(table, 2)[1])])
    assert len(typed) == len(arguments)  # the first batch's arguments only


def test_argument_kinds_tell_apart_what_numba_types_apart():
    """What a READY answer is remembered by separates dtypes, dimensions, layouts, read-only arrays, scalar types
    and integers beyond int64 (numba types those as uint64); objects it does not describe are not remembered."""
    from gpu_engine.codegen.background_compiles import _argument_kinds

    values = np.zeros(4, dtype=np.int64)
    read_only = values.view()
    read_only.flags.writeable = False
    kinds = [_argument_kinds((argument,)) for argument in (
        values, values.astype(np.int32), values.reshape(2, 2), values.reshape(2, 2).T, read_only, values[::2],
        True, 1, 2**63, 1.0, np.int32(1), np.int64(1), np.datetime64(1, "D"), np.datetime64(1, "s"))]
    assert len(set(kinds)) == len(kinds)
    assert _argument_kinds((values, 1)) == _argument_kinds((np.ones(9, dtype=np.int64), 7))
    assert _argument_kinds((values, object())) is None


def test_young_queries_in_a_row_pause_the_compile_process_half_the_time_at_most(monkeypatch):
    """The young policy: queries that follow one another, each younger than the pause when the next starts, would keep the worker
    paused for as long as they come (and their kernels would never compile): a pause lasts ``pause_seconds`` at
    most, then the worker runs as long before the next pause."""
    import time

    import gpu_engine.codegen.background_compiles as background_compiles
    from gpu_engine.codegen.compile_worker import PAUSE, RUN

    sent = []
    monkeypatch.setattr(background_compiles.BackgroundCompiler, "_tell", lambda self, process, word: sent.append(word))
    monkeypatch.setenv(background_compiles.PAUSE_VARIABLE, "1000")  # the watcher thread never acts: the test does
    monkeypatch.setenv(background_compiles.POLICY_VARIABLE, "young")

    class Clock:
        now = 0.0

        def monotonic(self):
            return self.now

        def __getattr__(self, name):
            return getattr(time, name)

    clock = Clock()
    monkeypatch.setattr(background_compiles, "time", clock)

    class Worker:
        pid = 123456789

        def poll(self):
            return None

    class Query:
        is_done = False

    compiler = background_compiles.BackgroundCompiler()
    compiler._process = Worker()
    queries = []

    def start_one_at(now):  # each query ends as the next one starts
        clock.now = now
        if queries:
            queries[-1].is_done = True
            compiler.query_ended(queries[-1])
        queries.append(Query())
        compiler.query_started(queries[-1])
        return list(sent)

    assert start_one_at(0) == [PAUSE]
    assert start_one_at(600) == [PAUSE, RUN, PAUSE]  # between two queries; the same stretch of pauses
    assert start_one_at(1000.5) == [PAUSE, RUN, PAUSE, RUN]  # the stretch has lasted its longest: runs until 2000.5
    assert not compiler.paused and compiler._look_at == 2000.5 + 0.001
    assert start_one_at(1600) == [PAUSE, RUN, PAUSE, RUN]  # a young query meets a running worker: it keeps running
    with compiler._lock:
        clock.now = 2000.6  # the run ends while that query is young: pause again
        compiler._apply_pause()
    assert sent == [PAUSE, RUN, PAUSE, RUN, PAUSE] and compiler.paused
    queries[-1].is_done = True
    compiler.query_ended(queries[-1])  # no young query left
    assert sent[-1] == RUN and not compiler.paused and compiler._look_at is None
    assert start_one_at(4000)[-1] == PAUSE  # long after: a new stretch


def _held_compiler(monkeypatch, cpus=2):
    """A hold-policy compiler with a stand-in worker, the words it is told and a clock the test advances."""
    import io
    import time

    import gpu_engine.codegen.background_compiles as background_compiles

    sent = []
    monkeypatch.setattr(background_compiles.BackgroundCompiler, "_tell", lambda self, process, word: sent.append(word))
    monkeypatch.delenv(background_compiles.PAUSE_VARIABLE, raising=False)
    monkeypatch.delenv(background_compiles.POLICY_VARIABLE, raising=False)

    class Clock:
        now = 0.0

        def monotonic(self):
            return self.now

        def __getattr__(self, name):
            return getattr(time, name)

    clock = Clock()
    monkeypatch.setattr(background_compiles, "time", clock)

    class Worker:
        pid, stdin = 123456789, io.BytesIO()

        def poll(self):
            return None

        def wait(self, timeout=None):
            return 0

    compiler = background_compiles.BackgroundCompiler()
    compiler._process = Worker()
    compiler.cpus = cpus
    return compiler, sent, clock


class _Query:
    """Stands for a started Task: ``pipeline_drivers`` as a Task's (pipeline id -> drivers), or none at all."""

    is_done = False

    def __init__(self, *widths):
        if widths:
            self.pipeline_drivers = dict(enumerate(widths))


def test_the_hold_policy_stops_the_compile_process_for_a_whole_query_whose_drivers_fill_the_cpus(monkeypatch):
    """By default the compile process is stopped while queries run whose drivers (each query's widest pipeline)
    fill the CPUs the process may use, however long they run (the young policy let it run after 2 s, half of
    a stream's time: the lowest tier ran 1.4x slower beside it on 2 cores); it runs between queries, and
    beside queries that leave a CPU to spare (a GPU machine's 16 cores, or one driver on two)."""
    from gpu_engine.codegen.compile_worker import PAUSE, RUN

    compiler, sent, clock = _held_compiler(monkeypatch, cpus=2)
    assert compiler.policy == "hold"
    query = _Query(2, 2)  # a build and a probe pipeline of two drivers each: two busy at a time
    compiler.query_started(query)
    assert sent == [PAUSE] and compiler.paused
    clock.now += 1000.0  # a long query: still stopped (no timer lets it go)
    with compiler._lock:
        compiler._apply_pause()
    assert sent == [PAUSE] and compiler._look_at is None
    query.is_done = True
    compiler.query_ended(query)
    assert sent == [PAUSE, RUN] and not compiler.paused

    narrow = _Query(1)  # one driver on two CPUs: a CPU to spare
    compiler.query_started(narrow)
    assert sent == [PAUSE, RUN]
    unknown = _Query()  # a task that does not say how wide it is counts as filling the machine
    compiler.query_started(unknown)
    assert sent == [PAUSE, RUN, PAUSE]
    unknown.is_done = True
    compiler.query_ended(unknown)
    assert sent[-1] == RUN
    narrow.is_done = True
    compiler.query_ended(narrow)

    wide, sent = _held_compiler(monkeypatch, cpus=16)[:2]  # the GPU machine: 16 CPUs beside two drivers
    query = _Query(2, 2)
    wide.query_started(query)
    assert sent == [] and not wide.paused


def test_a_shape_that_waited_longer_than_the_compiles_ahead_of_it_lets_the_compile_process_run(monkeypatch):
    """Kernels must still compile while queries keep the machine busy (a long query, a dashboard's stream): once a
    program shape's batches have waited on the lowest tier, summed over the process's busy stretches, as long as
    the pending jobs are estimated to take (2 s each until one is timed), the worker runs during queries until
    those jobs finish; a shape that waited less (a first run) never lets it run during a query."""
    from gpu_engine.codegen.compile_worker import PAUSE, RUN

    compiler, sent, clock = _held_compiler(monkeypatch, cpus=2)
    compiler._loading = 2  # two jobs pending: a price of 4 s
    first = _Query(2)
    compiler.query_started(first)
    assert sent == [PAUSE]
    for now in (0.0, 1.0, 2.9):
        clock.now = now
        compiler.query_waits("once")  # a one-off shape: waits 2.9 s
        compiler.query_waits("again")
    assert sent == [PAUSE]
    first.is_done = True
    compiler.query_ended(first)
    assert sent == [PAUSE, RUN]
    clock.now = 100.0  # time between busy stretches is no wait
    second = _Query(2)
    compiler.query_started(second)
    compiler.query_waits("again")
    clock.now = 101.0
    compiler.query_waits("again")
    assert sent == [PAUSE, RUN, PAUSE] and compiler.owed_runs == 0  # 3.9 s
    clock.now = 101.1
    compiler.query_waits("again")  # 4.0 s: the worker runs while the query does
    assert sent == [PAUSE, RUN, PAUSE, RUN] and not compiler.paused and compiler.owed_runs == 1
    compiler._finish_load(("m", "f", 1), lambda: None)
    assert sent[-1] == RUN  # one of the two jobs finished: it goes on
    compiler._finish_load(("m", "f", 2), lambda: None)
    assert sent[-1] == PAUSE and compiler.paused  # both finished while the query runs: stopped again


def test_the_compile_estimate_is_the_workers_own_cpu_time_per_job(monkeypatch):
    """The price of a job is the CPU seconds the worker reported per compiled job (its answers' fourth field;
    its wall time counts a pause inside a compile), the default until one is reported."""
    import io

    import gpu_engine.codegen.background_compiles as background_compiles
    from gpu_engine.codegen.compile_worker import write_message

    compiler, sent, clock = _held_compiler(monkeypatch)
    assert compiler._compile_estimate() == background_compiles.DEFAULT_COMPILE_ESTIMATE
    answers = io.BytesIO()
    write_message(answers, (("m", "f", 1), None, 9.0, 0.5))  # paused 8.5 s of its 9
    write_message(answers, (("m", "f", 2), None, 1.5, 1.5))
    answers.seek(0)
    compiler._process.stdout = answers
    compiler._states.update({("m", "f", 1): "pending", ("m", "f", 2): "pending"})
    compiler._read_answers(compiler._process)  # reads both, then the end (the worker "exited")
    assert compiler.compiled == 2 and compiler.compile_seconds == 10.5
    assert compiler._compile_estimate() == 1.0


@pytest.mark.parametrize("cpus", [2, 16])
def test_a_sql_call_holds_the_compile_process_while_it_plans_runs_and_converts_its_result(monkeypatch, cpus):
    """The compile process is held for a whole ``Session.sql`` call where its drivers fill the CPUs: planning
    and the result's conversion too, not only the Task (the worker compiled while each query planned, and a
    compile then inside one LLVM call ran on into the drivers). One PAUSE and one RUN a call, a shared CTE's
    Task included; with CPUs to spare (16 beside 2 drivers) nothing is held, as for a Task."""
    import gpu_engine.codegen.background_compiles as background_compiles
    from gpu_engine import Session
    from gpu_engine.codegen.compile_worker import PAUSE, RUN

    compiler, sent, _ = _held_compiler(monkeypatch, cpus=cpus)
    monkeypatch.setattr(background_compiles, "_COMPILER", compiler)
    seen = []
    planned = Session.sql_plan

    def sql_plan(self, *args, **kwargs):
        seen.append(compiler.paused)
        return planned(self, *args, **kwargs)

    monkeypatch.setattr(Session, "sql_plan", sql_plan)
    session = Session(device="cpu", drivers=2, compile_mode="lowest")
    session.register("t", pa.table({"k": [1, 2, 2, 3], "v": [1.0, 2.0, 3.0, 4.0]}))
    table = session.sql("SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k")
    assert table.column("s").to_pylist() == [1.0, 5.0, 4.0]
    shared = session.sql("WITH c AS (SELECT k, v FROM t WHERE v > 1) "
                         "SELECT a.k, b.v FROM c a JOIN c b ON a.k = b.k ORDER BY 1, 2")
    assert shared.num_rows == 5
    if cpus == 2:
        assert seen and all(seen), seen  # planned with the worker held (each CTE's plan too)
        assert sent == [PAUSE, RUN, PAUSE, RUN] and not compiler.paused
    else:
        assert seen and not any(seen) and sent == []
    assert compiler._queries == {}


def test_a_caller_waiting_for_the_compiles_lets_a_held_compile_process_run(monkeypatch):
    """``wait_idle`` (a benchmark, a test) wants the compiles now: a worker held by a running query goes on while
    it waits, and is held again after."""
    import threading

    from gpu_engine.codegen.compile_worker import PAUSE, RUN

    compiler, sent, clock = _held_compiler(monkeypatch)
    compiler._loading = 1
    query = _Query(2)  # kept alive: the compiler holds a weak reference
    compiler.query_started(query)
    assert sent == [PAUSE]
    waiter = threading.Thread(target=compiler.wait_idle, daemon=True)
    waiter.start()
    with compiler._lock:
        assert compiler._lock.wait_for(lambda: compiler._urgent == 1, timeout=60)
    assert sent == [PAUSE, RUN]
    compiler._finish_load(("m", "f", 1), lambda: None)
    waiter.join(60)
    assert not waiter.is_alive() and sent == [PAUSE, RUN, PAUSE]


def test_an_infinite_pause_set_directly_keeps_the_pause_watcher_alive(monkeypatch):
    """``pause_seconds = inf`` set on the compiler (the environment variable is clamped to 1e9) made the young
    policy's watcher wait ``inf`` seconds, which ``threading`` refuses (OverflowError): the thread died and
    the worker stayed paused after the query ended."""
    import threading

    import gpu_engine.codegen.background_compiles as background_compiles
    from gpu_engine.codegen.compile_worker import PAUSE, RUN

    failures = []
    monkeypatch.setattr(threading, "excepthook", lambda arguments: failures.append(arguments.exc_type))
    compiler, sent, clock = _held_compiler(monkeypatch)
    compiler.policy = "young"
    compiler.pause_seconds = float("inf")
    query = _Query(2)
    compiler.query_started(query)
    assert sent == [PAUSE]
    watcher = compiler._watcher
    watcher.join(1.0)  # a dead watcher ends at once
    assert watcher.is_alive() and failures == []
    query.is_done = True
    compiler.query_ended(query)
    assert sent == [PAUSE, RUN]
    compiler.close()


def test_batches_waiting_on_the_lowest_tier_count_toward_their_shapes_wait(monkeypatch):
    """An operator's batches that run on the lowest tier while its kernels are pending are what a shape's wait
    is made of (TierSwitch tells the compiler, also for batches that skip asking): with one job pending at the
    default estimate, a shape waiting 2 s lets a held worker run."""
    import numba

    import gpu_engine.codegen.background_compiles as background_compiles
    from gpu_engine.codegen.compile_worker import PAUSE, RUN
    from gpu_engine.device import get_device

    compiler, sent, clock = _held_compiler(monkeypatch)
    monkeypatch.setattr(background_compiles, "_COMPILER", compiler)
    monkeypatch.setattr(background_compiles, "_ready_kinds", {})

    @numba.njit
    def never_compiled(values):
        return values

    arguments = (np.zeros(3),)
    signature = tuple(never_compiled.typeof_pyval(argument) for argument in arguments)
    compiler._states[(never_compiled.py_func.__module__, never_compiled.py_func.__name__, signature)] = "pending"
    compiler._loading = 1  # stands for the job compiling it
    query = _Query(2)
    compiler.query_started(query)
    tiers = background_compiles.TierSwitch(get_device("cpu"), "background", shape=lambda: "shape")
    assert not tiers.use_generated(lambda: [(never_compiled, arguments)])
    clock.now = 1.9
    assert not tiers.use_generated(lambda: [(never_compiled, arguments)])  # not bound again: still noted
    assert sent == [PAUSE] and compiler.owed_runs == 0
    clock.now = 2.0
    assert not tiers.use_generated(lambda: [(never_compiled, arguments)])
    assert sent == [PAUSE, RUN] and compiler.owed_runs == 1
