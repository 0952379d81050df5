"""Review probe (stop 48): TIMESTAMP / TIME / DATE literals parsed while planning (d606740) against DuckDB: odd
texts (spaces, 'T', one-digit fields, fractions of 1..9 digits, 24:00:00, leap days, zones, infinity), compared
with columns, in arithmetic and as values; an answer where DuckDB answers, an error where it fails.

    .venv/bin/python -m bench.review_stop48_timestamp_literals
"""
import datetime as dt
import sys

import duckdb
import pyarrow as pa

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from bench.duckdb_probes import duckdb_probe_problem  # noqa: E402
from gpu_engine import Session  # noqa: E402

TEXTS = ["2020-01-01", "2020-01-01 10:00:00", "2020-01-01T10:00", " 2020-01-01 10:00:00 ", "2020-1-1 1:2:3",
         "2020-01-01 10:00:00.1", "2020-01-01 10:00:00.123456", "2020-01-01 10:00:00.1234567",
         "2020-01-01 10:00:00.123456789", "2020-01-01 24:00:00", "2020-02-29 00:00:00", "2021-02-29 00:00:00",
         "2020-01-01 10:00:00+02", "2020-01-01 10:00:00 UTC", "infinity", "-infinity", "epoch", "1969-12-31 23:59:59.5",
         "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999", "2020-01-01 10:60:00", "2020-01-01 10:00:60",
         "20200101", "2020-01-01 10:00:00.", "", "2020-13-01"]
TIMES = ["10:00", "10:00:00.5", "24:00:00", "23:59:59.9999999", " 01:02:03 ", "1:2:3", "25:00:00"]
FORMS = ["SELECT * FROM t WHERE ts < TIMESTAMP '{x}'", "SELECT * FROM t WHERE ts = CAST('{x}' AS TIMESTAMP)",
         "SELECT ts, '{x}'::TIMESTAMP AS v FROM t", "SELECT * FROM t WHERE ts + INTERVAL 1 DAY >= TIMESTAMP '{x}'",
         "SELECT * FROM t WHERE d <= TIMESTAMP '{x}'"]
TIME_FORMS = ["SELECT * FROM t WHERE tm < TIME '{x}'", "SELECT tm, CAST('{x}' AS TIME) AS v FROM t"]


def main():
    t = pa.table({"ts": pa.array([dt.datetime(2020, 1, 1, 10), None, dt.datetime(1969, 12, 31, 23, 59, 59, 500000),
                                  dt.datetime(2020, 2, 29)], pa.timestamp("us")),
                  "d": pa.array([dt.date(2020, 1, 1), dt.date(2020, 1, 2), None, dt.date(1, 1, 1)], pa.date32()),
                  "tm": pa.array([dt.time(10), dt.time(0), None, dt.time(23, 59, 59, 999999)], pa.time64("us"))})
    con = duckdb.connect()
    con.register("t", t)
    ses = Session(device="cpu", drivers=2, batch_rows=3)
    ses.register("t", t, split_rows=2)
    probes = bad = 0
    for forms, texts in ((FORMS, TEXTS), (TIME_FORMS, TIMES)):
        for form in forms:
            for x in texts:
                sql = form.format(x=x)
                probes += 1
                pr = duckdb_probe_problem(con, ses, sql)
                if pr:
                    bad += 1
                    print("BAD", repr(sql), str(pr)[:300], flush=True)
    print("probes", probes, "bad", bad)


if __name__ == "__main__":
    main()
