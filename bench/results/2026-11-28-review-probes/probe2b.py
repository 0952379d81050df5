import sys, itertools
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "tests"))
import numpy as np, pyarrow as pa, duckdb
from duckdb_reference import rows_mismatch
from gpu_engine import Session
dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
rng = np.random.default_rng(4)
N = 5000 if dev == "cpu" else 300
p = rng.integers(0, 1500 if dev == "cpu" else 50, N)
s = [None if x % 31 == 2 else "" if x % 97 == 0 else f"key{x}" for x in p]
t = pa.table({"s": pa.array(s, pa.string()), "v": pa.array(rng.integers(-5, 5, N)), "k": pa.array(rng.integers(0, 7, N))})
sliced = pa.concat_tables([t.slice(3, N // 2), t.slice(N // 2 + 5, N // 2 - 10)])
Q = ["SELECT DISTINCT s FROM t", "SELECT s FROM t GROUP BY s HAVING count(*) > 3",
     "SELECT s, count(*) FILTER (WHERE v > 0), sum(v) FILTER (WHERE k = 2) FROM t GROUP BY s",
     "SELECT s, count(DISTINCT k) FROM t GROUP BY s", "SELECT count(DISTINCT s) FROM t",
     "SELECT s, grouping(s), count(*) FROM t GROUP BY ROLLUP (s)",
     "SELECT upper(s), count(*) FROM t GROUP BY upper(s)", "SELECT coalesce(s, 'NULL'), count(*) FROM t GROUP BY 1",
     "SELECT s, min(v), max(k), avg(v) FROM t WHERE s <> '' OR s IS NULL GROUP BY s",
     "SELECT s, count(*) FROM (SELECT s FROM t ORDER BY v, s LIMIT 1000) GROUP BY s",
     "SELECT s, count(*) FROM t GROUP BY s ORDER BY count(*) DESC, s LIMIT 5",
     "SELECT s, string_agg(CAST(k AS VARCHAR), ',' ORDER BY k, v) FROM t WHERE v = 1 GROUP BY s"]
probes = bad = 0
for tb, drivers, batch, pmax in itertools.product([t, sliced], [1, 2, 4] if dev == "cpu" else [2], [1, 333, 65536] if dev == "cpu" else [50], [None, 40]):
    if batch == 1 and drivers > 1: continue
    extra = {} if pmax is None else {"partial_aggregation_max_groups": pmax}
    ses = Session(device=dev, drivers=drivers, batch_rows=batch, **extra); ses.register("t", tb, split_rows=max(1, tb.num_rows // 5))
    con = duckdb.connect(); con.register("t", tb)
    for q in Q:
        probes += 1
        try:
            e = con.sql(q).to_arrow_table(); g = ses.sql(q).rename_columns(e.column_names)
            pr = rows_mismatch(g, e, ordered=("ORDER BY count" in q)) if "ordered" in rows_mismatch.__code__.co_varnames else rows_mismatch(g, e)
        except Exception as ex:
            pr = f"EXC {type(ex).__name__}: {ex}"
        if pr: bad += 1; print("BAD", tb.num_rows, drivers, batch, pmax, q, str(pr)[:300], flush=True)
print("probes", probes, "bad", bad)
