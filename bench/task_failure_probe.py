"""Probe the Task contract when a driver fails mid-stream: the query fails promptly, leaves no thread, never hangs,
and the Session stays usable.

Why: the fuzzers check answers; this checks failures. Each scenario makes one driver fail part-way through its
input (bad text cast in the 3rd split, a zero divisor in the 3rd split, a damaged Parquet file that is the 3rd of
five, an operator raising a plain Python error on its 3rd batch: a kernel's failure) under scans, filters, joins
(build and probe side), aggregations, windows, sorts, set operations, Unnest and LIMIT, at 1, 2 and 4 drivers and
1, 4 and 1024 batch rows. For each it checks: the call raises an engine error (``GpuEngineError``) or answers as
DuckDB does; within a bound (``--bound`` seconds); the engine's threads (driver threads working, prefetchers,
exchanges) are those from before; and the same session then answers a good query as DuckDB does.

    python bench/task_failure_probe.py [--device cuda-sim] [--drivers 1,2,4] [--batches 1,4,1024]

Exits 1 on any broken promise (printed one per line).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

ROWS, SPLIT_ROWS = 60, 10  # six splits; the 3rd holds rows 20-29

SQL_FAILURES = [  # each reads the bad row 25 of column s (text) or q (a zero)
    "SELECT sum(CAST(s AS INTEGER)) AS n FROM t",
    "SELECT a, CAST(s AS INTEGER) AS v FROM t WHERE a >= 0",
    "SELECT a % 3 AS g, sum(CAST(s AS INTEGER)) AS n FROM t GROUP BY a % 3",
    "SELECT count(*) AS n FROM t JOIN (SELECT CAST(s AS INTEGER) AS k FROM t) q ON t.a = q.k",
    "SELECT count(*) AS n FROM (SELECT CAST(s AS INTEGER) AS k FROM t) q JOIN t ON t.a = q.k",
    "SELECT a, sum(CAST(s AS INTEGER)) OVER (ORDER BY a ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS w FROM t",
    "SELECT a FROM t ORDER BY CAST(s AS INTEGER) DESC LIMIT 5",
    "SELECT a, a // q AS d FROM t",
    "SELECT sum(a % q) AS n FROM t",
    "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM t u WHERE CAST(u.s AS INTEGER) = t.a)",
    "SELECT a FROM t UNION ALL SELECT CAST(s AS INTEGER) FROM t",
    "SELECT a FROM t INTERSECT SELECT CAST(s AS INTEGER) FROM t",
    "SELECT DISTINCT CAST(s AS INTEGER) AS v FROM t",
    "SELECT a, g.v FROM t, generate_series(1, CAST(s AS INTEGER) % 3) g(v)",
    "SELECT b, count(*) AS n FROM t GROUP BY ROLLUP (b, CAST(s AS INTEGER))",
]
GOOD = "SELECT b, count(*) AS n, sum(a) AS s FROM t GROUP BY b"


def _table():
    import pyarrow as pa

    a = list(range(ROWS))
    s = [str(i % 7) for i in range(ROWS)]
    s[25] = "x"  # not a number
    q = [1 + i % 4 for i in range(ROWS)]
    q[25] = 0
    return pa.table({"a": pa.array(a, pa.int64()), "s": pa.array(s), "q": pa.array(q, pa.int64()),
                     "b": pa.array([["p", "q", None][i % 3] for i in range(ROWS)])})


def _parquet_folder(folder: Path) -> Path:
    """Five files of 12 rows each; the 3rd file's data pages are overwritten (its footer stays readable)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    for index in range(5):
        rows = range(index * 12, index * 12 + 12)
        path = folder / f"part-{index}.parquet"
        pq.write_table(pa.table({"a": pa.array(list(rows), pa.int64()), "b": pa.array([f"v{i}" for i in rows])}),
                       path, compression="snappy", use_dictionary=False)
        if index == 2:
            data = bytearray(path.read_bytes())
            for offset in range(8, 120):  # the first pages: the column chunks' headers and values
                data[offset] = 0xA5
            path.write_bytes(bytes(data))
    return folder


def engine_threads() -> set[str]:
    """Return the engine threads but driver threads idle in a session's kept pool (tests/exec/test_cancellation)."""
    from gpu_engine.exec.driver_executors import DRIVER_THREAD_PREFIX, working_driver_threads

    working = {t.name for t in working_driver_threads()}
    return {t.name for t in threading.enumerate()
            if t.name.startswith("gpu-engine") and (t.name in working or not t.name.startswith(DRIVER_THREAD_PREFIX))}


def _settled_threads(before: set[str], wait: float = 3.0) -> set[str]:
    deadline = time.monotonic() + wait
    while True:
        extra = engine_threads() - before
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.05)


def _call(session, sql: str, bound: float):
    """Run ``session.sql(sql)`` on a thread; return (result, error, seconds), or raise TimeoutError past 4x bound."""
    box: dict = {}

    def run():
        try:
            box["result"] = session.sql(sql)
        except BaseException as error:  # noqa: BLE001 - reported
            box["error"] = error
    began = time.monotonic()
    thread = threading.Thread(target=run, name="probe-call", daemon=True)
    thread.start()
    thread.join(bound * 4)
    if thread.is_alive():
        raise TimeoutError(f"hung: no answer nor error after {bound * 4:.0f} s")
    return box.get("result"), box.get("error"), time.monotonic() - began


def probe(label, session, connection, sql, bound, problems, good=GOOD):
    from duckdb_reference import duckdb_table, rows_mismatch
    from gpu_engine.errors import GpuEngineError

    before = engine_threads()
    try:
        result, error, seconds = _call(session, sql, bound)
    except TimeoutError as hung:
        problems.append(f"{label}: {sql}: {hung}")
        return "hung"
    if error is not None and not isinstance(error, GpuEngineError):
        problems.append(f"{label}: {sql}: raised a raw {type(error).__name__}: {error}")
    if error is None:
        try:
            expected = duckdb_table(connection, sql)
        except Exception:  # noqa: BLE001
            expected = None
        why = "DuckDB raised" if expected is None else rows_mismatch(result, expected, rel_tol=1e-9)
        if why:
            problems.append(f"{label}: {sql}: answered where it should fail or differently: {why}")
    if seconds > bound:
        problems.append(f"{label}: {sql}: took {seconds:.1f} s (bound {bound} s)")
    left = _settled_threads(before)
    if left:
        problems.append(f"{label}: {sql}: left threads {sorted(left)}")
    if good is None:
        return "raised" if error is not None else "answered"
    try:
        again, again_error, _ = _call(session, good, bound)
    except TimeoutError as hung:
        problems.append(f"{label}: the next query hung: {hung}")
        return "hung"
    if again_error is not None:
        problems.append(f"{label}: after {sql!r} the session failed {good!r}: {type(again_error).__name__}: "
                        f"{again_error}")
    else:
        why = rows_mismatch(again, duckdb_table(connection, good))
        if why:
            problems.append(f"{label}: after {sql!r} the session answered {good!r} wrongly: {why}")
    return "raised" if error is not None else "answered"


class _RaiseOnThirdBatch:
    """Make ``cls.method`` raise a plain RuntimeError from its 3rd call on (a kernel failing mid-stream)."""

    def __init__(self, cls, method):
        self.cls, self.method, self.original, self.calls = cls, method, getattr(cls, method), 0
        self.lock = threading.Lock()

    def __enter__(self):
        original = self.original
        probe_self = self

        def failing(operator, *arguments, **keywords):
            with probe_self.lock:
                probe_self.calls += 1
                third = probe_self.calls >= 3
            if third:
                raise RuntimeError(f"injected failure in {probe_self.cls.__name__}.{probe_self.method}")
            return original(operator, *arguments, **keywords)
        setattr(self.cls, self.method, failing)
        return self

    def __exit__(self, *exc):
        setattr(self.cls, self.method, self.original)


def main(argv=None) -> int:
    import tempfile

    import duckdb

    from duckdb_reference import session_with_tables
    from gpu_engine.operators.filter_project import FilterProject
    from gpu_engine.operators.hash_aggregation import HashAggregation
    from gpu_engine.operators.hash_build import HashBuild
    from gpu_engine.operators.hash_probe import HashProbe
    from gpu_engine.operators.local_partition import LocalPartition

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--drivers", default="1,2,4")
    parser.add_argument("--batches", default="1,4,1024")
    parser.add_argument("--bound", type=float, default=30.0, help="seconds a failing query may take (loaded machine)")
    args = parser.parse_args(argv)
    table = _table()
    problems: list[str] = []
    outcomes: dict[str, int] = {}
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        folder = _parquet_folder(Path(scratch) / "p")
        connection = duckdb.connect()
        connection.register("t", table)
        threads_at_start = engine_threads()
        for drivers in (int(d) for d in args.drivers.split(",")):
            for batch_rows in (int(b) for b in args.batches.split(",")):
                for fuse in (False, True):
                    label = f"drivers {drivers} batch {batch_rows} fuse {fuse}"
                    session = session_with_tables({"t": table}, split_rows=SPLIT_ROWS, device=args.device,
                                                  drivers=drivers, batch_rows=batch_rows, fuse=fuse)
                    session.register("p", str(folder))
                    session.sql(GOOD)  # the session's pools exist before the first count of threads
                    for sql in SQL_FAILURES:
                        outcome = probe(label, session, connection, sql, args.bound, problems)
                        outcomes[outcome] = outcomes.get(outcome, 0) + 1
                    for sql in ("SELECT count(*) AS n, sum(a) AS s FROM p", "SELECT b FROM p WHERE a > 3",
                                "SELECT t.a FROM t JOIN p ON t.a = p.a"):
                        outcome = probe(label + " parquet", session, connection, sql, args.bound, problems)
                        outcomes[outcome] = outcomes.get(outcome, 0) + 1
                    for cls, method, sql in [
                            (FilterProject, "add_input", "SELECT a + 1 AS v FROM t WHERE a % 2 = 0"),
                            (HashBuild, "add_input", "SELECT count(*) AS n FROM t JOIN t u ON t.a = u.q"),
                            (HashProbe, "add_input", "SELECT count(*) AS n FROM t JOIN t u ON t.a = u.q"),
                            (HashAggregation, "add_input", "SELECT b, max(s) AS m FROM t GROUP BY b"),
                            (LocalPartition, "add_input", "SELECT b, count(DISTINCT s) AS m FROM t GROUP BY b")]:
                        with _RaiseOnThirdBatch(cls, method) as injected:
                            outcome = probe(f"{label} injected {cls.__name__}.{method}", session, connection, sql,
                                            args.bound, problems, good=None)
                        if injected.calls < 3 and outcome == "raised":
                            problems.append(f"{label}: {sql}: raised with {injected.calls} calls injected")
                        key = f"injected {cls.__name__} {outcome}" + ("" if injected.calls >= 3 else " (not reached)")
                        outcomes[key] = outcomes.get(key, 0) + 1
                        probe(label + " after injection", session, connection, GOOD, args.bound, problems)
                    session.close() if hasattr(session, "close") else None
                    del session
        connection.close()
    left = _settled_threads(threads_at_start, wait=5.0)
    for problem in problems:
        print(problem)
    print(f"{sum(outcomes.values())} failing calls on {args.device} ({outcomes}); {len(problems)} broken promises; "
          f"threads left at the end beyond the start: {sorted(left)}; {time.monotonic() - began:.0f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
