"""Review probe (stop 48): correlated scalar subqueries through the typed decorrelation rule (ce4368a) against
DuckDB: values over no rows (COUNT's 0, NULL) under comparisons, arithmetic, COALESCE / IS NULL / CASE / OR / NOT,
NULL and duplicate outer keys, keys of two widths, string/decimal keys, several rows a key (the error both raise),
optimize on/off, drivers 1..3 x batch rows 1..7/4096.

    .venv/bin/python -m bench.review_stop48_corrscalar [cpu|cuda-sim] [--quick] [--roundtrip]

``--roundtrip``: each SQL plan run after a JSON (plans.serialization) and a pickle round trip instead (2 drivers,
3-row batches; queries DuckDB refuses skipped).
"""
import pickle
import itertools
import sys
from decimal import Decimal

import duckdb
import pyarrow as pa

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import rows_mismatch  # noqa: E402
from gpu_engine import Session  # noqa: E402


def tables():
    t = pa.table({"a": pa.array([1, 2, None, 3, 4, None, 5, 2, 7, 8], pa.int64()),
                  "b": pa.array([i % 4 for i in range(10)], pa.int32()),
                  "s": pa.array(["x", None, "y", "z", "", "x", None, "w", "y", "q"]),
                  "d": pa.array([Decimal(f"{i}.25") if i % 3 else None for i in range(10)], pa.decimal128(12, 2))})
    u = pa.table({"c": pa.array([2, 3, None, 9, 2, 1], pa.int64()), "e": pa.array([0, 1, 2, 3, 1, 0], pa.int32()),
                  "r": pa.array(["y", None, "x", "k", "y", "x"]),
                  "f": pa.array([Decimal("1.25"), None, Decimal("4.25"), Decimal("9.00"), Decimal("2.25"), None],
                                pa.decimal128(12, 2))})
    return {"t": t, "u": u, "z": u.slice(0, 0)}


Q = [
    "SELECT * FROM t WHERE b < (SELECT count(*) FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.c = t.a) < 1",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.c = t.a) + 1 > b",
    "SELECT * FROM t WHERE (SELECT count(c) FROM {s} WHERE {s}.e = t.b) = 0",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b) <> 2",
    "SELECT * FROM t WHERE (SELECT max(c) FROM {s} WHERE {s}.e = t.b) IS NULL",
    "SELECT * FROM t WHERE coalesce((SELECT max(c) FROM {s} WHERE {s}.e = t.b), 0) = 0",
    "SELECT * FROM t WHERE coalesce((SELECT sum(c) FROM {s} WHERE {s}.c = t.a), -1) < 3",
    "SELECT * FROM t WHERE NOT ((SELECT max(c) FROM {s} WHERE {s}.e = t.b) > 2)",
    "SELECT * FROM t WHERE a > (SELECT min(c) FROM {s} WHERE {s}.e = t.b) OR b = 0",
    "SELECT * FROM t WHERE a > (SELECT min(c) FROM {s} WHERE {s}.e = t.b) OR a IS NULL",
    "SELECT * FROM t WHERE CASE WHEN (SELECT max(c) FROM {s} WHERE {s}.e = t.b) IS NULL THEN true ELSE a > 2 END",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.c = t.a) IS NOT DISTINCT FROM 0",
    "SELECT * FROM t WHERE (SELECT max(c) FROM {s} WHERE {s}.e = t.b) IS DISTINCT FROM 3",
    "SELECT * FROM t WHERE d > (SELECT avg(f) FROM {s} WHERE {s}.e = t.b)",
    "SELECT * FROM t WHERE d < (SELECT sum(f) FROM {s} WHERE {s}.r = t.s)",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.r = t.s) = 0",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.c = t.a AND {s}.e = t.b) = 0",
    "SELECT * FROM t WHERE a = (SELECT max(c) FROM {s} WHERE {s}.e = t.b AND {s}.c < t.a + 5)",
    "SELECT * FROM t WHERE a = (SELECT c FROM {s} WHERE {s}.e = t.b AND {s}.c = t.a)",
    "SELECT * FROM t WHERE b = (SELECT e FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE a >= (SELECT count(*) FROM {s} WHERE {s}.e = t.b GROUP BY {s}.e)",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b GROUP BY {s}.e) IS NULL",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b GROUP BY {s}.r) = 1",
    "SELECT * FROM t WHERE (SELECT count(*) * 2 FROM {s} WHERE {s}.e = t.b) = 0",
    "SELECT * FROM t WHERE (SELECT count(*) + 1 FROM {s} WHERE {s}.e = t.b) = 1",
    "SELECT * FROM t WHERE (SELECT coalesce(max(c), 7) FROM {s} WHERE {s}.e = t.b) = 7",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b HAVING count(*) > 1) IS NULL",
    "SELECT * FROM t WHERE (SELECT max(c) FROM {s} WHERE {s}.e = t.b) = (SELECT min(c) FROM {s} WHERE {s}.e = t.b)",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b) = (SELECT count(*) FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE b IN (1, 2) AND (SELECT count(*) FROM {s} WHERE {s}.e = t.b) > 0",
    "SELECT b, count(*) FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b) = 0 GROUP BY b",
    "SELECT * FROM t x WHERE (SELECT count(*) FROM t y WHERE y.b = x.b AND y.a > x.a) < 2",
    "SELECT * FROM t WHERE (SELECT count(DISTINCT c) FROM {s} WHERE {s}.e = t.b) = 0",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b AND {s}.c IS NULL) = 0",
    "SELECT * FROM t WHERE (SELECT bool_or(c > 2) FROM {s} WHERE {s}.e = t.b) IS NULL",
    "SELECT * FROM t WHERE (SELECT string_agg(r, ',') FROM {s} WHERE {s}.e = t.b) IS NULL",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b) BETWEEN 0 AND 1",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b) IN (0, 2)",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b) NOT IN (1, 2)",
    "SELECT * FROM t WHERE a - (SELECT count(*) FROM {s} WHERE CAST({s}.e AS BIGINT) = t.a) > 1",
    "SELECT b, sum(a) FROM t GROUP BY b HAVING sum(a) > (SELECT count(*) FROM {s} WHERE {s}.e = t.b)",
    "SELECT b, sum(a) FROM t GROUP BY b HAVING (SELECT count(*) FROM {s} WHERE {s}.e = t.b) = 0",
    # several rows a key: DuckDB's error whatever the rest of WHERE says of the row
    "SELECT * FROM t WHERE a > 3 AND b = (SELECT e FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE b = 1 AND b = (SELECT e FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE b = 7 OR b = (SELECT e FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE b + 100 = (SELECT e FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE b = (SELECT e FROM {s} WHERE {s}.c = t.a AND {s}.e = t.b)",
    # values over no rows through division, casts, booleans; in SELECT and over GROUP BY keys; keys of other types
    "SELECT * FROM t WHERE (SELECT 10 // count(*) FROM {s} WHERE {s}.e = t.b) > 1",
    "SELECT * FROM t WHERE 5 > (SELECT count(*) - 9223372036854775807 - 2 FROM {s} WHERE {s}.e = t.b)",
    "SELECT * FROM t WHERE (SELECT 10 % count(*) FROM {s} WHERE {s}.e = t.b) = 0",
    "SELECT * FROM t WHERE (SELECT CAST(count(*) AS VARCHAR) FROM {s} WHERE {s}.e = t.b) = '0'",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b)::DOUBLE / 0 IS NULL",
    "SELECT * FROM t WHERE (SELECT count(*) > 0 FROM {s} WHERE {s}.e = t.b)",
    "SELECT * FROM t WHERE NOT (SELECT count(*) > 0 FROM {s} WHERE {s}.e = t.b)",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.b) = (SELECT count(*) FROM z WHERE z.e = t.b)",
    "SELECT * FROM t WHERE (SELECT sum(c) FROM {s} WHERE {s}.e = t.b) + (SELECT count(*) FROM {s} WHERE {s}.c = t.a) IS NULL",
    "SELECT *, (SELECT count(*) FROM {s} WHERE {s}.e = t.b) FROM t",
    "SELECT a, (SELECT count(*) FROM {s} WHERE {s}.e = t.b) + 1 AS x FROM t WHERE b > 0",
    "SELECT b, (SELECT count(*) FROM {s} WHERE {s}.e = t.b) AS x FROM t GROUP BY b",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.c = t.a AND {s}.c = t.a) = 0",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE t.a = {s}.c) = 0",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.c = t.b) = 0",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.f = t.d) = 0",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.e = t.a) = 0",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.c = t.d) = 0",
]


def roundtrip(dev):
    from gpu_engine.plans.serialization import plan_from_json, plan_to_json

    data = tables()
    con = duckdb.connect()
    ses = Session(device=dev, drivers=2, batch_rows=3)
    for name, tb in data.items():
        con.register(name, tb)
        ses.register(name, tb, split_rows=3)
    probes = bad = 0
    for q in Q:
        for s in ("u", "z"):
            sql = q.format(s=s)
            try:
                e = con.sql(sql).to_arrow_table()
            except Exception:  # noqa: BLE001 - DuckDB's errors are main()'s
                continue
            plan = ses.sql_plan(sql)
            for how, copy in (("json", lambda p: plan_from_json(plan_to_json(p))),
                              ("pickle", lambda p: pickle.loads(pickle.dumps(p)))):
                probes += 1
                try:
                    pr = rows_mismatch(ses.execute(copy(plan)).rename_columns(e.column_names), e)
                except Exception as ex:  # noqa: BLE001
                    pr = f"EXC {type(ex).__name__}: {str(ex)[:200]}"
                if pr:
                    bad += 1
                    print("BAD", how, sql, str(pr)[:300], flush=True)
    print("roundtrip probes", probes, "bad", bad)


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "cpu"
    if "--roundtrip" in sys.argv:
        return roundtrip(dev)
    quick = "--quick" in sys.argv or dev != "cpu"
    data = tables()
    con = duckdb.connect()
    for name, tb in data.items():
        con.register(name, tb)
    probes = bad = 0
    grid = [(2, 3, True)] if quick else itertools.product([1, 3], [1, 7, 4096], [True, False])
    for drivers, batch, optimize in grid:
        ses = Session(device=dev, drivers=drivers, batch_rows=batch, optimize=optimize)
        for name, tb in data.items():
            ses.register(name, tb, split_rows=3)
        for q in Q:
            for s in ("u", "z"):
                sql = q.format(s=s)
                probes += 1
                try:
                    e = con.sql(sql).to_arrow_table()
                except Exception as ex:
                    e = ex
                try:
                    g = ses.sql(sql)
                    pr = (f"duckdb raised {e}" if isinstance(e, Exception)
                          else rows_mismatch(g.rename_columns(e.column_names), e))
                except Exception as ex:
                    pr = None if isinstance(e, Exception) else f"EXC {type(ex).__name__}: {str(ex)[:200]}"
                if pr:
                    bad += 1
                    print("BAD", drivers, batch, optimize, sql, str(pr)[:300], flush=True)
    print("probes", probes, "bad", bad)


if __name__ == "__main__":
    main()
