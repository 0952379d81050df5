"""Review probe (stop 48): this stop's shapes from 4 threads at once on one Session and on a Session each (driver
pools are process-wide): correlated scalar subqueries through the typed rule (COUNT over no rows, several rows a
key: DuckDB's error, which must fail its own query only), windows and TopN over packed sort words, typed eager
aggregation over a join; every answer against DuckDB's, every error against DuckDB's, no thread left running.

    .venv/bin/python -m bench.review_stop48_threads [cpu|cuda-sim]
"""
import sys
import threading

import duckdb

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import rows_mismatch  # noqa: E402
from gpu_engine import Session  # noqa: E402
from bench.review_stop48_corrscalar import tables  # noqa: E402

Q = [
    "SELECT * FROM t WHERE (SELECT count(*) FROM u WHERE u.e = t.b) = 0",
    "SELECT * FROM t WHERE a > (SELECT min(c) FROM u WHERE u.e = t.b) OR b = 0",
    "SELECT a, (SELECT count(*) FROM u WHERE u.e = t.b) + 1 AS x FROM t WHERE b > 0",
    "SELECT * FROM t WHERE b = (SELECT e FROM u WHERE u.c = t.a)",  # DuckDB's error (key 2 meets two rows)
    "SELECT * FROM t WHERE b = (SELECT e FROM u WHERE u.c = t.a AND u.e = t.b)",
    "SELECT a, b, row_number() OVER (PARTITION BY b ORDER BY a DESC NULLS FIRST, s) r FROM t",
    "SELECT a, b, dense_rank() OVER (PARTITION BY s ORDER BY d NULLS LAST, a) r FROM t",
    "SELECT * FROM t ORDER BY b DESC, a NULLS FIRST, s LIMIT 4",
    "SELECT t.b, sum(u.c), count(*) FROM t JOIN u ON t.a = u.c GROUP BY t.b",
    "SELECT u.e, min(t.s), max(t.d) FROM t JOIN u ON t.b = u.e GROUP BY u.e",
]


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    data = tables()
    con = duckdb.connect()
    for n, tb in data.items():
        con.register(n, tb)
    expected = {}
    for q in Q:
        try:
            expected[q] = con.sql(q).to_arrow_table()
        except Exception as ex:  # noqa: BLE001
            expected[q] = ex
    shared = Session(device=dev, drivers=3, batch_rows=2)
    for n, tb in data.items():
        shared.register(n, tb, split_rows=2)
    problems, counts = [], [0]
    lock = threading.Lock()
    before = threading.active_count()

    def worker(w):
        own = Session(device=dev, drivers=2, batch_rows=3)
        for n, tb in data.items():
            own.register(n, tb, split_rows=3)
        for rnd in range(3 if dev == "cpu" else 1):
            for i, q in enumerate(Q):
                session = shared if (i + w + rnd) % 2 else own
                e = expected[q]
                try:
                    got = session.sql(q)
                    pr = (f"DuckDB raised {e}" if isinstance(e, Exception)
                          else rows_mismatch(got.rename_columns(e.column_names), e))
                except Exception as ex:  # noqa: BLE001
                    pr = None if isinstance(e, Exception) and "More than one row" in str(ex) else \
                        f"EXC {type(ex).__name__}: {ex}"
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
    print("probes", counts[0], "bad", len(problems), "threads before/after", before, threading.active_count())


if __name__ == "__main__":
    main()
