"""Cost of the composite-key measurement (optimizer.statistics.key_match_divisor) at planning, per scale factor.

Why (reviewer, stop 52): the measurement reads the smaller table's key columns whole and samples the larger at
PLANNING time; its cost must stay bounded whatever the tables' size. Each case runs in a fresh process (the
measurement is cached per process and file version, so only a fresh process shows a first planning): the
process registers TPC-H at ``--sf``, runs a one-row query (imports, decoders), then times
``optimize_plan(sql_plan(q9))`` with ``cardinality.MEASURED_KEY_MATCHES`` off or on (wall and process CPU), and
times ``key_match_divisor`` of lineitem x partsupp alone. Sides alternate per round. From the repository root::

    python -m bench.review_stop52_key_measure --sf 1 10 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _child(sf: float, on: bool) -> dict:
    import gpu_engine.optimizer.cardinality as cardinality
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.optimizer import optimize_plan
    from gpu_engine.optimizer import statistics as stats_module
    from gpu_engine.plans import tpch

    session = Session(device="cpu")
    register_tpch(session, ensure_tpch(sf))
    session.sql("SELECT count(*) FROM nation")
    cardinality.MEASURED_KEY_MATCHES = on
    out = {}
    wall, cpu = time.perf_counter(), time.process_time()
    optimize_plan(session.sql_plan(tpch.sql(9, sf)), session.statistics())
    out["q9_first_wall"], out["q9_first_cpu"] = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    optimize_plan(session.sql_plan(tpch.sql(9, sf)), session.statistics())
    out["q9_second_wall"], out["q9_second_cpu"] = time.perf_counter() - wall, time.process_time() - cpu
    if on:
        stats_module._MATCHES.clear()
        tables = session.tables() if hasattr(session, "tables") else session._tables
        wall, cpu = time.perf_counter(), time.process_time()
        divisor = stats_module.key_match_divisor(tables["lineitem"], ["l_partkey", "l_suppkey"],
                                                 tables["partsupp"], ["ps_partkey", "ps_suppkey"])
        out["measure_wall"], out["measure_cpu"] = time.perf_counter() - wall, time.process_time() - cpu
        out["divisor"] = divisor
    import resource
    out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, nargs="+", default=[1.0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(float(args.child[0]), args.child[1] == "on")))
        return
    for sf in args.sf:
        results = {"off": [], "on": []}
        for run in range(args.runs):
            for side in (("off", "on") if run % 2 == 0 else ("on", "off")):
                done = subprocess.run([sys.executable, "-m", "bench.review_stop52_key_measure", "--child",
                                       str(sf), side], capture_output=True, text=True, check=True)
                results[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
        load = os.getloadavg()[0]
        for side, rows in results.items():
            summary = {k: statistics.median(r[k] for r in rows) for k in rows[0] if isinstance(rows[0][k], float)}
            print(f"sf={sf:g} {side} runs={len(rows)} load={load:.1f} "
                  + " ".join(f"{k}={v:.3f}" for k, v in summary.items()))


if __name__ == "__main__":
    main()
