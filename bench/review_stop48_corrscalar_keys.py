"""Review probe (stop 48): correlated scalar subqueries (ce4368a's typed rule) correlated on keys of other types
against DuckDB: doubles with -0.0/0.0/NaN/NULL, int32 vs int64 vs double, decimals of two scales, expressions on
either side, two keys, IS NOT DISTINCT FROM; optimize on/off x drivers 1..3 x batch rows 1/7/4096.

    PYTHONPATH=tests .venv/bin/python -m bench.review_stop48_corrscalar_keys
"""
import duckdb
import pyarrow as pa
from decimal import Decimal
import sys
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import rows_mismatch  # noqa: E402
from gpu_engine import Session
T = {"t": pa.table({"x": pa.array([0.0, -0.0, float("nan"), None, 1.5, 2.0]), "i": pa.array([0, 0, 1, None, 2, 2], pa.int32()),
                    "dd": pa.array([Decimal("1.50"), Decimal("2.00"), None, Decimal("0.00"), Decimal("1.5"), Decimal("-0.00")], pa.decimal128(10, 2))}),
     "u": pa.table({"y": pa.array([-0.0, float("nan"), 1.5, 1.5, None]), "j": pa.array([0, 1, 2, 2, None], pa.int64()),
                    "de": pa.array([Decimal("1.500"), Decimal("2.000"), Decimal("0.000"), None, Decimal("1.5")], pa.decimal128(12, 3)),
                    "w": pa.array([1, 2, 3, 4, 5], pa.int64())})}
con = duckdb.connect()
for n, tb in T.items(): con.register(n, tb)
bad = 0
Qs = ["SELECT * FROM t WHERE (SELECT count(*) FROM u WHERE u.y = t.x) = 0",
      "SELECT * FROM t WHERE (SELECT count(*) FROM u WHERE u.y = t.x) > 0",
      "SELECT x, (SELECT sum(w) FROM u WHERE u.y = t.x) s FROM t",
      "SELECT * FROM t WHERE x < (SELECT max(w) FROM u WHERE u.y = t.x)",
      "SELECT * FROM t WHERE (SELECT count(*) FROM u WHERE u.y = t.i) = 0",
      "SELECT * FROM t WHERE (SELECT count(*) FROM u WHERE u.j = t.x) = 0",
      "SELECT * FROM t WHERE (SELECT count(*) FROM u WHERE u.de = t.dd) = 0",
      "SELECT * FROM t WHERE i < (SELECT sum(w) FROM u WHERE u.de = t.dd)",
      "SELECT * FROM t WHERE (SELECT count(*) FROM u WHERE u.de = t.i) = 0",
      "SELECT * FROM t WHERE (SELECT count(*) FROM u WHERE u.j = t.i + 1) = 0",
      "SELECT * FROM t WHERE (SELECT count(*) FROM u WHERE u.j + 1 = t.i) = 0",
      "SELECT * FROM t WHERE (SELECT count(*) FROM u WHERE u.y = t.x AND u.j = t.i) = 0",
      "SELECT * FROM t WHERE (SELECT avg(w) FROM u WHERE u.y IS NOT DISTINCT FROM t.x) IS NULL",
      ]
for opt in (True, False):
  for d, b in ((1, 4096), (3, 1), (2, 7)):
    s = Session(device="cpu", optimize=opt, drivers=d, batch_rows=b)
    for n, tb in T.items(): s.register(n, tb, split_rows=2)
    for q in Qs:
        try: e = con.sql(q).to_arrow_table()
        except Exception as ex: e = ex
        try:
            g = s.sql(q)
            pr = f"duckdb raised {e}" if isinstance(e, Exception) else rows_mismatch(g.rename_columns(e.column_names), e)
        except Exception as ex:
            pr = None if isinstance(e, Exception) else f"EXC {type(ex).__name__}: {str(ex)[:200]}"
        if pr: bad += 1; print("BAD", opt, d, b, q, str(pr)[:250])
print("bad", bad, "of", 6 * len(Qs))
