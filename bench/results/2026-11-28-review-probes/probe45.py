import sys, threading, random, gc
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "tests"))
import numpy as np, pyarrow as pa, duckdb
from duckdb_reference import rows_mismatch
from gpu_engine import Session
from gpu_engine.kernels import lazy_cuda
rng = np.random.default_rng(5)
N = 3000
t = pa.table({"k": pa.array(rng.integers(0, 50, N)), "v": pa.array(rng.integers(-9, 9, N)),
              "s": pa.array([None if i % 17 == 0 else f"x{i % 37}" for i in range(N)])})
con = duckdb.connect(); con.register("t", t)
Q = ["SELECT k, sum(v), count(s) FROM t GROUP BY k", "SELECT s, count(*) FROM t GROUP BY s",
     "SELECT count(*) FROM t a JOIN t b ON a.k = b.k AND a.s = b.s"]
exp = {q: con.sql(q).to_arrow_table() for q in Q}
probes = bad = 0
def check(ses, q):
    global probes, bad
    probes += 1
    got = ses.sql(q); got = got.rename_columns(exp[q].column_names)
    p = rows_mismatch(got, exp[q])
    if p:
        bad += 1; print("BAD", q, p[:200], flush=True)
# item 4: cpu session, then cuda-sim in one process
s = Session(device="cpu", drivers=2, batch_rows=500); s.register("t", t, split_rows=700)
for q in Q: check(s, q)
print("numba.cuda loaded after cpu:", lazy_cuda.is_loaded())
g = Session(device="cuda-sim", drivers=2, batch_rows=1000); g.register("t", t, split_rows=1500)
for q in Q[:2]: check(g, q)
print("numba.cuda loaded after sim:", lazy_cuda.is_loaded())
for q in Q: check(s, q)   # cpu again after the real import
# item 5: concurrent sessions from threads, with failures
errors = []
def worker(i):
    try:
        for j in range(6):
            ses = Session(device="cpu", drivers=1 + (i + j) % 4, batch_rows=[1, 64, 999, 65536][j % 4] if j % 4 else 7)
            ses.register("t", t.slice(0, 400) if j % 4 == 0 else t, split_rows=300)
            if (i + j) % 3 == 0:
                try:
                    ses.sql("SELECT CAST(s AS INTEGER) FROM t")
                    errors.append("no error for bad cast")
                except Exception as e:
                    if "Could not" not in str(e) and "convert" not in str(e).lower() and "cast" not in str(e).lower():
                        errors.append(f"odd error {type(e).__name__}: {e}")
            if j % 4 != 0:
                check(ses, Q[(i + j) % 3])
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")
before = threading.active_count()
for rnd in range(2):
    ths = [threading.Thread(target=worker, args=(i,)) for i in range(5)]
    [x.start() for x in ths]; [x.join() for x in ths]
    gc.collect()
    print("round", rnd, "threads", threading.active_count(), "driver threads",
          len([x for x in threading.enumerate() if x.name.startswith("gpu-engine-driver")]), flush=True)
# 50 sequential sessions: no thread growth
counts = []
for i in range(50):
    ses = Session(device="cpu", drivers=4, batch_rows=256); ses.register("t", t, split_rows=500)
    check(ses, Q[i % 3]); del ses
    counts.append(threading.active_count())
print("thread counts over 50 sessions: first", counts[:3], "last", counts[-3:], "max", max(counts))
print("errors", errors[:5], len(errors))
print("probes", probes, "bad", bad)
