"""Time queries through Session.sql with runtime join-key filters on and off, beside DuckDB, in one process.

The "off" arm makes :func:`gpu_engine.exec.dynamic_filters.plan_key_filters`
find no target (the Task then pushes no filter), so both arms run the same
plans on the same warm Session. Runs are interleaved (off, on, DuckDB, per
repetition) after one warm run of each; medians of wall time, with the
process CPU time (user+sys) of the engine's runs and the 1-minute load
average before and after. Every result is checked against DuckDB's.

    python -m bench.dynamic_filters --suite tpch --sf 0.1 --runs 5
    python -m bench.dynamic_filters --suite tpcds --sf 0.1 --queries 3,7,19,40,42,52,55 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import duckdb  # noqa: E402

import gpu_engine.exec.dynamic_filters as dynamic_filters  # noqa: E402
from gpu_engine import Session  # noqa: E402


def _queries(suite: str, numbers: list[int]):
    if suite == "tpch":
        from gpu_engine.plans import tpch

        return {f"q{n}": tpch.spec_sql(n) for n in numbers}
    from bench.tpcds import query_text

    return {f"q{n}": query_text(n) for n in numbers}


def _register(suite: str, sf: float, session: Session, duck) -> None:
    if suite == "tpch":
        from gpu_engine.connectors.tpch_data import TPCH_TABLES, register_tpch, tpch_directory

        folder = tpch_directory(sf)
        register_tpch(session, folder)
        tables = TPCH_TABLES
    else:
        from gpu_engine.connectors.tpcds_data import TPCDS_TABLES, register_tpcds, tpcds_directory

        folder = tpcds_directory(sf)
        register_tpcds(session, folder)
        tables = TPCDS_TABLES
    for table in tables:
        path = Path(folder) / f"{table}.parquet"
        if path.exists():
            duck.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{path}')")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=("tpch", "tpcds"), default="tpch")
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--queries", default=None, help="comma-separated numbers (default: tpch 1-22)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    from duckdb_reference import duckdb_table, rows_mismatch

    numbers = [int(n) for n in args.queries.split(",")] if args.queries else list(range(1, 23))
    queries = _queries(args.suite, numbers)
    session = Session(device="cpu", drivers=args.drivers)
    duck = duckdb.connect()
    duck.execute(f"SET threads = {args.drivers}")
    _register(args.suite, args.sf, session, duck)
    planned = dynamic_filters.plan_key_filters

    def run(arm: str, text: str):
        dynamic_filters.plan_key_filters = planned if arm == "on" else (lambda items: [])
        cpu, start = time.process_time(), time.perf_counter()
        try:
            result = session.sql(text) if arm != "duckdb" else duckdb_table(duck, text)
        finally:
            dynamic_filters.plan_key_filters = planned
        return result, time.perf_counter() - start, time.process_time() - cpu

    load_before = os.getloadavg()[0]
    rows = {}
    for name, text in queries.items():
        times = {"off": [], "on": [], "duckdb": []}
        cpus = {"off": [], "on": [], "duckdb": []}
        expected, _, _ = run("duckdb", text)
        for arm in ("off", "on"):  # warm runs (compiles, caches), checked
            result, _, _ = run(arm, text)
            mismatch = rows_mismatch(result, expected)
            if mismatch:
                raise AssertionError(f"{name} ({arm}) differs from DuckDB: {mismatch}")
        for _ in range(args.runs):
            for arm in ("off", "on", "duckdb"):
                _, wall, cpu = run(arm, text)
                times[arm].append(wall)
                cpus[arm].append(cpu)
        session.sql(text)
        skipped = dropped = 0
        for pipeline in session.last_stats().pipelines:
            for stats in pipeline.operators:
                skipped += stats.runtime.get("dynamic_filter_row_groups_skipped", 0)
                dropped += stats.runtime.get("dynamic_filter_rows_dropped", 0)
        rows[name] = {arm: statistics.median(values) for arm, values in times.items()}
        rows[name].update({f"{arm}_cpu": statistics.median(values) for arm, values in cpus.items()})
        rows[name].update(row_groups_skipped=skipped, rows_dropped=dropped)
        r = rows[name]
        print(f"{name}: off {r['off'] * 1000:.1f} ms, on {r['on'] * 1000:.1f} ms ({r['off'] / r['on']:.2f}x), "
              f"duckdb {r['duckdb'] * 1000:.1f} ms; on/duckdb {r['on'] / r['duckdb']:.2f}x, "
              f"off/duckdb {r['off'] / r['duckdb']:.2f}x; cpu off {r['off_cpu'] * 1000:.1f} ms, on "
              f"{r['on_cpu'] * 1000:.1f} ms, duckdb {r['duckdb_cpu'] * 1000:.1f} ms; skipped {skipped} row groups, "
              f"dropped {dropped} rows",
              flush=True)
    load_after = os.getloadavg()[0]
    total = {arm: sum(r[arm] for r in rows.values()) for arm in ("off", "on", "duckdb")}
    print(f"total: off {total['off']:.3f} s, on {total['on']:.3f} s, duckdb {total['duckdb']:.3f} s; "
          f"on/duckdb {total['on'] / total['duckdb']:.2f}x, off/duckdb {total['off'] / total['duckdb']:.2f}x; "
          f"load average {load_before:.2f} -> {load_after:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"suite": args.suite, "sf": args.sf, "runs": args.runs,
                                         "drivers": args.drivers, "load_before": load_before,
                                         "load_after": load_after, "queries": rows, "total": total}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
