"""A/B the calling thread running one driver's first slice (``session.CALLER_RUNS_A_DRIVER``) over many queries.

Why: the switch changes no plan, only which thread runs a scan driver's first slice (issue 31: two scan drivers
woken together by a caller that then sleeps were placed on one CPU), so one Session runs both sides; per query,
after a check against DuckDB and a warm run on each side, ``--runs`` rounds of DuckDB then both sides (their
order alternating by round) give wall and process-CPU (user+sys) medians. Totals are sums of the medians.

    python -m bench.caller_driver_ab tpch --sf 1 --runs 7            # the 22 specification texts
    python -m bench.caller_driver_ab tpcds --queries 3,7,28,42,55,96 --sf 1 --runs 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.ab import _workload  # noqa: E402
from bench.tpcds_cpu import measure  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workload", choices=("tpch", "tpcds"))
    p.add_argument("--queries", default="", help="comma-separated query numbers (default: TPC-H's 22)")
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--drivers", type=int, default=2)
    a = p.parse_args(argv)
    from duckdb_reference import duckdb_connection, duckdb_table
    from gpu_engine import Session
    from gpu_engine import session as session_module
    from gpu_engine.codegen.background_compiles import background_compiler

    queries = [int(q) for q in a.queries.split(",") if q] or list(range(1, 23))
    sides = {"sleeps": False, "runs": True}  # the caller sleeps in Task.wait / runs a driver's first slice
    m = statistics.median
    totals = {k: [0.0, 0.0] for k in ("duckdb", *sides)}
    compiler = background_compiler()
    session = duck = None
    print(f"{a.workload} sf{a.sf:g} drivers {a.drivers}, {a.runs} rounds; load {os.getloadavg()[0]:.1f}", flush=True)
    for query in queries:
        folder, sql, register, check = _workload(a.workload, query, a.sf)
        if session is None:
            session = Session(device="cpu", drivers=a.drivers)
            register(session, folder)
            duck = duckdb_connection(folder, threads=a.drivers)
        expected = duckdb_table(duck, sql)
        for side, value in sides.items():
            session_module.CALLER_RUNS_A_DRIVER = value
            problem = check(session.sql(sql), expected)
            if problem is not None:
                print(f"q{query} {side}: MISMATCH {problem[:200]}", flush=True)
        compiler.wait_idle(timeout=300)
        samples = {k: ([], []) for k in totals}
        for run in range(a.runs):
            _, w, c = measure(lambda: duckdb_table(duck, sql))
            samples["duckdb"][0].append(w)
            samples["duckdb"][1].append(c)
            for side in (list(sides) if run % 2 == 0 else list(sides)[::-1]):
                session_module.CALLER_RUNS_A_DRIVER = sides[side]
                _, w, c = measure(lambda: session.sql(sql))
                samples[side][0].append(w)
                samples[side][1].append(c)
        session_module.CALLER_RUNS_A_DRIVER = True
        line = [f"q{query:<3d}"]
        for k, (w, c) in samples.items():
            totals[k][0] += m(w)
            totals[k][1] += m(c)
            line.append(f"{k} wall {m(w) * 1e3:7.1f} cpu {m(c) * 1e3:7.1f}")
        change = m(samples["runs"][0]) / m(samples["sleeps"][0]) - 1
        print("  ".join(line) + f"  runs/sleeps wall {change * 100:+.1f}%  load {os.getloadavg()[0]:.1f}", flush=True)
    line = ["total"]
    for k, (w, c) in totals.items():
        line.append(f"{k} wall {w * 1e3:7.1f} cpu {c * 1e3:7.1f}")
    print("  ".join(line) + f"  runs/sleeps wall {(totals['runs'][0] / totals['sleeps'][0] - 1) * 100:+.1f}% cpu "
          f"{(totals['runs'][1] / totals['sleeps'][1] - 1) * 100:+.1f}%  wall/duckdb sleeps "
          f"{totals['sleeps'][0] / totals['duckdb'][0]:.2f}x runs {totals['runs'][0] / totals['duckdb'][0]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
