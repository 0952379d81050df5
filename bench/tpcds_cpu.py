"""Time TPC-DS queries through Session.sql and DuckDB by process CPU time (user+sys), beside wall time and load.

Why CPU time: on a shared, loaded machine wall times swing 2-4x between runs
(both engines wait for a core); the CPU time a query costs the process is
steadier, and is what the issue's ratios compare when the machine is busy.
Per query: DuckDB's answer, the engine's first run checked against it
(:func:`bench.tpcds.result_mismatch`), then ``--runs`` interleaved pairs
(DuckDB, engine), medians. ``--no-filters`` plans no runtime join-key filter
(the A/B of :mod:`gpu_engine.exec.dynamic_filters`); ``--explain DIR`` writes
each query's explain-analyze.

    python bench/tpcds_cpu.py --sf 0.1 --queries all --runs 2 --json out.json
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

def cpu() -> float:
    """Return the process's user+sys CPU seconds (every thread: drivers, decode pool, DuckDB's)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(fn):
    """Return fn's result, wall seconds and process CPU seconds."""
    c0, w0 = cpu(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - w0, cpu() - c0


def main() -> None:
    """Run the queries and print one line per query and the totals."""
    p = argparse.ArgumentParser()
    p.add_argument("--sf", type=float, default=0.1)
    p.add_argument("--queries", default="all")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--drivers", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-filters", action="store_true")
    p.add_argument("--json")
    p.add_argument("--explain")
    p.add_argument("--skip-check", action="store_true")
    a = p.parse_args()
    from bench.run_tpcds import parse_query_numbers
    from bench.tpcds import query_text, result_mismatch
    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch
    if a.no_filters:
        import gpu_engine.exec.dynamic_filters as df
        df.plan_key_filters = lambda items: []
    folder = ensure_tpcds(a.sf, None)
    session = Session(device="cpu", drivers=a.drivers)
    register_tpcds(session, folder)
    duck = duckdb_connection(folder, threads=a.threads)
    results = {}
    for n in parse_query_numbers(a.queries):
        sql = query_text(n)
        expected = duckdb_table(duck, sql)
        try:
            actual = session.sql(sql, timeout=300)
        except Exception as e:
            print(f"q{n} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        problem = None if a.skip_check else result_mismatch(actual, expected, sql, rows_mismatch)
        e_w, e_c, d_w, d_c = [], [], [], []
        for _ in range(a.runs):
            _, w, c = measure(lambda: duckdb_table(duck, sql)); d_w.append(w); d_c.append(c)
            _, w, c = measure(lambda: session.sql(sql, timeout=300)); e_w.append(w); e_c.append(c)
        m = statistics.median
        r = dict(eng_cpu=m(e_c), eng_wall=m(e_w), duck_cpu=m(d_c), duck_wall=m(d_w), load=os.getloadavg()[0],
                 equal=problem is None)
        results[f"q{n}"] = r
        ratio = r['eng_cpu'] / max(r['duck_cpu'], 1e-4)
        print(f"q{n:<3} cpu eng {r['eng_cpu']*1000:8.1f} duck {r['duck_cpu']*1000:7.1f} x{ratio:5.1f}"
              f" | wall eng {r['eng_wall']*1000:8.1f} duck {r['duck_wall']*1000:7.1f} | load {r['load']:.1f}"
              f" {'' if problem is None else 'MISMATCH ' + problem.splitlines()[0][:100]}", flush=True)
        if a.explain:
            os.makedirs(a.explain, exist_ok=True)
            plan = session.sql_plan(sql)
            with open(f"{a.explain}/q{n}.txt", "w") as f:
                f.write(session.explain(plan, analyze=True, full=True))
    ec = sum(r["eng_cpu"] for r in results.values()); dc = sum(r["duck_cpu"] for r in results.values())
    ew = sum(r["eng_wall"] for r in results.values()); dw = sum(r["duck_wall"] for r in results.values())
    print(f"TOTAL cpu eng {ec*1000:.0f} duck {dc*1000:.0f} x{ec/dc:.2f} | "
          f"wall eng {ew*1000:.0f} duck {dw*1000:.0f} x{ew/dw:.2f}")
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
