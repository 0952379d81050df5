"""Time the per-query fixed cost: TPC-H's 22 specification SQL texts (or TPC-DS's 99) at a small scale through
``Session.sql``.

Issue 31 item 4: at SF 0.01 a query reads a few thousand rows, so what a user
waits on is parsing, planning, preparing the plan, starting the Task and its
drivers, and converting the result to Arrow. This script measures that against
DuckDB in the same process, on the same Parquet files, with DuckDB's
``threads`` set to the engine's driver count:

1. every query once through ``Session.sql`` and DuckDB; the engine's answer is
   checked against DuckDB's (:func:`tests.duckdb_reference.rows_mismatch`);
   a second engine run leaves every kernel compiled (warm);
2. ``--runs`` rounds; each round runs every query once on the engine and once
   on DuckDB, taking turns (interleaved, so a busy moment of the shared machine
   hits both); the last round's answers are checked again;
3. per query the median wall time of each side, the median CPU time
   (user+sys of the whole process, driver threads included) and the median of
   each phase of the engine's run.

The phases come from timers put around the engine's own functions for the run
(a few microseconds each; exclusive: an inner timed call counts for its own
phase only); what they do not cover is ``other`` (Session.sql's own work:
argument checks, catalog statements and views looked for):

- ``parse``: parameters bound, the text parsed and qualified by sqlglot
  (:func:`gpu_engine.sql.rewrite.parse_and_qualify`, literal lists lifted,
  shared CTEs split off);
- ``plan``: the rest of ``Session.sql_plan``: the planner
  (:class:`gpu_engine.sql.planner.QueryPlanner` and the PlanBuilder calls it
  makes), or the plan cache's lookup (:mod:`gpu_engine.sql.plan_cache`);
- ``prepare``: the scans checked against the catalog and the plan prepared
  (local exchanges, fusion, placement; :mod:`gpu_engine.planning.prepared_plans`);
- ``task start``: the rest of ``Session._run``: the query's context and
  driver threads, the Task's pipelines, operators and drivers created and
  queued, its splits handed over, the threads given back at the end;
- ``execute``: from the drivers' start until the Task is done
  (``Task.wait``), which includes ``convert in drivers``, each result batch
  copied to Arrow on its driver's thread (``batch_to_arrow``);
- ``to arrow``: the result batches cast to the plan's schema and made one
  ``pyarrow.Table`` after the Task ended.

Writes ``bench/results/<date>-fixed-cost-<device>-sf<sf>[-<tag>].md`` and
``.json``. Run from the repository root::

    python -m bench.fixed_cost --sf 0.01 --runs 20
    python -m bench.fixed_cost --queries 1,6,15 --runs 30 --tag q1-6-15
    python -m bench.fixed_cost --workload tpcds --runs 5 --no-plan-cache   # TPC-DS answers: bench.tpcds.result_mismatch
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # `python bench/fixed_cost.py` puts bench/ first, not the root
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main", "PHASES", "PhaseTimer"]

#: The engine's phases, in the order a query goes through them (``other`` is the rest of the wall time).
PHASES = ("parse", "plan", "prepare", "task start", "execute", "to arrow")


class PhaseTimer:
    """Sum the seconds spent in wrapped functions per phase, across threads, for one run at a time.

    Why wrappers rather than a profiler: a profiler slows Python code several
    times over and so misstates a cost made of many small calls; a wrapper
    costs one clock read at each end of a call that takes far longer.

    Time is exclusive: a wrapped call inside another wrapped call on the same
    thread counts for its own phase only, and the outer call's phase gets the
    rest. So an outer function (``Session._run``) can be wrapped to catch what
    its inner phases leave.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._local = threading.local()
        self.seconds: dict[str, float] = {}
        self._patched: list[tuple[object, str, object]] = []

    def reset(self) -> None:
        with self._lock:
            self.seconds = {}

    def add(self, phase: str, seconds: float) -> None:
        with self._lock:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def wrap(self, owner, name: str, phase: str) -> None:
        """Replace ``owner.name`` (a module function or a class's method) by a timed call of it."""
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        function = original.__func__ if isinstance(original, (classmethod, staticmethod)) else original
        local = self._local

        @functools.wraps(function)
        def timed(*args, **kwargs):
            stack = local.__dict__.setdefault("stack", [])
            stack.append(0.0)  # the seconds of wrapped calls inside this one
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                total = time.perf_counter() - start
                inner = stack.pop()
                if stack:
                    stack[-1] += total
                self.add(phase, total - inner)

        wrapped = classmethod(timed) if isinstance(original, classmethod) else timed
        setattr(owner, name, wrapped)
        self._patched.append((owner, name, original))

    def restore(self) -> None:
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)
        self._patched.clear()


def install_phase_timers(timer: PhaseTimer) -> None:
    """Wrap the engine functions each phase is made of (see the module docstring)."""
    import gpu_engine.session as session_module
    import gpu_engine.sql as sql_module
    import gpu_engine.sql.parameters as parameters_module
    import gpu_engine.sql.shared_ctes as shared_ctes_module
    from gpu_engine.exec.task import Task

    session = session_module.Session
    timer.wrap(parameters_module, "bind_parameters", "parse")
    timer.wrap(sql_module, "lift_literal_lists", "parse")
    timer.wrap(sql_module, "parse_and_qualify", "parse")
    timer.wrap(shared_ctes_module, "split_shared_ctes", "parse")
    timer.wrap(session, "sql_plan", "plan")  # the planner, or the plan cache's lookup
    if hasattr(session, "_plan_sql"):
        timer.wrap(session, "_plan_sql", "plan")  # a shared CTE's query over its temporary table: never kept
    timer.wrap(session, "_check_scans", "prepare")
    timer.wrap(session_module, "prepare_plan", "prepare")  # a tree before prepared_plans existed
    try:
        from gpu_engine.planning.prepared_plans import PreparedPlans

        timer.wrap(PreparedPlans, "prepare", "prepare")
    except ImportError:
        pass
    timer.wrap(session, "_run", "task start")  # what prepare and execute leave: context, Task, drivers, splits
    timer.wrap(Task, "wait", "execute")
    timer.wrap(session_module, "batch_to_arrow", "convert in drivers")  # on driver threads, during execute
    timer.wrap(session, "_execute_to_arrow", "to arrow")  # what _run leaves: the result made one table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("tpch", "tpcds"), default="tpch",
                        help="TPC-H's 22 specification texts (default) or TPC-DS's 99 (bench/tpcds)")
    parser.add_argument("--sf", type=float, default=0.01)
    parser.add_argument("--runs", type=int, default=20, help="timed rounds (each query once per round; median)")
    parser.add_argument("--drivers", type=int, default=2, help="the engine's drivers and DuckDB's threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--queries", default="all", help="comma-separated query numbers, or all")
    parser.add_argument("--data", default=os.environ.get("GPU_ENGINE_DATA"),
                        help="folder holding tpch/sf<N> or tpcds/sf<N> (default: the engine's data folder)")
    parser.add_argument("--no-phases", action="store_true", help="time without the phase timers")
    parser.add_argument("--no-plan-cache", action="store_true",
                        help="plan every run's text again (Session.plan_cache keeps nothing): a new text's cost")
    parser.add_argument("--baseline", action="store_true",
                        help="also run, interleaved in the same rounds, a session that keeps nothing between "
                        "queries (no plan cache, no prepared plans, new driver threads per query)")
    parser.add_argument("--tag", default="", help="suffix of the result files' names")
    parser.add_argument("--out", default=str(REPO_ROOT / "bench" / "results"))
    return parser


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def _keep_nothing(session) -> list[str]:
    """Turn off what keeps work between a session's queries; return what was turned off (an older tree has less)."""
    off = []
    if hasattr(session, "plan_cache"):
        from gpu_engine.sql.plan_cache import PlanCache

        session.plan_cache = PlanCache(entries=0)
        off.append("plan cache")
    if hasattr(session, "_prepared"):
        session._prepared.entries = 0
        off.append("prepared plans")
    if hasattr(session, "_executors"):
        session._executors.keep = 0
        off.append("kept driver threads")
    return off


def _phase_table(numbers, rows, total, phase_totals, columns) -> list[str]:
    header = "| query | engine ms | DuckDB ms | × | engine CPU ms | DuckDB CPU ms |"
    rule = "|---|---|---|---|---|---|"
    with_phases = bool(phase_totals["execute"])
    if with_phases:
        header += " " + " | ".join(columns) + " |"
        rule += "---|" * len(columns)
    lines = [header, rule]
    for n in numbers:
        r = rows[n]
        line = (f"| q{n} | {_ms(r['engine'])} | {_ms(r['duckdb'])} | {r['engine'] / r['duckdb']:.2f} | "
                f"{_ms(r['engine_cpu'])} | {_ms(r['duckdb_cpu'])} |")
        if with_phases:
            line += " " + " | ".join(_ms(r["phases"][c]) for c in columns) + " |"
        lines.append(line)
    line = (f"| **total** | {_ms(total['engine'])} | {_ms(total['duckdb'])} | {total['engine'] / total['duckdb']:.2f} "
            f"| {_ms(total['engine_cpu'])} | {_ms(total['duckdb_cpu'])} |")
    if with_phases:
        line += " " + " | ".join(_ms(phase_totals[c]) for c in columns) + " |"
    return lines + [line]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.runs < 1:
        raise SystemExit("--runs must be at least 1")

    from bench.run_bench import _git, _machine_facts
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.plans.tpch import TPCH_QUERY_NUMBERS, spec_sql
    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    if args.workload == "tpcds":
        from bench.tpcds import QUERY_NUMBERS, query_text, result_mismatch
        from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds

        all_numbers, register = QUERY_NUMBERS, register_tpcds
        folder = ensure_tpcds(args.sf, Path(args.data) / "tpcds" if args.data else None)
    else:
        all_numbers, register = TPCH_QUERY_NUMBERS, register_tpch
        data_root = Path(args.data) / "tpch" if args.data else None
        folder = ensure_tpch(args.sf, data_root, progress=False) if data_root else ensure_tpch(args.sf, progress=False)
    numbers = list(all_numbers) if args.queries == "all" else [int(q) for q in args.queries.split(",")]
    texts = {n: query_text(n) if args.workload == "tpcds" else spec_sql(n, args.sf) for n in numbers}
    duck = duckdb_connection(folder, threads=args.drivers)
    runners: dict[str, Session] = {}
    turned_off: list[str] = []
    for label in ("engine", "caches off") if args.baseline else ("engine",):
        session = Session(device=args.device, drivers=args.drivers)
        register(session, folder)
        if label == "caches off" or args.no_plan_cache:
            turned_off = _keep_nothing(session) if label == "caches off" else turned_off
            if args.no_plan_cache and hasattr(session, "plan_cache"):
                from gpu_engine.sql.plan_cache import PlanCache

                session.plan_cache = PlanCache(entries=0)
        runners[label] = session
    plan_cache = getattr(runners["engine"], "plan_cache", None)  # None before the plan cache existed

    def check(n: int, table, expected) -> None:
        if args.workload == "tpcds":  # ORDER BY keys in order, rows tied at a LIMIT free, floats within 1e-9
            problem = result_mismatch(table, expected, texts[n], rows_mismatch)
        else:
            problem = rows_mismatch(table, expected, ordered="order by" in texts[n].lower())
        if problem is not None:
            raise SystemExit(f"q{n}: result differs from DuckDB's: {problem}")

    expected = {}
    for n, text in texts.items():  # warm: files in the OS cache, kernels compiled, answers checked
        expected[n] = duckdb_table(duck, text)
        for session in runners.values():
            check(n, session.sql(text), expected[n])
            session.sql(text)

    timer = PhaseTimer()
    if not args.no_phases:
        install_phase_timers(timer)
    samples = {label: {n: {"engine": [], "engine_cpu": [], "phases": []} for n in numbers} for label in runners}
    duck_samples = {n: {"duckdb": [], "duckdb_cpu": []} for n in numbers}
    load_start = os.getloadavg()
    started = time.perf_counter()
    try:
        for round_number in range(args.runs):
            last = round_number == args.runs - 1
            order = list(runners.items())
            if round_number % 2:
                order.reverse()  # neither engine runner always goes first
            for n, text in texts.items():
                for label, session in order:
                    timer.reset()
                    cpu, wall = _cpu_seconds(), time.perf_counter()
                    table = session.sql(text)
                    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
                    phases = dict(timer.seconds)
                    if last:
                        check(n, table, expected[n])
                    record = samples[label][n]
                    record["engine"].append(wall)
                    record["engine_cpu"].append(cpu)
                    if phases:
                        phases["other"] = wall - sum(phases.get(p, 0.0) for p in PHASES)  # Session.sql's own, timers
                        record["phases"].append(phases)
                cpu, wall = _cpu_seconds(), time.perf_counter()
                duckdb_table(duck, text)
                duck_samples[n]["duckdb"].append(time.perf_counter() - wall)
                duck_samples[n]["duckdb_cpu"].append(_cpu_seconds() - cpu)
    finally:
        timer.restore()
    elapsed = time.perf_counter() - started
    load_end = os.getloadavg()

    columns = PHASES + ("convert in drivers", "other")
    results = {}
    for label in runners:
        rows = {}
        for n in numbers:
            record = samples[label][n]
            row = {key: statistics.median(record[key]) for key in ("engine", "engine_cpu")}
            row.update({key: statistics.median(duck_samples[n][key]) for key in ("duckdb", "duckdb_cpu")})
            row["phases"] = {c: statistics.median(p.get(c, 0.0) for p in record["phases"]) for c in columns} \
                if record["phases"] else {}
            rows[n] = row
        total = {key: sum(r[key] for r in rows.values()) for key in ("engine", "engine_cpu", "duckdb", "duckdb_cpu")}
        phase_totals = {c: sum(r["phases"].get(c, 0.0) for r in rows.values()) for c in columns}
        results[label] = {"rows": rows, "total": total, "phase_totals": phase_totals}
    total = results["engine"]["total"]

    when = datetime.datetime.now(datetime.timezone.utc)
    command = "python -m bench.fixed_cost " + " ".join(sys.argv[1:] if argv is None else argv)
    facts = _machine_facts(args.device)
    lines = [
        f"# Fixed cost: {'TPC-DS' if args.workload == 'tpcds' else 'TPC-H spec'} SQL through Session.sql, "
        f"sf{args.sf:g}, {when:%Y-%m-%d %H:%M} UTC", "",
        f"Command: `{command}` at `{_git(['rev-parse', '--short', 'HEAD'])}`"
        f"{' (uncommitted changes)' if _git(['status', '--porcelain', '--untracked-files=no']) else ''}", "",
        f"Device `{args.device}`, {args.drivers} drivers; DuckDB {facts.get('duckdb', '?')} with "
        f"{args.drivers} threads, same process, same files. {os.cpu_count()} cores. Warm (each query run twice "
        f"before timing); {args.runs} interleaved rounds (each query on "
        f"{' and '.join(runners)}, then on DuckDB); medians. CPU = user+sys of the process over the run (driver "
        f"threads included). Every answer checked against DuckDB's (first and last round). Plan cache: "
        f"{'none (an older tree)' if plan_cache is None else f'{plan_cache.entries} texts'}. Load average (1 min) "
        f"{load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end; {elapsed:.0f} s of rounds.", "",
        f"**Total of medians: engine {_ms(total['engine'])} ms, DuckDB {_ms(total['duckdb'])} ms: "
        f"{total['engine'] / total['duckdb']:.2f}×** (CPU {_ms(total['engine_cpu'])} ms against "
        f"{_ms(total['duckdb_cpu'])} ms).", "",
    ]
    if "caches off" in results:
        off = results["caches off"]["total"]
        lines += [f"Same process, same rounds, a session with {', '.join(turned_off)} turned off (every text "
                  f"parsed, planned and prepared again, new driver threads per query): **{_ms(off['engine'])} ms, "
                  f"{off['engine'] / off['duckdb']:.2f}×** (CPU {_ms(off['engine_cpu'])} ms).", ""]
    if results["engine"]["phase_totals"]["execute"]:
        lines += ["Phases (medians per phase, ms; `convert in drivers` is part of `execute`; `other` is the wall time "
                  "no phase covers: Session.sql's own work, timers):", ""]
    for label, result in results.items():
        if len(results) > 1:
            lines += ["", f"### {label}", ""]
        lines += _phase_table(numbers, result["rows"], result["total"], result["phase_totals"], columns)
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workload = "-tpcds" if args.workload == "tpcds" else ""
    stem = f"{when:%Y-%m-%d}-fixed-cost{workload}-{args.device}-sf{args.sf:g}" + (f"-{args.tag}" if args.tag else "")
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem}.json").write_text(json.dumps({
        "command": command, "workload": args.workload, "sf": args.sf, "device": args.device, "drivers": args.drivers,
        "runs": args.runs,
        "load_average_start": load_start, "load_average_end": load_end, "machine": facts, "turned_off": turned_off,
        "results": results, "samples": samples, "duckdb_samples": duck_samples}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
