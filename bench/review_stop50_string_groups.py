"""Review probe (stop 50): grouping over string keys through PARTIAL/FINAL steps (8c9b3dd: a FINAL driver interns a
mapped dictionary-coded key by its rows, id-slotted; d70daa6: a cpu StringKeyTable batch growing out of the caches
hashes the rest first) and the radix-partitioned aggregation (``radix_aggregation_min_groups=1`` on half the
sessions), against DuckDB. Keys: plain and dictionary-coded strings with NULLs and empty strings, many distinct
values (so a batch grows the table), a string beside an integer key; drivers 1-3, batch rows 1..4096.

    .venv/bin/python -m bench.review_stop50_string_groups [cpu|cuda-sim] [--queries N] [--seed S]
"""
from __future__ import annotations

import argparse
import random
import sys

import duckdb
import pyarrow as pa

from bench.duckdb_probes import duckdb_probe_problem
from gpu_engine import Session


def _tables(seed: int) -> dict[str, pa.Table]:
    r = random.Random(seed)
    n = 3000
    words = [None, ""] + [f"k{i:05d}" + "x" * (i % 17) for i in range(2000)]
    s = [r.choice(words) for _ in range(n)]
    few = [r.choice([None, "a", "bb", "", "ccc"]) for _ in range(n)]
    i = [r.choice([None, 1, 2, 3]) for _ in range(n)]
    v = [r.choice([None] + list(range(-50, 50))) for _ in range(n)]
    plain = pa.table({"s": pa.array(s, pa.string()), "f": pa.array(few, pa.string()), "i": pa.array(i, pa.int64()),
                      "v": pa.array(v, pa.int64())})
    coded = plain.set_column(0, "s", pa.array(s, pa.string()).dictionary_encode()).set_column(
        1, "f", pa.array(few, pa.string()).dictionary_encode())
    return {"p": plain, "d": coded}


def _query(r: random.Random) -> str:
    table = r.choice(["p", "d"])
    keys = r.choice(["s", "f", "s, i", "f, i", "i, s", "s, f", "upper(f)", "s || f"])
    aggs = r.sample(["count(*)", "sum(v)", "min(v)", "max(s)", "count(DISTINCT f)", "count(v)", "avg(v)",
                     "min(f)", "string_agg(f, ',' ORDER BY f)"], r.randrange(1, 4))
    where = r.choice(["", " WHERE v > 0", " WHERE s IS NOT NULL", " WHERE f <> ''", " WHERE v > 1000"])
    inner = f"SELECT {keys}, {', '.join(aggs)} FROM {table}{where} GROUP BY {keys}"
    return r.choice([inner, f"SELECT count(*), count(DISTINCT x.c) FROM (SELECT {keys}, count(*) AS c FROM {table}"
                            f"{where} GROUP BY {keys}) x",
                     inner + r.choice([" HAVING count(*) > 1", " HAVING min(v) < 0"]),
                     f"SELECT DISTINCT {keys} FROM {table}{where}"])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("device", nargs="?", default="cpu")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    tables = _tables(args.seed)
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(name, table)
    sessions = []
    for d, b, radix in ((1, 4096, False), (2, 7, True), (3, 100, False), (2, 1024, True), (2, 333, False)):
        session = Session(device=args.device, drivers=d, batch_rows=b)
        if radix:
            session.config = session.config.with_overrides(radix_aggregation_min_groups=1)
        for name, table in tables.items():
            session.register(name, table, split_rows=1000)
        sessions.append(session)
    r = random.Random(args.seed)
    bad = refused = 0
    for q in range(args.queries):
        sql = _query(r)
        problem = duckdb_probe_problem(con, sessions[q % len(sessions)], sql)
        if problem and problem.startswith("EXC SqlError"):
            refused += 1
            print("REFUSED", sql, "\n   ", problem[:200], flush=True)
        elif problem:
            bad += 1
            print("BAD", q % len(sessions), sql, "\n   ", problem[:300], flush=True)
    print(f"{args.device} seed {args.seed}: {args.queries} probes, {bad} bad, {refused} refused")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
