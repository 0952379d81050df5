"""Review probe (stop 50): LIKE / ILIKE (56265f8 / 92537a2: the linear-time column-pattern matcher, ILIKE folded as
DuckDB's lower, like_escape and kin by name) against DuckDB. Part 1 matches the matcher
(:func:`gpu_engine.expressions.like_patterns.like_pattern`) against DuckDB's ``s LIKE p ESCAPE e`` on random strings
and patterns over a small alphabet with ``%``, ``_``, escapes and a non-ASCII letter (DuckDB's error where the
pattern ends with its escape counted as one answer). Part 2 runs SQL through a Session: column and constant
patterns, [NOT] [I]LIKE with ESCAPE, like_escape by name, strings with case-folding edge letters.

    .venv/bin/python -m bench.review_stop50_like [cpu|cuda-sim] [--cases N] [--queries N] [--seed S]
"""
from __future__ import annotations

import argparse
import random
import sys

import duckdb
import pyarrow as pa

from bench.duckdb_probes import duckdb_probe_problem
from gpu_engine import Session
from gpu_engine.expressions.like_patterns import like_pattern

LETTERS = ["a", "b", "a", "A", "é", "%", "_", "\\", "#", "İ", "Σ", "σ", "ß"]


def _matcher_cases(r: random.Random, cases: int) -> int:
    con = duckdb.connect()
    bad = 0
    for _ in range(cases):
        s = "".join(r.choice(LETTERS) for _ in range(r.randrange(0, 14)))
        p = "".join(r.choice(LETTERS + ["%", "_"]) for _ in range(r.randrange(0, 9)))
        e = r.choice(["", "\\", "#", "a", "%", "_"])
        try:
            expected = con.execute("SELECT like_escape(?, ?, ?)", [s, p, e]).fetchone()[0]
        except duckdb.Error:
            expected = "ERR"
        compiled = like_pattern(p, e)
        matched = compiled.matches(s)
        got = "ERR" if compiled.dangling and matched else matched and not compiled.dangling
        if got != expected:
            bad += 1
            print("BAD matcher", repr(s), repr(p), repr(e), "duckdb", expected, "ours", got, flush=True)
    return bad


def _query(r: random.Random) -> str:
    op = r.choice(["LIKE", "NOT LIKE", "ILIKE", "NOT ILIKE"])
    pattern = r.choice(["p", "p", "'%" + r.choice(LETTERS[:5] + ["İ", "σ", "ΑΣ"]) + "%'", "'_%'", "upper(p)",
                        "'%a_'", "p || '%'"])
    escape = r.choice(["", " ESCAPE '\\'", " ESCAPE '#'", " ESCAPE ''"])
    form = r.randrange(3)
    if form == 0:
        return f"SELECT i, s {op} {pattern}{escape} AS m FROM w"
    if form == 1:
        return f"SELECT i FROM w WHERE s {op} {pattern}{escape}"
    name = r.choice(["like_escape", "not_like_escape", "ilike_escape", "not_ilike_escape"])
    return f"SELECT i, {name}(s, {pattern}, '{r.choice(['#', '!'])}') AS m FROM w"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("device", nargs="?", default="cpu")
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    r = random.Random(args.seed)
    bad = _matcher_cases(r, args.cases) if args.cases else 0
    rows = 40
    strings = ["".join(r.choice(LETTERS) for _ in range(r.randrange(0, 8))) for _ in range(rows)]
    patterns = ["".join(r.choice(LETTERS[:5] + ["%", "_", "İ", "σ", "Σ"]) for _ in range(r.randrange(0, 5)))
                for _ in range(rows)]
    w = pa.table({"i": pa.array(range(rows), pa.int64()),
                  "s": pa.array([None if k % 9 == 0 else v for k, v in enumerate(strings)], pa.string()),
                  "p": pa.array([None if k % 11 == 0 else v for k, v in enumerate(patterns)], pa.string())})
    con = duckdb.connect()
    con.register("w", w)
    sessions = [Session(device=args.device, drivers=d, batch_rows=b) for d, b in ((1, 4096), (2, 3), (3, 7))]
    for session in sessions:
        session.register("w", w, split_rows=9)
    for q in range(args.queries):
        sql = _query(r)
        problem = duckdb_probe_problem(con, sessions[q % len(sessions)], sql)
        if problem:
            bad += 1
            print("BAD", q % len(sessions), sql, "\n   ", problem[:300], flush=True)
    print(f"{args.device} seed {args.seed}: {args.cases} matcher cases, {args.queries} queries, {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
