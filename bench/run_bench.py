"""Time gpu_engine against DuckDB and Polars on the same TPC-H Parquet files, in one process.

For every query, each runner (the engine with each driver count, DuckDB, Polars)
first runs once: that run is timed and reported apart (it includes numba's JIT
compilation for the engine and cold caches for everyone), and its result is
checked against DuckDB's (names, row count, values; floats within 1e-9
relative). A runner whose result differs is reported as wrong and not timed.
Then each runner is timed ``--runs`` times and the median is reported.

Writes ``bench/results/<date>-<host kind>-sf<sf>.json``, a ``.md`` table and a
``.png`` chart of the medians (linked from the table; :mod:`bench.charts`) next
to it. Run from the repository root::

    python -m bench.run_bench --sf 1 --runs 5 --drivers 1,2
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # `python bench/run_bench.py` puts bench/ first, not the root
    sys.path.insert(0, str(REPO_ROOT))

from bench.charts import chart_link, medians_ms, write_chart
from bench.tpch_queries import BenchQuery, available_bench_queries, bench_query
from gpu_engine.cli import speed_ratio

__all__ = ["main", "RunnerResult", "QueryResult"]

RESULTS_DIR = REPO_ROOT / "bench" / "results"
DEFAULT_QUERIES = "primer,q1,q6"


@dataclass
class RunnerResult:
    """What one runner (engine config, DuckDB or Polars) did on one query."""

    runner: str
    first_run_s: float | None = None
    median_s: float | None = None
    min_s: float | None = None
    samples_s: list[float] = field(default_factory=list)
    rows: int | None = None
    correct: bool | None = None  # None: not checked (DuckDB is the reference)
    error: str | None = None


@dataclass
class QueryResult:
    """Every runner's result on one query."""

    query: str
    runners: dict[str, RunnerResult] = field(default_factory=dict)


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _parse_int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"driver counts must be integers >= 1, got {text!r}")
    return sorted(set(values))


def _parse_sf(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"scale factor must be positive, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """Return the benchmark's argument parser."""
    parser = argparse.ArgumentParser(prog="python -m bench.run_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=_parse_sf, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument(
        "--runs", type=int, default=5, help="timed runs per runner after the first (default 5, at least 5)"
    )
    parser.add_argument(
        "--device", default="cpu", choices=("cpu", "cuda", "cuda-sim", "auto"), help="engine device (default cpu)"
    )
    parser.add_argument("--drivers", type=_parse_int_list, default=[1, 2], help="engine driver counts (default 1,2)")
    parser.add_argument(
        "--queries",
        default=DEFAULT_QUERIES,
        help=f"comma-separated query names (default {DEFAULT_QUERIES}); 'all' for every one with a plan",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=_available_cores(),
        help="DuckDB and Polars threads (default: the cores this process may use)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="root of the TPC-H cache (default $GPU_ENGINE_DATA/tpch or ~/.cache/gpu_engine/tpch)",
    )
    parser.add_argument("--no-polars", action="store_true", help="skip Polars")
    parser.add_argument("--unfused", action="store_true",
                        help="also time each driver count with fusion off (fuse=False), to show what fusion gains")
    parser.add_argument("--sql", action="store_true",
                        help="also time each driver count with the query's SQL text through Session.sql "
                        "(engine-<device>-sql-<N>d), beside the hand-written plan")
    parser.add_argument(
        "--output-dir", type=Path, default=RESULTS_DIR, help="where to write results (default bench/results)"
    )
    parser.add_argument("--tag", default=None, help="host kind in the file name (default: device and core count)")
    return parser


# ------------------------------------------------------------------ timing
COMPILE_WAIT_LIMIT_S = 300.0


def settle_compiled_tier(run, limit_s: float = COMPILE_WAIT_LIMIT_S) -> float:
    """Wait for the background compile process, run once untimed, wait again; return the seconds waited.

    Why: with ``compile_mode="background"`` (the default) a query's first runs
    execute on the lowest tier while its generated kernels compile in another
    process; timing the runs right after the first one would mix the tiers
    (medians then depend on how fast the compile process happened to be). The
    warm figure is the compiled tier's; first runs are measured apart
    (``bench/first_runs.py``). The untimed run asks for kernels that only the
    fused tier reaches. In a Spark run the executors compile their own: nothing
    to wait for here.
    """
    from gpu_engine.codegen.background_compiles import background_compiler

    compiler = background_compiler()
    start = time.perf_counter()
    compiler.wait_idle(timeout=limit_s)
    run()
    compiler.wait_idle(timeout=max(0.0, limit_s - (time.perf_counter() - start)))
    return time.perf_counter() - start


def _time_runner(
    result: RunnerResult, run: Callable[[], object], reference, ordered: bool, runs: int, mismatch: Callable,
    settle: bool = False,
) -> object:
    """Run once (timed apart), check against ``reference`` when given, then time ``runs`` runs.

    ``settle``: an engine runner; wait for its compiled tier before timing (:func:`settle_compiled_tier`).
    """
    start = time.perf_counter()
    try:
        table = run()
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
    if settle and runs:
        settle_compiled_tier(run)
    for _ in range(runs):
        start = time.perf_counter()
        run()
        result.samples_s.append(time.perf_counter() - start)
    result.median_s = statistics.median(result.samples_s)
    result.min_s = min(result.samples_s)
    return table


def _machine_facts(device_name: str) -> dict:
    import duckdb
    import numba
    import numpy
    import pyarrow

    facts = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cores_available": _available_cores(),
        "cpu_count": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "device": device_name,
        "device_name": _cpu_model() if device_name != "cuda" else _gpu_name(),
        "python": platform.python_version(),
        "numba": numba.__version__,
        "numpy": numpy.__version__,
        "pyarrow": pyarrow.__version__,
        "duckdb": duckdb.__version__,
        "git_commit": _git(["rev-parse", "HEAD"]),
        "git_dirty": bool(_git(["status", "--porcelain", "--untracked-files=no"])),
    }
    try:
        import polars

        facts["polars"] = polars.__version__
    except ImportError:
        facts["polars"] = None
    return facts


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return None


def _gpu_name() -> str:
    try:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - a fact we could not read is reported as unknown
        return "unknown GPU"


def _git(arguments: list[str]) -> str | None:
    try:
        completed = subprocess.run(
            ["git", *arguments], check=False, cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout.strip() if completed.returncode == 0 else None


def _host_kind(device_name: str, cores: int) -> str:
    if device_name == "cuda":
        slug = re.sub(r"[^a-z0-9]+", "-", _gpu_name().lower()).strip("-")
        return f"cuda-{slug}"
    return f"{device_name}-{cores}core"


def _command_line(argv: list[str]) -> str:
    if __spec__ is not None and __spec__.name == "bench.run_bench":
        return shlex.join(["python", "-m", "bench.run_bench", *argv])
    return shlex.join(["python", "bench/run_bench.py", *argv])


# ---------------------------------------------------------------- running
def run_benchmark(args: argparse.Namespace, queries: list[BenchQuery]) -> tuple[list[QueryResult], str]:
    """Run every query on every runner; return the results and the engine's device name."""
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    data_dir = ensure_tpch(args.sf, args.data_dir, progress=True)
    duck = duckdb_connection(data_dir, threads=args.threads)
    sessions = {}
    for drivers in args.drivers:
        for fuse in (True, False) if getattr(args, "unfused", False) else (True,):
            session = Session(device=args.device, drivers=drivers, fuse=fuse)
            register_tpch(session, data_dir)
            sessions[f"engine-{session.device.name}-{drivers}d" + ("" if fuse else _UNFUSED)] = session
    device_name = next(iter(sessions.values())).device.name
    polars_tables = None
    if not args.no_polars:
        try:
            import polars as pl

            polars_tables = {p.stem: pl.scan_parquet(p) for p in sorted(data_dir.glob("*.parquet"))}
        except ImportError:
            print("polars is not installed; skipping it", file=sys.stderr)

    results = []
    for query in queries:
        print(f"[{query.name}]", file=sys.stderr)
        outcome = QueryResult(query.name)
        duck_result = RunnerResult("duckdb")
        reference = _time_runner(
            duck_result, lambda sql=query.sql: duckdb_table(duck, sql), None, query.ordered, args.runs, rows_mismatch
        )
        outcome.runners["duckdb"] = duck_result
        _report(duck_result)
        if reference is None:
            results.append(outcome)
            continue
        for label, session in sessions.items():
            plan = query.build_plan(session.catalog)
            runner = RunnerResult(label)
            _time_runner(
                runner,
                lambda session=session, plan=plan: session.execute(plan),
                reference,
                query.ordered,
                args.runs,
                rows_mismatch,
                settle=True,
            )
            outcome.runners[label] = runner
            _report(runner)
        for label, session in sessions.items() if getattr(args, "sql", False) else ():
            head, drivers = label.split("-unfused")[0].rsplit("-", 1)
            runner = RunnerResult(f"{head}-sql-{drivers}" + label[len(head) + len(drivers) + 1:])
            try:
                session.sql_plan(query.sql)
            except Exception as error:  # noqa: BLE001 - SQL the planner refuses is reported, not fatal
                runner.error = f"{type(error).__name__}: {error}"
            else:
                # Session.sql as users call it: planning (its plan cache), CTEs read twice computed once.
                _time_runner(runner, lambda session=session: session.sql(query.sql), reference,
                             query.ordered, args.runs, rows_mismatch, settle=True)
            outcome.runners[runner.runner] = runner
            _report(runner)
        if polars_tables is not None and query.polars is not None:
            runner = RunnerResult("polars")
            try:
                lazy = query.polars(polars_tables)
            except Exception as error:  # noqa: BLE001 - e.g. SQL Polars cannot plan; report it
                runner.error = f"{type(error).__name__}: {error}"
            else:
                # Polars names an unaliased aggregate after its input column (``l_quantity`` for DuckDB's
                # ``sum(l_quantity)`` in Q18): compare values by position, under DuckDB's names.
                def run_polars(lazy=lazy, names=reference.column_names):
                    table = lazy.collect().to_arrow()
                    return table.rename_columns(names) if table.num_columns == len(names) else table

                _time_runner(runner, run_polars, reference, query.ordered, args.runs, rows_mismatch)
            outcome.runners["polars"] = runner
            _report(runner)
        results.append(outcome)
    return results, device_name


def _report(result: RunnerResult) -> None:
    if result.error:
        print(f"  {result.runner:<24} FAILED: {result.error.splitlines()[0]}", file=sys.stderr)
    else:
        print(
            f"  {result.runner:<24} first {result.first_run_s * 1000:9.1f} ms   "
            f"median {result.median_s * 1000:9.1f} ms",
            file=sys.stderr,
        )


# ---------------------------------------------------------------- reports
def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.1f}"


def _time_cell(runner: RunnerResult | None) -> str:
    if runner is None:
        return "—"
    if runner.correct is False:
        return "WRONG"
    if runner.error:
        return "FAILED"
    return _ms(runner.median_s)


def _ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or denominator is None or denominator == 0:
        return "—"
    return f"{numerator / denominator:.2f}×"


def _versus(seconds: float | None, duck_seconds: float | None) -> str:
    """Say how a runner compares with DuckDB in words (``3.67× slower``), ``—`` when either time is missing."""
    words = speed_ratio(seconds, duck_seconds)
    return "—" if words == "-" else words


def runner_order(report: dict) -> list[str]:
    """Return the report's runner labels as its table shows them: DuckDB, the engine runners, then Polars."""
    seen = [label for q in report["results"] for label in q["runners"]]
    labels = list(dict.fromkeys(seen))
    engines = [label for label in labels if label.startswith("engine-")]
    return ["duckdb"] * ("duckdb" in labels) + engines + [label for label in labels
                                                          if label != "duckdb" and label not in engines]


def render_markdown(report: dict) -> str:
    """Return the report as a markdown document: machine facts, then one table of times and ratios."""
    settings, facts = report["settings"], report["machine"]
    results = [
        QueryResult(q["query"], {k: RunnerResult(**v) for k, v in q["runners"].items()}) for q in report["results"]
    ]
    engine_labels = [label for label in results[0].runners if label.startswith("engine-")] if results else []
    peers = [label for label in ("polars",) if any(label in r.runners for r in results)]
    lines = [
        f"# gpu_engine benchmark — TPC-H sf{settings['sf']:g}, {report['date']}",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Times are medians of {settings['runs']} runs after a first run (reported apart: it includes JIT "
        f"compilation and cold caches), in milliseconds, each result checked against DuckDB's first. "
        f"DuckDB and Polars use {settings['threads']} threads. The \"vs DuckDB\" columns say how many times "
        "slower or faster than DuckDB a runner is; a speedup column is the baseline's time over the other's "
        "(above 1× the other is faster).",
        "",
    ] + chart_link(report)
    via_sql = settings.get("polars_via_sql") or []
    if peers and via_sql:
        lines += [f"Polars runs {', '.join(via_sql)} through its SQL front end (`polars.SQLContext`) on the same "
                  "SQL text as DuckDB; the others are hand-written LazyFrame queries.", ""]
    runner_labels = ["duckdb"] + engine_labels + peers
    titles = {"duckdb": "DuckDB", "polars": "Polars"}
    fused_labels = [label for label in engine_labels if not label.endswith(_UNFUSED)]
    speedup_pairs = [(fused_labels[0], other) for other in fused_labels[1:]]
    # "fusion speedup": the unfused runner's time over the fused one's, per driver count.
    speedup_pairs += [(label + _UNFUSED, label) for label in fused_labels if label + _UNFUSED in engine_labels]
    header = ["query"] + [titles.get(label, label) for label in runner_labels]
    header += [f"{titles.get(label, label)} vs DuckDB" for label in engine_labels + peers]
    header += [f"fusion speedup {_drivers_of(b)}d" if a.endswith(_UNFUSED) else
               f"speedup {_drivers_of(b)}d vs {_drivers_of(a)}d" for a, b in speedup_pairs]
    lines += ["Median times (ms):", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    failures = []
    for result in results:
        duck = result.runners.get("duckdb")
        duck_median = duck.median_s if duck else None
        row = [result.query]
        for label in runner_labels:
            row.append(_time_cell(result.runners.get(label)))
        for label in engine_labels + peers:
            runner = result.runners.get(label)
            row.append(_versus(runner.median_s if runner else None, duck_median))
        for a, b in speedup_pairs:
            ra, rb = result.runners.get(a), result.runners.get(b)
            row.append(_ratio(ra.median_s if ra else None, rb.median_s if rb else None))
        lines.append("| " + " | ".join(row) + " |")
        failures += [
            f"- {result.query} / {r.runner}: " + r.error.replace("\n", "\n  ")
            for r in result.runners.values()
            if r.error
        ]
    if len(results) > 1:
        lines.append(_total_row(results, runner_labels, engine_labels + peers, speedup_pairs))
    first_header = ["query"] + [titles.get(label, label) for label in runner_labels]
    lines += [
        "",
        "First runs (ms; the engine's include numba JIT compilation):",
        "",
        "| " + " | ".join(first_header) + " |",
        "|" + "---|" * len(first_header),
    ]
    for result in results:
        cells = [_ms(r.first_run_s) if (r := result.runners.get(label)) else "—" for label in runner_labels]
        lines.append("| " + " | ".join([result.query] + cells) + " |")
    if failures:
        lines += ["", "## Failures", ""] + failures
    lines += ["", "## Machine", ""]
    lines += [f"- {key}: {value}" for key, value in facts.items()]
    return "\n".join(lines) + "\n"


def _total_row(results: list[QueryResult], runner_labels: list[str], compared: list[str],
               speedup_pairs: list[tuple[str, str]]) -> str:
    """Return the table's **total** row: per runner the sum of medians, over queries every runner finished."""
    complete = [r for r in results
                if all((x := r.runners.get(label)) is not None and x.median_s is not None and not x.error
                       for label in runner_labels)]
    totals = {label: sum(r.runners[label].median_s for r in complete) for label in runner_labels}
    row = [f"**total** ({len(complete)} queries)"] + [_ms(totals[label]) for label in runner_labels]
    row += [_versus(totals[label], totals["duckdb"]) for label in compared]
    row += [_ratio(totals[a], totals[b]) for a, b in speedup_pairs]
    return "| " + " | ".join(row) + " |"


_UNFUSED = "-unfused"


def _drivers_of(label: str) -> str:
    return label.removesuffix(_UNFUSED).rsplit("-", 1)[-1].removesuffix("d")


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0, or 1 when any runner failed or disagreed with DuckDB."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.runs < 5:
        parser.error(f"--runs must be at least 5 for a meaningful median, got {args.runs}")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    # Polars sizes its thread pool once, at import; give it the same threads as DuckDB.
    os.environ.setdefault("POLARS_MAX_THREADS", str(args.threads))
    names = (
        available_bench_queries()
        if args.queries.strip() == "all"
        else [part for part in args.queries.split(",") if part.strip()]
    )
    try:
        queries = [bench_query(name, args.sf) for name in names]
    except ValueError as error:
        parser.error(str(error))
    if not queries:
        parser.error("no query given")

    started = datetime.datetime.now()
    results, device_name = run_benchmark(args, queries)
    facts = _machine_facts(device_name)
    report = {
        "date": started.strftime("%Y-%m-%d %H:%M"),
        "command": _command_line(argv),
        "settings": {
            "sf": args.sf,
            "runs": args.runs,
            "device": device_name,
            "drivers": args.drivers,
            "threads": args.threads,
            "queries": [q.name for q in queries],
            "polars_via_sql": [q.name for q in queries if q.polars_from_sql],
        },
        "machine": facts,
        "results": [{"query": r.query, "runners": {k: asdict(v) for k, v in r.runners.items()}} for r in results],
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{started:%Y-%m-%d}-{args.tag or _host_kind(device_name, facts['cores_available'])}-sf{args.sf:g}"
    json_path, markdown_path = args.output_dir / f"{stem}.json", args.output_dir / f"{stem}.md"
    chart = write_chart(args.output_dir / f"{stem}.png",
                        f"gpu_engine vs DuckDB and Polars — TPC-H sf{args.sf:g}, {device_name}, {report['date']}",
                        [r.query for r in results], medians_ms(report["results"], runner_order(report)))
    if chart is not None:
        report["chart"] = chart.name
    _write_atomically(json_path, json.dumps(report, indent=2) + "\n")
    markdown = render_markdown(report)
    _write_atomically(markdown_path, markdown)
    print(markdown)
    print(f"wrote {json_path} and {markdown_path}", file=sys.stderr)
    failed = any(r.error for q in results for r in q.runners.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
