"""Time first runs against warm runs: TPC-H's 22 specification SQL texts with an empty generated-kernel cache.

Issue 29's measure: a query whose generated kernels were never compiled must
not wait for the compiler. The process points ``GPU_ENGINE_CACHE_DIR`` at a
new, empty folder before the engine is imported (so every generated kernel is
new to numba), first runs each query once with ``fuse=False`` (which compiles
the static kernels the lowest tier uses, as ``make`` set-up does on a fresh
machine, and reads the files into the OS cache for both phases alike), times
a second unfused pass (the lowest tier alone: what a first run must not be
slower than), then:

1. first runs: every query once, in order, with the compile mode asked for
   (``background``: batches whose kernel is not compiled run on the lowest
   tier while the compile process works; ``inline``: the driver waits for numba);
2. warm runs: after the compile process is idle, each query runs until none of
   its batches runs on the lowest tier (a fused step can hand the next one a
   new batch layout, whose kernel then compiles), then ``--runs`` timed runs;
   their median is the warm time.

Each result is checked against DuckDB's (same process, same files). Writes
``bench/results/<date>-first-runs-<device>-sf<sf>.md`` and ``.json``.

    python -m bench.first_runs --sf 1 --drivers 2 --runs 3
    python -m bench.first_runs --sf 1 --compile-mode inline --tag inline
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=3, help="timed warm runs per query (median)")
    parser.add_argument("--queries", default="all", help="comma-separated TPC-H numbers, or all")
    parser.add_argument("--compile-mode", default="background", choices=("background", "inline"))
    parser.add_argument("--data", default=os.environ.get("GPU_ENGINE_DATA"),
                        help="folder holding tpch/sf<N> (default: the engine's data folder)")
    parser.add_argument("--tag", default="", help="suffix of the result files' names")
    parser.add_argument("--out", default="bench/results")
    return parser


def _lowest_tier_batches(stats) -> int:
    return sum(int(s.runtime.get("lowest_tier_batches", 0)) for p in stats.pipelines for s in p.operators)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    generated = tempfile.mkdtemp(prefix="gpe-first-runs-")
    os.environ["GPU_ENGINE_CACHE_DIR"] = generated  # before the engine is imported: every generated kernel is new

    from gpu_engine import Session
    from gpu_engine.codegen.background_compiles import background_compiler
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.plans.tpch import TPCH_QUERY_NUMBERS, spec_sql
    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    numbers = list(TPCH_QUERY_NUMBERS) if args.queries == "all" else [int(q) for q in args.queries.split(",")]
    data_root = Path(args.data) / "tpch" if args.data else None
    folder = ensure_tpch(args.sf, data_root, progress=False) if data_root else ensure_tpch(args.sf, progress=False)
    texts = {n: spec_sql(n, args.sf) for n in numbers}
    duck = duckdb_connection(folder, threads=args.drivers)
    expected, duck_seconds = {}, {}
    for n, text in texts.items():
        duckdb_table(duck, text)
        start = time.perf_counter()
        expected[n] = duckdb_table(duck, text)
        duck_seconds[n] = time.perf_counter() - start

    def session(**config) -> Session:
        s = Session(device=args.device, drivers=args.drivers, **config)
        register_tpch(s, folder)
        return s

    def check(n: int, table) -> None:
        problem = rows_mismatch(table, expected[n], ordered="order by" in texts[n].lower())
        if problem is not None:
            raise SystemExit(f"q{n}: result differs from DuckDB's: {problem}")

    static = session(fuse=False)  # static kernels compiled (set-up on a fresh machine); files in the OS cache
    for n, text in texts.items():
        check(n, static.sql(text))
    lowest_alone = {}  # the lowest tier alone: what a first run must not be slower than
    for n, text in texts.items():
        start = time.perf_counter()
        static.sql(text)
        lowest_alone[n] = time.perf_counter() - start

    engine = session(compile_mode=args.compile_mode)
    first: dict[int, dict] = {}
    for n, text in texts.items():
        start = time.perf_counter()
        table = engine.sql(text)
        seconds = time.perf_counter() - start
        check(n, table)
        stats = engine.last_stats()
        first[n] = {"seconds": seconds, "lowest_tier_batches": _lowest_tier_batches(stats),
                    "kernels_compiled": stats.kernels_compiled, "compile_seconds": stats.compile_seconds}
    waited = time.perf_counter()
    background_compiler().wait_idle()
    waited = time.perf_counter() - waited

    warm: dict[int, dict] = {}
    for n, text in texts.items():
        settle = 0
        for settle in range(1, 6):  # until every batch runs on the generated kernels
            check(n, engine.sql(text))
            if _lowest_tier_batches(engine.last_stats()) == 0:
                break
            background_compiler().wait_idle()
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            engine.sql(text)
            times.append(time.perf_counter() - start)
        warm[n] = {"seconds": statistics.median(times), "settling_runs": settle,
                   "lowest_tier_batches": _lowest_tier_batches(engine.last_stats())}

    first_total = sum(r["seconds"] for r in first.values())
    warm_total = sum(r["seconds"] for r in warm.values())
    duck_total = sum(duck_seconds.values())
    compiler = background_compiler()
    when = datetime.datetime.now(datetime.timezone.utc)
    command = "python -m bench.first_runs " + " ".join(sys.argv[1:] if argv is None else argv)
    lines = [
        f"# First runs against warm runs — TPC-H spec SQL, sf{args.sf:g}, {when:%Y-%m-%d %H:%M} UTC", "",
        f"Command: `{command}`", "",
        f"Device `{args.device}`, {args.drivers} drivers, compile mode `{args.compile_mode}`, {os.cpu_count()} cores. "
        "A new empty generated-kernel cache; static kernels compiled first (an unfused pass over the queries, "
        "as set-up does). First run: each query once, in order. Warm: after the compile process is idle and "
        f"every batch runs on generated kernels, the median of {args.runs} runs. DuckDB: same process, same files, "
        f"{args.drivers} threads, second run. Every result checked against DuckDB's.", "",
        "| query | first run (ms) | lowest-tier batches | compiled on drivers | warm (ms) | first / warm "
        "| lowest tier alone (ms) | first / lowest tier alone | DuckDB (ms) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n in numbers:
        f, w = first[n], warm[n]
        lines.append(f"| q{n} | {f['seconds'] * 1e3:.1f} | {f['lowest_tier_batches']} | {f['kernels_compiled']} "
                     f"({f['compile_seconds'] * 1e3:.0f} ms) | {w['seconds'] * 1e3:.1f} | "
                     f"{f['seconds'] / w['seconds']:.2f}× | {lowest_alone[n] * 1e3:.1f} | "
                     f"{f['seconds'] / lowest_alone[n]:.2f}× | {duck_seconds[n] * 1e3:.1f} |")
    lines += [
        f"| **total** | {first_total * 1e3:.0f} | {sum(f['lowest_tier_batches'] for f in first.values())} | "
        f"{sum(f['kernels_compiled'] for f in first.values())} | {warm_total * 1e3:.0f} | "
        f"{first_total / warm_total:.2f}× | {sum(lowest_alone.values()) * 1e3:.0f} | "
        f"{first_total / sum(lowest_alone.values()):.2f}× | {duck_total * 1e3:.0f} |", "",
        f"The compile process compiled {compiler.compiled} kernels in {compiler.compile_seconds:.1f} s of its own "
        f"time (low priority); after the first runs it needed {waited:.1f} s more to finish. "
        f"Failures: {len(compiler.failures)}.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{when:%Y-%m-%d}-first-runs-{args.device}-sf{args.sf:g}" + (f"-{args.tag}" if args.tag else "")
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem}.json").write_text(json.dumps({
        "command": command, "sf": args.sf, "device": args.device, "drivers": args.drivers,
        "compile_mode": args.compile_mode, "first": first, "warm": warm, "duckdb_seconds": duck_seconds,
        "first_total_s": first_total, "warm_total_s": warm_total, "duckdb_total_s": duck_total,
        "lowest_tier_alone_s": lowest_alone, "lowest_tier_alone_total_s": sum(lowest_alone.values()),
        "background_compiled": compiler.compiled, "background_compile_seconds": compiler.compile_seconds,
        "wait_after_first_runs_s": waited}, indent=1, default=str))


if __name__ == "__main__":
    main()
