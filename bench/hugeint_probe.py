"""The reviewer's HUGEINT-beside-a-decimal probe (stop 54): four queries, the engine against DuckDB, types and values.

    python bench/hugeint_probe.py
"""
import pyarrow as pa, duckdb, decimal
from gpu_engine import Session
t = pa.table({"u": pa.array([5, 7], pa.uint64()), "k": pa.array([1, 2], pa.int64()),
              "m": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-0.5")], pa.decimal128(10, 2))})
s = Session(device="cpu", compile_mode="lowest"); s.register("t", t)
con = duckdb.connect(); con.register("t", t)
for q in ["SELECT coalesce(m, u - k) AS x FROM t",
          "SELECT coalesce(m, s) AS x FROM (SELECT m, sum(k) OVER () AS s FROM t)",
          "SELECT m AS x FROM t UNION ALL SELECT sum(k) FROM t",
          "SELECT CASE WHEN k = 1 THEN m ELSE u - k END AS x FROM t"]:
    try: e = s.sql(q)
    except Exception as ex: e = repr(ex)[:100]
    d = con.sql(q).to_arrow_table()
    print(q, "\n  engine", getattr(e, "schema", e) if not isinstance(e,str) else e, e.column(0).to_pylist() if not isinstance(e,str) else "", "\n  duckdb", d.schema.types, d.column(0).to_pylist())
