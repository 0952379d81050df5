"""Review probes (stop 54) of ``connectors/scan_predicates``: a Filter's single-column conjuncts tested inside the
Parquet scan (late decoding, row-group skipping). Tries to break it with NULLs, row groups of 1 row, dictionary and
plain pages mixed in one column chunk, unicode / empty strings, decimals at two scales, casts of the column, ORs,
IN lists with NULL / never-equal values, constants past the column's range, renames through derived tables and CTEs
read twice, aggregate FILTER clauses, several drivers and batch sizes; each answer compared with DuckDB.
Run: ``.venv/bin/python -m bench.review_stop54_scan_predicates [--cases N] [--device cpu] [--seed S]``.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import os
import random
import tempfile
import time

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from bench.duckdb_probes import duckdb_probe_problem
from gpu_engine import Session

_WORDS = ["", "a", "b", "ab", "é", "ü", "z", "日本", "a ", "B", "zz", "ß"]


def _file(rng: random.Random, directory: str) -> str:
    """One Parquet file: row groups of 1 row and larger; a string column whose chunk starts dictionary-encoded and
    falls back to plain pages (tiny dictionary page limit); NULLs in every column."""
    n = rng.choice([0, 1, 7, 50, 300])
    null = lambda p=.15: rng.random() < p
    many = [f"w{rng.randrange(10 ** 6)}" for _ in range(n)]
    table = pa.table({
        "k": pa.array(list(range(n)), pa.int64()),
        "i": pa.array([None if null() else rng.randrange(-5, 6) for _ in range(n)], pa.int32()),
        "b": pa.array([None if null() else rng.choice([-128, -1, 0, 1, 127]) for _ in range(n)], pa.int8()),
        "u": pa.array([None if null() else rng.choice([0, 1, 7, 4294967295]) for _ in range(n)], pa.uint32()),
        "d": pa.array([None if null() else datetime.date(2020, 1, 1) + datetime.timedelta(days=rng.randrange(-3, 4))
                       for _ in range(n)], pa.date32()),
        "m": pa.array([None if null() else decimal.Decimal(rng.randrange(-300, 300)) / 100 for _ in range(n)],
                      pa.decimal128(9, 2)),
        "w": pa.array([None if null() else decimal.Decimal(rng.randrange(-10 ** 6, 10 ** 6)) / 10000
                       for _ in range(n)], pa.decimal128(18, 4)),
        "s": pa.array([None if null() else rng.choice(_WORDS) for _ in range(n)], pa.string()),
        "t": pa.array([None if null() else (rng.choice(_WORDS) if r < n // 2 else many[r]) for r in range(n)],
                      pa.string()),
        "f": pa.array([None if null() else rng.choice([-1.5, 0.0, 2.5, 3.0]) for _ in range(n)], pa.float64()),
    })
    path = os.path.join(directory, f"f{rng.randrange(10 ** 9)}.parquet")
    pq.write_table(table, path, row_group_size=rng.choice([1, 2, 16, 64, 1000]),
                   dictionary_pagesize_limit=rng.choice([64, 1 << 20]), data_page_size=rng.choice([64, 1 << 20]),
                   write_statistics=rng.random() < .8)
    return path


def _constant(rng: random.Random, column: str) -> str:
    return {
        "k": lambda: rng.choice(["0", "3", "49", "-1", "299", "9223372036854775807", "99999999999999999999",
                                 "2.5", "1+1", "7 - 3"]),
        "i": lambda: rng.choice(["0", "-5", "5", "3", "2.5", "-0.5", "1e0", "6", "300", "CAST(2 AS TINYINT)",
                                 "2::DECIMAL(4,1)", "-2147483649"]),
        "b": lambda: rng.choice(["0", "-128", "127", "128", "-129", "1", "0.5"]),
        "u": lambda: rng.choice(["0", "1", "7", "4294967295", "4294967296", "-1"]),
        "d": lambda: rng.choice(["DATE '2020-01-01'", "DATE '2019-12-30'", "DATE '2020-01-03' + 1",
                                 "'2020-01-02'", "DATE '2020-01-02' - INTERVAL 1 DAY"]),
        "m": lambda: rng.choice(["0", "1.5", "-1.005", "0.01", "2.995", "1.234", "-3", "0.015 + 0.01", "1"]),
        "w": lambda: rng.choice(["0", "12.34567", "-5.5", "99.9999", "0.00005", "3"]),
        "s": lambda: rng.choice([f"'{w}'" for w in _WORDS]),
        "t": lambda: rng.choice([f"'{w}'" for w in _WORDS] + ["'w5'", "'w'"]),
    }[column]()


def _conjunct(rng: random.Random, column: str) -> str:
    ref = column
    if column in "ibu" and rng.random() < .2:
        ref = rng.choice([f"CAST({column} AS BIGINT)", f"CAST({column} AS DECIMAL(18,2))", f"CAST({column} AS DOUBLE)"])
    elif column == "m" and rng.random() < .2:
        ref = rng.choice(["CAST(m AS DECIMAL(15,4))", "CAST(m AS DOUBLE)", "CAST(m AS DECIMAL(3,1))"])
    elif column in "st" and rng.random() < .15:
        ref = rng.choice([f"lower({column})", f"CAST({column} AS VARCHAR)"])
    shape = rng.random()
    if shape < .45:
        op = rng.choice(["=", "<", "<=", ">", ">=", "<>"])
        left, right = (ref, _constant(rng, column)) if rng.random() < .7 else (_constant(rng, column), ref)
        return f"{left} {op} {right}"
    if shape < .6:
        return f"{ref} BETWEEN {_constant(rng, column)} AND {_constant(rng, column)}"
    if shape < .8:
        values = [_constant(rng, column) for _ in range(rng.randrange(1, 4))]
        if rng.random() < .2:
            values.append("NULL")
        return f"{ref} {'NOT ' if rng.random() < .1 else ''}IN ({', '.join(values)})"
    if shape < .9:
        return f"({_conjunct(rng, column)} OR {_conjunct(rng, column)})"
    return rng.choice([f"{ref} IS NULL", f"{ref} IS NOT NULL", f"NOT ({_conjunct(rng, column)})",
                       f"({_conjunct(rng, column)} OR {ref} IS NULL)"])


def _query(rng: random.Random) -> str:
    columns = "kibudmwst"
    where = " AND ".join(_conjunct(rng, rng.choice(columns)) for _ in range(rng.randrange(1, 4)))
    shape = rng.choice(["select", "select", "group", "agg", "derived", "cte2", "filter_agg", "limit"])
    if shape == "select":
        return f"SELECT k, i, b, u, d, m, w, s, t, f FROM fact WHERE {where}"
    if shape == "group":
        return f"SELECT s, count(*), sum(m), min(t), max(d) FROM fact WHERE {where} GROUP BY s"
    if shape == "agg":
        return f"SELECT count(*), sum(i), sum(w), count(DISTINCT t) FROM fact WHERE {where}"
    if shape == "derived":  # the filter above a derived table's own filter, columns renamed through it
        return f"SELECT k, i FROM (SELECT k, i, b, u, d, m, w, s, t, f FROM fact WHERE k >= 0) q WHERE {where}"
    if shape == "cte2":  # the same table read twice, the filter on one reader only
        return f"WITH c AS (SELECT * FROM fact) SELECT count(*), sum(k), (SELECT count(*) FROM c) FROM c WHERE {where}"
    if shape == "filter_agg":
        return f"SELECT count(*), count(*) FILTER (WHERE {where}), sum(k) FILTER (WHERE {where}) FROM fact"
    return f"SELECT k, s FROM fact WHERE {where} ORDER BY k LIMIT 5"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--per-file", type=int, default=25)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    began, bad = time.time(), 0
    with tempfile.TemporaryDirectory() as directory:
        case = 0
        while case < args.cases:
            path = _file(rng, directory)
            drivers, batch_rows = rng.choice([1, 2, 3]), rng.choice([1, 2, 5, 64, 4096])
            reader = "auto" if args.device != "cpu" and rng.random() < .5 else "pyarrow"
            session = Session(device=args.device, drivers=drivers, batch_rows=batch_rows, parquet_reader=reader,
                              compile_mode="lowest")
            session.register("fact", path, split_rows=rng.choice([None, 1, 3, 100]))
            con = duckdb.connect()
            con.execute("SET TimeZone = 'UTC'")
            con.execute(f"CREATE VIEW fact AS SELECT * FROM read_parquet('{path}')")
            for _ in range(args.per_file):
                sql = _query(rng)
                problem = duckdb_probe_problem(con, session, sql)
                case += 1
                if problem and not problem.startswith("duckdb raised"):
                    bad += 1
                    print(f"BAD drivers={drivers} batch={batch_rows} reader={reader} file={path}\n  {sql}\n  {problem}",
                          flush=True)
                    import shutil
                    shutil.copy(path, f"/tmp/review54_{os.path.basename(path)}")
    print(f"{args.cases} cases, {bad} bad, {time.time() - began:.0f} s", flush=True)


if __name__ == "__main__":
    main()
