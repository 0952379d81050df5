"""Review probe (stop 48): the typed eager aggregation (8e1f674, the only one now) over joins that repeat rows,
with sums near the int64 / DECIMAL(18) limits and int32 sums past 2**31, against DuckDB (its BIGINT sum is a
HUGEINT: no overflow), optimize on/off x drivers 1-2 x batch rows 3/4096.

    PYTHONPATH=tests .venv/bin/python -m bench.review_stop48_eager_overflow
"""
import sys

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
import duckdb
import pyarrow as pa
from decimal import Decimal
from duckdb_reference import rows_mismatch  # noqa: E402
from gpu_engine import Session
big = 2**62
T = {"t": pa.table({"k": pa.array([1, 1, 2, 3, None], pa.int64()), "v": pa.array([big, big, -big, 5, 7], pa.int64()),
                    "w": pa.array([Decimal("9" * 16 + ".99"), Decimal("1.00"), None, Decimal("-" + "9" * 16 + ".99"), Decimal("0.01")], pa.decimal128(18, 2)),
                    "i": pa.array([2**31 - 1, 2**31 - 1, 5, None, 1], pa.int32())}),
     "u": pa.table({"k": pa.array([1, 1, 1, 2, 3, 3, None] + [1] * 10, pa.int64()), "x": pa.array(list(range(17)), pa.int64())})}
con = duckdb.connect()
for n, tb in T.items(): con.register(n, tb)
Qs = ["SELECT t.k, sum(v) s FROM t JOIN u ON t.k = u.k GROUP BY t.k",
      "SELECT t.k, sum(w) s FROM t JOIN u ON t.k = u.k GROUP BY t.k",
      "SELECT t.k, sum(i) s, avg(i) a FROM t JOIN u ON t.k = u.k GROUP BY t.k",
      "SELECT sum(v) s FROM t JOIN u ON t.k = u.k",
      "SELECT u.x % 2 g, sum(w) s, count(*) c FROM t JOIN u ON t.k = u.k GROUP BY g",
      "SELECT u.x % 3 g, sum(i) s, min(w), max(v) FROM t JOIN u ON t.k = u.k GROUP BY g",
      "SELECT t.k, sum(u.x) s FROM t JOIN u ON t.k = u.k GROUP BY t.k"]
bad = 0
for opt in (True, False):
  for d, b in ((1, 4096), (2, 3)):
    s = Session(device="cpu", optimize=opt, drivers=d, batch_rows=b)
    for n, tb in T.items(): s.register(n, tb, split_rows=3)
    for q in Qs:
        try: e = con.sql(q).to_arrow_table()
        except Exception as ex: e = ex
        try:
            g = s.sql(q)
            pr = f"duckdb raised {str(e)[:150]}" if isinstance(e, Exception) else rows_mismatch(g.rename_columns(e.column_names), e)
        except Exception as ex:
            pr = None if isinstance(e, Exception) else f"EXC {type(ex).__name__}: {str(ex)[:200]}"
        if pr: bad += 1; print("BAD", opt, d, b, q, str(pr)[:300])
print("bad", bad, "of", 4 * len(Qs))
