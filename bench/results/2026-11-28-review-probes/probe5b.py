import sys, threading, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "tests"))
import numpy as np, pyarrow as pa, duckdb
from duckdb_reference import rows_mismatch
from gpu_engine import Session
from gpu_engine.exec.driver_executors import working_driver_threads
rng = np.random.default_rng(2)
N = 200_000
t = pa.table({"k": pa.array(rng.integers(0, 2000, N)), "v": pa.array(rng.integers(-9, 9, N)), "s": pa.array([f"s{i % 501}" for i in range(N)])})
con = duckdb.connect(); con.register("t", t)
q = "SELECT a.s, count(*), sum(b.v) FROM t a JOIN (SELECT k, v FROM t WHERE v > 5) b ON a.k = b.k GROUP BY a.s"
exp = con.sql(q).to_arrow_table()
probes = bad = 0; lock = threading.Lock(); notes = []
def run(i):
    global probes, bad
    s = Session(device="cpu", drivers=1 + i % 4, batch_rows=4096); s.register("t", t, split_rows=20000)
    for j in range(3):
        timeout = 0.05 if (i + j) % 2 else None
        try:
            g = s.sql(q, timeout=timeout).rename_columns(exp.column_names); p = rows_mismatch(g, exp)
        except Exception as e:
            p = None if timeout else f"{type(e).__name__}: {e}"
            if timeout: notes.append(type(e).__name__)
        with lock:
            probes += 1
            if p: bad += 1; print("BAD", i, j, str(p)[:200], flush=True)
ths = [threading.Thread(target=run, args=(i,)) for i in range(6)]
[x.start() for x in ths]; [x.join() for x in ths]
time.sleep(0.5)
print("working driver threads after:", len(working_driver_threads()))
print("timeouts raised:", sorted(set(notes)), len(notes))
print("probes", probes, "bad", bad)
