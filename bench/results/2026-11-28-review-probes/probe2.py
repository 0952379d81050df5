import sys, itertools, os, tempfile
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "tests"))
import numpy as np, pyarrow as pa, pyarrow.parquet as pq, duckdb
from duckdb_reference import rows_mismatch
from gpu_engine import Session
from gpu_engine.operators.fused_aggregation import FusedAggregation
device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
modes = []
orig = FusedAggregation._kernel
def rec(self, layout):
    modes.append((id(self), layout.id_slotted, tuple(layout.lifted_modes)))
    return orig(self, layout)
FusedAggregation._kernel = rec
rng = np.random.default_rng(1)
def labels(n, distinct, nulls=True, prefix="k"):
    p = rng.integers(0, distinct, n)
    return [None if nulls and x % 29 == 3 else "" if x == 0 else (f"{prefix}-a-much-longer-key-{x}" if x % 3 == 0 else f"{prefix}{x}") for x in p]
N = 6000 if device == "cpu" else 400
big = pa.table({"s": pa.array(labels(N, 2500 if device == "cpu" else 60), pa.string()), "v": pa.array(rng.integers(-100, 100, N)),
                "k": pa.array(rng.integers(0, 40, N))})
small = pa.table({"s": pa.array(labels(N // 2, 20), pa.string()).dictionary_encode(), "v": pa.array(rng.integers(-100, 100, N // 2)),
                  "k": pa.array(rng.integers(0, 40, N // 2))})
small_plain = small.set_column(0, "s", small.column("s").cast(pa.string()))
tmp = tempfile.mkdtemp()
# parquet: first row group high cardinality (dictionary falls back to plain), later ones low cardinality (dictionary)
pfile = os.path.join(tmp, "mixed.parquet")
w = pq.ParquetWriter(pfile, big.schema, dictionary_pagesize_limit=512)
w.write_table(big, row_group_size=len(big)); w.write_table(small_plain, row_group_size=max(1, len(small_plain) // 3)); w.close()
mixed = pq.read_table(pfile)
tables = {"big": big, "small": small, "small_plain": small_plain, "bigslice": big.slice(7, N - 20)}
queries = [
    "SELECT s, count(*), sum(v), min(v) FROM big GROUP BY s",
    "SELECT s, count(*), sum(v) FROM bigslice GROUP BY s",
    "SELECT s, count(*), sum(v) FROM (SELECT s, v FROM big UNION ALL SELECT s, v FROM small) GROUP BY s",
    "SELECT s, count(*), sum(v) FROM (SELECT s, v FROM small UNION ALL SELECT s, v FROM big) GROUP BY s",
    "SELECT s, count(*), sum(v) FROM (SELECT s, v FROM small_plain UNION ALL SELECT s, v FROM small) GROUP BY s",
    "SELECT s, count(*), max(v) FROM mixed GROUP BY s",
    "SELECT b.s, count(*), sum(a.v) FROM big a JOIN small_plain b ON a.k = b.k GROUP BY b.s",
    "SELECT a.s, count(*), sum(b.v) FROM bigslice a JOIN small b ON a.k = b.k WHERE a.v > 0 GROUP BY a.s",
    "SELECT s, count(*) FROM big WHERE v > 10 GROUP BY s",
    "SELECT s IS NULL, s = '', count(*) FROM big GROUP BY s",
    "SELECT s, count(DISTINCT k), sum(v) FROM big GROUP BY s",
    "SELECT s, count(*) FROM (SELECT s FROM big LIMIT 0) GROUP BY s",
    "SELECT s, sum(v) FROM big WHERE k < 0 GROUP BY s",
]
probes = bad = 0
confs = itertools.product([1, 2, 4] if device == "cpu" else [2], [1, 100, 2048, 65536] if device == "cpu" else [64], [None, 50] if device == "cpu" else [None, 20])
for drivers, batch, pmax in confs:
    extra = {} if pmax is None else {"partial_aggregation_max_groups": pmax}
    if batch == 1 and drivers != 2: continue
    ses = Session(device=device, drivers=drivers, batch_rows=batch, **extra)
    con = duckdb.connect()
    for name, tb in tables.items():
        ses.register(name, tb, split_rows=max(1, tb.num_rows // 4)); con.register(name, tb)
    ses.register("mixed", pfile); con.sql(f"CREATE VIEW mixed AS SELECT * FROM read_parquet('{pfile}')")
    for q in queries:
        if batch == 1 and ("JOIN" in q or "DISTINCT" in q): continue
        probes += 1
        try:
            exp = con.sql(q).to_arrow_table(); got = ses.sql(q).rename_columns(exp.column_names)
            p = rows_mismatch(got, exp)
        except Exception as e:
            p = f"EXC {type(e).__name__}: {e}"
        if p:
            bad += 1; print("BAD", drivers, batch, pmax, q, str(p)[:300], flush=True)
from collections import defaultdict
per = defaultdict(set)
for i, sl, m in modes: per[(i, sl)].add(m)
print("slotted tables:", len({i for i, s, m in modes if s}), "hashed:", len({i for i, s, m in modes if not s}))
print("slotted tables that saw more than one lifted-mode layout:", sum(1 for (i, sl), ms in per.items() if sl and len(ms) > 1), [ms for (i, sl), ms in per.items() if sl and len(ms) > 1][:3])
print("probes", probes, "bad", bad)
