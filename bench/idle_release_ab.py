"""The idle release of kept memory due after a fixed 5 s ("fixed") vs after as long as the Tasks ran ("busy"),
alternating, in one process, with a gap between two engine runs longer than 5 s and shorter than a run.

``python -m bench.idle_release_ab ROWS ROUNDS``: one Session (cpu, 2 drivers) over ROWS rows of ROWS/2 distinct
int64 keys; ``SELECT k, sum(v), count(*) ... GROUP BY k`` (a group-by table past the huge-page bound, from the
recycler). Each round, per side (order alternating): an engine run (unmeasured: its tables kept), a wait of
:data:`GAP` seconds (as a comparison harness's DuckDB run between them under load: db-bench q10's took 6.5 s between
engine runs of 13.6 s), then the measured engine run (process CPU,
user+sys: what its allocations' first touches cost if the gap released them). The side is switched by patching
``idle_memory.IDLE_RELEASE_MAX_SECONDS`` (0: the fixed delay as before). Prints each run, then medians.
"""
import os
import resource
import statistics
import sys
import time

import duckdb
import numpy as np
import pyarrow as pa

from gpu_engine import Session
from gpu_engine.exec import buffer_recycler, idle_memory

SIDES = {"fixed": 0.0, "busy": 60.0}
#: Seconds between the unmeasured and the measured run: past the fixed 5 s, short of a loaded run's wall.
GAP = 6.0


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    rows, rounds = int(float(sys.argv[1])), int(sys.argv[2])
    rng = np.random.default_rng(1)
    table = pa.table({"k": rng.integers(0, rows // 2, rows, dtype=np.int64), "v": rng.random(rows)})
    session = Session(device="cpu", drivers=2)
    session.register("t", table)
    sql = "SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k"
    connection = duckdb.connect()
    connection.execute("set threads=2")
    connection.register("t", table)
    print("rows", session.sql(sql).num_rows, "duckdb", len(connection.sql(sql).fetchall()), flush=True)
    results = {side: [] for side in SIDES}
    gaps, walls = [], []
    for number in range(rounds):
        for side in (list(SIDES) if number % 2 == 0 else list(SIDES)[::-1]):
            idle_memory.IDLE_RELEASE_MAX_SECONDS = SIDES[side]
            start = time.monotonic()
            session.sql(sql)
            walls.append(time.monotonic() - start)
            start = time.monotonic()
            time.sleep(GAP)  # a gap past the fixed 5 s and shorter than the run, as DuckDB's run under load was
            gaps.append(time.monotonic() - start)
            kept = buffer_recycler.kept_bytes()
            cpu = _cpu()
            session.sql(sql)
            results[side].append(_cpu() - cpu)
            print(side, round(results[side][-1], 3), "kept MiB before", kept >> 20, "run wall", round(walls[-1], 1),
                  "gap", round(gaps[-1], 1),
                  "load", os.getloadavg()[0], flush=True)
    for side in SIDES:
        print("SUMMARY", side, round(statistics.median(results[side]), 3), [round(x, 3) for x in results[side]])


if __name__ == "__main__":
    main()
