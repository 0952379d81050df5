"""Time first runs against warm runs and against the lowest tier alone, with an empty generated-kernel cache.

Issue 29's measure: a query whose generated kernels were never compiled must
not wait for the compiler, and compiling must never make it slower than its
lowest tier would be alone. Workloads (``--workload``):

``tpch``
    the 22 TPC-H specification SQL texts (``--queries`` numbers);
``tpcds``
    the TPC-DS queries the engine answers (``--queries`` numbers and ranges;
    refused ones are listed and left out);
``fuzz``
    the project's generated SQL queries (``tests/sql/fuzz_queries.py``, the
    differential fuzz's generator, ``--queries start:stop`` seeds) over its
    small tables: every seed is a new query shape.

Each round is a new process whose ``GPU_ENGINE_CACHE_DIR`` is a new, empty
folder (set before the engine is imported, so every generated kernel is new to
numba). It runs every query once with ``fuse=False`` (which compiles the
static kernels, as set-up does, and reads the files into the OS cache), times
a second unfused pass (``unfused``), runs the queries once untimed with
``compile_mode="lowest"`` (the fused plan, every batch on the lowest tier:
static kernels it needs are loaded) and then, each timed pass but the warm one
in a new session (a session keeps its plans, and a first run plans its text):

1. lowest tier alone: every query once with ``compile_mode="lowest"`` (the
   plan and operators of a first run, nothing generated for a batch or compiled);
2. first runs: every query once, in order, with ``--compile-mode`` (default
   ``background``: batches whose kernel is not compiled run on the lowest tier
   while the compile process works);
3. warm runs: the compile process is stopped (on a loaded machine its
   idle-priority compiles can take longer than the round) and a new session
   with ``compile_mode="inline"`` runs each query once untimed (compiling
   what is left), then ``--runs`` timed runs; their median is the warm time.

Odd rounds time the first runs before the lowest tier (after the compile
process is stopped), so neither pass always runs first on a machine whose
load drifts. Each result is checked against DuckDB's (same process, same
files). ``--rounds N`` runs N rounds and reports each round's totals and the
median ratios. Writes ``bench/results/<date>-first-runs-<workload>-<device>-sf<sf>[-<tag>].md`` and ``.json``.

    python -m bench.first_runs --sf 0.1 --rounds 3
    python -m bench.first_runs --workload tpcds --sf 0.01 --rounds 2
    python -m bench.first_runs --workload fuzz --queries 0:60 --rounds 2
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for _folder in (REPO_ROOT, REPO_ROOT / "tests", REPO_ROOT / "tests" / "sql"):  # the fuzz generator's imports
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

WORKLOADS = ("tpch", "tpcds", "fuzz")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="tpch", choices=WORKLOADS)
    parser.add_argument("--sf", type=float, default=1.0, help="scale factor (tpch, tpcds)")
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=3, help="timed warm runs per query (median)")
    parser.add_argument("--queries", default="all",
                        help="tpch: numbers; tpcds: numbers and ranges (1-10,42); fuzz: seeds start:stop; or all")
    parser.add_argument("--compile-mode", default="background", choices=("background", "inline"))
    parser.add_argument("--rounds", type=int, default=1, help="rounds, each in a new process (default 1)")
    parser.add_argument("--compile-pause", type=float, default=None,
                        help="the young policy's seconds of each query's start during which the compile "
                             "process is stopped ($GPU_ENGINE_COMPILE_PAUSE; default: the environment's, else "
                             "the engine's, DEFAULT_PAUSE_SECONDS; 0 = never, under either policy)")
    parser.add_argument("--compile-policy", default=None, choices=("hold", "young"),
                        help="when the compile process is stopped ($GPU_ENGINE_COMPILE_POLICY; default: the "
                             "environment's, else \"hold\": while queries' drivers fill the CPUs; \"young\": "
                             "during each query's first --compile-pause seconds, then as long running)")
    parser.add_argument("--data", default=os.environ.get("GPU_ENGINE_DATA"),
                        help="folder holding tpch/sf<N> and tpcds/sf<N> (default: the engine's data folder)")
    parser.add_argument("--tag", default="", help="suffix of the result files' names")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--round-output", help=argparse.SUPPRESS)  # a round's JSON (set by the parent process)
    parser.add_argument("--round-number", type=int, default=0, help=argparse.SUPPRESS)
    return parser


class QueryMeter:
    """Measure each query of a pass: wall seconds, process CPU (user + sys) and the interpreter's full GC pauses.

    Why: a full collection (generation 2) holds the interpreter lock while it walks every tracked object,
    so every driver stops: ~0.15-0.6 s each on this 2-core machine with the bench's heap (the plans of
    every session it keeps), which landed in single queries of every pass (q10's lowest tier 0.65 s
    against 0.16 s, q84's 0.72 s against 0.05 s). The pauses are reported per query beside the times,
    and process CPU beside wall, so a loaded run still compares passes. ``run_delay_s`` is the time the
    process's threads spent runnable but waiting for a CPU (Linux schedstat): on a quiet machine, first
    runs took ~4.5 s more wall than the lowest tier with the same process CPU while the idle-priority
    compile process ran, and this tells waiting for a CPU apart from waiting on a lock or the GIL.
    """

    def __init__(self):
        self.gc_seconds = 0.0
        self.gc_collections = 0
        self.compiles = 0
        self._started: float | None = None
        gc.callbacks.append(self._observe)
        from numba.core import event

        meter = self

        class _Compiles(event.Listener):  # every numba compile (or cache load) in the process, on any thread
            def on_start(self, _event) -> None:
                pass

            def on_end(self, _event) -> None:
                meter.compiles += 1

        self._compiles = _Compiles()
        event.register("numba:compile", self._compiles)

    def _observe(self, phase: str, info: dict) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.gc_seconds += time.perf_counter() - self._started
            self.gc_collections += 1
            self._started = None

    def measure(self, run):
        """Return ``run()``'s result and what it cost: seconds, cpu_s, gc_s, gc_collections and compiles.

        ``compiles`` counts numba's compiles in the whole process while it ran (any driver, a query's
        CTE Tasks included: ``last_stats()`` sees its last Task only).
        """
        gc_seconds, collections, compiles = self.gc_seconds, self.gc_collections, self.compiles
        waited = _run_delay_by_thread()
        before = _process_cpu()
        start = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - start
        after = _process_cpu()
        delays = _run_delay_by_thread()
        return result, {"seconds": seconds, "cpu_s": after - before,
                        "gc_s": self.gc_seconds - gc_seconds, "gc_collections": self.gc_collections - collections,
                        "compiles": self.compiles - compiles,
                        "run_delay_s": sum(ns - waited.get(tid, 0) for tid, ns in delays.items()) / 1e9}

    def close(self) -> None:
        from numba.core import event

        gc.callbacks.remove(self._observe)
        event.unregister("numba:compile", self._compiles)


def _process_cpu() -> float:
    """Return this process's CPU seconds so far, user + sys (the compile process is another process).

    ``getrusage`` counts microseconds; ``os.times`` (used before stop 51) counts clock ticks of 10 ms, so each
    query's CPU was rounded to 10 ms and a 99-query pass's difference of sums carried ~0.05 s of that rounding.
    """
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _run_delay_by_thread() -> dict[str, int]:
    """Return each thread's nanoseconds spent waiting on a run queue so far (empty where Linux's schedstat is absent)."""
    delays = {}
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return delays
    for tid in threads:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as stat:
                delays[tid] = int(stat.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return delays


def settle_heap() -> None:
    """Collect, then freeze what survives, so that a timed pass's full collections walk only what it makes itself.

    Why: the bench keeps every earlier pass's session (their cached plans), the kernels they loaded and
    DuckDB's answers alive, which a process running only that pass would not hold, and a full collection's
    cost grows with every tracked object: without this, whichever pass ran later paid for the earlier ones
    (the first runs cost 4-5 s more process CPU when timed after the lowest tier than before it, at SF1).
    Also called between a warm query's untimed runs and its timed ones: the untimed runs compile kernels
    inline, and the compiler's garbage would otherwise be collected inside the timed runs.
    """
    gc.collect()
    gc.freeze()


def _lowest_tier_batches(stats) -> int:
    return sum(int(s.runtime.get("lowest_tier_batches", 0)) for p in stats.pipelines for s in p.operators)


class Workload:
    """The queries of a run: their texts by name, how to register the tables and how to check a result."""

    def __init__(self, args):
        self.args = args
        self.texts: dict[str, str] = {}
        self.left_out: dict[str, str] = {}
        getattr(self, f"_load_{args.workload}")()

    # ------------------------------------------------------------------ loading
    def _load_tpch(self) -> None:
        from gpu_engine.connectors.tpch_data import ensure_tpch
        from gpu_engine.plans.tpch import TPCH_QUERY_NUMBERS, spec_sql
        from tests.duckdb_reference import duckdb_connection

        args = self.args
        numbers = list(TPCH_QUERY_NUMBERS) if args.queries == "all" else [int(q) for q in args.queries.split(",")]
        root = Path(args.data) / "tpch" if args.data else None
        self.folder = ensure_tpch(args.sf, root, progress=False) if root else ensure_tpch(args.sf, progress=False)
        self.texts = {f"q{n}": spec_sql(n, args.sf) for n in numbers}
        self.duck = duckdb_connection(self.folder, threads=args.drivers)

    def _load_tpcds(self) -> None:
        from bench.run_tpcds import parse_query_numbers
        from bench.tpcds import query_name, query_text
        from gpu_engine.connectors.tpcds_data import ensure_tpcds
        from tests.duckdb_reference import duckdb_connection

        args = self.args
        self.folder = ensure_tpcds(args.sf, Path(args.data) / "tpcds" if args.data else None)
        self.texts = {query_name(n): query_text(n) for n in parse_query_numbers(args.queries)}
        self.duck = duckdb_connection(self.folder, threads=args.drivers)

    def _load_fuzz(self) -> None:
        from fuzz_queries import generate_case, reference_connection, write_tables

        start, stop = (0, 60) if self.args.queries == "all" else (int(x) for x in self.args.queries.split(":"))
        self.folder = Path(tempfile.mkdtemp(prefix="first-runs-fuzz-"))
        self.paths = write_tables(self.folder)
        self.cases = {}
        for seed in range(start, stop):
            case = generate_case(seed)
            self.cases[f"seed{seed}"] = case
            self.texts[f"seed{seed}"] = case.sql
        self.duck = reference_connection(self.paths)

    # ------------------------------------------------------------------- running
    def session(self, **config):
        from gpu_engine import Session

        s = Session(device=self.args.device, drivers=self.args.drivers, **config)
        if self.args.workload == "tpch":
            from gpu_engine.connectors.tpch_data import register_tpch

            register_tpch(s, self.folder)
        elif self.args.workload == "tpcds":
            from gpu_engine.connectors.tpcds_data import register_tpcds

            register_tpcds(s, self.folder)
        else:
            for name, path in self.paths.items():
                s.register(name, str(path))
        return s

    def expected(self) -> dict[str, float]:
        """Run DuckDB on every query (its second run timed); leave out the ones DuckDB refuses."""
        from tests.duckdb_reference import duckdb_table

        self.answers, seconds = {}, {}
        for name, text in list(self.texts.items()):
            try:
                duckdb_table(self.duck, text)
            except Exception as error:  # noqa: BLE001 - a generated query DuckDB refuses: nothing to compare
                self.left_out[name] = f"DuckDB: {str(error).splitlines()[0]}"
                del self.texts[name]
                continue
            start = time.perf_counter()
            self.answers[name] = duckdb_table(self.duck, text)
            seconds[name] = time.perf_counter() - start
        return seconds

    def mismatch(self, name: str, table) -> str | None:
        from tests.duckdb_reference import rows_mismatch

        text, expected = self.texts[name], self.answers[name]
        if self.args.workload == "tpcds":
            from bench.tpcds import result_mismatch

            problem = result_mismatch(table, expected, text, rows_mismatch)
            if problem is not None and table.num_columns == expected.num_columns:  # DuckDB's names aside
                problem = result_mismatch(table.rename_columns(expected.column_names), expected, text, rows_mismatch)
            return problem
        ordered = self.cases[name].ordered if self.args.workload == "fuzz" else "order by" in text.lower()
        return rows_mismatch(table, expected, ordered=ordered)


def run_round(args) -> dict:
    """Run one round in this process (its generated-kernel cache empty); return its timings."""
    generated = tempfile.mkdtemp(prefix="gpe-first-runs-")
    if args.compile_pause is not None:  # before the background compiler is made: it reads it once
        os.environ["GPU_ENGINE_COMPILE_PAUSE"] = str(args.compile_pause)
    if args.compile_policy is not None:
        os.environ["GPU_ENGINE_COMPILE_POLICY"] = args.compile_policy
    os.environ["GPU_ENGINE_CACHE_DIR"] = generated  # before the engine is imported: every generated kernel is new

    from gpu_engine.codegen.background_compiles import background_compiler
    from gpu_engine.errors import GpuEngineError

    work = Workload(args)
    duck_seconds = work.expected()

    def check(name: str, table) -> None:
        problem = work.mismatch(name, table)
        if problem is not None:
            raise SystemExit(f"{name}: result differs from DuckDB's: {problem}")

    static = work.session(fuse=False)  # static kernels compiled (set-up on a fresh machine); files in the OS cache
    for name, text in list(work.texts.items()):
        try:
            table = static.sql(text)
            problem = work.mismatch(name, table)
        except Exception as error:  # noqa: BLE001 - a query the engine refuses or fails unfused: left out, named
            kind = "" if isinstance(error, GpuEngineError) else "internal "
            problem = f"{kind}{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
        if problem is not None:  # measured are the queries the engine answers (as DuckDB does) unfused
            work.left_out[name] = problem.splitlines()[0][:160]
            del work.texts[name]

    meter = QueryMeter()

    def timed_pass(session) -> tuple[dict[str, float], dict[str, dict]]:
        settle_heap()
        seconds, costs = {}, {}
        for name, text in work.texts.items():
            _, costs[name] = meter.measure(lambda: session.sql(text))
            seconds[name] = costs[name]["seconds"]
        return seconds, costs

    # Every timed pass but the warm one runs in a new session, so each plans its texts anew as a first run
    # does (a session keeps its plans: a second pass in one session skips the planner and plan preparation).
    unfused, unfused_costs = timed_pass(work.session(fuse=False))
    warmed = work.session(compile_mode="lowest")
    for name, text in work.texts.items():  # the static kernels the fused plan's lowest tier runs, loaded
        check(name, warmed.sql(text))
    lowest_session = work.session(compile_mode="lowest")

    engine = work.session(compile_mode=args.compile_mode)
    first: dict[str, dict] = {}

    def held_cpu() -> float:  # the compile process's CPU while held so far (it exists after the first job)
        from gpu_engine.codegen import background_compiles

        compiler = background_compiles._COMPILER
        return 0.0 if compiler is None else getattr(compiler, "held_cpu_seconds", 0.0)

    def first_pass() -> float:
        settle_heap()
        started, checking = _process_cpu(), 0.0
        for name, text in work.texts.items():
            held = held_cpu()
            table, costs = meter.measure(lambda: engine.sql(text))
            costs["compile_cpu_held_s"] = held_cpu() - held  # the worker ran on while told to stop
            check_started = _process_cpu()
            check(name, table)
            # The check (DuckDB's answer compared) is no part of a first run, and the lowest tier's pass has none:
            # counted in, it made TPC-DS SF1's first runs look 4.7% dearer than the lowest tier (stop 48) where
            # their per-query CPU was 1.4% dearer.
            checking += _process_cpu() - check_started
            stats = engine.last_stats()
            first[name] = dict(costs, lowest_tier_batches=_lowest_tier_batches(stats),
                               kernels_compiled=stats.kernels_compiled, compile_seconds=stats.compile_seconds)
        return _process_cpu() - started - checking

    lowest_first = args.round_number % 2 == 0
    if lowest_first:
        started = _process_cpu()
        lowest, lowest_costs = timed_pass(lowest_session)
        lowest_cpu = _process_cpu() - started
        first_cpu = first_pass()
    else:
        first_cpu = first_pass()
    compiler = background_compiler()
    compiled_during_first, pending = compiler.compiled, compiler.pending()
    compile_cpu_during_first = getattr(compiler, "compile_cpu_seconds", 0.0)
    # The compile process stops here: on a loaded machine its idle-priority compiles could take longer than
    # the round; the warm session compiles what is left on its drivers, in runs that are not timed.
    compiler.close()
    if not lowest_first:
        started = _process_cpu()
        lowest, lowest_costs = timed_pass(lowest_session)
        lowest_cpu = _process_cpu() - started

    warm: dict[str, dict] = {}
    engine = work.session(compile_mode="inline")
    for name, text in work.texts.items():
        settle = 0
        for settle in range(1, 6):  # until every batch runs on the generated kernels and a run compiles nothing
            table, costs = meter.measure(lambda: engine.sql(text))
            check(name, table)
            # A later run may still compile: a kernel layout only some batches bring (a validity, a
            # dictionary), spread over the drivers differently each run. Its compile in a timed run made
            # q14's "warm" time twice its lowest tier's at SF1.
            if _lowest_tier_batches(engine.last_stats()) == 0 and costs["compiles"] == 0:
                break
        settle_heap()  # the untimed runs' inline compiles leave garbage the timed runs must not collect
        runs = [meter.measure(lambda: engine.sql(text))[1] for _ in range(args.runs)]
        warm[name] = {"seconds": statistics.median(r["seconds"] for r in runs), "settling_runs": settle,
                      "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                      "gc_s": statistics.median(r["gc_s"] for r in runs),
                      "kernels_compiled": sum(r["compiles"] for r in runs),
                      "lowest_tier_batches": _lowest_tier_batches(engine.last_stats())}
    meter.close()
    return {
        "round": args.round_number, "order": "lowest tier, then first runs" if lowest_first else
        "first runs, then lowest tier", "load_average": os.getloadavg(), "first": first, "warm": warm,
        "lowest_tier_alone_s": lowest, "unfused_s": unfused, "duckdb_seconds": duck_seconds,
        "lowest_costs": lowest_costs, "unfused_costs": unfused_costs,
        "first_driver_cpu_s": first_cpu, "lowest_driver_cpu_s": lowest_cpu,
        "first_total_s": sum(r["seconds"] for r in first.values()),
        "warm_total_s": sum(r["seconds"] for r in warm.values()),
        "lowest_tier_alone_total_s": sum(lowest.values()), "unfused_total_s": sum(unfused.values()),
        "duckdb_total_s": sum(duck_seconds.values()), "left_out": work.left_out,
        "background_compiled": compiler.compiled, "compiled_during_first_runs": compiled_during_first,
        "pending_after_first_runs": pending, "background_compile_seconds": compiler.compile_seconds,
        "compile_cpu_during_first_runs_s": compile_cpu_during_first,
        "compile_cpu_held_during_first_runs_s": sum(r.get("compile_cpu_held_s", 0.0) for r in first.values()),
        "compile_pause_s": compiler.pause_seconds, "compile_pauses": compiler.pauses,
        "compile_policy": getattr(compiler, "policy", "young"), "compile_owed_runs": getattr(compiler, "owed_runs", 0),
        "background_compile_cpu_s": getattr(compiler, "compile_cpu_seconds", 0.0),
        "failures": len(compiler.failures),
    }


def _total(by_query: dict[str, dict], key: str) -> float:
    return sum(costs.get(key, 0.0) for costs in by_query.values())


def _scale(args) -> str:
    return "" if args.workload == "fuzz" else f"-sf{args.sf:g}"


def report(args, rounds: list[dict], command: str) -> str:
    """Return the Markdown report of ``rounds``: each query's medians over the rounds, then each round's totals."""
    when = datetime.datetime.now(datetime.timezone.utc)
    names = list(rounds[0]["first"])
    title = {"tpch": "TPC-H spec SQL", "tpcds": "TPC-DS", "fuzz": "generated SQL (fuzz generator)"}[args.workload]
    scale = f", sf{args.sf:g}" if args.workload != "fuzz" else ""

    def median(key_of) -> float:
        return statistics.median(key_of(r) for r in rounds)

    lines = [
        f"# First runs against warm runs and the lowest tier alone — {title}{scale}, {when:%Y-%m-%d %H:%M} UTC", "",
        f"Command: `{command}`", "",
        f"Device `{args.device}`, {args.drivers} drivers, compile mode `{args.compile_mode}`, {os.cpu_count()} cores, "
        + (f"compile process stopped during each query's first {rounds[0].get('compile_pause_s', 0):g} s "
           if rounds[0].get("compile_policy", "young") == "young" else
           "compile process stopped while queries' drivers fill the CPUs (policy `hold`; "
           f"{sum(r.get('compile_owed_runs', 0) for r in rounds)} runs during queries paid by a shape's wait) ")
        + f"({sum(r.get('compile_pauses', 0) for r in rounds)} stops), "
        f"{len(rounds)} round(s), each a new process with a new, empty generated-kernel cache (static kernels "
        "compiled first by an unfused pass, as set-up does). First run: each query once, in order. Lowest tier "
        "alone: the same plans with `compile_mode=\"lowest\"` (every batch on the lowest tier, nothing generated "
        "or compiled). Unfused: `fuse=False`. Warm: a new inline session after one untimed run (every batch on "
        f"generated kernels), the median of {args.runs} runs. Every result checked against DuckDB's. Per query: "
        "medians over the rounds. CPU: the process's user + sys seconds during the query (its drivers and "
        "threads; not the compile process). GC: the interpreter's full collections inside the query (they stop "
        "every driver); before each timed pass, and before each query's warm runs, the heap is collected and "
        "frozen (`settle_heap`), so a pass does not pay for the objects earlier passes left.", "",
        "| query | first run (ms) | lowest-tier batches | compiled on drivers | warm (ms) | first / warm "
        "| lowest tier alone (ms) | first / lowest | unfused (ms) | DuckDB (ms) | CPU first / lowest / warm (ms) "
        "| GC first / lowest (ms) | waiting for a CPU first / lowest (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        f = median(lambda r: r["first"][name]["seconds"])
        w = median(lambda r: r["warm"][name]["seconds"])
        lo = median(lambda r: r["lowest_tier_alone_s"][name])
        lines.append(
            f"| {name} | {f * 1e3:.1f} | {rounds[0]['first'][name]['lowest_tier_batches']} | "
            f"{max(r['first'][name]['kernels_compiled'] for r in rounds)} | {w * 1e3:.1f} | {f / w:.2f}× | "
            f"{lo * 1e3:.1f} | {f / lo:.2f}× | {median(lambda r: r['unfused_s'][name]) * 1e3:.1f} | "
            f"{median(lambda r: r['duckdb_seconds'][name]) * 1e3:.1f} | "
            f"{median(lambda r: r['first'][name]['cpu_s']) * 1e3:.0f} / "
            f"{median(lambda r: r['lowest_costs'][name]['cpu_s']) * 1e3:.0f} / "
            f"{median(lambda r: r['warm'][name]['cpu_s']) * 1e3:.0f} | "
            f"{median(lambda r: r['first'][name]['gc_s']) * 1e3:.0f} / "
            f"{median(lambda r: r['lowest_costs'][name]['gc_s']) * 1e3:.0f} | "
            f"{median(lambda r: r['first'][name]['run_delay_s']) * 1e3:.0f} / "
            f"{median(lambda r: r['lowest_costs'][name]['run_delay_s']) * 1e3:.0f} |")
    lines += ["", "Each round's totals (s):", "",
              "| round | order | load average (1 min) | first | lowest tier alone | first / lowest | "
              "process CPU s first / lowest (user + sys over the pass, checks excluded) | compile process CPU s during the first runs "
              "(of it after a stop request: ran on while held) | warm | first / warm | unfused | kernels the compile process compiled "
              "during the first runs (left pending) | DuckDB | CPU s first / lowest / warm (user + sys, per query) "
              "| GC s first / lowest / warm (collections) | waiting for a CPU s first / lowest |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rounds:
        lines.append(
            f"| {r['round']} | {r['order']} | {r['load_average'][0]:.1f} | {r['first_total_s']:.2f} | "
            f"{r['lowest_tier_alone_total_s']:.2f} | {r['first_total_s'] / r['lowest_tier_alone_total_s']:.2f}× | "
            f"{r['first_driver_cpu_s']:.2f} / {r['lowest_driver_cpu_s']:.2f} | "
            f"{r.get('compile_cpu_during_first_runs_s', 0.0):.2f} "
            f"({r.get('compile_cpu_held_during_first_runs_s', float('nan')):.2f}) | {r['warm_total_s']:.2f} | "
            f"{r['first_total_s'] / r['warm_total_s']:.2f}× | {r['unfused_total_s']:.2f} | "
            f"{r['compiled_during_first_runs']} ({r['pending_after_first_runs']}) | {r['duckdb_total_s']:.2f} | "
            f"{_total(r['first'], 'cpu_s'):.2f} / {_total(r['lowest_costs'], 'cpu_s'):.2f} / "
            f"{_total(r['warm'], 'cpu_s'):.2f} | {_total(r['first'], 'gc_s'):.2f} / "
            f"{_total(r['lowest_costs'], 'gc_s'):.2f} / {_total(r['warm'], 'gc_s'):.2f} "
            f"({_total(r['first'], 'gc_collections'):.0f} / {_total(r['lowest_costs'], 'gc_collections'):.0f}) | "
            f"{_total(r['first'], 'run_delay_s'):.2f} / {_total(r['lowest_costs'], 'run_delay_s'):.2f} |")
    ratio_lowest = statistics.median(r["first_total_s"] / r["lowest_tier_alone_total_s"] for r in rounds)
    ratio_warm = statistics.median(r["first_total_s"] / r["warm_total_s"] for r in rounds)
    cpu_lowest = statistics.median(_total(r["first"], "cpu_s") / _total(r["lowest_costs"], "cpu_s") for r in rounds)
    lines += ["", f"Median over the rounds: first / lowest tier alone **{ratio_lowest:.2f}×** wall, "
              f"**{cpu_lowest:.3f}×** CPU (per query, user + sys), first / warm "
              f"**{ratio_warm:.2f}×**; {len(names)} queries. Compile failures: "
              f"{sum(r['failures'] for r in rounds)}."]
    left_out = rounds[0]["left_out"]
    if left_out:
        lines += ["", f"Left out ({len(left_out)}): " + "; ".join(f"{n} ({why})" for n, why in left_out.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.round_output:  # a round: its generated-kernel cache (and the fuzz's tables) beside its output
        os.environ["TMPDIR"] = str(Path(args.round_output).parent)
        tempfile.tempdir = None
        Path(args.round_output).write_text(json.dumps(run_round(args), default=str))
        return
    command = "python -m bench.first_runs " + " ".join(argv)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="first-runs-") as folder:
        for number in range(args.rounds):
            output = Path(folder) / f"round{number}.json"
            subprocess.run([sys.executable, "-m", "bench.first_runs", *argv, "--round-output", str(output),
                            "--round-number", str(number)], check=True, cwd=REPO_ROOT)
            rounds.append(json.loads(output.read_text()))
            print(f"round {number}: first {rounds[-1]['first_total_s']:.2f} s, lowest tier alone "
                  f"{rounds[-1]['lowest_tier_alone_total_s']:.2f} s, warm {rounds[-1]['warm_total_s']:.2f} s",
                  flush=True)
    text = report(args, rounds, command)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    when = datetime.datetime.now(datetime.timezone.utc)
    stem = (f"{when:%Y-%m-%d}-first-runs" + ("" if args.workload == "tpch" else f"-{args.workload}")
            + f"-{args.device}{_scale(args)}" + (f"-{args.tag}" if args.tag else ""))
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem}.json").write_text(json.dumps({"command": command, "workload": args.workload, "sf": args.sf,
                                                  "device": args.device, "drivers": args.drivers,
                                                  "compile_mode": args.compile_mode, "rounds": rounds},
                                                 indent=1, default=str))


if __name__ == "__main__":
    main()
