"""A/B the fused kernel's prefetch of interned string keys' slots on one db-benchmark groupby question, in one Session.

Why one Session (not ``bench/ab.py``'s two): q10's 10M groups held by two Sessions and DuckDB passed 12 GB on the
shared 24 GB machine. The "without" side generates the kernels as before 15fd01f (a look-ahead only where every
key is an integer column), under its own cache key; both sides' answers are checked against DuckDB's first (the
columnar check of ``bench/run_dbbench.py``), both settle on their compiled tier, then ``runs`` rounds (DuckDB, then
the two sides in alternating order) give the process CPU (user+sys) and wall medians.

    python bench/ab_interned_key_prefetch.py q10 --runs 3
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


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _without_interned_prefetch():
    """Return ``generate_fused_aggregation`` as before the change: interned keys' slots never read ahead."""
    import gpu_engine.codegen.fused_aggregation_kernel as kernel
    from gpu_engine.codegen.generation_cache import aggregate_shape

    original = kernel._prefetchable_key_reads
    generated = {}

    def columns_only(program, layout):
        reads = original(program, layout)
        return None if reads is None or any(kind != "column" for kind, _ in reads) else reads

    def generate(program, aggregates, layout):
        key = (repr(program.shape()), aggregate_shape(aggregates), repr(layout))
        if key not in generated:
            kernel._prefetchable_key_reads = columns_only
            try:
                generated[key] = kernel._generate_fused_aggregation(program.shape(), aggregates, layout)
            finally:
                kernel._prefetchable_key_reads = original
        return generated[key]

    return generate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question", help="q1 .. q10")
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import duckdb
    import pyarrow.parquet as pq

    import gpu_engine.operators.fused_aggregation as module
    from bench.dbbench import QUESTIONS, ensure_groupby
    from bench.run_bench import settle_compiled_tier
    from bench.run_dbbench import columnar_mismatch
    from gpu_engine import Session

    sql = QUESTIONS[args.question]
    sides = {"without": _without_interned_prefetch(), "with": module.generate_fused_aggregation}
    table = pq.read_table(ensure_groupby(int(args.rows), 100))
    session = Session(device="cpu", drivers=2)
    session.register("x", table)
    duck = duckdb.connect()
    duck.execute("SET threads = 2")
    duck.register("source", table)
    duck.execute("CREATE TABLE x AS SELECT * FROM source")
    duck.unregister("source")
    expected = duck.sql(sql).to_arrow_table()
    failed = False
    for side, generate in sides.items():
        module.generate_fused_aggregation = generate
        problem = columnar_mismatch(session.sql(sql), expected)
        failed |= problem is not None
        print(f"{side}: {problem or 'equal to DuckDB'}", flush=True)
        settle_compiled_tier(lambda: session.sql(sql))
    del expected
    gc.collect()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in ("duckdb", *sides)}
    for run in range(args.runs):
        cpu, start = _cpu(), time.perf_counter()
        duck.sql(sql).to_arrow_table()
        samples["duckdb"].append((time.perf_counter() - start, _cpu() - cpu))
        for side in list(sides) if run % 2 == 0 else list(sides)[::-1]:
            module.generate_fused_aggregation = sides[side]
            cpu, start = _cpu(), time.perf_counter()
            session.sql(sql)
            samples[side].append((time.perf_counter() - start, _cpu() - cpu))
            gc.collect()
    module.generate_fused_aggregation = sides["with"]
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.question}, {int(args.rows):,} rows, cpu, 2 drivers, {args.runs} interleaved runs, load {load}")
    for name, pairs in samples.items():
        print(f"  {name:8} cpu median {statistics.median(c for _, c in pairs) * 1000:8.1f} ms  wall median "
              f"{statistics.median(w for w, _ in pairs) * 1000:8.1f} ms  cpu {[round(c * 1000) for _, c in pairs]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
