import sys, threading
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "tests"))
import numpy as np, pyarrow as pa, duckdb
from duckdb_reference import rows_mismatch
from gpu_engine import Session
from gpu_engine.kernels import lazy_cuda
rng = np.random.default_rng(9)
N = 20000
t = pa.table({"k": pa.array(rng.integers(0, 300, N)), "v": pa.array(rng.integers(-9, 9, N)),
              "s": pa.array([None if i % 13 == 0 else f"s{i % 211}" for i in range(N)])})
small = t.slice(0, 300)
Q = ["SELECT s, count(*), sum(v) FROM t GROUP BY s", "SELECT k, count(s) FROM t GROUP BY k",
     "SELECT count(*), sum(a.v) FROM t a JOIN t b ON a.s = b.s AND a.k = b.k"]
def expected(tb):
    con = duckdb.connect(); con.register("t", tb); return {q: con.sql(q).to_arrow_table() for q in Q}
E, Es = expected(t), expected(small)
probes = bad = 0; lock = threading.Lock(); stop = threading.Event()
def check(ses, q, exp):
    global probes, bad
    try:
        g = ses.sql(q).rename_columns(exp[q].column_names); p = rows_mismatch(g, exp[q])
    except Exception as e:
        p = f"{type(e).__name__}: {e}"
    with lock:
        probes += 1
        if p: bad += 1; print("BAD", ses.device, q, str(p)[:300], flush=True)
def cpu_loop(i):
    n = 0
    while not stop.is_set() or n < 3:
        s = Session(device="cpu", drivers=1 + i, batch_rows=1000); s.register("t", t, split_rows=3000)
        check(s, Q[n % 3], E); n += 1
def sim():
    s = Session(device="cuda-sim", drivers=2, batch_rows=64); s.register("t", small, split_rows=100)
    for q in Q[:2]: check(s, q, Es)
    stop.set()
ths = [threading.Thread(target=cpu_loop, args=(i,)) for i in range(2)]
[x.start() for x in ths]
import time; time.sleep(3)
print("cuda loaded before sim:", lazy_cuda.is_loaded(), flush=True)
sm = threading.Thread(target=sim); sm.start(); sm.join(); [x.join() for x in ths]
print("probes", probes, "bad", bad)
