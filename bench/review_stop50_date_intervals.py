"""Review probe (stop 50): constant DATE / TIMESTAMP +/- INTERVAL (8be9739: DuckDB's TIMESTAMP as a value, folded to
a DATE only as a side of a comparison / BETWEEN / IN; c2d63b6 / 645dddb: past Python's years) in random positions
against DuckDB: SELECT values, comparisons with date / timestamp / text columns, BETWEEN, IN lists, operands of
further arithmetic with a column, CASE / coalesce / date_diff / extract arguments; month ends, leap days, years 1 and
9999.

    .venv/bin/python -m bench.review_stop50_date_intervals [cpu|cuda-sim] [--queries N] [--seed S]
"""
from __future__ import annotations

import argparse
import datetime
import random
import sys

import duckdb
import pyarrow as pa

from bench.duckdb_probes import duckdb_probe_problem
from gpu_engine import Session

TABLE = pa.table({
    "i": pa.array([1, 2, 3, 4], pa.int64()),
    "d": pa.array([datetime.date(2024, 2, 29), datetime.date(2024, 3, 31), None, datetime.date(1, 1, 1)], pa.date32()),
    "ts": pa.array([datetime.datetime(2024, 3, 1), datetime.datetime(2024, 3, 31, 12), None,
                    datetime.datetime(2023, 1, 1)], pa.timestamp("us"))})


def _constant(r: random.Random) -> str:
    day = r.choice(["2024-02-29", "2024-01-31", "2023-12-31", "9999-12-31", "0001-01-01", "2024-03-01"])
    base = r.choice([f"DATE '{day}'", f"DATE '{day}'", f"TIMESTAMP '{day} 06:00:00'"])
    out = base
    for _ in range(r.randrange(1, 3)):
        out += f" {r.choice(['+', '-'])} INTERVAL {r.choice([1, 2, 12, 30, 36])} {r.choice(['DAY', 'MONTH', 'YEAR', 'HOUR', 'WEEK'])}"
    return f"({out})" if r.random() < 0.5 else out


def _query(r: random.Random) -> str:
    c = _constant(r)
    col = r.choice(["d", "ts"])
    form = r.randrange(9)
    if form == 0:
        return f"SELECT i, {c} AS a FROM t"
    if form == 1:
        return f"SELECT i FROM t WHERE {col} {r.choice(['=', '<', '>=', '<>'])} {c}"
    if form == 2:
        return f"SELECT i FROM t WHERE {col} BETWEEN {c} AND {_constant(r)}"
    if form == 3:
        return f"SELECT i, {col} {r.choice(['IN', 'NOT IN'])} ({c}, {_constant(r)}) AS a FROM t"
    if form == 4:
        return f"SELECT i, {col} - {c} AS a FROM t"
    if form == 5:
        return f"SELECT i FROM t WHERE {col} - {c} {r.choice(['>', '<'])} INTERVAL {r.choice([1, 40, 400])} DAY"
    if form == 6:
        return f"SELECT i, coalesce({col}, {c}) AS a, CASE WHEN i > 2 THEN {c} ELSE {col} END AS b FROM t"
    if form == 7:
        return f"SELECT i, date_diff('{r.choice(['day', 'month', 'hour'])}', {col}, {c}) AS a FROM t"
    return f"SELECT i, extract({r.choice(['year', 'day', 'hour'])} FROM {c}) AS a, CAST({c} AS VARCHAR) AS b FROM t"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("device", nargs="?", default="cpu")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    con = duckdb.connect()
    con.register("t", TABLE)
    sessions = [Session(device=args.device, drivers=d, batch_rows=b) for d, b in ((1, 4096), (2, 1), (3, 2))]
    for session in sessions:
        session.register("t", TABLE, split_rows=2)
    r = random.Random(args.seed)
    counts = {"bad": 0, "duckdb_only": 0, "refused": 0}
    for q in range(args.queries):
        sql = _query(r)
        try:
            problem = duckdb_probe_problem(con, sessions[q % len(sessions)], sql)
        except (OverflowError, ValueError) as error:  # DuckDB's timestamp past year 9999: Python cannot hold it
            print("SKIP", sql, "\n   ", error, flush=True)
            continue
        if not problem:
            continue
        kind = ("duckdb_only" if problem.startswith("duckdb raised") else
                "refused" if problem.startswith("EXC SqlError") else "bad")
        counts[kind] += 1
        print(kind.upper(), sql, "\n   ", problem[:300], flush=True)
    print(f"{args.device} seed {args.seed}: {args.queries} probes, {counts}")
    return 1 if counts["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
