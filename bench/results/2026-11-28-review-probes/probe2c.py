import sys, itertools
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "tests"))
import numpy as np, pyarrow as pa, duckdb
from duckdb_reference import rows_mismatch
from gpu_engine import Session
import gpu_engine.kernels.group_by as _g; sys.modules.setdefault("kernels.group_by", _g)  # the shared cache was polluted (see results)
dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
n = 600
tables = {
 "allnull": pa.table({"s": pa.nulls(n, pa.string()), "v": pa.array(np.arange(n))}),
 "nullsfirst": pa.table({"s": pa.array([None] * 300 + [f"k{i % 50}" for i in range(300)], pa.string()), "v": pa.array(np.arange(n))}),
 "emptyfirst": pa.table({"s": pa.array([""] * 300 + [None if i % 3 else f"k{i % 70}" for i in range(300)], pa.string()), "v": pa.array(np.arange(n))}),
 "emptydict": pa.table({"s": pa.DictionaryArray.from_arrays(pa.nulls(n, pa.int32()), pa.array([], pa.string())), "v": pa.array(np.arange(n))}),
 "onekey": pa.table({"s": pa.array(["same-key-longer-than-sixteen"] * n, pa.string()), "v": pa.array(np.arange(n))}),
 "large": pa.table({"s": pa.array([None if i % 5 == 0 else f"L{i % 333}" for i in range(n)], pa.large_string()), "v": pa.array(np.arange(n))}),
}
Q = ["SELECT s, count(*), sum(v), count(s) FROM {t} GROUP BY s", "SELECT DISTINCT s FROM {t}",
     "SELECT s, count(*) FROM (SELECT s, v FROM {t} UNION ALL SELECT s, v FROM nullsfirst) GROUP BY s"]
probes = bad = 0
for drivers, batch, pmax in itertools.product([1, 3] if dev == "cpu" else [2], [1, 64, 4096] if dev == "cpu" else [64], [None, 10]):
    extra = {} if pmax is None else {"partial_aggregation_max_groups": pmax}
    ses = Session(device=dev, drivers=drivers, batch_rows=batch, **extra); con = duckdb.connect()
    for name, tb in tables.items():
        ses.register(name, tb, split_rows=150); con.register(name, tb)
    for name in tables:
        for q in Q:
            q = q.format(t=name); probes += 1
            try:
                e = con.sql(q).to_arrow_table(); g = ses.sql(q).rename_columns(e.column_names); pr = rows_mismatch(g, e)
            except Exception as ex:
                pr = f"EXC {type(ex).__name__}: {ex}"
            if pr: bad += 1; print("BAD", drivers, batch, pmax, q, str(pr)[:300], flush=True)
print("probes", probes, "bad", bad)
