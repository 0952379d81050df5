"""A/B a FINAL step's deferred table growth (held partial batches, one growth for many) on db-benchmark questions.

Why one Session (as ``bench/ab_interned_key_prefetch.py``): q10's 10M groups held by two Sessions and DuckDB
passed 12 GB on the shared 24 GB machine. The "without" side makes ``FusedAggregation._defer_growth`` hold
nothing (every batch grows the table as it needs, by doubling, as before); both sides' answers are checked
against DuckDB's first (the columnar check of ``bench/run_dbbench.py``), both settle on their compiled tier,
then ``runs`` rounds (DuckDB, then the two sides in alternating order) give the process CPU (user+sys), its
system part (page faults of fresh memory show there) and wall medians per question.

    python bench/ab_deferred_growth.py q10 --rows 1e7 --runs 3
    python bench/ab_deferred_growth.py q1,q2,q3,q5 --rows 1e6 --runs 5
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", help="comma-separated, q1 .. q10")
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import duckdb
    import pyarrow.parquet as pq

    from bench.dbbench import QUESTIONS, ensure_groupby
    from bench.run_bench import settle_compiled_tier
    from bench.run_dbbench import columnar_mismatch
    from gpu_engine import Session
    from gpu_engine.operators.fused_aggregation import FusedAggregation

    held = FusedAggregation._defer_growth
    sides = {"without": lambda self, batch, bound: False, "with": held}
    table = pq.read_table(ensure_groupby(int(args.rows), 100))
    session = Session(device="cpu", drivers=2)
    session.register("x", table)
    duck = duckdb.connect()
    duck.execute("SET threads = 2")
    duck.register("source", table)
    duck.execute("CREATE TABLE x AS SELECT * FROM source")
    duck.unregister("source")
    failed = False
    questions = args.questions.split(",")
    for question in questions:
        sql = QUESTIONS[question]
        expected = duck.sql(sql).to_arrow_table()
        for side, function in sides.items():
            FusedAggregation._defer_growth = function
            problem = columnar_mismatch(session.sql(sql), expected)
            failed |= problem is not None
            print(f"{question} {side}: {problem or 'equal to DuckDB'}", flush=True)
            settle_compiled_tier(lambda: session.sql(sql))
        del expected
        gc.collect()
    samples = {(q, name): [] for q in questions for name in ("duckdb", *sides)}
    for run in range(args.runs):
        for question in questions:
            sql = QUESTIONS[question]
            cpu, start = _cpu(), time.perf_counter()
            duck.sql(sql).to_arrow_table()
            after = _cpu()
            samples[question, "duckdb"].append((time.perf_counter() - start, after[0] - cpu[0], after[1] - cpu[1]))
            for side in list(sides) if run % 2 == 0 else list(sides)[::-1]:
                FusedAggregation._defer_growth = sides[side]
                cpu, start = _cpu(), time.perf_counter()
                session.sql(sql)
                after = _cpu()
                samples[question, side].append((time.perf_counter() - start, after[0] - cpu[0], after[1] - cpu[1]))
                gc.collect()
    FusedAggregation._defer_growth = held
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{int(args.rows):,} rows, cpu, 2 drivers, {args.runs} interleaved runs, load after {load}")
    for (question, name), triples in samples.items():
        print(f"  {question:4} {name:8} cpu median {statistics.median(c for _, c, _ in triples) * 1000:8.1f} ms  "
              f"sys median {statistics.median(s for _, _, s in triples) * 1000:7.1f} ms  wall median "
              f"{statistics.median(w for w, _, _ in triples) * 1000:8.1f} ms  cpu {[round(c * 1000) for _, c, _ in triples]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
