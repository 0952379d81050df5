import sys
sys.path.insert(0, "tests")
import duckdb
from duckdb_reference import rows_mismatch
from bench.review_stop47_subqueries import tables
from gpu_engine import Session
data = tables()
con = duckdb.connect()
ses = Session(device="cpu", drivers=2, batch_rows=3)
for n, tb in data.items():
    con.register(n, tb); ses.register(n, tb, split_rows=3)
Q = [
 "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM t t2 WHERE t2.a = t.a AND t2.b < t.b)",
 "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM t t2 WHERE t2.a = t.a AND t2.b < t.b)",
 "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM t t2 WHERE t2.b = t.b AND t2.a > t.a)",
 "SELECT * FROM t WHERE a IN (SELECT t2.a FROM t t2 WHERE t2.b <> t.b)",
 "SELECT * FROM t WHERE b IN (SELECT t2.b FROM t t2 WHERE t2.s = t.s AND t2.a <> t.a)",
 "SELECT * FROM t x WHERE EXISTS (SELECT 1 FROM t WHERE t.s = x.s AND t.d > x.d)",
 "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM t t2 WHERE t2.a = t.a + 1)",
 "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM t t2 WHERE t2.a = t.b)",
 "SELECT * FROM t WHERE a NOT IN (SELECT b FROM t)",
 "SELECT * FROM u WHERE EXISTS (SELECT 1 FROM u u2 WHERE u2.c = u.c AND u2.e <> u.e)",
 "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM t t2 JOIN u ON u.c = t2.a WHERE t2.b = t.b AND u.e > t.b)",
]
bad = 0
for q in Q:
    e = con.sql(q).to_arrow_table()
    try:
        g = ses.sql(q); pr = rows_mismatch(g.rename_columns(e.column_names), e)
    except Exception as ex:
        pr = f"EXC {type(ex).__name__}: {ex}"
    if pr: bad += 1; print("BAD", q, str(pr)[:300])
print("probes", len(Q), "bad", bad)
