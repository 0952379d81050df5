"""A/B each TPC-H query's SQL-planned plan against its hand-written plan, interleaved, by process CPU beside wall.

Why: issue 31 item 1 asks for SQL-planned TPC-H "within noise of the hand plans, query by query". run_bench
times the hand plan's runs and then the SQL runs back to back (a busy moment of the shared machine hits one
side only) and reports no CPU time; ``bench/tpch_commit_ab.py`` compares two trees. Here one Session runs both
sides of each query in one process: both answers are checked against DuckDB, both wait for their compiled
tier, then ``--runs`` rounds run DuckDB, then the hand plan and ``Session.sql`` in an order alternating by
round. Per query: medians of wall and process CPU (user+sys) for each side, SQL / hand, and the load average.
``--plan-only`` also reports the SQL side's planning time (plan cache off) per query, which ``Session.sql``
pays only on a cache miss.

    python -m bench.sql_vs_hand_ab --sf 1 --runs 7 --queries 10,16
    python -m bench.sql_vs_hand_ab --sf 1 --runs 5 --queries all --json /tmp/ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

__all__ = ["main"]


def _timed(run) -> tuple[float, float]:
    """Return (wall seconds, process CPU seconds) of one call of ``run``."""
    from bench.tpcds_cpu import cpu

    c0, w0 = cpu(), time.perf_counter()
    run()
    return time.perf_counter() - w0, cpu() - c0


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the interleaved A/B and print one table (and write ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--queries", default="all", help="comma-separated numbers or 'all'")
    parser.add_argument("--json")
    args = parser.parse_args(argv)

    from bench.run_bench import settle_compiled_tier
    from bench.tpch_queries import bench_query
    from duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.sql.plan_cache import PlanCache

    numbers = range(1, 23) if args.queries == "all" else [int(q.strip().lstrip("q")) for q in args.queries.split(",")]
    folder = ensure_tpch(args.sf, None, progress=False)
    session = Session(device="cpu", drivers=args.drivers)
    register_tpch(session, folder)
    planner = Session(device="cpu", drivers=args.drivers)
    register_tpch(planner, folder)
    planner.plan_cache = PlanCache(entries=0)
    duck = duckdb_connection(folder, threads=args.drivers)
    loads = [os.getloadavg()[0]]
    rows = {}
    for number in numbers:
        query = bench_query(f"q{number}", args.sf)
        expected = duckdb_table(duck, query.sql)
        plan = query.build_plan(session.catalog)
        sides = {"hand": lambda plan=plan: session.execute(plan), "sql": lambda q=query: session.sql(q.sql),
                 "duckdb": lambda q=query: duckdb_table(duck, q.sql)}
        for side in ("hand", "sql"):
            problem = rows_mismatch(sides[side](), expected, ordered=query.ordered)
            if problem:
                raise SystemExit(f"q{number} {side}: differs from DuckDB: {problem}")
            settle_compiled_tier(sides[side])
        samples = {side: [] for side in sides}
        for run in range(args.runs):
            order = ("duckdb", "hand", "sql") if run % 2 == 0 else ("duckdb", "sql", "hand")
            for side in order:
                samples[side].append(_timed(sides[side]))
        plans = [_timed(lambda q=query: planner.sql_plan(q.sql))[1] for _ in range(3)]
        row = {side: {"wall": statistics.median(w for w, _ in s) * 1e3, "cpu": statistics.median(c for _, c in s) * 1e3}
               for side, s in samples.items()}
        row["plan_cpu"] = statistics.median(plans) * 1e3
        rows[f"q{number}"] = row
        loads.append(os.getloadavg()[0])
        print(f"q{number}: hand {row['hand']['cpu']:.1f}/{row['hand']['wall']:.1f} sql {row['sql']['cpu']:.1f}/"
              f"{row['sql']['wall']:.1f} duckdb {row['duckdb']['cpu']:.1f}/{row['duckdb']['wall']:.1f} "
              f"(cpu/wall ms) sql/hand cpu {row['sql']['cpu'] / row['hand']['cpu']:.2f} "
              f"plan {row['plan_cpu']:.1f} ms load {loads[-1]:.1f}", flush=True)
    print(f"\nmedians of {args.runs} interleaved runs, sf {args.sf}, {args.drivers} drivers, "
          f"load {min(loads):.1f}-{max(loads):.1f}")
    print("| query | hand cpu | sql cpu | sql/hand cpu | hand wall | sql wall | sql/hand wall | duckdb wall | plan cpu |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        h, s, d = row["hand"], row["sql"], row["duckdb"]
        print(f"| {name} | {h['cpu']:.1f} | {s['cpu']:.1f} | {s['cpu'] / h['cpu']:.2f} | {h['wall']:.1f} | "
              f"{s['wall']:.1f} | {s['wall'] / h['wall']:.2f} | {d['wall']:.1f} | {row['plan_cpu']:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"sf": args.sf, "runs": args.runs, "loads": loads, "rows": rows},
                                              indent=1))


if __name__ == "__main__":
    main()
