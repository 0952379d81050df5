"""Profile one hot TPC-H query on ``cuda``: where the host time of a steady-state run goes.

    python bench/gpu_profile.py QUERY [SF]      # QUERY: 1..22 or primer; SF default 10

Caches the query's tables in device memory, runs it (compile, then warm), prints the
explain-analyze (per-operator time, kernel launches, host syncs), then runs it again while a
sampling thread reads every thread's stack each millisecond and prints the functions with the
most samples, own and inclusive. The GPU machine has no py-spy or perf, and cProfile sees only
the calling thread (drivers run on their own threads), hence the sampler.
"""

from __future__ import annotations

import collections
import threading
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def main(argv: list[str]) -> int:
    from bench.tpch_queries import bench_query
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.plans.nodes import TableScanNode, walk_plan

    name = argv[0] if argv else "1"
    sf = float(argv[1]) if len(argv) > 1 else 10.0
    query = bench_query(name if name == "primer" else f"q{int(name)}")
    data_dir = ensure_tpch(sf)
    session = Session(device=sys.argv[3] if len(sys.argv) > 3 else "cuda", drivers=1)
    register_tpch(session, data_dir)
    plan = query.build_plan(session.catalog)
    for table in sorted({n.table_name for n in walk_plan(plan) if isinstance(n, TableScanNode)}):
        start = time.perf_counter()
        session.cache(table)
        session.device.synchronize()
        print(f"cached {table} in {time.perf_counter() - start:.2f} s")
    for label in ("first (compile)", "warm", "warm"):
        start = time.perf_counter()
        session.execute(plan)
        session.device.synchronize()
        print(f"{query.name} {label}: {1000 * (time.perf_counter() - start):.1f} ms")
    print(session.explain(plan, analyze=True))
    own, inclusive, samples = sample_stacks(lambda: (session.execute(plan), session.device.synchronize()))
    for title, counts in (("own", own), ("inclusive", inclusive)):
        print(f"--- {title} samples of {samples} (1 ms each, every thread but the sampler's and idle waits)")
        for where, count in counts.most_common(30):
            print(f"{count:6d} {100 * count / max(samples, 1):5.1f}%  {where}")
    return 0


def _where(frame) -> str:
    code = frame.f_code
    path = code.co_filename
    for marker in ("/site-packages/", "/gpu_engine/", "/kernels/", "/plans/", "/lib/python3"):
        if marker in path:
            path = path[path.index(marker) + 1:]
            break
    return f"{path}:{code.co_name}"


_IDLE = ("threading.py:wait", "queue.py:get", "threading.py:_wait_for_tstate_lock", "selectors.py:select")


def sample_stacks(run, interval: float = 0.001):
    """Run ``run()`` while sampling every other thread's stack; return own and inclusive counts and the total."""
    own, inclusive = collections.Counter(), collections.Counter()
    samples = 0
    done = threading.Event()
    me = threading.get_ident()

    def sampler() -> None:
        nonlocal samples
        sampler_id = threading.get_ident()
        while not done.is_set():
            for ident, frame in sys._current_frames().items():
                if ident in (sampler_id, me):
                    continue
                leaf = _where(frame)
                if leaf.endswith(_IDLE) or "lock" in leaf and "acquire" in leaf:
                    continue
                samples += 1
                own[leaf] += 1
                seen = set()
                while frame is not None:
                    where = _where(frame)
                    if where not in seen:
                        seen.add(where)
                        inclusive[where] += 1
                    frame = frame.f_back
            time.sleep(interval)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    try:
        run()
    finally:
        done.set()
        thread.join()
    return own, inclusive, samples


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
