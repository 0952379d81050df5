"""Time TPC-H on the engine's GPU device, cold (from Parquet) and hot (cached on the device), against DuckDB in one run.

For every query, three runners go in turn, each run once first (that run is
timed apart: for the engine it holds numba's JIT compilation, for everyone
cold file caches) and checked against DuckDB's result, then timed ``--runs``
times (median reported). The timed runs are interleaved: run 1 of every
runner, then run 2 of every runner, and so on, so that a change of the
machine's speed during the call (DuckDB's own total varied 5.7-8.8 s between
calls on the H100) touches every runner alike. The device is synchronized
before each clock start, and kernels compiled during a timed run (there should
be none once the first run is done) are counted in the report's ``jit``:

* ``duckdb``: DuckDB on the same Parquet files, all the machine's cores;
* ``engine-cold``: a Session over the Parquet files (decode, host-to-device
  copy through pinned memory, kernels, result back to Arrow);
* ``engine-hot``: a Session whose tables the query reads were cached on the
  device first (``Session.cache``; the seconds each cache took are reported
  apart). Where this checkout's Session has no ``cache``, hot runs are
  reported as not run, with the reason.

The report (``<date>-gpu-<device>-sf<sf>.json``, ``.md`` and a ``.png`` chart
of the medians) gives the medians, how many times faster or slower than DuckDB
each engine runner is, the issue's targets (hot primer
query and Q1 at least 10× faster than DuckDB), the first-run (JIT) times, an
``explain(analyze=True)`` of the first query (with its host-device bytes and
seconds), the machine, the command, and the kernel micro-benchmark's table
when ``--micro-json`` names its output. Run from the repository root::

    python -m bench.run_gpu_bench --sf 10 --runs 5 --output-dir "$OUT"
    python -m bench.run_gpu_bench --queries all --runs 3     # every TPC-H query with a plan
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import sys
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # `python bench/run_gpu_bench.py` puts bench/ first, not the root
    sys.path.insert(0, str(REPO_ROOT))

from bench.run_bench import (  # noqa: E402 - after the path fix above
    QueryResult,
    RunnerResult,
    _available_cores,
    _machine_facts,
    _parse_sf,
    _write_atomically,
    runner_order,
)
from bench.charts import chart_link, medians_ms, write_chart  # noqa: E402
from bench.tpch_queries import BenchQuery, available_bench_queries, bench_query  # noqa: E402

from gpu_engine.cli import speed_ratio  # noqa: E402

__all__ = ["main", "TARGET_SPEEDUP", "TARGET_QUERIES"]

DEFAULT_QUERIES = "primer,q1,q6"
#: The issue's target: these queries, hot, at least this many times faster than DuckDB on the same host.
TARGET_SPEEDUP = 10.0
TARGET_QUERIES = ("primer", "q1")
RESULTS_DIR = REPO_ROOT / "bench" / "results"


def build_parser() -> argparse.ArgumentParser:
    """Return the GPU benchmark's argument parser."""
    parser = argparse.ArgumentParser(prog="python -m bench.run_gpu_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=_parse_sf, default=10.0, help="TPC-H scale factor (default 10)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per runner after the first (default 5)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu", "cuda-sim"),
                        help="engine device (default cuda; cpu or cuda-sim only to check the script)")
    parser.add_argument("--drivers", type=int, default=1,
                        help="engine drivers per pipeline (default 1: on cuda more drivers are slower, see the "
                             "README's 'Drivers on a GPU')")
    parser.add_argument("--queries", default=DEFAULT_QUERIES,
                        help=f"comma-separated query names (default {DEFAULT_QUERIES}); 'all' for every planned one")
    parser.add_argument("--modes", default="cold,hot", help="engine runners: cold, hot or both (default cold,hot)")
    parser.add_argument("--threads", type=int, default=_available_cores(), help="DuckDB threads (default: all cores)")
    parser.add_argument("--data-dir", type=Path, default=None, help="root of the TPC-H cache (default as run_bench)")
    parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR, help="where the report goes")
    parser.add_argument("--tag", default=None, help="host kind in the file name (default gpu-<device name>)")
    parser.add_argument("--micro-json", type=Path, default=None, help="a kernel_microbench JSON to include")
    parser.add_argument("--no-interleave", action="store_true",
                        help="time every run of one runner before the next runner's (default: interleaved)")
    return parser


def _scanned_tables(plan) -> list[str]:
    from gpu_engine.plans.nodes import TableScanNode, walk_plan

    return sorted({node.table_name for node in walk_plan(plan) if isinstance(node, TableScanNode)})


def _cache_tables(session, tables: list[str], cached: dict[str, float]) -> str | None:
    """Cache ``tables`` on ``session``'s device (once each); return why not, when the Session cannot."""
    cache = getattr(session, "cache", None)
    if cache is None:
        return "Session.cache is not available in this checkout; hot runs need it"
    for name in tables:
        if name not in cached:
            start = time.perf_counter()
            cache(name)
            session.device.synchronize()
            cached[name] = time.perf_counter() - start
    return None


def run_benchmark(args: argparse.Namespace, queries: list[BenchQuery], after_query=None) -> dict:
    """Run every query on DuckDB and the engine's runners; return the report's results part.

    ``after_query(part)`` gets the results so far after each query (the report is written then, so a run
    stopped at a time limit leaves the queries it finished).
    """
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    data_dir = ensure_tpch(args.sf, args.data_dir, progress=True)
    duck = duckdb_connection(data_dir, threads=args.threads)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    sessions = {}
    for mode in modes:
        session = Session(device=args.device, drivers=args.drivers)
        register_tpch(session, data_dir)
        sessions[f"engine-{mode}"] = session
    cached: dict[str, float] = {}
    results, explain_text, jit = [], None, {}
    for query in queries:
        print(f"[{query.name}]", file=sys.stderr)
        outcome = QueryResult(query.name)
        duck_result = RunnerResult("duckdb")
        duck_call = partial(duckdb_table, duck, query.sql)
        reference = _first_run(duck_result, duck_call, None, None, query.ordered, rows_mismatch)
        outcome.runners["duckdb"] = duck_result
        timed = [(duck_result, duck_call, None)] if reference is not None else []
        jit[query.name] = {}
        for label, session in sessions.items():
            runner = RunnerResult(label)
            outcome.runners[label] = runner
            if reference is None:
                runner.error = "DuckDB failed; nothing to check against"
                continue
            plan = query.build_plan(session.catalog)
            if label == "engine-hot":
                try:
                    runner.error = _cache_tables(session, _scanned_tables(plan), cached)
                except Exception as error:  # noqa: BLE001 - report and go on
                    runner.error = f"caching failed: {type(error).__name__}: {error}"
                if runner.error:
                    continue
            compiled, compile_s = _ptx_compiles()
            call = partial(session.execute, plan)
            _first_run(runner, call, session.device, reference, query.ordered, rows_mismatch)
            after, after_s = _ptx_compiles()
            jit[query.name][label] = {"first_run_ptx_compiles": after - compiled,
                                      "first_run_ptx_compile_s": round(after_s - compile_s, 3)}
            if runner.error is None:
                timed.append((runner, call, session.device))
            if explain_text is None and label == "engine-cold" and runner.error is None:
                explain_text = session.explain(plan, analyze=True)
        compiled, _ = _ptx_compiles()
        _timed_runs(timed, args.runs, interleave=not args.no_interleave)
        jit[query.name]["timed_runs_ptx_compiles"] = _ptx_compiles()[0] - compiled
        for runner in outcome.runners.values():
            _report(runner)
        results.append(outcome)
        part = {"results": results, "explain": explain_text, "cache_seconds": cached, "jit": jit,
                "device": next(iter(sessions.values())).device if sessions else None}
        if after_query is not None and len(results) < len(queries):
            after_query(part)
    return {"results": results, "explain": explain_text, "cache_seconds": cached, "jit": jit,
            "device": next(iter(sessions.values())).device if sessions else None}


def _ptx_compiles() -> tuple[int, float]:
    """Return how many kernels this process compiled to PTX so far, and their seconds (JIT, reported apart)."""
    from gpu_engine.kernels.ptx_cache import compile_records

    compiled = [record for record in compile_records() if record.outcome == "compiled"]
    return len(compiled), sum(record.seconds for record in compiled)


def _first_run(result: RunnerResult, run, device, reference, ordered: bool, mismatch):
    """Run once, timed apart (JIT, cold caches), and check against ``reference``; return the table or None."""
    if device is not None:
        device.synchronize()
    start = time.perf_counter()
    try:
        table = run()
        if device is not None:
            device.synchronize()
    except Exception as error:  # noqa: BLE001 - report and go on with the other runners
        result.error = f"{type(error).__name__}: {error}"
        return None
    result.first_run_s = time.perf_counter() - start
    result.rows = table.num_rows
    if reference is not None:
        problem = mismatch(table, reference, ordered=ordered)
        result.correct = problem is None
        if problem is not None:
            result.error = "result differs from DuckDB: " + problem
    return table


def _timed_runs(timed: list, runs: int, interleave: bool = True) -> None:
    """Time ``runs`` runs of each ``(result, run, device)``: round by round when ``interleave``, else runner by runner.

    The device is synchronized before the clock starts and before it stops (an
    engine result is on the host already; the sync also waits for any stray work).
    """
    order = ([entry for _ in range(runs) for entry in timed] if interleave
             else [entry for entry in timed for _ in range(runs)])
    for result, run, device in order:
        if result.error is not None:
            continue
        if device is not None:
            device.synchronize()
        start = time.perf_counter()
        try:
            run()
            if device is not None:
                device.synchronize()
        except Exception as error:  # noqa: BLE001 - a later run failing is a finding too
            result.error = f"timed run failed: {type(error).__name__}: {error}"
            continue
        result.samples_s.append(time.perf_counter() - start)
    for result, _, _ in timed:
        if result.samples_s:
            result.median_s = statistics.median(result.samples_s)
            result.min_s = min(result.samples_s)


def _report(result: RunnerResult) -> None:
    if result.error:
        print(f"  {result.runner:<14} FAILED: {result.error.splitlines()[0]}", file=sys.stderr)
    else:
        print(f"  {result.runner:<14} first {_ms(result.first_run_s):>9} ms   median {_ms(result.median_s):>9} ms",
              file=sys.stderr)


# ------------------------------------------------------------------ report
def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.1f}"


def _speedup(duck: RunnerResult | None, engine: RunnerResult | None) -> float | None:
    if duck is None or engine is None or duck.median_s is None or engine.median_s is None or engine.error:
        return None
    return duck.median_s / engine.median_s


def render_markdown(report: dict) -> str:
    """Return the report as markdown: the command, the medians and speed-ups, targets, first runs, machine."""
    settings, facts = report["settings"], report["machine"]
    results = [QueryResult(q["query"], {k: RunnerResult(**v) for k, v in q["runners"].items()})
               for q in report["results"]]
    engines = [label for label in ("engine-cold", "engine-hot") if any(label in r.runners for r in results)]
    lines = [
        f"# gpu_engine on {facts['device_name']} — TPC-H sf{settings['sf']:g}, {report['date']}",
        "",
        f"Command: `{report['command']}`",
        "",
        *([f"**Partial**: {report['partial']}.", ""] if report.get("partial") else []),
        f"Engine: device {settings['device']}, {settings['drivers']} drivers. DuckDB {facts.get('duckdb')}: "
        f"{settings['threads']} threads of this machine's CPUs ({facts['cpu_model']}), same Parquet files, same run. "
        f"Medians of {settings['runs']} runs after a first run (apart: JIT compilation, cold caches)"
        f"{', the runners interleaved run by run' if settings.get('interleaved') else ''}. "
        "\"vs DuckDB\" says how many times faster or slower than DuckDB the engine is. "
        "Cold reads Parquet every run; hot reads tables cached on the device.",
        "",
        *chart_link(report),
        "| query | DuckDB ms | " + " | ".join(f"{label} ms" for label in engines) + " | "
        + " | ".join(f"{label} vs DuckDB" for label in engines) + " |",
        "|" + "---|" * (2 + 2 * len(engines)),
    ]
    failures = []
    for result in results:
        duck = result.runners.get("duckdb")
        cells = [result.query, _ms(duck.median_s if duck else None)]
        for label in engines:
            runner = result.runners.get(label)
            cells.append("WRONG" if runner and runner.correct is False else
                         "—" if runner is None or runner.error else _ms(runner.median_s))
        for label in engines:
            value = _speedup(duck, result.runners.get(label))
            cells.append("—" if value is None else speed_ratio(1.0, value))
        lines.append("| " + " | ".join(cells) + " |")
        failures += [f"- {result.query} / {r.runner}: {r.error}" for r in result.runners.values() if r.error]
    lines += ["", f"Targets: hot {', '.join(TARGET_QUERIES)} at least {TARGET_SPEEDUP:g}× faster than DuckDB:"]
    for name, verdict in report["targets"].items():
        lines.append(f"- {name}: {verdict}")
    lines += ["", "First runs (ms; the engine's first run of the first query holds numba's JIT compilation):", "",
              "| query | " + " | ".join(["DuckDB"] + engines) + " |", "|" + "---|" * (1 + 1 + len(engines))]
    for result in results:
        cells = [_ms(r.first_run_s) if (r := result.runners.get(label)) else "—" for label in ["duckdb"] + engines]
        lines.append("| " + " | ".join([result.query] + cells) + " |")
    if report.get("jit"):
        entries = [entry for query in report["jit"].values() for entry in query.values() if isinstance(entry, dict)]
        timed = sum(query.get("timed_runs_ptx_compiles", 0) for query in report["jit"].values())
        lines += ["", f"JIT (PTX compiles, kept out of the medians): {sum(e['first_run_ptx_compiles'] for e in entries)} "
                      f"in first runs ({sum(e['first_run_ptx_compile_s'] for e in entries):.1f} s), {timed} in timed runs."]
    if report.get("cache_seconds"):
        lines += ["", "Caching on the device (s): " + ", ".join(f"{k} {v:.2f}" for k, v in report["cache_seconds"].items())]
    if report.get("micro"):
        from bench.kernel_microbench import render_table

        lines += ["", render_table(report["micro"])]
    if report.get("explain"):
        lines += ["", "explain(analyze=True) of the first query, cold:", "", "```", report["explain"], "```"]
    if failures:
        lines += ["", "## Failures", ""] + failures
    lines += ["", "## Machine", ""] + [f"- {key}: {value}" for key, value in facts.items()]
    return "\n".join(lines) + "\n"


def summary(markdown: str) -> str:
    """Return the short part of a report: its title, the medians table and the targets (what a terminal shows last)."""
    head = markdown.split("\nFirst runs")[0]
    lines = [line for line in head.splitlines() if line.startswith(("#", "|", "Targets", "- "))]
    return "\n".join(lines) + "\n"


def _targets(results: list[QueryResult], device_name: str) -> dict[str, str]:
    verdicts = {}
    for name in TARGET_QUERIES:
        result = next((r for r in results if r.query == name), None)
        if result is None:
            verdicts[name] = "not run"
            continue
        value = _speedup(result.runners.get("duckdb"), result.runners.get("engine-hot"))
        if value is None:
            verdicts[name] = "no hot figure"
        else:
            ok = value >= TARGET_SPEEDUP
            verdicts[name] = f"{value:.1f}× ({'met' if ok else 'MISSED'})" + ("" if device_name == "cuda" else
                                                                             " — not a GPU run")
    return verdicts


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def main(argv: list[str] | None = None) -> int:
    """Run the GPU benchmark and write its report; return 1 when a runner failed or disagreed with DuckDB."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.runs < 1 or args.drivers < 1 or args.threads < 1:
        parser.error("--runs, --drivers and --threads must be at least 1")
    names = available_bench_queries() if args.queries.strip() == "all" else [
        part.strip() for part in args.queries.split(",") if part.strip()]
    try:
        queries = [bench_query(name, args.sf) for name in names]
    except ValueError as error:
        parser.error(str(error))
    started = datetime.datetime.now()
    facts_of: dict[str, dict] = {}

    def write(outcome: dict, final: bool) -> str:
        device_name = outcome["device"].name if outcome["device"] is not None else args.device
        facts = facts_of.setdefault(device_name, _machine_facts(device_name))
        done = [r.query for r in outcome["results"]]
        report = {
            "date": started.strftime("%Y-%m-%d %H:%M"),
            "command": shlex.join(["python", "-m", "bench.run_gpu_bench", *argv]),
            "settings": {"sf": args.sf, "runs": args.runs, "device": device_name, "drivers": args.drivers,
                         "threads": args.threads, "queries": [q.name for q in queries], "modes": args.modes,
                         "interleaved": not args.no_interleave},
            "machine": facts,
            "results": [{"query": r.query, "runners": {k: asdict(v) for k, v in r.runners.items()}}
                        for r in outcome["results"]],
            "targets": _targets(outcome["results"], device_name),
            "cache_seconds": outcome["cache_seconds"],
            "explain": outcome["explain"],
            "jit": outcome["jit"],
            "micro": json.loads(args.micro_json.read_text()) if args.micro_json and args.micro_json.exists() else None,
        }
        if not final:
            report["partial"] = f"{len(done)} of {len(queries)} queries so far (the run was still going)"
        args.output_dir.mkdir(parents=True, exist_ok=True)
        tag = args.tag or (f"gpu-{_slug(facts['device_name'])}" if device_name == "cuda"
                           else f"{device_name}-{os.cpu_count()}core")
        stem = f"{started:%Y-%m-%d}-{tag}-sf{args.sf:g}"
        json_path, markdown_path = args.output_dir / f"{stem}.json", args.output_dir / f"{stem}.md"
        if final:
            chart = write_chart(args.output_dir / f"{stem}.png",
                                f"gpu_engine on {facts['device_name']} vs DuckDB — TPC-H sf{args.sf:g}, {report['date']}",
                                [q["query"] for q in report["results"]], medians_ms(report["results"], runner_order(report)))
            if chart is not None:
                report["chart"] = chart.name
        _write_atomically(json_path, json.dumps(report, indent=2) + "\n")
        markdown = render_markdown(report)
        _write_atomically(markdown_path, markdown)
        if final:
            print(f"wrote {json_path} and {markdown_path}", file=sys.stderr)
        return markdown

    outcome = run_benchmark(args, queries, after_query=lambda part: write(part, final=False))
    print(summary(write(outcome, final=True)))
    failed = any(r.error and not r.error.startswith("Session.cache") for q in outcome["results"]
                 for r in q.runners.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
