"""Review probe (stop 47): this stop's query shapes from several threads at once on one Session and on a Session
each (the driver pools are process-wide): NOT IN / EXISTS through the typed decorrelation rule, distinct set
operations, grouped aggregates; every answer against DuckDB's.

    .venv/bin/python -m bench.review_stop47_threads [cpu|cuda-sim]
"""
import sys
import threading

import duckdb

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import rows_mismatch  # noqa: E402
from gpu_engine import Session  # noqa: E402
from bench.review_stop47_subqueries import tables  # noqa: E402

Q = [
    "SELECT * FROM t WHERE a NOT IN (SELECT c FROM u)",
    "SELECT * FROM t WHERE a NOT IN (SELECT c FROM v)",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.c = t.a AND u.e < t.b)",
    "SELECT * FROM t WHERE s IN (SELECT r FROM u) AND d NOT IN (SELECT f FROM v)",
    "SELECT DISTINCT a, b FROM t UNION SELECT DISTINCT c, e FROM u",
    "SELECT DISTINCT a FROM t INTERSECT SELECT DISTINCT c FROM u",
    "SELECT b, count(*), sum(d), min(s), max(a) FROM t WHERE a IN (SELECT c FROM u) GROUP BY b",
]


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    data = tables()
    con = duckdb.connect()
    for n, tb in data.items():
        con.register(n, tb)
    expected = {q: con.sql(q).to_arrow_table() for q in Q}
    shared = Session(device=dev, drivers=3, batch_rows=2)
    for n, tb in data.items():
        shared.register(n, tb, split_rows=2)
    problems, counts = [], [0]
    lock = threading.Lock()

    def worker(w):
        own = Session(device=dev, drivers=2, batch_rows=3)
        for n, tb in data.items():
            own.register(n, tb, split_rows=3)
        for rnd in range(3 if dev == "cpu" else 1):
            for i, q in enumerate(Q):
                session = shared if (i + w + rnd) % 2 else own
                try:
                    got = session.sql(q)
                    pr = rows_mismatch(got.rename_columns(expected[q].column_names), expected[q])
                except Exception as ex:  # noqa: BLE001
                    pr = f"EXC {type(ex).__name__}: {ex}"
                with lock:
                    counts[0] += 1
                    if pr:
                        problems.append((w, q, str(pr)[:300]))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in problems:
        print("BAD", *p)
    print("probes", counts[0], "bad", len(problems))


if __name__ == "__main__":
    main()
