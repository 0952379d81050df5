import sys
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "tests"))
import numpy as np, pyarrow as pa, duckdb
from duckdb_reference import rows_mismatch
from gpu_engine import Session
dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
d8 = pa.DictionaryArray.from_arrays(pa.array([0, None, 1, 2, 0, 1, None, 2, 0, 1, 2, 3], pa.int8()), pa.array(["x", None, "zz", ""]))
odd = pa.Array.from_buffers(pa.int64(), 12, [None, pa.py_buffer(np.arange(12, dtype=np.int64).tobytes() + b"\x07")])
t = pa.table({"d": d8, "v": odd, "k": pa.array(np.arange(12) % 3)})
qs = ["SELECT d, count(*), count(d), sum(v) FROM t GROUP BY d", "SELECT count(*) FROM t WHERE d IS NULL",
      "SELECT k, count(d), min(d), max(d) FROM t GROUP BY k", "SELECT d, v FROM t WHERE d <> 'x'", "SELECT sum(v) FROM t",
      "SELECT a.d, b.v FROM t a JOIN t b ON a.d = b.d"]
probes = bad = 0
for tb in [t, t.slice(1, 10), t.slice(5, 0)]:
    for drivers, batch in [(1, 3), (2, 1024)]:
        s = Session(device=dev, drivers=drivers, batch_rows=batch); s.register("t", tb, split_rows=4)
        con = duckdb.connect(); con.register("t", tb)
        for q in qs:
            probes += 1
            try:
                e = con.sql(q).to_arrow_table(); g = s.sql(q).rename_columns(e.column_names); p = rows_mismatch(g, e)
            except Exception as ex:
                p = f"EXC {type(ex).__name__}: {ex}"
            if p: bad += 1; print("BAD", tb.num_rows, drivers, batch, q, str(p)[:200])
print("probes", probes, "bad", bad)
