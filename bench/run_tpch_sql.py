"""Run the 22 TPC-H queries through ``Session.sql`` against DuckDB in one process: interleaved, CPU time, peak memory.

Why: issue 31's scale line (TPC-H SF10 through ``Session.sql``, <= 1.2x DuckDB in total, peak memory reported
beside DuckDB's) asks for what ``bench/run_bench.py`` does not measure: it times each runner's runs back to back
(a busy moment of the shared machine hits one side only), reports no CPU time and no memory, and always runs the
hand plans too (twice the time at SF10). This script runs only the SQL texts:

1. every query once on DuckDB (the reference; ``read_parquet`` views over the same files) and once on the engine
   (``Session.sql``, its plan cache as users get it); the engine's answer is checked against DuckDB's
   (:func:`tests.duckdb_reference.rows_mismatch`), then the engine waits for its compiled tier
   (:func:`bench.run_bench.settle_compiled_tier`);
2. ``--runs`` rounds; each round runs every query on both sides, the side that goes first alternating by round
   (the side right after the other one paid more in fixed order, see ``bench/ab.py``); per query the median wall
   time and the median CPU time (user+sys of the whole process, so the engine's and DuckDB's own threads);
3. memory: a sampler thread reads the process's resident set (``/proc/self/statm``) every 5 ms; per query and side
   the highest rise over the resident set at the start of the call (max over the runs). In-process rises
   understate an allocator that keeps freed memory (DuckDB's), so ``--memory-pass`` also runs each side alone in
   a fresh process over the queries once and reports that process's peak resident set (``VmHWM``) with the
   resident set after loading (the figure issue 31 asks to put beside DuckDB's);
4. the load average before and after.

Writes ``bench/results/<date>-tpch-sql-<device>-sf<N>[-<tag>].json`` and ``.md``. From the repository root::

    python -m bench.run_tpch_sql --sf 10 --runs 3 --memory-pass
    python -m bench.run_tpch_sql --sf 1 --queries 10,16 --runs 5 --no-write
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main", "render_markdown", "RssSampler"]

RESULTS_DIR = REPO_ROOT / "bench" / "results"
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss_bytes() -> int:
    with open("/proc/self/statm", "rb") as handle:
        return int(handle.read().split()[1]) * _PAGE


class RssSampler:
    """Track the highest resident set of this process between :meth:`start` and :meth:`stop` (5 ms samples)."""

    def __init__(self, interval_s: float = 0.005):
        self._interval = interval_s
        self._peak = 0
        self._active = threading.Event()
        self._quit = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="rss-sampler", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._quit.is_set():
            if self._active.wait(0.1):
                self._peak = max(self._peak, _rss_bytes())
                time.sleep(self._interval)

    def start(self) -> int:
        base = _rss_bytes()
        self._peak = base
        self._active.set()
        return base

    def stop(self) -> int:
        self._active.clear()
        self._peak = max(self._peak, _rss_bytes())
        return self._peak

    def close(self) -> None:
        self._quit.set()
        self._active.set()
        self._thread.join()


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _parse_sf(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"scale factor must be positive, got {text!r}")
    return value


def _names(text: str) -> list[str]:
    from gpu_engine.plans import tpch

    if text == "all":
        return [f"q{n}" for n in tpch.available_queries()]
    return [f"q{int(part.strip().removeprefix('q'))}" for part in text.split(",") if part.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=_parse_sf, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--queries", default="all", help="'all' (default) or numbers: 1,6,q10")
    parser.add_argument("--runs", type=int, default=3, help="interleaved timed rounds after the first run (default 3)")
    parser.add_argument("--device", default="cpu", help="engine device (default cpu)")
    parser.add_argument("--drivers", type=int, default=2, help="engine drivers; also DuckDB's threads (default 2)")
    parser.add_argument("--memory-pass", action="store_true",
                        help="also run each side alone in a fresh process once and report its peak resident set")
    parser.add_argument("--memory-side", choices=("engine", "duckdb"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", default=None, help="root of the TPC-H files (default: the data cache)")
    parser.add_argument("--tag", default=None, help="suffix of the result file names")
    parser.add_argument("--no-write", action="store_true", help="print only; write no result file")
    return parser


def _open_sides(args, which=("engine", "duckdb")):
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

    from tests.duckdb_reference import duckdb_connection, duckdb_table

    folder = ensure_tpch(args.sf, args.data_dir, progress=True)
    sides = {}
    if "engine" in which:
        from gpu_engine import Session

        session = Session(device=args.device, drivers=args.drivers)
        register_tpch(session, folder)
        sides["engine"] = lambda sql: session.sql(sql)
    if "duckdb" in which:
        duck = duckdb_connection(folder, threads=args.drivers)
        sides["duckdb"] = lambda sql: duckdb_table(duck, sql)
    return sides


def _high_water_bytes() -> int:
    """The process's peak resident set (``VmHWM``: unlike ``ru_maxrss`` it starts afresh at exec)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _memory_only(args) -> int:
    """One side alone, each query once: print a JSON line with the process's peak resident set."""
    from bench.tpch_queries import bench_query

    run = _open_sides(args, (args.memory_side,))[args.memory_side]
    loaded = _rss_bytes()
    sampler = RssSampler()
    rises = {}
    for name in _names(args.queries):
        base = sampler.start()
        run(bench_query(name, args.sf).sql)
        rises[name] = sampler.stop() - base
    sampler.close()
    peak = _high_water_bytes()
    print("MEMORY " + json.dumps({"side": args.memory_side, "loaded_bytes": loaded, "peak_bytes": peak,
                                   "rises": rises}), flush=True)
    return 0


def _memory_pass(args, argv: list[str]) -> dict:
    out = {}
    for side in ("duckdb", "engine"):
        command = [sys.executable, "-m", "bench.run_tpch_sql", *argv, "--memory-side", side]
        done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("MEMORY ")]
        if done.returncode != 0 or not lines:
            out[side] = {"error": (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]}
        else:
            out[side] = json.loads(lines[-1][len("MEMORY "):])
        print(f"memory pass {side}: {out[side]}", file=sys.stderr, flush=True)
    return out


def _gb(value: int | None) -> str:
    return "—" if value is None else f"{value / 1e9:.2f}"


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.1f}"


def render_markdown(report: dict) -> str:
    """Return the report as markdown: per query its check, wall/CPU medians, ratio and memory rise; totals."""
    s, results = report["settings"], report["results"]
    lines = [f"# TPC-H through Session.sql against DuckDB — sf{s['sf']:g}, {s['device']}, {report['date']}", "",
             f"Command: `{report['command']}` at commit {report['machine'].get('git_commit')}"
             f"{' (dirty)' if report['machine'].get('git_dirty') else ''}.", "",
             f"Engine {s['drivers']} driver(s), DuckDB {s['drivers']} thread(s) over `read_parquet` views of the same "
             "files, one process. Every engine answer is checked against DuckDB's first. Times: medians of "
             f"{s['runs']} interleaved rounds (the side going first alternates by round) after a first run and the "
             "engine's wait for its compiled tier, ms; CPU = user+sys of the whole process during the call. "
             "Memory rise = highest resident set during a call minus the resident set at its start (5 ms samples, "
             "max over the runs; understates an allocator that keeps freed pages). "
             f"Load average before {report['load_before']}, after {report['load_after']}.", "",
             "| query | check | engine ms | engine CPU ms | DuckDB ms | DuckDB CPU ms | engine/DuckDB wall | "
             "engine/DuckDB CPU | engine rise GB | DuckDB rise GB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        ew, dw, ec, dc = (r.get(k) for k in ("engine_wall_s", "duckdb_wall_s", "engine_cpu_s", "duckdb_cpu_s"))
        lines.append(" | ".join([
            f"| {name}", r["check"] if r["check"] == "equal" else f"{r['check']}: {r.get('reason') or ''}",
            _ms(ew), _ms(ec), _ms(dw), _ms(dc), f"{ew / dw:.2f}x" if ew and dw else "—",
            f"{ec / dc:.2f}x" if ec and dc else "—", _gb(r.get("engine_rise_bytes")),
            _gb(r.get("duckdb_rise_bytes"))]) + " |")
    timed = [r for r in results.values() if r.get("engine_wall_s") and r.get("duckdb_wall_s")]
    if timed:
        ew, dw = sum(r["engine_wall_s"] for r in timed), sum(r["duckdb_wall_s"] for r in timed)
        ec, dc = sum(r["engine_cpu_s"] for r in timed), sum(r["duckdb_cpu_s"] for r in timed)
        over = [f"{r['query']} {r['engine_wall_s'] / r['duckdb_wall_s']:.2f}x" for r in timed
                if r["engine_wall_s"] / r["duckdb_wall_s"] > 1.6]
        lines += ["", f"**Total over the {len(timed)} queries both answered: engine {_ms(ew)} ms, DuckDB {_ms(dw)} ms "
                      f"({ew / dw:.2f}x wall); CPU {_ms(ec)} against {_ms(dc)} ms ({ec / dc:.2f}x).** "
                      f"Above 1.6x wall: {', '.join(over) or 'none'}.",
                  f"Highest in-process rise: engine {_gb(max(r.get('engine_rise_bytes') or 0 for r in timed))} GB, "
                  f"DuckDB {_gb(max(r.get('duckdb_rise_bytes') or 0 for r in timed))} GB."]
    memory = report.get("memory_pass")
    if memory:
        lines += ["", "## Peak memory, each side alone in a fresh process (each query once)", "",
                  "| side | resident after loading GB | peak resident GB (VmHWM) | highest rise of one query GB |",
                  "|---|---|---|---|"]
        for side, m in memory.items():
            if "error" in m:
                lines.append(f"| {side} | error: {m['error']} | | |")
            else:
                lines.append(f"| {side} | {_gb(m['loaded_bytes'])} | {_gb(m['peak_bytes'])} | "
                             f"{_gb(max(m['rises'].values(), default=0))} |")
    first = [f"{name} {_ms(r.get('engine_first_s'))}/{_ms(r.get('duckdb_first_s'))}" for name, r in results.items()]
    lines += ["", "First runs, engine/DuckDB (ms; the engine's on the lowest tier while kernels compile, both "
                  "reading files the page cache may not hold yet): " + ", ".join(first) + "."]
    if s.get("runs_asked"):
        lines += ["", f"**Partial report: {s['runs']} of the {s['runs_asked']} rounds asked had run when it was written.**"]
    lines += ["", "## Machine", ""] + [f"- {key}: {value}" for key, value in report["machine"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the queries; print each; write the report. Return 0, or 1 when an answer differs from DuckDB's."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.memory_side:
        return _memory_only(args)

    from bench.run_bench import _machine_facts, settle_compiled_tier
    from bench.tpch_queries import bench_query
    from gpu_engine.errors import PlanError

    from tests.duckdb_reference import rows_mismatch

    started = datetime.datetime.now()
    names = _names(args.queries)
    queries = {name: bench_query(name, args.sf) for name in names}
    sides = _open_sides(args)
    sampler = RssSampler()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())

    def timed(side: str, name: str):
        cpu, base = _cpu_seconds(), sampler.start()
        start = time.perf_counter()
        value = sides[side](queries[name].sql)
        wall = time.perf_counter() - start
        return value, wall, _cpu_seconds() - cpu, sampler.stop() - base

    results: dict[str, dict] = {}
    for name in names:
        r = results[name] = {"query": name, "check": "equal", "reason": None}
        expected, r["duckdb_first_s"], _, r["duckdb_rise_bytes"] = timed("duckdb", name)
        try:
            actual, r["engine_first_s"], _, r["engine_rise_bytes"] = timed("engine", name)
            problem = rows_mismatch(actual, expected, ordered=queries[name].ordered)
            if problem is not None:
                r["check"], r["reason"] = "wrong", problem.splitlines()[0]
        except Exception as error:  # noqa: BLE001 - reported, the run goes on
            r["check"] = "refused" if isinstance(error, PlanError) else "error"
            r["reason"] = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
        if r["check"] == "equal" and args.runs:
            r["engine_settle_s"] = settle_compiled_tier(lambda name=name: sides["engine"](queries[name].sql))
        print(f"{name:>4} {r['check']:<8} engine {_ms(r.get('engine_first_s')):>9} ms first, DuckDB "
              f"{_ms(r['duckdb_first_s']):>8} ms  {r['reason'] or ''}", file=sys.stderr, flush=True)

    machine = _machine_facts(args.device)

    def write(samples, rounds_done: int, memory=None) -> None:
        """Write the report as it stands (after the first runs and after each round: a run cut short keeps them)."""
        for (name, side), pairs in samples.items():
            results[name][f"{side}_wall_s"] = statistics.median(w for w, _ in pairs)
            results[name][f"{side}_cpu_s"] = statistics.median(c for _, c in pairs)
            results[name][f"{side}_samples_s"] = [w for w, _ in pairs]
        report = {
            "date": started.strftime("%Y-%m-%d %H:%M"),
            "command": shlex.join(["python", "-m", "bench.run_tpch_sql", *argv]),
            "settings": {"sf": args.sf, "runs": rounds_done, "device": args.device, "drivers": args.drivers},
            "load_before": load_before, "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "process_peak_bytes": _high_water_bytes(),
            "machine": machine,
            "results": results,
        }
        if rounds_done < args.runs:
            report["settings"]["runs_asked"] = args.runs
        if memory:
            report["memory_pass"] = memory
        text = render_markdown(report)
        if args.no_write:
            if memory is not None or (rounds_done == args.runs and not args.memory_pass):
                print(text)
            return
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stem = f"{started:%Y-%m-%d}-tpch-sql-{args.device}-sf{args.sf:g}" + (f"-{args.tag}" if args.tag else "")
        for suffix, content in ((".json", json.dumps(report, indent=1) + "\n"), (".md", text)):
            target = RESULTS_DIR / (stem + suffix)
            temporary = target.with_name(target.name + ".tmp")
            temporary.write_text(content)
            os.replace(temporary, target)
        print(f"wrote {RESULTS_DIR.relative_to(REPO_ROOT) / stem}.md after {rounds_done} round(s)", file=sys.stderr,
              flush=True)

    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    write(samples, 0)
    for round_number in range(args.runs):
        order = ("engine", "duckdb") if round_number % 2 == 0 else ("duckdb", "engine")
        for name in names:
            if results[name]["check"] != "equal":
                continue
            for side in order:
                _, wall, cpu, rise = timed(side, name)
                samples.setdefault((name, side), []).append((wall, cpu))
                key = f"{side}_rise_bytes"
                results[name][key] = max(results[name].get(key) or 0, rise)
        print(f"round {round_number + 1} of {args.runs} done", file=sys.stderr, flush=True)
        write(samples, round_number + 1)
    sampler.close()
    sides.clear()  # free the interleaved process's data before the memory passes load theirs
    import gc

    gc.collect()
    if args.memory_pass:
        passed = [a for a in argv if a not in ("--memory-pass", "--no-write")]
        write(samples, args.runs, _memory_pass(args, passed))
    return 1 if any(r["check"] == "wrong" for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
