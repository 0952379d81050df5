"""A/B one ``bench/ab.py`` switch over many TPC-DS or TPC-H texts in one process: each side's answer checked
against DuckDB, process CPU medians of interleaved runs, DuckDB's beside them.

Why: a planner rule (join estimates, build sides) changes the plans of dozens of queries at once; ``bench/ab.py``
runs one query per process, minutes each on this loaded machine. Here one Session per side plans and runs each
text with the switch set its way before every call (a planning-time switch shapes that Session's cached plan, a
run-time one each run), and the runs alternate sides. A switch read through a process-wide cache (a module-level
memo keyed without the switched function) sees whichever side filled it first: give such a switch its own key.
::

    python bench/ab_all.py partial-steps --sf 1 --queries 1,24,78 --runs 5
    python bench/ab_all.py partial-steps --sf 0.1 --queries all --runs 1   (every answer of the 99 on both sides)
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.ab import SWITCHES  # noqa: E402


def _cpu() -> float:
    return time.process_time()  # every thread of the process, user and system


def main() -> None:
    """Print per query: each side's median process CPU, DuckDB's, and whether each side's answer equals DuckDB's."""
    p = argparse.ArgumentParser()
    p.add_argument("switch", choices=sorted(SWITCHES))
    p.add_argument("--workload", choices=("tpcds", "tpch"), default="tpcds")
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--queries", default="all")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--drivers", type=int, default=2)
    a = p.parse_args()
    from bench.ab import _workload
    from bench.run_tpcds import parse_query_numbers
    from gpu_engine import Session
    from tests.duckdb_reference import duckdb_connection, duckdb_table
    numbers = (parse_query_numbers(a.queries) if a.workload == "tpcds" else
               range(1, 23) if a.queries == "all" else [int(q) for q in a.queries.split(",")])
    module, attribute, stand_in = SWITCHES[a.switch]()
    setting = {"without": stand_in, "with": getattr(module, attribute)}
    folder, _, register, _ = _workload(a.workload, numbers[0], a.sf)
    sessions = {}
    for side in setting:
        sessions[side] = Session(device="cpu", drivers=a.drivers)
        register(sessions[side], folder)
    duck = duckdb_connection(folder, threads=a.drivers)
    totals = {"duckdb": 0.0, "without": 0.0, "with": 0.0}
    for n in numbers:
        _, sql, _, check = _workload(a.workload, n, a.sf)
        expected = duckdb_table(duck, sql)
        line, cpu = [], {"duckdb": [], "without": [], "with": []}
        for side in setting:
            setattr(module, attribute, setting[side])
            try:
                actual = sessions[side].sql(sql, timeout=300)
            except Exception as error:  # noqa: BLE001 - reported per query
                line.append(f"{side} ERROR {type(error).__name__}: {str(error)[:120]}")
                continue
            problem = check(actual, expected)
            line.append(f"{side} {'equal' if problem is None else 'DIFFERS ' + problem.splitlines()[0][:100]}")
        for side in setting:  # a second warm run: kernels a new plan asked for have compiled (background tier)
            setattr(module, attribute, setting[side])
            sessions[side].sql(sql, timeout=300)
        for run in range(a.runs):
            began = _cpu()
            duckdb_table(duck, sql)
            cpu["duckdb"].append(_cpu() - began)
            for side in (list(setting) if run % 2 == 0 else list(setting)[::-1]):
                setattr(module, attribute, setting[side])
                began = _cpu()
                sessions[side].sql(sql, timeout=300)
                cpu[side].append(_cpu() - began)
        setattr(module, attribute, setting["with"])
        m = {side: statistics.median(v) * 1000 if v else 0.0 for side, v in cpu.items()}
        for side in totals:
            totals[side] += m[side]
        print(f"q{n:<3} duckdb {m['duckdb']:7.1f} without {m['without']:7.1f} with {m['with']:7.1f} ms "
              f"({(m['with'] / m['without'] - 1) * 100 if m['without'] else 0:+5.1f}%) | {'; '.join(line)} "
              f"| load {os.getloadavg()[0]:.1f}", flush=True)
    if not totals["duckdb"]:  # --runs 0: answers checked, nothing timed
        return
    print(f"TOTAL duckdb {totals['duckdb']:.0f} without {totals['without']:.0f} ({totals['without'] / totals['duckdb']:.2f}x)"
          f" with {totals['with']:.0f} ({totals['with'] / totals['duckdb']:.2f}x) ms")


if __name__ == "__main__":
    main()
