"""Review probe (stop 48): TRY_CAST across type pairs (28429da: pairs without a conversion answer NULL) against
DuckDB, over columns with NULLs, an empty table and literals.

    .venv/bin/python -m bench.review_stop48_try_cast
"""
import datetime as dt
import sys
from decimal import Decimal

import duckdb
import pyarrow as pa

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from bench.duckdb_probes import duckdb_probe_problem  # noqa: E402
from gpu_engine import Session  # noqa: E402

COLUMNS = {"i": pa.array([1, None, -5, 20000101], pa.int64()), "f": pa.array([1.5, None, -0.0, 1e300]),
           "n": pa.array([Decimal("1.50"), None, Decimal("-3.00"), Decimal("99.99")], pa.decimal128(6, 2)),
           "d": pa.array([dt.date(2020, 1, 1), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)]),
           "ts": pa.array([dt.datetime(2020, 1, 1, 10, 30), None, dt.datetime(1970, 1, 1), dt.datetime(2000, 2, 29)],
                          pa.timestamp("us")),
           "s": pa.array(["10:00:00", None, "2020-01-01", "1 day"]), "b": pa.array([True, None, False, True]),
           "tm": pa.array([dt.time(10), None, dt.time(0), dt.time(23, 59)], pa.time64("us"))}
TARGETS = ["DATE", "TIME", "INTERVAL", "INTEGER", "BIGINT", "DOUBLE", "DECIMAL(8,2)", "TIMESTAMP", "VARCHAR",
           "BOOLEAN", "SMALLINT"]


def main():
    t = pa.table(COLUMNS)
    con = duckdb.connect()
    ses = Session(device="cpu", drivers=2, batch_rows=3)
    probes = bad = 0
    for name, table in (("t", t), ("e", t.slice(0, 0))):
        con.register(name, table)
        ses.register(name, table, split_rows=2)
    for table in ("t", "e"):
        for column in COLUMNS:
            for target in TARGETS:
                sql = f"SELECT TRY_CAST({column} AS {target}) AS v FROM {table}"
                probes += 1
                pr = duckdb_probe_problem(con, ses, sql)
                if pr:
                    bad += 1
                    print("BAD", sql, str(pr)[:250], flush=True)
    print("probes", probes, "bad", bad)


if __name__ == "__main__":
    main()
