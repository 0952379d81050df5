"""Review probe (stop 47): [NOT] EXISTS / [NOT] IN / scalar subqueries through the typed decorrelation rule
(optimizer/decorrelation.py), against DuckDB: NULL outer keys, NULLs in the subquery, empty subqueries, string and
decimal keys, expression keys, several subquery conjuncts, optimize on/off, drivers 1..4 x batch rows 1..7/4096.

    .venv/bin/python -m bench.review_stop47_subqueries [cpu|cuda-sim] [--quick]
"""
import itertools
import sys
from decimal import Decimal

import duckdb
import pyarrow as pa

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import rows_mismatch  # noqa: E402
from gpu_engine import Session  # noqa: E402


def tables():
    a = [1, 2, None, 3, 4, None, 5, 2, 7, 8]
    t = pa.table({"a": pa.array(a, pa.int64()), "b": pa.array([i % 4 for i in range(10)], pa.int32()),
                  "s": pa.array(["x", None, "y", "z", "", "x", None, "w", "y", "q"]),
                  "d": pa.array([Decimal(f"{i}.25") if i % 3 else None for i in range(10)], pa.decimal128(12, 2))})
    u = pa.table({"c": pa.array([2, 3, None, 9, 2], pa.int64()), "e": pa.array([0, 1, 2, 3, 1], pa.int32()),
                  "r": pa.array(["y", None, "x", "k", "y"]),
                  "f": pa.array([Decimal("1.25"), None, Decimal("4.25"), Decimal("9.00"), Decimal("2.25")],
                                pa.decimal128(12, 2))})
    v = pa.table({"c": pa.array([2, 3, 9], pa.int64()), "e": pa.array([0, 1, 3], pa.int32()),
                  "r": pa.array(["y", "x", "k"]),
                  "f": pa.array([Decimal("1.25"), Decimal("4.25"), Decimal("9.00")], pa.decimal128(12, 2))})
    z = v.slice(0, 0)
    return {"t": t, "u": u, "v": v, "z": z}


Q = [
    "SELECT * FROM t WHERE a IN (SELECT c FROM {s})",
    "SELECT * FROM t WHERE a NOT IN (SELECT c FROM {s})",
    "SELECT * FROM t WHERE s IN (SELECT r FROM {s})",
    "SELECT * FROM t WHERE s NOT IN (SELECT r FROM {s})",
    "SELECT * FROM t WHERE d IN (SELECT f FROM {s})",
    "SELECT * FROM t WHERE d NOT IN (SELECT f FROM {s})",
    "SELECT * FROM t WHERE a + 1 NOT IN (SELECT c + 1 FROM {s})",
    "SELECT * FROM t WHERE b NOT IN (SELECT e FROM {s} WHERE e > 0)",
    "SELECT * FROM t WHERE a NOT IN (SELECT c FROM {s} WHERE c IS NOT NULL) AND b > 0",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM {s} WHERE {s}.r = t.s AND {s}.e < t.b)",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM {s} WHERE {s}.c = t.a AND {s}.e = t.b)",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM {s} WHERE {s}.c = t.a AND {s}.e = t.a)",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM {s} WHERE {s}.c = t.a + 1)",
    "SELECT * FROM t WHERE a IN (SELECT c FROM {s} WHERE {s}.e = t.b)",
    "SELECT * FROM t WHERE a IN (SELECT c FROM {s}) AND s NOT IN (SELECT r FROM {s})",
    "SELECT * FROM t WHERE a NOT IN (SELECT c FROM {s}) AND NOT EXISTS (SELECT 1 FROM {s} WHERE {s}.r = t.s)",
    "SELECT b, count(*), count(a) FROM t WHERE a NOT IN (SELECT c FROM {s}) GROUP BY b",
    "SELECT * FROM t WHERE b IN (SELECT e FROM {s}) OR a IS NULL",
    "SELECT * FROM t WHERE a > (SELECT min(c) FROM {s})",
    "SELECT * FROM t WHERE a > (SELECT min(c) FROM {s}) OR b = (SELECT max(e) FROM {s})",
    "SELECT * FROM t WHERE d >= (SELECT avg(f) FROM {s}) AND a NOT IN (SELECT c FROM {s})",
    "SELECT * FROM t WHERE a = (SELECT c FROM {s} WHERE e = 3)",
    "SELECT count(*) FROM t WHERE a NOT IN (SELECT c FROM {s}) AND a IN (SELECT c FROM u)",
    "SELECT * FROM t WHERE (a, b) IN (SELECT c, e FROM {s})",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM {s} WHERE {s}.c = t.a) AND EXISTS (SELECT 1 FROM u WHERE u.r = t.s)",
    "SELECT * FROM t WHERE a NOT IN (SELECT a FROM t WHERE b = 1)",
    "SELECT * FROM t WHERE CAST(b AS BIGINT) NOT IN (SELECT c FROM {s})",
    "SELECT * FROM t WHERE b NOT IN (SELECT c FROM {s})",
    # correlated aggregates (one row even over no row), nesting, NOT around IN, set operations, LIMITs
    "SELECT * FROM t WHERE EXISTS (SELECT count(*) FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT max(c) FROM {s} WHERE {s}.c = t.a)",
    "SELECT * FROM t WHERE a IN (SELECT max(c) FROM {s} WHERE {s}.e = t.b)",
    "SELECT * FROM t WHERE (SELECT count(*) FROM {s} WHERE {s}.c = t.a) = 0",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM {s} WHERE {s}.c = t.a GROUP BY {s}.e HAVING count(*) > 1)",
    "SELECT * FROM t WHERE a NOT IN (SELECT c FROM {s} UNION SELECT NULL)",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.c = t.a AND NOT EXISTS (SELECT 1 FROM {s} WHERE {s}.e = u.e))",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.c = t.a AND NOT EXISTS (SELECT 1 FROM {s} WHERE {s}.e = u.e AND {s}.c = t.a))",
    "SELECT * FROM t WHERE a IN (SELECT c FROM {s} WHERE c IS NULL)",
    "SELECT * FROM t WHERE b IN (SELECT e FROM {s} ORDER BY e LIMIT 2)",
    "SELECT * FROM t WHERE NOT (a IN (SELECT c FROM {s}))",
    "SELECT * FROM t WHERE a IN (SELECT DISTINCT c FROM {s})",
    "SELECT * FROM t WHERE s NOT IN (SELECT r FROM {s} WHERE r <> 'k') AND d IS NOT NULL",
    "SELECT x.a FROM t x JOIN t y ON x.a = y.a WHERE x.a NOT IN (SELECT c FROM {s})",
    "WITH q AS (SELECT c FROM {s} WHERE e > 0) SELECT * FROM t WHERE a NOT IN (SELECT c FROM q) AND a IN (SELECT c FROM q)",
    "SELECT * FROM (SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM {s} WHERE {s}.c = t.a)) q WHERE q.b > 0",
    "SELECT a FROM t WHERE a NOT IN (SELECT c FROM {s}) UNION ALL SELECT a FROM t WHERE a IN (SELECT c FROM {s})",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM {s} WHERE {s}.e = t.b LIMIT 1)",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM {s} WHERE {s}.c = t.a OR {s}.e = t.b)",
    "SELECT b, sum(a) FROM t GROUP BY b HAVING sum(a) > (SELECT min(c) FROM {s})",
    "SELECT * FROM t WHERE a IN (SELECT CAST(e AS BIGINT) FROM {s})",
    "SELECT * FROM t WHERE b IN (SELECT e FROM {s} WHERE {s}.f > t.d)",
    "SELECT * FROM t WHERE b NOT IN (SELECT e FROM {s} WHERE {s}.f > t.d)",
]


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "cpu"
    quick = "--quick" in sys.argv or dev != "cpu"
    data = tables()
    con = duckdb.connect()
    for name, tb in data.items():
        con.register(name, tb)
    probes = bad = 0
    grid = [(2, 3, True)] if quick else itertools.product([1, 2, 4], [1, 3, 7, 4096], [True, False])
    if "--first" in sys.argv:  # only the queries after the first 30, a small grid
        grid = [(1, 4096, True), (3, 2, True), (2, 7, False)]
        del Q[:30]
    for drivers, batch, optimize in grid:
        ses = Session(device=dev, drivers=drivers, batch_rows=batch, optimize=optimize)
        for name, tb in data.items():
            ses.register(name, tb, split_rows=3)
        for q in Q:
            for s in ("u", "v", "z"):
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
                    pr = None if isinstance(e, Exception) else f"EXC {type(ex).__name__}: {ex}"
                if pr:
                    bad += 1
                    print("BAD", drivers, batch, optimize, sql, str(pr)[:300], flush=True)
    print("probes", probes, "bad", bad)


if __name__ == "__main__":
    main()
