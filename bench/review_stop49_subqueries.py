"""Review probe (stop 49): this stop's typed subquery forms and set-operation rules against DuckDB, drawn at random
over ``tests/optimizer/subquery_tables.py`` (NULL keys both sides, an empty table, int32 against int64 keys).

Forms: EXISTS / IN / NOT IN (correlated and not) as SELECT values, inside CASE / COALESCE / arithmetic, in HAVING and
QUALIFY, inside aggregate arguments (0c49a90, f760242, 23af223); correlated scalar subqueries with LIMIT n [OFFSET m]
and ORDER BY, without aggregate (320d251, e063fa8, 4204115); UNION [ALL] / INTERSECT / EXCEPT with DISTINCT
branches, groupings and projections over them (62ea4c1, f6252f3); TRY over failing casts (789a49d). Drivers 1-3,
batch rows 1..4096, optimizer on and off; ``--threads 4`` runs the draws from 4 threads on one Session.

    .venv/bin/python -m bench.review_stop49_subqueries [cpu|cuda-sim] [--queries N] [--seed S] [--threads T]
"""
from __future__ import annotations

import argparse
import random
import sys
import threading
from pathlib import Path

import duckdb

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "optimizer"))
from bench.duckdb_probes import duckdb_probe_problem  # noqa: E402
from gpu_engine import Session  # noqa: E402
from subquery_tables import TABLES  # noqa: E402

SUBS = ["u", "e", "s"]


def _mark(r: random.Random) -> str:
    s = r.choice(SUBS)
    c = r.choice([0, 2, 5, 40])
    return r.choice([
        f"EXISTS (SELECT * FROM {s} WHERE {s}.k = t.k)",
        f"EXISTS (SELECT * FROM {s} WHERE {s}.k = t.k AND {s}.w > {c})",
        f"EXISTS (SELECT * FROM {s} WHERE w > {c})",
        f"k IN (SELECT k FROM {s})",
        f"k NOT IN (SELECT k FROM {s})",
        f"k NOT IN (SELECT k FROM {s} WHERE k IS NOT NULL)",
        f"v IN (SELECT w FROM {s} WHERE {s}.k = t.k)",
        f"v NOT IN (SELECT w FROM {s} WHERE {s}.k = t.k)",
        f"k + 1 IN (SELECT k FROM {s} WHERE w > {c})",
        f"NOT EXISTS (SELECT * FROM {s} WHERE {s}.k = t.k)",
    ])


def _scalar(r: random.Random) -> str:
    s = r.choice(SUBS)
    order = r.choice(["w", "w DESC", "w NULLS FIRST", "w DESC NULLS LAST, k"])
    return r.choice([
        f"(SELECT max(w) FROM {s} WHERE {s}.k = t.k)",
        f"(SELECT count(*) FROM {s} WHERE {s}.k = t.k)",
        f"(SELECT w FROM {s} WHERE {s}.k = t.k ORDER BY {order} LIMIT 1)",
        f"(SELECT w FROM {s} WHERE {s}.k = t.k ORDER BY {order} LIMIT 1 OFFSET {r.choice([1, 2])})",
        f"(SELECT w FROM {s} WHERE {s}.k = t.k AND {s}.w > {r.choice([0, 5, 20])} ORDER BY {order} LIMIT 1)",
        f"(SELECT w FROM {s} WHERE {s}.k = t.k)",  # several rows a key: both must raise
        f"(SELECT min(w) FROM {s})",
    ])


def _value(r: random.Random) -> str:
    m = _mark(r)
    return r.choice([m, f"CASE WHEN {m} THEN 1 ELSE 0 END", f"coalesce({m}, false)", f"({m}) IS NULL",
                     f"NOT ({m})", f"({m}) OR v > 30", f"({m}) AND k > 1", _scalar(r),
                     f"coalesce({_scalar(r)}, -1) + v"])


def _bool_value(r: random.Random) -> str:
    m = _mark(r)
    return r.choice([m, f"coalesce({m}, false)", f"({m}) IS NULL", f"NOT ({m})", f"({m}) OR v > 30",
                     f"({m}) AND k > 1", f"{_scalar(r)} > v", f"{_scalar(r)} IS NULL"])


def _query(r: random.Random) -> str:
    form = r.randrange(9)
    if form == 0:
        return f"SELECT k, v, {_value(r)} AS x FROM t"
    if form == 1:
        return f"SELECT k, v FROM t WHERE ({_bool_value(r)}) IS NOT DISTINCT FROM true OR ({_mark(r)})"
    if form == 2:
        agg = r.choice(["count(*)", "sum(v)", "max(v)", "count(v)"])
        pred = r.choice([_mark(r), f"{agg} > {_scalar(r)}", f"NOT ({_mark(r)}) OR {agg} > 25"])
        return f"SELECT k, {agg} AS a FROM t GROUP BY k HAVING {pred}"
    if form == 3:
        inner = r.choice([_scalar(r), f"CASE WHEN {_mark(r)} THEN v END", f"CASE WHEN {_mark(r)} THEN 1 ELSE 0 END"])
        agg = r.choice(["sum", "count", "max", "min"])
        return r.choice([f"SELECT k, {agg}({inner}) AS a FROM t GROUP BY k", f"SELECT {agg}({inner}) AS a FROM t"])
    if form == 4:
        return (f"SELECT k, v FROM t QUALIFY row_number() OVER (PARTITION BY k ORDER BY v) <= 1 "
                f"AND coalesce({_bool_value(r)}, true)")
    if form == 5:
        return f"SELECT k, {_scalar(r)} AS x FROM t ORDER BY x NULLS FIRST, k NULLS FIRST, v NULLS FIRST"
    if form == 6:
        op = r.choice(["UNION", "UNION ALL", "INTERSECT", "EXCEPT", "INTERSECT ALL", "EXCEPT ALL"])
        left = r.choice(["SELECT DISTINCT k FROM t", "SELECT k FROM t", "SELECT k FROM t WHERE v > 15",
                         "SELECT k FROM e"])
        right = r.choice(["SELECT DISTINCT k FROM u", "SELECT k FROM u", "SELECT k FROM s", "SELECT k FROM e",
                          "SELECT k FROM u UNION ALL SELECT k FROM s"])
        outer = r.choice(["SELECT k, count(*) FROM ({q}) x GROUP BY k",
                          "SELECT count(DISTINCT k), count(*) FROM ({q}) x",
                          "SELECT * FROM ({q}) x", "SELECT k FROM ({q}) x WHERE k > 1",
                          "SELECT sum(k) FROM (SELECT DISTINCT k FROM ({q}) y) x"])
        return outer.format(q=f"{left} {op} ({right})")
    if form == 7:
        op = r.choice(["UNION", "UNION ALL", "EXCEPT", "INTERSECT"])
        return (f"SELECT a FROM (SELECT k AS a, v AS b, v + 1 AS c FROM t {op} SELECT k, w, w * 2 FROM u) x "
                f"WHERE b IS NOT NULL OR a > {r.choice([0, 2])}")
    cast = r.choice(["CAST(v * 10000000 AS TINYINT)", "CAST(CAST(v AS VARCHAR) || 'x' AS INTEGER)",
                     "CAST(v AS TINYINT) * CAST(100 AS TINYINT)", "v // (k - 1)", "CAST(k - 3 AS UTINYINT)"])
    return r.choice([f"SELECT k, TRY({cast}) AS x FROM t", f"SELECT sum(TRY({cast})) FROM t",
                     f"SELECT k FROM t WHERE TRY({cast}) IS NULL"])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("device", nargs="?", default="cpu")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    sessions = [Session(device=args.device, drivers=d, batch_rows=b, optimize=o)
                for d, b, o in ((1, 1, True), (2, 3, True), (3, 2, True), (2, 4096, True), (2, 2, False))]
    for session in sessions:
        for name, table in TABLES.items():
            session.register(name, table, split_rows=3)
    lock = threading.Lock()
    counts = {"probes": 0, "bad": 0, "refused": 0, "planner_refusals": 0}
    before = threading.active_count()
    refusals: dict[str, int] = {}

    def worker(w: int) -> None:
        r = random.Random(args.seed * 1000 + w)
        con = duckdb.connect()
        for name, table in TABLES.items():
            con.register(name, table)
        for i in range(args.queries):
            sql = _query(r)
            session = sessions[i % len(sessions)] if args.threads == 1 else sessions[1]  # threads: one Session
            problem = duckdb_probe_problem(con, session, sql)
            with lock:
                counts["probes"] += 1
                if problem and problem.startswith("duckdb raised"):
                    counts["refused"] += 1
                    print("DUCKONLY", sql, "\n   ", problem[:200], flush=True)
                elif problem and problem.startswith("EXC SqlError"):  # a plan-time refusal naming the construct
                    counts["planner_refusals"] += 1
                    refusals[problem[:90]] = refusals.get(problem[:90], 0) + 1
                elif problem:
                    counts["bad"] += 1
                    print("BAD", sql, "\n   ", problem[:300], flush=True)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"{args.device} seed {args.seed} threads {args.threads}: {counts['probes']} probes, {counts['bad']} bad, "
          f"{counts['refused']} DuckDB-only errors, {counts['planner_refusals']} planner refusals; "
          f"threads before/after {before}/{threading.active_count()}")
    for text, count in sorted(refusals.items(), key=lambda item: -item[1]):
        print(f"  refused x{count}: {text}")
    return 1 if counts["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
