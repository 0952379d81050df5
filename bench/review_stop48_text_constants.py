"""Review probe (stop 48): text constants that are no value of the compared type (5a81ca1: a checked CAST that
raises only where a row reaches it) against DuckDB: empty tables, conjuncts after a false one, CASE branches, IN
lists, joins, aggregates, HAVING; 1-3 drivers, batch rows 1/4096.

    .venv/bin/python -m bench.review_stop48_text_constants
"""
import sys

import duckdb
import pyarrow as pa

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from bench.duckdb_probes import duckdb_probe_problem  # noqa: E402
from gpu_engine import Session  # noqa: E402

Q = ["SELECT * FROM {t} WHERE k = 'a'", "SELECT * FROM {t} WHERE k = '7'", "SELECT * FROM {t} WHERE k IN ('a', 1)",
     "SELECT * FROM {t} WHERE k > 100 AND k = 'a'", "SELECT * FROM {t} WHERE k = 'a' AND k > 100",
     "SELECT CASE k WHEN 'a' THEN 1 ELSE 0 END AS v FROM {t}",
     "SELECT CASE WHEN k > 100 THEN k = 'a' END AS v FROM {t}", "SELECT * FROM {t} WHERE b = 'maybe'",
     "SELECT * FROM {t} WHERE b = 'true'", "SELECT * FROM {t} WHERE d = 'x'", "SELECT * FROM {t} WHERE d = '2.5'",
     "SELECT count(*) FROM {t} WHERE k = 'a'", "SELECT k, count(*) FROM {t} GROUP BY k HAVING k = 'zz'",
     "SELECT * FROM {t} WHERE k IS NULL AND k = 'a'", "SELECT * FROM {t} x JOIN {t} y ON x.k = y.k WHERE x.k = 'q'",
     "SELECT * FROM {t} WHERE k = ' 7 '", "SELECT * FROM {t} WHERE k = '1e2'", "SELECT * FROM {t} WHERE k <> 'a' OR true"]


def main():
    t = pa.table({"k": pa.array([1, 7, None, 3], pa.int64()), "b": pa.array([True, None, False, True]),
                  "d": pa.array([2.5, None, 1.0, -0.0])})
    data = {"t": t, "e": t.slice(0, 0), "n": pa.table({"k": pa.array([None], pa.int64()), "b": pa.array([None], pa.bool_()),
                                                        "d": pa.array([None], pa.float64())})}
    con = duckdb.connect()
    for name, tb in data.items():
        con.register(name, tb)
    probes = bad = 0
    for drivers, batch in ((1, 4096), (3, 1)):
        ses = Session(device="cpu", drivers=drivers, batch_rows=batch)
        for name, tb in data.items():
            ses.register(name, tb, split_rows=1)
        for q in Q:
            for name in data:
                sql = q.format(t=name)
                probes += 1
                pr = duckdb_probe_problem(con, ses, sql)
                if pr:
                    bad += 1
                    print("BAD", drivers, batch, sql, str(pr)[:300], flush=True)
    print("probes", probes, "bad", bad)


if __name__ == "__main__":
    main()
