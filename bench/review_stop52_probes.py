"""Review probe (stop 52): this session's engine changes against DuckDB, random queries per area.

- ``composite`` (30ce572 / 7c74c7b / the reviewer's cap: joins on several key columns estimated from the
  tables' measured key pairs, which chooses join orders and eager aggregation): chains of three tables joined on
  two or three columns of mixed widths (int32 beside int64, dates), with NULL keys, inner / LEFT joins,
  filters, grouped or not; the measurement run with its sample sizes cut to a few hundred rows so that every
  path (whole, sampled on one side, on both) plans some of the queries.
- ``exchange`` (6340791 / f686861: a GROUP BY over string keys exchanged on one fixed-width key; a key renamed
  by a derived table keeps its distribution): GROUP BY string + integer keys over derived tables that rename
  the integer key, DISTINCT aggregates, HAVING, keys with NULLs, many groups.

Sessions: drivers 1-3, batch rows 7..8192, optimizer on and off, tables split into several parts.

    .venv/bin/python -m bench.review_stop52_probes [cpu|cuda-sim] --area composite --queries 400 --seed 1
"""
from __future__ import annotations

import argparse
import random
import sys

import duckdb
import numpy as np
import pyarrow as pa

import gpu_engine.optimizer.statistics as statistics_module
from bench.duckdb_probes import duckdb_probe_problem
from gpu_engine import Session


def _tables(seed: int) -> dict[str, pa.Table]:
    rng = np.random.default_rng(seed)

    def column(values, dtype, share=0.05):
        return pa.array(values, dtype, mask=rng.random(len(values)) < share)

    def keyed(n, parts, items):
        part = rng.integers(0, parts, n)
        return part, (part * 7 + rng.integers(0, 4, n)) % items  # a composite foreign key's shape

    n = 6000
    p, s = keyed(n, 300, 50)
    fact = pa.table({"id": pa.array(np.arange(n), pa.int64()), "fp": column(p, pa.int64()),
                     "fs": column(s, pa.int32()), "fd": column(rng.integers(0, 30, n), pa.int32()),
                     "fq": column(rng.integers(-5, 50, n), pa.int64()),
                     "fw": column(rng.choice(["x", "yy", "", "zzz"], n).tolist(), pa.string())})
    m = 1200
    p2, s2 = keyed(m, 300, 50)
    link = pa.table({"lp": column(p2, pa.int32()), "ls": column(s2, pa.int64()),
                     "ld": column(rng.integers(0, 30, m), pa.int64()), "lc": column(rng.integers(0, 100, m), pa.int64())})
    small = pa.table({"sp": column(rng.integers(0, 300, 400), pa.int64()), "ss": column(rng.integers(0, 50, 400),
                      pa.int64()), "sn": column(rng.choice(["a", "b", "é", "c"], 400).tolist(), pa.string())})
    g = 30000
    wide = pa.table({"k": column(rng.integers(0, 9000, g), pa.int64(), 0.02),
                     "name": column([f"n{v % 3000}" for v in rng.integers(0, 9000, g)], pa.string(), 0.02),
                     "tag": column(rng.choice(["p", "q", "r"], g).tolist(), pa.string()),
                     "d": column(rng.integers(0, 100, g), pa.int32()),
                     "v": column(rng.integers(-100, 100, g), pa.int64())})
    return {"fact": fact, "link": link, "small": small, "wide": wide}


def _composite(r: random.Random) -> str:
    on_fl = ["fp = lp", "fs = ls"] + (["fd = ld"] if r.random() < 0.3 else [])
    on_ls = r.choice([["lp = sp", "ls = ss"], ["fp = sp", "fs = ss"], ["ls = ss", "lp = sp"]])
    joins = r.choice(["JOIN", "JOIN", "LEFT JOIN"])
    where = r.choice(["", " WHERE fq > 10", " WHERE sn <> 'b'", " WHERE lc < 50 OR fq IS NULL", " WHERE fw = 'x'"])
    tables = [f"fact {joins} link ON {' AND '.join(on_fl)}", f"JOIN small ON {' AND '.join(on_ls)}"]
    if r.random() < 0.5:
        source = f"small JOIN fact ON {' AND '.join(on_ls).replace('lp', 'fp').replace('ls', 'fs')} " \
                 f"{joins} link ON {' AND '.join(on_fl)}"
    else:
        source = " ".join(tables)
    shape = r.randrange(4)
    if shape == 0:
        return f"SELECT count(*), sum(fq), sum(lc), count(sn) FROM {source}{where}"
    if shape == 1:
        return f"SELECT sn, fd, sum(fq) AS q, count(*) AS n FROM {source}{where} GROUP BY sn, fd"
    if shape == 2:
        return f"SELECT fw, max(lc), min(fq), count(DISTINCT fp) FROM {source}{where} GROUP BY fw"
    return f"SELECT id, fq, lc, sn FROM {source}{where}"


def _exchange(r: random.Random) -> str:
    inner = r.choice(["SELECT k AS kk, name, tag, v, d FROM wide",
                      "SELECT k AS kk, name AS nm, tag, v, d FROM wide WHERE v <> 3",
                      "SELECT k, k AS kk, name, tag, v, d FROM wide"])
    names = "nm" if "AS nm" in inner else "name"
    keys = r.choice([["kk", names], ["kk", names, "tag"], [names, "kk"], ["kk", "tag", "d"], ["d", names, "kk"]])
    aggs = ", ".join(r.sample(["sum(v)", "count(*)", "count(DISTINCT v)", "max(v)", "min(d)", "avg(v)"],
                              r.randrange(1, 3)))
    having = r.choice(["", " HAVING count(*) > 1", " HAVING sum(v) > 0"])
    query = f"SELECT {', '.join(keys)}, {aggs} FROM ({inner}) t GROUP BY {', '.join(keys)}{having}"
    if r.random() < 0.3:  # the derived table's groups grouped again by a subset
        query = f"SELECT {keys[0]}, count(*) AS c FROM ({query}) u GROUP BY {keys[0]}"
    return query


AREAS = {"composite": _composite, "exchange": _exchange}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("device", nargs="?", default="cpu")
    parser.add_argument("--area", choices=sorted(AREAS), required=True)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    statistics_module.KEY_MATCH_WHOLE_ROWS, statistics_module.KEY_MATCH_SAMPLE_ROWS = 1000, 500
    tables = _tables(args.seed)
    con = duckdb.connect()
    shapes = ((1, 8192, True), (2, 1000, True), (3, 4096, True), (2, 7, False), (3, 333, True))
    if args.device != "cpu":  # the simulator runs each thread in Python: no 7-row batches
        shapes = ((1, 8192, True), (2, 1000, True), (3, 4096, False))
    sessions = [Session(device=args.device, drivers=d, batch_rows=b, optimize=o) for d, b, o in shapes]
    for name, table in tables.items():
        con.register(name, table)
        for session in sessions:
            session.register(name, table, split_rows=max(1, table.num_rows // 3))
    r = random.Random(args.seed)
    bad = refused = 0
    for q in range(args.queries):
        sql = AREAS[args.area](r)
        problem = duckdb_probe_problem(con, sessions[q % len(sessions)], sql)
        if problem and problem.startswith("EXC SqlError"):
            refused += 1
            print("REFUSED", sql, "\n   ", problem[:200], flush=True)
        elif problem:
            bad += 1
            print("BAD", q % len(sessions), sql, "\n   ", problem[:400], flush=True)
    print(f"{args.device} {args.area} seed {args.seed}: {args.queries} probes, {bad} bad, {refused} refused")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
