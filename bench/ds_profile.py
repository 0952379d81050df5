"""Where a TPC-DS query's time goes as ``Session.sql`` runs it: every Task's explain-analyze, shared CTEs included.

Why: ``Session.explain(session.sql_plan(text), analyze=True)`` runs the one plan tree with each shared CTE inlined
at every reference (:mod:`gpu_engine.sql.shared_ctes`), which is not what ``Session.sql`` runs (each CTE read twice
or more computed once into a temporary table first). This runs the query as ``Session.sql`` does (after
``--warm`` runs), keeps each Task it executes, and prints per Task its wall time and explain-analyze, then the
plan nodes by operator time over all Tasks, beside DuckDB's time and its ``EXPLAIN ANALYZE`` (``--duckdb``).
The ranking of plan nodes uses each operator's driver-thread CPU time (explain-analyze's ``cpu``, which the load
does not inflate; a split's decode on the prefetch pool is not the scan's), or ``--wall`` the wall time inside its
calls; the explain-analyze text shows both.

    python -m bench.ds_profile 39 --sf 1 [--duckdb] [--top 20] [--full]
"""
import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("query", type=int)
    parser.add_argument("--sf", type=float, default=1)
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each side after the warm ones (medians)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--full", action="store_true", help="print whole plan lines")
    parser.add_argument("--duckdb", action="store_true", help="also print DuckDB's EXPLAIN ANALYZE")
    parser.add_argument("--wall", action="store_true",
                        help="rank plan nodes by the wall time inside their operators' calls, not the driver thread's "
                        "CPU time")
    args = parser.parse_args()

    from bench.tpcds import query_text
    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    from gpu_engine.plans.explain import format_plan
    from gpu_engine.session import node_stats_text
    from tests.duckdb_reference import duckdb_connection, duckdb_table

    folder = ensure_tpcds(args.sf, None)
    session = Session(device="cpu", drivers=args.drivers)
    register_tpcds(session, folder)
    duck = duckdb_connection(folder, threads=args.drivers)
    sql = query_text(args.query)
    for _ in range(args.warm):
        session.sql(sql)
        duckdb_table(duck, sql)
    samples = {"engine": [], "duckdb": []}
    for run in range(args.runs):
        for side in (("engine", "duckdb") if run % 2 == 0 else ("duckdb", "engine")):
            c, w = _cpu(), time.perf_counter()
            session.sql(sql) if side == "engine" else duckdb_table(duck, sql)
            samples[side].append((time.perf_counter() - w, _cpu() - c))
    tasks = []
    execute = Session._execute_to_arrow

    def recorded(self, plan, *rest, **options):
        result = execute(self, plan, *rest, **options)
        tasks.append(result[1])
        return result

    Session._execute_to_arrow = recorded
    try:
        w = time.perf_counter()
        session.sql(sql)
        wall = time.perf_counter() - w
    finally:
        Session._execute_to_arrow = execute
    median = statistics.median
    for side, rows in samples.items():
        wall, cpu = median(r[0] for r in rows), median(r[1] for r in rows)
        print(f"{side:7s} wall {wall * 1000:8.1f} ms  cpu {cpu * 1000:8.1f} ms (medians of {len(rows)}, "
              f"load {os.getloadavg()[0]:.1f})")
    print(f"profiled run: {wall * 1000:.1f} ms wall, {len(tasks)} Task(s)")
    per_node = []
    for number, task in enumerate(tasks):
        stats = task.task_stats()
        print(f"\n=== Task {number}: {stats.wall_seconds * 1000:.1f} ms wall, {stats.splits} split(s)")
        print(format_plan(task.plan, node_stats_text(stats), full=args.full))
        for pipeline in stats.pipelines:
            for operator in pipeline.operators:
                per_node.append((operator.wall_seconds if args.wall else operator.cpu_seconds, number, operator.plan_node_id, operator.operator_type,
                                 operator.input_rows, operator.output_rows))
    per_node.sort(reverse=True)
    total = sum(row[0] for row in per_node)
    print(f"\noperator time over all Tasks: {total * 1000:.1f} ms; the largest:")
    for seconds, number, node, kind, rows_in, rows_out in per_node[:args.top]:
        print(f"  {seconds * 1000:7.1f} ms  task {number} node {node:<14} {kind:18s} in {rows_in:>9} out {rows_out:>9}")
    if args.duckdb:
        duck.execute("PRAGMA enable_profiling='query_tree'")
        text = duck.execute("EXPLAIN ANALYZE " + sql).fetchall()
        print("\n=== DuckDB EXPLAIN ANALYZE\n" + "\n".join(row[1] for row in text))


if __name__ == "__main__":
    main()
