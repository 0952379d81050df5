"""Review probe (stop 50): this stop's typed quantified comparisons (``x op ANY|ALL (S)``: 9b32902, 81045b1), row
``(a, b) IN (S)`` under OR (8839b2f), grouped correlated EXISTS (b931354) and set-operation binding (0e1e0cd,
e7c3c22: types unified across branches, UNION BY NAME, ORDER BY / LIMIT over a union) against DuckDB, drawn at random
over ``tests/optimizer/subquery_tables.py`` (NULL keys both sides, an empty table, int32 against int64 keys) and a
table of mixed column types. Drivers 1-3, batch rows 1..4096, optimizer on and off. Reuses the stop-49 harness.

    .venv/bin/python -m bench.review_stop50_quantified [cpu|cuda-sim] [--queries N] [--seed S]
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import duckdb
import pyarrow as pa

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "optimizer"))
from bench.duckdb_probes import duckdb_probe_problem  # noqa: E402
from gpu_engine import Session  # noqa: E402
from subquery_tables import TABLES as SUBQUERY_TABLES  # noqa: E402

TABLES = dict(SUBQUERY_TABLES)
TABLES["m"] = pa.table({  # mixed types for set-operation unification
    "i8": pa.array([1, -2, None, 7], pa.int8()), "f": pa.array([1.5, None, -0.0, 2.0], pa.float64()),
    "d": pa.array([1, 2, 3, None], pa.decimal128(9, 2)), "s": pa.array(["a", None, "bb", "a"], pa.string()),
    "b": pa.array([True, False, None, True], pa.bool_()), "u32": pa.array([4, 0, None, 1], pa.uint32())})
SUBS = ["u", "e", "s"]
OPS = ["=", "<>", "<", "<=", ">", ">="]


def _subquery(r: random.Random, correlated: bool) -> str:
    s = r.choice(SUBS)
    col = r.choice(["w", "k", "w + 1", "CASE WHEN w > 3 THEN w END"])
    cond = r.choice(["", f" WHERE w > {r.choice([0, 3, 10, 100])}", f" WHERE k IS NOT NULL"])
    if correlated:
        corr = r.choice([f"{s}.k = t.k", f"{s}.k = t.k AND {s}.w > 2", f"{s}.w < t.v", f"{s}.k <> t.k"])
        cond = f" WHERE {corr}"
    return f"SELECT {col} FROM {s}{cond}"


def _quantified(r: random.Random, operand: str = "v") -> str:
    return (f"{operand} {r.choice(OPS)} {r.choice(['ANY', 'ALL', 'SOME'])} "
            f"({_subquery(r, r.random() < 0.4)})")


def _row_in(r: random.Random) -> str:
    s = r.choice(SUBS)
    return r.choice([f"(k, v) IN (SELECT k, w FROM {s})", f"(k, v // 10) IN (SELECT k, w FROM {s})",
                     f"(k, 1) IN (SELECT k, 1 FROM {s} WHERE w > 2)", f"(k, v) NOT IN (SELECT k, w FROM {s})"])


def _set_branch(r: random.Random) -> str:
    col = r.choice(["i8", "f", "d", "u32", "NULL", "1", "2.5", "CAST(i8 AS BIGINT)", "b", "i8 + 1000"])
    col2 = r.choice(["s", "NULL", "'x'", "s || 'z'"])
    return f"SELECT {col} AS a, {col2} AS c FROM m" + r.choice(["", " WHERE i8 > 0", " WHERE b"])


def _query(r: random.Random) -> str:
    form = r.randrange(8)
    if form == 0:
        return f"SELECT k, v FROM t WHERE {_quantified(r)}"
    if form == 1:
        return f"SELECT k, v, {_quantified(r)} AS x FROM t"
    if form == 2:
        pred = r.choice([_quantified(r), f"NOT ({_quantified(r)})", f"{_quantified(r)} OR k > 2",
                         f"({_quantified(r)}) IS NULL"])
        return f"SELECT k, v FROM t WHERE {pred}"
    if form == 3:
        agg = r.choice(["sum(v)", "max(v)", "count(*)", "min(v)"])
        s = r.choice(SUBS)
        sub = r.choice([f"SELECT w FROM {s}", f"SELECT w FROM {s} WHERE {s}.k = t.k", f"SELECT k FROM {s}"])
        q = f"{agg} {r.choice(OPS)} {r.choice(['ANY', 'ALL'])} ({sub})"
        return r.choice([f"SELECT k, {agg} AS a FROM t GROUP BY k HAVING {q}",
                         f"SELECT k, {q} AS x FROM t GROUP BY k",
                         f"SELECT k, {agg} AS a FROM t GROUP BY k HAVING {q} OR k IN (SELECT k FROM {s})"])
    if form == 4:
        return f"SELECT k, v FROM t WHERE {_row_in(r)} OR v > {r.choice([0, 30, 100])}"
    if form == 5:
        s = r.choice(SUBS)
        e = r.choice(["", "NOT "])
        return (f"SELECT k, v FROM t WHERE {e}EXISTS (SELECT k FROM {s} WHERE {s}.k = t.k GROUP BY k "
                f"HAVING count(*) > {r.choice([0, 1])})")
    if form == 6:
        op = r.choice(["UNION", "UNION ALL", "INTERSECT", "EXCEPT", "UNION BY NAME", "UNION ALL BY NAME"])
        q = f"{_set_branch(r)} {op} {_set_branch(r)}"
        if r.random() < 0.5:
            q += f" {r.choice(['UNION ALL', 'UNION'])} {_set_branch(r)}"
        tail = r.choice(["", " ORDER BY 1 NULLS FIRST, 2 NULLS FIRST LIMIT 3",
                         " ORDER BY a DESC NULLS LAST, c NULLS LAST LIMIT 2 OFFSET 1", " ORDER BY c, a"])
        if tail and r.random() < 0.5:
            return f"SELECT * FROM ({q}{tail}) x"
        return q + tail
    agg = r.choice(["sum(a)", "count(*)", "max(c)", "count(DISTINCT a)"])
    return f"SELECT {agg} FROM ({_set_branch(r)} {r.choice(['UNION', 'UNION ALL', 'EXCEPT'])} {_set_branch(r)}) x"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("device", nargs="?", default="cpu")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sessions = [Session(device=args.device, drivers=d, batch_rows=b, optimize=o)
                for d, b, o in ((1, 1, True), (2, 3, True), (3, 2, True), (2, 4096, True), (2, 2, False))]
    con = duckdb.connect()
    for name, table in TABLES.items():
        con.register(name, table)
        for session in sessions:
            session.register(name, table, split_rows=3)
    r = random.Random(args.seed)
    counts = {"probes": 0, "bad": 0, "duckdb_only": 0, "refusals": 0}
    refusals: dict[str, int] = {}
    for i in range(args.queries):
        sql = _query(r)
        problem = duckdb_probe_problem(con, sessions[i % len(sessions)], sql)
        counts["probes"] += 1
        if problem and problem.startswith("duckdb raised"):
            counts["duckdb_only"] += 1
            print("DUCKONLY", sql, "\n   ", problem[:200], flush=True)
        elif problem and problem.startswith("EXC SqlError"):
            counts["refusals"] += 1
            refusals[problem[:100]] = refusals.get(problem[:100], 0) + 1
        elif problem:
            counts["bad"] += 1
            print("BAD", i % len(sessions), sql, "\n   ", problem[:300], flush=True)
    print(f"{args.device} seed {args.seed}: {counts['probes']} probes, {counts['bad']} bad, "
          f"{counts['duckdb_only']} DuckDB-only errors, {counts['refusals']} planner refusals")
    for text, count in sorted(refusals.items(), key=lambda item: -item[1]):
        print(f"  refused x{count}: {text}")
    return 1 if counts["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
