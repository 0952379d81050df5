"""Review probe (stop 50): join order changes (09d8394: semi joins under a DISTINCT made after the typed join order;
7205774 / 42c7e60: canonical relation order) against DuckDB: DISTINCT over joins of three or four relations with
IN / EXISTS conjuncts, duplicate and NULL keys, an empty table, int32 against int64 keys, the FROM list and the
conjuncts in random order. Drivers 1-3, batch rows 1..4096, optimizer on and off.

    .venv/bin/python -m bench.review_stop50_joins [cpu|cuda-sim] [--queries N] [--seed S]
"""
from __future__ import annotations

import argparse
import random
import sys

import duckdb

from bench.duckdb_probes import duckdb_probe_problem
from bench.review_stop50_quantified import TABLES
from gpu_engine import Session


def _query(r: random.Random) -> str:
    rels = r.sample([("t", "t1"), ("u", "u1"), ("s", "s1"), ("t", "t2"), ("u", "u2")], r.randrange(2, 5))
    conds = []
    for (_, a), (_, b) in zip(rels, rels[1:]):
        conds.append(f"{a}.k = {b}.k")
    if r.random() < 0.3 and len(rels) > 2:
        conds.append(f"{rels[0][1]}.k = {rels[-1][1]}.k")
    sub = r.choice(["u", "s", "e"])
    first = rels[0][1]
    conds += r.sample([f"{first}.k IN (SELECT k FROM {sub})", f"EXISTS (SELECT 1 FROM {sub} WHERE {sub}.k = {first}.k)",
                       f"{first}.k NOT IN (SELECT k FROM {sub} WHERE k IS NOT NULL)", f"{first}.k > 1",
                       f"NOT EXISTS (SELECT 1 FROM {sub} WHERE {sub}.k = {rels[-1][1]}.k)"], r.randrange(0, 3))
    r.shuffle(conds)
    order = rels[:]
    r.shuffle(order)
    cols = ", ".join(f"{a}.k" for _, a in r.sample(rels, r.randrange(1, len(rels) + 1)))
    frm = ", ".join(f"{t} AS {a}" for t, a in order)
    distinct = r.choice(["DISTINCT ", ""])
    return f"SELECT {distinct}{cols} FROM {frm} WHERE {' AND '.join(conds)}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("device", nargs="?", default="cpu")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    con = duckdb.connect()
    sessions = [Session(device=args.device, drivers=d, batch_rows=b, optimize=o)
                for d, b, o in ((1, 1, True), (2, 3, True), (3, 4096, True), (2, 2, False))]
    for name, table in TABLES.items():
        con.register(name, table)
        for session in sessions:
            session.register(name, table, split_rows=3)
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
