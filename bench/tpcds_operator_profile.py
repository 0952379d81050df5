"""Where TPC-DS's engine time goes, by operator kind: explain-analyze per-operator time summed over queries.

Why: a per-query ratio against DuckDB names the slow queries, not the cause; a cost general to many queries
(one operator kind, planning, Task start, result conversion) shows only when the queries' operator times are
summed by kind. Per query: DuckDB's answer and CPU, the engine's first run (then the compiled tier settled,
:func:`bench.run_bench.settle_compiled_tier`), then ``--runs`` interleaved pairs (DuckDB, engine); each engine
run's Tasks (a query with shared CTEs runs several) are collected and their operators' times (wall seconds
inside the operator's calls, summed over drivers: ``OperatorStats.cpu_seconds``) summed by operator type. The
rest of the process CPU (plan preparation, Task and driver start, result conversion, waits) is the "outside
operators" line. Planning (``sql_plan`` with an empty plan cache: parse + plan + optimize) is timed apart,
since repeated runs take the plan from the cache.

    python -m bench.tpcds_operator_profile --sf 1 --queries all --runs 3 --json out.json
"""
import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.tpcds_cpu import measure  # noqa: E402


def main() -> None:
    """Profile the queries; print per-query lines and the table by operator type."""
    p = argparse.ArgumentParser()
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--queries", default="all")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--drivers", type=int, default=2)
    p.add_argument("--json")
    p.add_argument("--no-settle", action="store_true", help="do not wait for the compiled tier per query")
    p.add_argument("--sample-hz", type=float, default=100.0,
                   help="sample every thread's Python stack this often during the timed engine runs (0: off)")
    a = p.parse_args()
    from bench.run_bench import settle_compiled_tier
    from bench.run_tpcds import parse_query_numbers
    from bench.tpcds import query_text, result_mismatch
    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    from tests.duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch

    folder = ensure_tpcds(a.sf, None)
    session = Session(device="cpu", drivers=a.drivers)
    register_tpcds(session, folder)
    duck = duckdb_connection(folder, threads=a.drivers)
    tasks: list = []
    original_run = Session._run

    def recording_run(self, plan, consumer, timeout):
        task = original_run(self, plan, consumer, timeout)
        tasks.append(task)
        return task

    Session._run = recording_run
    thread_cpu = ThreadCpuByOperator()
    sampler = StackSampler(a.sample_hz) if a.sample_hz > 0 else None
    per_query = {}
    for n in parse_query_numbers(a.queries):
        sql = query_text(n)
        expected = duckdb_table(duck, sql)
        try:
            actual = session.sql(sql, timeout=300)
        except Exception as e:  # a refused query is reported, the rest still run
            print(f"q{n} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        problem = result_mismatch(actual, expected, sql, rows_mismatch)
        if not a.no_settle:
            settle_compiled_tier(lambda: session.sql(sql, timeout=300), limit_s=30)
        plan_s = []
        for _ in range(2):
            session.plan_cache.clear()
            _, w, _ = measure(lambda: session.sql_plan(sql))
            plan_s.append(w)
        session.sql(sql, timeout=300)  # the shared CTEs' plans back in the cache
        d_c, e_c, e_w, by_type, by_type_cpu = [], [], [], [], []
        for _ in range(a.runs):
            _, w, c = measure(lambda: duckdb_table(duck, sql)); d_c.append(c)
            tasks.clear()
            if sampler:
                sampler.active = True
            thread_cpu.start()
            _, w, c = measure(lambda: session.sql(sql, timeout=300)); e_c.append(c); e_w.append(w)
            kinds_cpu = thread_cpu.stop()
            if sampler:
                sampler.active = False
            kinds: dict[str, float] = defaultdict(float)
            for task in tasks:
                for pipeline in task.task_stats().pipelines:
                    for s in pipeline.operators:
                        kinds[s.operator_type] += s.cpu_seconds
            kinds["(tasks)"] = len(tasks)
            by_type.append(kinds)
            by_type_cpu.append(kinds_cpu)
        m = statistics.median
        types = sorted({k for kinds in by_type for k in kinds})
        ops = {k: m([kinds.get(k, 0.0) for kinds in by_type]) for k in types}
        cpu_types = sorted({k for kinds in by_type_cpu for k in kinds})
        ops_cpu = {k: m([kinds.get(k, 0.0) for kinds in by_type_cpu]) for k in cpu_types}
        ops_cpu["(not in a driver's operator call)"] = max(0.0, m(e_c) - sum(ops_cpu.values()))
        r = dict(eng_cpu=m(e_c), eng_wall=m(e_w), duck_cpu=m(d_c), plan_s=min(plan_s), ops=ops, ops_cpu=ops_cpu,
                 load=os.getloadavg()[0], equal=problem is None)
        per_query[f"q{n}"] = r
        top = sorted(((v, k) for k, v in ops_cpu.items()), reverse=True)[:4]
        print(f"q{n:<3} cpu eng {r['eng_cpu']*1000:7.1f} duck {r['duck_cpu']*1000:6.1f} "
              f"x{r['eng_cpu']/max(r['duck_cpu'], 1e-4):4.1f} plan {r['plan_s']*1000:5.1f} ms tasks "
              f"{ops.get('(tasks)', 0):.0f} | " + ", ".join(f"{k} {v*1000:.0f}" for v, k in top)
              + f" | load {r['load']:.1f}" + ("" if problem is None else " MISMATCH"), flush=True)
    Session._run = original_run
    totals: dict[str, float] = defaultdict(float)
    for r in per_query.values():
        for k, v in r["ops_cpu"].items():
            totals[k] += v
    eng = sum(r["eng_cpu"] for r in per_query.values())
    duck_total = sum(r["duck_cpu"] for r in per_query.values())
    op_sum = sum(totals.values())
    print(f"\n{len(per_query)} queries: engine CPU {eng*1000:.0f} ms, DuckDB CPU {duck_total*1000:.0f} ms "
          f"(x{eng/max(duck_total, 1e-9):.2f}); planning (not in the "
          f"runs: cached) {sum(r['plan_s'] for r in per_query.values())*1000:.0f} ms")
    print("| operator type (thread CPU in its calls) | ms summed over queries | share of the engine's CPU |"
          "\n|---|---|---|")
    for k, v in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"| {k} | {v*1000:.0f} | {v/max(eng, 1e-9):.1%} |")
    if sampler:
        sampler.stop()
        sampler.report()
    if a.json:
        json.dump(dict(queries=per_query, samples=sampler.counts() if sampler else {}), open(a.json, "w"), indent=1)


class ThreadCpuByOperator:
    """Add each driver call's thread CPU time (``time.thread_time``) to its operator type, between start and stop.

    Why not the operators' own stats: those are wall seconds inside the calls, which on a loaded machine are
    mostly waiting for a core or the GIL (a 274-row HashBuild read 170 ms there and 0.3 ms of thread CPU).
    Patches ``Driver._timed`` for the process; the decode pool's threads and the calling thread outside a
    driver are the remainder of the process CPU.
    """

    def __init__(self):
        import threading
        from gpu_engine.exec.driver import Driver
        self._lock = threading.Lock()
        self._totals: dict[str, float] = defaultdict(float)
        self._on = False
        original = Driver._timed
        profile = self

        def timed(driver, operator, stat, call, *args):
            if not profile._on:
                return original(driver, operator, stat, call, *args)
            began = time.thread_time()
            try:
                return original(driver, operator, stat, call, *args)
            finally:
                spent = time.thread_time() - began
                with profile._lock:
                    profile._totals[operator.stats.operator_type] += spent

        Driver._timed = timed

    def start(self) -> None:
        with self._lock:
            self._totals = defaultdict(float)
        self._on = True

    def stop(self) -> dict[str, float]:
        self._on = False
        with self._lock:
            return dict(self._totals)


class StackSampler:
    """Sample every thread's Python stack while ``active`` (the timed engine runs only: no first runs, no compiles
    of a first run, no DuckDB), and count each sample by operator module, kernel module and leaf frame.

    Why in-process rather than py-spy: only the timed runs are sampled, so the first runs' compiles and the
    reference queries do not hide the steady state. A thread waiting (a lock, a condition, an idle pool thread)
    is counted apart as "waiting", so the other lines are work; a wait inside native code that releases the GIL
    without a Python wait frame is counted as work (numpy and numba kernels release it, too).
    """

    WAIT_FILES = ("threading.py", "queue.py", "concurrent/futures/thread.py", "concurrent/futures/_base.py",
                  "selectors.py", "compile_worker.py", "subprocess.py")

    def __init__(self, hz: float):
        import threading
        self.active = False
        self._period = 1.0 / hz
        self._by_operator: dict[str, int] = defaultdict(int)
        self._by_kernel: dict[str, int] = defaultdict(int)
        self._by_leaf: dict[str, int] = defaultdict(int)
        self._by_path: dict[str, int] = defaultdict(int)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stack-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        import threading
        me = threading.get_ident()
        while not self._stop.wait(self._period):
            if not self.active:
                continue
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    try:
                        self._count(frame)
                    except Exception:  # a frame torn down mid-walk: skip the sample, keep sampling
                        pass

    def _count(self, frame) -> None:
        files = []
        f = frame
        while f is not None:
            files.append((f.f_code.co_filename, f.f_code.co_name, f.f_lineno))
            f = f.f_back
        if not files:
            return
        leaf_file = files[0][0]
        if any(leaf_file.endswith(w) for w in self.WAIT_FILES):
            self._by_operator["(waiting)"] += 1
            return
        operator = kernel = None
        path = []
        for filename, name, _ in files:  # innermost first
            if "/gpu_engine/operators/" in filename and operator is None:
                operator = os.path.basename(filename)[:-3]
            if "/kernels/" in filename and "site-packages" not in filename and kernel is None:
                kernel = os.path.basename(filename)[:-3] + "." + name
            if ("/gpu_engine/" in filename or "/kernels/" in filename) and len(path) < 3:
                path.append(os.path.basename(filename)[:-3] + "." + name)
        if operator is None:
            operator = "(outside operators) " + (path[-1] if path else files[-1][1])
        self._by_operator[operator] += 1
        if kernel:
            self._by_kernel[kernel] += 1
        self._by_leaf[f"{os.path.basename(files[0][0])}:{files[0][1]}"] += 1
        self._by_path[operator + " | " + " < ".join(path)] += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def counts(self) -> dict:
        return dict(operator=dict(self._by_operator), kernel=dict(self._by_kernel), leaf=dict(self._by_leaf),
                    path=dict(self._by_path))

    def report(self) -> None:
        work = sum(v for k, v in self._by_operator.items() if k != "(waiting)")
        print(f"\nstack samples during the timed engine runs: {work} working, "
              f"{self._by_operator.get('(waiting)', 0)} waiting")
        for title, table, n in (("operator module", self._by_operator, 25), ("kernel function", self._by_kernel, 25),
                                ("leaf frame", self._by_leaf, 25), ("operator | innermost engine frames",
                                                                    self._by_path, 40)):
            print(f"| {title} | samples | share of working samples |\n|---|---|---|")
            for k, v in sorted(table.items(), key=lambda kv: -kv[1])[:n]:
                if k != "(waiting)":
                    print(f"| {k} | {v} | {v / max(work, 1):.1%} |")


if __name__ == "__main__":
    main()
