"""Review probe (stop 47): distinct set operations whose SELECT DISTINCT branches are planned without their own
grouping (sql/distinct_branches.py, 9928bae), against DuckDB: branches holding correlated subqueries, windows,
aggregates, GROUP BY, CTE readers, VALUES, NULLs, nested set operations, in derived tables and CTEs.

    .venv/bin/python -m bench.review_stop47_distinct_branches [cpu|cuda-sim]
"""
import sys

import duckdb

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import rows_mismatch  # noqa: E402
from gpu_engine import Session  # noqa: E402
from bench.review_stop47_subqueries import tables  # noqa: E402

B = [
    "SELECT DISTINCT a, b FROM t",
    "SELECT DISTINCT a, b FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.c = t.a)",
    "SELECT DISTINCT a, b FROM t WHERE a NOT IN (SELECT c FROM v)",
    "SELECT DISTINCT c AS a, e AS b FROM u",
    "SELECT DISTINCT b AS a, count(*) AS b FROM t GROUP BY b",
    "SELECT DISTINCT a, row_number() OVER (PARTITION BY a ORDER BY b, s, d) AS b FROM t",
    "SELECT DISTINCT a, max(b) OVER (PARTITION BY a) AS b FROM t",
    "SELECT DISTINCT a, (SELECT max(e) FROM u WHERE u.c = t.a) AS b FROM t",
    "SELECT DISTINCT NULL AS a, b FROM t",
    "SELECT DISTINCT a, b FROM (VALUES (1, 2), (1, 2), (NULL, 3)) x(a, b)",
    "SELECT DISTINCT a, b FROM t WHERE b > (SELECT min(e) FROM u)",
]
OPS = ["UNION", "INTERSECT", "EXCEPT", "UNION ALL", "INTERSECT ALL", "EXCEPT ALL"]


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    data = tables()
    con = duckdb.connect()
    ses = Session(device=dev, drivers=2, batch_rows=3)
    for n, tb in data.items():
        con.register(n, tb)
        ses.register(n, tb, split_rows=3)
    queries = []
    for i, left in enumerate(B):
        for right in B[i:i + 4]:
            for op in OPS:
                queries.append(f"{left} {op} {right}")
    queries += [f"SELECT count(*), count(a), sum(b) FROM ({B[1]} UNION {B[2]}) q",
                f"WITH w AS ({B[0]} INTERSECT {B[1]}) SELECT * FROM w UNION SELECT * FROM w",
                f"({B[0]} EXCEPT {B[2]}) UNION ({B[5]} INTERSECT {B[0]})",
                f"SELECT * FROM ({B[6]} EXCEPT {B[3]}) q WHERE a IS NOT NULL",
                f"{B[0]} UNION ({B[1]} UNION ALL {B[1]})"]
    if dev != "cpu":
        queries = queries[::9]
    bad = 0
    for sql in queries:
        try:
            e = con.sql(sql).to_arrow_table()
        except Exception as ex:
            e = ex
        try:
            g = ses.sql(sql)
            pr = f"duckdb raised {e}" if isinstance(e, Exception) else rows_mismatch(g.rename_columns(e.column_names), e)
        except Exception as ex:
            pr = None if isinstance(e, Exception) else f"EXC {type(ex).__name__}: {ex}"
        if pr:
            bad += 1
            print("BAD", sql, str(pr)[:300], flush=True)
    print("probes", len(queries), "bad", bad)


if __name__ == "__main__":
    main()
