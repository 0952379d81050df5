"""A/B a query's plan from a ``plan_snapshots`` file against the plan the current tree makes, in one process.

Why: a planner change that cannot be switched off in place (a module's path replaced, as the typed correlated
scalar subqueries replaced the SQL planner's joins) is still compared in one process, sides alternating, against
the old tree's plan: ``python -m bench.plan_snapshots --sf 1 --optimized --write old.json`` on the old tree, then
this on the new one. Both plans run in one Session (the snapshot plan read back from JSON and executed; the
current one from ``Session.sql_plan``), each answer checked against DuckDB first, both wait for their compiled
tier, then ``--runs`` interleaved runs (DuckDB, then the two sides, their order alternating by run) give process
CPU and wall medians (``bench.tpcds_cpu.measure``, as ``bench/ab.py``).

    python -m bench.snapshot_plan_ab /tmp/old-plans.json tpcds 1 --sf 1 --runs 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.ab import _workload  # noqa: E402  (folder, text, registration and check of one query)
from bench.tpcds_cpu import measure  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("snapshot", type=Path, help="a plan_snapshots --optimized file of the old tree")
    p.add_argument("workload", choices=("tpch", "tpcds"))
    p.add_argument("query", type=int)
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--drivers", type=int, default=2)
    a = p.parse_args(argv)
    from duckdb_reference import duckdb_connection, duckdb_table
    from gpu_engine import Session
    from gpu_engine.codegen.background_compiles import background_compiler
    from gpu_engine.plans.serialization import plan_from_dict

    folder, sql, register, check = _workload(a.workload, a.query, a.sf)
    session = Session(device="cpu", drivers=a.drivers)
    register(session, folder)
    old = json.loads(a.snapshot.read_text())[f"{a.workload}/q{a.query}"]
    if isinstance(old, str):
        raise SystemExit(f"the snapshot holds no plan for {a.workload}/q{a.query}: {old}")
    plans = {"snapshot": plan_from_dict(old), "current": session.sql_plan(sql)}
    duck = duckdb_connection(folder, threads=2)
    expected = duckdb_table(duck, sql)
    compiler = background_compiler()
    for side, plan in plans.items():
        problem = check(session.execute(plan), expected)
        print(f"{side}: first run {'equal' if problem is None else 'MISMATCH ' + problem[:200]}", flush=True)
        compiler.wait_idle(timeout=300)
        session.execute(plan)
        compiler.wait_idle(timeout=300)
    samples = {k: ([], []) for k in ("duckdb", *plans)}
    for run in range(a.runs):
        _, w, c = measure(lambda: duckdb_table(duck, sql))
        samples["duckdb"][0].append(w)
        samples["duckdb"][1].append(c)
        for side, plan in (list(plans.items()) if run % 2 == 0 else list(plans.items())[::-1]):
            _, w, c = measure(lambda: session.execute(plan))
            samples[side][0].append(w)
            samples[side][1].append(c)
    m = statistics.median
    duck_cpu = m(samples["duckdb"][1])
    print(f"{a.workload} q{a.query} sf{a.sf:g} drivers {a.drivers}, {a.runs} interleaved runs, "
          f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for k, (w, c) in samples.items():
        print(f"  {k:8s} cpu median {m(c)*1000:8.1f} ms (x{m(c)/duck_cpu:5.2f} DuckDB)  wall median {m(w)*1000:8.1f} ms"
              f"  cpu {' '.join(f'{x*1000:.0f}' for x in c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
