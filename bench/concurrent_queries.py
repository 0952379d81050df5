"""Time TPC-H's 22 SQL texts issued by several threads at once against one Session, beside DuckDB.

Issue 31 asks for throughput under concurrency: ``--threads`` threads each
run the 22 specification texts ``--rounds`` times through one shared
``Session.sql`` (each thread starts at another query, so different queries
overlap), and the same threads run them on DuckDB, one connection per thread
(``cursor()`` of one database: DuckDB's way of sharing a database between
threads). Both sides use the same Parquet files and the same thread budget
(DuckDB's ``threads`` = the engine's driver count). Before timing, each text
runs once on each side and the engine's answer is checked against DuckDB's
(:func:`tests.duckdb_reference.rows_mismatch`); every answer of the timed
concurrent runs is checked against that reference again, so a race that
mixes up two queries' results shows up as a wrong answer, not as speed.

Reported: queries per second for one thread and for ``--threads`` threads on
each side, the engine's throughput against DuckDB's, per-query median
latencies under concurrency, process CPU (user+sys) and the load average.
The Session's plan cache, prepared plans and driver threads are shared by
the threads, as a server's would be; nothing here may need a global lock.

    python -m bench.concurrent_queries --sf 1 --threads 4 --rounds 2
    python -m bench.concurrent_queries --sf 0.01 --threads 4 --rounds 5 --tag small

Writes ``bench/results/<date>-concurrent-tpch-<device>-sf<sf>[-<tag>].md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _run_threads(threads: int, rounds: int, names: list[str], run_one) -> dict:
    """Run ``names`` ``rounds`` times on each of ``threads`` threads; return wall, CPU, latencies and errors."""
    latencies: dict[str, list[float]] = {name: [] for name in names}
    problems: list[str] = []
    lock = threading.Lock()
    start_barrier = threading.Barrier(threads)

    def worker(index: int) -> None:
        offset = index * len(names) // threads
        order = names[offset:] + names[:offset]
        start_barrier.wait()
        for _ in range(rounds):
            for name in order:
                began = time.perf_counter()
                try:
                    problem = run_one(name, index)
                except Exception as error:  # reported, not raised: the other threads go on
                    problem = f"{type(error).__name__}: {error}"
                took = time.perf_counter() - began
                with lock:
                    latencies[name].append(took)
                    if problem is not None:
                        problems.append(f"{name} on thread {index}: {problem}")

    workers = [threading.Thread(target=worker, args=(k,), name=f"bench-client-{k}") for k in range(threads)]
    cpu0, wall0 = _cpu_seconds(), time.perf_counter()
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    wall, cpu = time.perf_counter() - wall0, _cpu_seconds() - cpu0
    queries = threads * rounds * len(names)
    return {"threads": threads, "rounds": rounds, "queries": queries, "wall_seconds": wall, "cpu_seconds": cpu,
            "queries_per_second": queries / wall, "median_latency_ms": {
                name: statistics.median(values) * 1000 for name, values in latencies.items()},
            "problems": problems}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--threads", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the 22 texts per thread (default 2)")
    parser.add_argument("--drivers", type=int, default=2, help="engine drivers; DuckDB's threads (default 2)")
    parser.add_argument("--device", default="cpu", help="engine device (default cpu)")
    parser.add_argument("--queries", default="all", help="'all' or numbers: 1,3,6")
    parser.add_argument("--data-dir", default=None, help="TPC-H data root (default: $GPU_ENGINE_DATA)")
    parser.add_argument("--tag", default=None, help="suffix of the result file names")
    parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR, help="where the report goes")
    parser.add_argument("--no-write", action="store_true", help="print the summary only")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO_ROOT))

    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.plans import tpch
    from gpu_engine.sql.ordering import order_key_columns
    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    numbers = list(range(1, 23)) if args.queries == "all" else [int(n) for n in args.queries.split(",")]
    texts = {f"q{n}": tpch.sql(n, args.sf) for n in numbers}
    names = list(texts)
    ordered = {name: order_key_columns(text) for name, text in texts.items()}
    data_dir = ensure_tpch(args.sf, args.data_dir, progress=True)
    duck = duckdb_connection(data_dir, threads=args.drivers)
    session = Session(device=args.device, drivers=args.drivers, compile_mode="inline")  # timed: compiled tier
    register_tpch(session, data_dir)

    reference = {}
    for name, text in texts.items():  # warm both sides; the reference answers
        reference[name] = duckdb_table(duck, text)
        problem = rows_mismatch(session.sql(text), reference[name], ordered[name])
        if problem is not None:
            print(f"{name}: the engine's answer differs from DuckDB's: {problem}", file=sys.stderr)
            return 1
        session.sql(text)

    cursors: dict[int, object] = {}

    def on_duckdb(name: str, index: int) -> str | None:
        cursor = cursors.get(index)
        if cursor is None:
            cursor = cursors[index] = duck.cursor()
        return rows_mismatch(duckdb_table(cursor, texts[name]), reference[name], ordered[name])

    def on_engine(name: str, index: int) -> str | None:
        return rows_mismatch(session.sql(texts[name]), reference[name], ordered[name])

    runs = {}
    for label, run_one in (("engine", on_engine), ("duckdb", on_duckdb)):
        runs[label] = {"1": _run_threads(1, args.rounds, names, run_one),
                       str(args.threads): _run_threads(args.threads, args.rounds, names, run_one)}
    report = {"command": "python -m bench.concurrent_queries " + " ".join(argv if argv is not None else sys.argv[1:]),
              "sf": args.sf, "device": session.device.name, "drivers": args.drivers, "threads": args.threads,
              "rounds": args.rounds, "queries": names, "load_average": os.getloadavg(), "cores": os.cpu_count(),
              "utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), "runs": runs}
    text = _markdown(report)
    print(text)
    if not args.no_write:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        stem = (f"{report['utc'][:10]}-concurrent-tpch-{report['device']}-sf{args.sf:g}"
                + (f"-{args.tag}" if args.tag else ""))
        (args.output_dir / f"{stem}.md").write_text(text)
        (args.output_dir / f"{stem}.json").write_text(json.dumps(report, indent=1))
    problems = [p for side in runs.values() for run in side.values() for p in run["problems"]]
    return 1 if problems else 0


def _markdown(report: dict) -> str:
    threads = str(report["threads"])
    runs = report["runs"]
    lines = [f"# Concurrent TPC-H SQL: {report['threads']} threads against one Session, sf{report['sf']:g}, "
             f"{report['utc']} UTC", "", f"Command: `{report['command']}`", "",
             f"Device `{report['device']}`, {report['drivers']} drivers; DuckDB with {report['drivers']} threads and "
             f"a connection (cursor) per client thread; {report['cores']} cores; load average at the end "
             f"{report['load_average'][0]:.2f}. Each client thread runs the {len(report['queries'])} texts "
             f"{report['rounds']} time(s), starting at another query; every answer checked against DuckDB's.", "",
             "| side | client threads | queries | wall s | process CPU s | queries/s | problems |",
             "|---|---|---|---|---|---|---|"]
    for label in ("engine", "duckdb"):
        for key, run in runs[label].items():
            lines.append(f"| {label} | {key} | {run['queries']} | {run['wall_seconds']:.2f} | "
                         f"{run['cpu_seconds']:.2f} | {run['queries_per_second']:.2f} | {len(run['problems'])} |")
    engine, duck = runs["engine"][threads], runs["duckdb"][threads]
    lines += ["", f"**Throughput with {threads} threads: engine {engine['queries_per_second']:.2f} queries/s, "
              f"DuckDB {duck['queries_per_second']:.2f} queries/s: the engine at "
              f"{engine['queries_per_second'] / duck['queries_per_second']:.2f}x DuckDB's throughput** "
              f"(one thread: {runs['engine']['1']['queries_per_second'] / runs['duckdb']['1']['queries_per_second']:.2f}x).",
              "", f"Median latency per query with {threads} threads (ms):", "",
              "| query | engine | DuckDB |", "|---|---|---|"]
    for name in report["queries"]:
        lines.append(f"| {name} | {engine['median_latency_ms'][name]:.1f} | {duck['median_latency_ms'][name]:.1f} |")
    problems = [p for side in runs.values() for run in side.values() for p in run["problems"]]
    if problems:
        lines += ["", "Problems:", ""] + [f"- {p}" for p in problems[:50]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
