"""Time a query on one Task against the same query on a LocalCluster, with DuckDB as the yardstick.

Why: the cluster adds shuffles (device-to-host copies, Arrow IPC pages, buffer
hand-offs) that a single Task does not pay; this shows what they cost and how
many bytes and pages cross them. Each runner runs once (timed apart, checked
against DuckDB), then ``--runs`` times; medians are reported. The cluster's
shuffle pages and bytes come from its query stats (the output buffers of every
stage). Writes ``bench/results/<date>-cluster-<host kind>-sf<sf>.json``, ``.md`` and a ``.png`` chart.
Run from the repository root::

    python -m bench.run_cluster_bench --sf 1 --runs 5 --widths 2,2,1
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from dataclasses import asdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.run_bench import (  # noqa: E402 - after the path fix above
    RESULTS_DIR,
    RunnerResult,
    _available_cores,
    _host_kind,
    _machine_facts,
    _ms,
    _parse_sf,
    _time_runner,
    _write_atomically,
)
from bench.charts import chart_link, write_chart  # noqa: E402
from bench.tpch_queries import bench_query  # noqa: E402
from gpu_engine.cli import speed_ratio  # noqa: E402

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    """Return the cluster benchmark's argument parser."""
    parser = argparse.ArgumentParser(prog="python -m bench.run_cluster_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=_parse_sf, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per runner after the first (default 5)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "cuda-sim", "auto"))
    parser.add_argument("--query", default="primer", help="query name (default primer)")
    parser.add_argument("--widths", default="2,2,1", help="cluster stage widths, leaf first (default 2,2,1)")
    parser.add_argument("--task-drivers", type=int, default=1, help="drivers per cluster Task (default 1)")
    parser.add_argument("--single-drivers", type=int, default=_available_cores(),
                        help="drivers of the single-Task runner (default: the cores)")
    parser.add_argument("--threads", type=int, default=_available_cores(), help="DuckDB threads")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; return 0, or 1 when a runner failed or disagreed with DuckDB."""
    from gpu_engine import Session
    from gpu_engine.cluster import LocalCluster
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    widths = tuple(int(w) for w in args.widths.split(","))
    query = bench_query(args.query, args.sf)
    data_dir = ensure_tpch(args.sf, args.data_dir, progress=True)
    started = datetime.datetime.now()

    duck = duckdb_connection(data_dir, threads=args.threads)
    runners: dict[str, RunnerResult] = {}
    duck_result = RunnerResult("duckdb")
    reference = _time_runner(duck_result, lambda: duckdb_table(duck, query.sql), None, query.ordered, args.runs,
                             rows_mismatch)
    runners["duckdb"] = duck_result

    single = Session(device=args.device, drivers=args.single_drivers)
    register_tpch(single, data_dir)
    plan = query.build_plan(single.catalog)
    label = f"single-task-{args.single_drivers}d"
    runners[label] = RunnerResult(label)
    _time_runner(runners[label], lambda: single.execute(plan), reference, query.ordered, args.runs, rows_mismatch)

    distributed = Session(device=args.device, drivers=args.task_drivers)
    register_tpch(distributed, data_dir)
    cluster = LocalCluster(distributed, widths)
    label = f"cluster-{'x'.join(map(str, widths))}-{args.task_drivers}d"
    runners[label] = RunnerResult(label)
    _time_runner(runners[label], lambda: cluster.execute(plan), reference, query.ordered, args.runs, rows_mismatch)
    stats = cluster.last_stats
    shuffle = [{"stage": s.stage_id, "tasks": len(s.tasks), "pages": s.shuffle_pages, "bytes": s.shuffle_bytes,
                "rows": sum(b.rows for b in s.output_buffers),
                "peak_buffered_bytes": max((b.peak_bytes for b in s.output_buffers), default=0)}
               for s in stats.stages] if stats else []

    facts = _machine_facts(single.device.name)
    report = {
        "date": started.strftime("%Y-%m-%d %H:%M"),
        "command": " ".join(["python", "-m", "bench.run_cluster_bench", *argv]),
        "settings": {"sf": args.sf, "runs": args.runs, "device": single.device.name, "query": query.name,
                     "widths": list(widths), "task_drivers": args.task_drivers,
                     "single_drivers": args.single_drivers, "threads": args.threads},
        "machine": facts,
        "runners": {k: asdict(v) for k, v in runners.items()},
        "shuffle": shuffle,
        "explain_analyze": None if stats is None else _explain(stats),
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{started:%Y-%m-%d}-cluster-{_host_kind(single.device.name, facts['cores_available'])}-sf{args.sf:g}"
    json_path, markdown_path = args.output_dir / f"{stem}.json", args.output_dir / f"{stem}.md"
    chart = write_chart(args.output_dir / f"{stem}.png",
                        f"single Task vs LocalCluster vs DuckDB — {query.name}, TPC-H sf{args.sf:g}, {report['date']}",
                        [query.name], {label: [None if r.error or r.correct is False or r.median_s is None
                                               else r.median_s * 1000] for label, r in runners.items()})
    if chart is not None:
        report["chart"] = chart.name
    _write_atomically(json_path, json.dumps(report, indent=2) + "\n")
    markdown = render_markdown(report)
    _write_atomically(markdown_path, markdown)
    print(markdown)
    print(f"wrote {json_path} and {markdown_path}", file=sys.stderr)
    return 1 if any(r.error for r in runners.values()) else 0


def _explain(stats) -> str:
    from gpu_engine.cluster import format_query_stats

    return format_query_stats(stats)


def render_markdown(report: dict) -> str:
    """Return the report as markdown: times, ratios to DuckDB, the shuffle per stage, the machine."""
    settings = report["settings"]
    runners = {k: RunnerResult(**v) for k, v in report["runners"].items()}
    duck = runners["duckdb"].median_s
    lines = [
        f"# gpu_engine single Task vs LocalCluster — {settings['query']}, TPC-H sf{settings['sf']:g}, {report['date']}",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Medians of {settings['runs']} runs after a first run (ms), each result checked against DuckDB's. "
        f"Single Task: {settings['single_drivers']} driver(s); cluster: stage widths "
        f"{'x'.join(map(str, settings['widths']))}, {settings['task_drivers']} driver(s) per Task, one shared "
        f"executor. DuckDB uses {settings['threads']} threads.",
        "",
        *chart_link(report),
        "| runner | median | min | first run | vs DuckDB |",
        "|---|---|---|---|---|",
    ]
    for label, runner in runners.items():
        cell = "WRONG" if runner.correct is False else ("FAILED" if runner.error else _ms(runner.median_s))
        ratio = "—" if not (runner.median_s and duck) or label == "duckdb" else speed_ratio(runner.median_s, duck)
        lines.append(f"| {label} | {cell} | {_ms(runner.min_s)} | {_ms(runner.first_run_s)} | {ratio} |")
    lines += ["", "Shuffle of the last cluster run (what each stage's Tasks sent):", "",
              "| stage | tasks | pages | bytes | rows | peak buffered bytes (one Task) |", "|---|---|---|---|---|---|"]
    for s in report["shuffle"]:
        lines.append(f"| {s['stage']} | {s['tasks']} | {s['pages']} | {s['bytes']} | {s['rows']} | "
                     f"{s['peak_buffered_bytes']} |")
    failures = [f"- {r.runner}: {r.error}" for r in runners.values() if r.error]
    if failures:
        lines += ["", "## Failures", ""] + failures
    lines += ["", "## Machine", ""] + [f"- {k}: {v}" for k, v in report["machine"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
