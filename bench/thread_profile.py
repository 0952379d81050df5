"""Host-side cProfile of every thread (main, drivers, decode pool) over warm runs of one TPC-DS query.

Why: ``cProfile`` on the calling thread sees only the Task's set-up; the operators run on driver threads and
the scan's decode on a prefetch pool. Each thread created after start-up gets its own profiler (thread-time
clock), armed only after the warm runs, and their statistics are merged.

``python bench/thread_profile.py Q RUNS [--sf SF | --dbbench ROWS] [--out FILE]`` prints the top functions by own time and
writes the merged statistics (``pstats``) to FILE (default ``/tmp/thread_profile_qQ.prof``). Profiled
CPU is ~1.4x unprofiled: compare shares, not milliseconds (bench/results/2026-11-28-dsslow-q74-q66-profile.md).
"""

import argparse
import cProfile
import pstats
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_profiles: list[cProfile.Profile] = []
_lock = threading.Lock()
_armed = False


def _start(*_):
    """Installed in each new thread: once armed, replace itself with that thread's profiler."""
    if not _armed:
        return
    profile = cProfile.Profile(time.thread_time)
    with _lock:
        _profiles.append(profile)
    sys.setprofile(None)
    profile.enable()


def main() -> None:
    global _armed
    p = argparse.ArgumentParser()
    p.add_argument("query", type=int)
    p.add_argument("runs", type=int)
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--warm", type=int, default=3)
    p.add_argument("--out")
    p.add_argument("--dbbench", type=float, metavar="ROWS",
                   help="profile db-benchmark groupby question qQUERY over ROWS rows (100 groups) instead")
    a = p.parse_args()
    from gpu_engine import Session

    threading.setprofile(_start)  # before the session: its driver and decode threads are made after this
    session = Session(device="cpu", drivers=2)
    if a.dbbench:
        import pyarrow.parquet as pq
        from bench.dbbench import QUESTIONS, ensure_groupby

        session.register("x", pq.read_table(ensure_groupby(int(a.dbbench), 100)))
        sql = QUESTIONS[f"q{a.query}"]
    else:
        from bench.tpcds import query_text
        from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds

        register_tpcds(session, ensure_tpcds(a.sf))
        sql = query_text(a.query)
    for _ in range(a.warm):
        session.sql(sql, timeout=300)
    _armed = True
    main_profile = cProfile.Profile(time.thread_time)
    began = time.process_time()
    main_profile.enable()
    for _ in range(a.runs):
        session.sql(sql, timeout=300)
    main_profile.disable()
    print(f"process CPU {(time.process_time() - began) * 1000 / a.runs:.1f} ms a run (profiled)")
    threading.setprofile(None)
    stats = pstats.Stats(main_profile)
    for profile in _profiles:
        stats.add(profile)
    stats.dump_stats(a.out or f"/tmp/thread_profile_q{a.query}.prof")
    stats.sort_stats("tottime").print_stats(35)


if __name__ == "__main__":
    main()
