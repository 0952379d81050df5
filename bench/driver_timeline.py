"""Where a query's wall time goes on its driver threads: CPU, waiting for a CPU, asleep, and which CPU ran them.

Why: a query whose CPU time is unchanged can take twice the wall time (TPC-H q15 at SF1 on two drivers:
~160 ms of CPU, 80 ms of wall in one run and 145 in another; issue 31). ``time.thread_time`` cannot tell the
reasons apart; the kernel's per-thread ``/proc/self/task/<tid>/schedstat`` can: its first two fields are the
thread's time on a CPU and its time runnable but waiting for one (the run queue). So for each driver time
slice (one ``Driver.run`` call) this records wall, on-CPU and run-queue nanoseconds, and the rest is time the
thread slept inside the slice (the interpreter lock, a mutex, a page-fault lock: what a serial stage or lock
contention would show); the CPU the thread was on at the slice's start and end (``/proc/.../stat`` field 39)
shows two drivers sharing one CPU. DuckDB runs the same SQL in the same process, alternating with the engine.

``python -m bench.driver_timeline QUERY [--sql] [--runs N] [--sf SF] [--drivers D] [--slices] [--pin]``

``--pin`` binds each driver's thread to CPU ``driver_id % cores`` for each slice (``sched_setaffinity``): a
diagnostic for placement only, not a setting of the engine (a pinned driver cannot leave a CPU that another
process holds). ``--ab-pin`` alternates unpinned and pinned runs in one process (the thread's full CPU set is
given back before an unpinned slice) and reports both sides' medians. ``--ab-caller`` alternates runs with the
calling thread sleeping while the drivers run and running one driver's first slice itself
(``gpu_engine.session.CALLER_RUNS_A_DRIVER``; the "pinned" side of the output is the caller running). Linux only. Output: per run, wall, process CPU, DuckDB's wall, the longest pipeline's drivers'
start CPUs; with ``--slices`` every slice; after the runs, medians and the per-driver split of the last run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _schedstat() -> tuple[float, float]:
    """Return this thread's seconds on a CPU and waiting in the run queue, as the kernel counts them."""
    on_cpu, waiting, _ = open(f"/proc/self/task/{threading.get_native_id()}/schedstat").read().split()
    return int(on_cpu) / 1e9, int(waiting) / 1e9


def _cpu() -> int:
    """Return the CPU this thread last ran on (``/proc/self/task/<tid>/stat`` field 39)."""
    stat = open(f"/proc/self/task/{threading.get_native_id()}/stat").read()
    return int(stat.rsplit(")", 1)[1].split()[36])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("query", help="TPC-H query name, e.g. q15")
    p.add_argument("--sql", action="store_true", help="run the query's SQL text through Session.sql (else the hand plan)")
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--drivers", type=int, default=2)
    p.add_argument("--slices", action="store_true", help="print every driver slice of every run")
    p.add_argument("--pin", action="store_true", help="diagnostic: bind driver d's thread to CPU d %% cores")
    p.add_argument("--ab-pin", action="store_true", help="alternate unpinned and pinned runs in one process")
    p.add_argument("--ab-caller", action="store_true",
                   help="alternate runs with the caller sleeping / running a driver (CALLER_RUNS_A_DRIVER)")
    a = p.parse_args(argv)

    from bench.run_bench import settle_compiled_tier
    from bench.tpch_queries import bench_query
    from gpu_engine import Session
    from gpu_engine import session as session_module
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.exec import driver as driver_module
    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    path = ensure_tpch(a.sf)
    session = Session(device="cpu", drivers=a.drivers)
    register_tpch(session, path)
    duck = duckdb_connection(path, threads=a.drivers)
    query = bench_query(a.query, a.sf)
    plan = None if a.sql else query.build_plan(session.catalog)
    run = (lambda: session.sql(query.sql)) if a.sql else (lambda: session.execute(plan))
    reference = duckdb_table(duck, query.sql)
    problem = rows_mismatch(run(), reference, ordered=query.ordered)
    if problem:
        raise SystemExit(f"{a.query}: result differs from DuckDB: {problem}")
    settle_compiled_tier(run)

    every_cpu = os.sched_getaffinity(0)
    cores = len(every_cpu)
    pinned = [a.pin]
    slices: list[tuple] = []
    original = driver_module.Driver.run

    def traced(driver) -> None:
        os.sched_setaffinity(threading.get_native_id(), {sorted(every_cpu)[driver.driver_id % cores]}
                             if pinned[0] else every_cpu)
        first_cpu, began = _cpu(), time.perf_counter()
        on_cpu, waiting = _schedstat()
        try:
            original(driver)
        finally:
            on_cpu_after, waiting_after = _schedstat()
            slices.append((driver.task.task_id, driver.pipeline_id, driver.driver_id, began, time.perf_counter(),
                           on_cpu_after - on_cpu, waiting_after - waiting, first_cpu, _cpu(), driver._state,
                           type(driver._blocked_operator).__name__ if driver._blocked_operator is not None else ""))

    driver_module.Driver.run = traced
    walls, cpus, ducks, split, sides = [], [], [], [], []
    try:
        for number in range(a.runs * (2 if a.ab_pin or a.ab_caller else 1)):
            if a.ab_pin:
                pinned[0] = bool(number % 2)
            if a.ab_caller:
                session_module.CALLER_RUNS_A_DRIVER = bool(number % 2)
            sides.append(pinned[0] or (a.ab_caller and bool(number % 2)))
            began = time.perf_counter()
            duckdb_table(duck, query.sql)
            ducks.append(time.perf_counter() - began)
            slices.clear()
            began, process_began = time.perf_counter(), time.process_time()
            run()
            walls.append(time.perf_counter() - began)
            cpus.append(time.process_time() - process_began)
            by_driver: dict = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, []])
            for task, pipeline, driver, start, end, on_cpu, waiting, cpu0, cpu1, _, _ in slices:
                entry = by_driver[(task, pipeline, driver)]
                entry[0] += end - start
                entry[1] += on_cpu
                entry[2] += waiting
                entry[3] = max(entry[3], end - start)
                entry[4].append(cpu0)
            longest = max(by_driver.items(), key=lambda kv: kv[1][1])[0]
            starts = [by_driver[k][4][-1] for k in by_driver if k[:2] == longest[:2]]
            print(f"run {number}: wall {walls[-1] * 1e3:6.1f} ms  cpu {cpus[-1] * 1e3:6.1f} ms  duckdb "
                  f"{ducks[-1] * 1e3:6.1f} ms  pipeline {longest[1]}'s drivers ran on CPUs {starts}  "
                  f"load {os.getloadavg()[0]:.1f}" + ("  pinned" if pinned[0] else "")
                  + ("  caller runs" if a.ab_caller and sides[-1] else ""))
            if a.slices:
                for task, pipeline, driver, start, end, on_cpu, waiting, cpu0, cpu1, state, blocked in sorted(
                        slices, key=lambda s: s[3]):
                    print(f"    {task} p{pipeline}d{driver} {(start - began) * 1e3:6.1f}-{(end - began) * 1e3:6.1f} ms"
                          f" cpu {on_cpu * 1e3:5.1f} runq {waiting * 1e3:5.1f} CPU {cpu0}->{cpu1} {state} {blocked}")
            split = sorted(by_driver.items(), key=lambda kv: kv[0])
    finally:
        driver_module.Driver.run = original
        session_module.CALLER_RUNS_A_DRIVER = True
    if a.ab_pin or a.ab_caller:
        for side in (False, True):
            w = [x for x, p in zip(walls, sides) if p == side]
            c = [x for x, p in zip(cpus, sides) if p == side]
            d = [x for x, p in zip(ducks, sides) if p == side]
            name = ("caller runs" if side else "caller sleeps") if a.ab_caller else ("pinned  " if side else "unpinned")
            print(f"{name}: wall {statistics.median(w) * 1e3:.1f} ms, cpu "
                  f"{statistics.median(c) * 1e3:.1f} ms, duckdb {statistics.median(d) * 1e3:.1f} ms, wall/duckdb "
                  f"{statistics.median(w) / statistics.median(d):.2f}x; walls {[round(x * 1e3) for x in w]}")
    print(f"medians of {len(walls)}: wall {statistics.median(walls) * 1e3:.1f} ms, cpu {statistics.median(cpus) * 1e3:.1f} ms,"
          f" duckdb {statistics.median(ducks) * 1e3:.1f} ms, wall/duckdb {statistics.median(walls) / statistics.median(ducks):.2f}x;"
          f" walls {[round(w * 1e3) for w in walls]}")
    print("last run, per driver (ms): on thread = on cpu + run queue + asleep")
    for (task, pipeline, driver), (on_thread, on_cpu, waiting, _, _) in split:
        print(f"  {task} pipeline {pipeline} driver {driver}: on thread {on_thread * 1e3:6.1f}  on cpu {on_cpu * 1e3:6.1f}"
              f"  run queue {waiting * 1e3:6.1f}  asleep {(on_thread - on_cpu - waiting) * 1e3:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
