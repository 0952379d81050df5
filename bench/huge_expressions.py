"""Time the first run of a query with a huge expression: a long IN list or a long AND chain (issue 28 item 11).

One query per process (a first run: nothing planned or imported before it; the generated-kernel
cache on disk is whatever ``GPU_ENGINE_CACHE_DIR`` holds), over TPC-H ``lineitem``, printing the
run's wall time and this process's CPU (user + sys: planning included, a compile process's not), the task's own wall time (execution without planning), whether the answer equals
DuckDB's (run after the timing) and the load average, as JSON.

    python -m bench.huge_expressions --kind in --size 100000 --sf 0.01 --device cpu
    python -m bench.huge_expressions --kind chain --size 2000 --sf 0.01 --device cpu
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def query(kind: str, size: int) -> str:
    """Return the benchmark's SQL: ``size`` IN-list values or ``size`` AND-ed comparisons on l_orderkey."""
    if kind == "in":
        return ("SELECT count(*) AS c FROM lineitem WHERE l_orderkey IN ("
                + ", ".join(str(i * 3) for i in range(size)) + ")")
    return "SELECT count(*) AS c FROM lineitem WHERE " + " AND ".join(f"l_orderkey <> {i * 7 + 3}" for i in range(size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kind", choices=("in", "chain"), default="in")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--sf", type=float, default=0.01)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--data", default=os.environ.get("GPU_ENGINE_DATA", ".pytest_cache/d/gpu_engine"))
    args = parser.parse_args()

    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch

    folder = ensure_tpch(args.sf, Path(args.data) / "tpch", progress=False)
    session = Session(device=args.device)
    session.register("lineitem", str(folder / "lineitem.parquet"))
    text = query(args.kind, args.size)
    start, cpu = time.perf_counter(), time.process_time()
    rows = session.sql(text).to_pylist()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    import duckdb  # after the timing: the answer is checked against DuckDB's on the same file

    connection = duckdb.connect()
    connection.execute(f"CREATE VIEW lineitem AS SELECT * FROM read_parquet('{folder / 'lineitem.parquet'}')")
    expected = [{"c": count} for (count,) in connection.execute(text).fetchall()]
    print(json.dumps({"kind": args.kind, "size": args.size, "sf": args.sf, "device": args.device,
                      "first_run_s": round(seconds, 2), "first_run_cpu_s": round(cpu, 2), "task_wall_s": round(session.last_stats().wall_seconds, 2),
                      "rows": rows, "equals_duckdb": rows == expected, "load_average": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
