import sys, multiprocessing as mp
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "tests"))
import numpy as np, pyarrow as pa, duckdb
from duckdb_reference import rows_mismatch
from gpu_engine import Session
import gpu_engine.kernels.group_by as _g; sys.modules.setdefault("kernels.group_by", _g)
t = pa.table({"k": pa.array(np.arange(5000) % 17), "s": pa.array([f"s{i % 23}" for i in range(5000)])})
Q = "SELECT s, count(*), sum(k) FROM t GROUP BY s"
exp = duckdb.connect().execute("SELECT 1").fetchall() and None
def run(drivers):
    s = Session(device="cpu", drivers=drivers, batch_rows=500); s.register("t", t, split_rows=1000)
    return s.sql(Q)
def child(q, drivers):
    try:
        q.put(("ok", run(drivers).to_pylist()))
    except Exception as e:
        q.put(("err", repr(e)))
if __name__ == "__main__":
    con = duckdb.connect(); con.register("t", t); expected = con.sql(Q).to_arrow_table()
    bad = probes = 0
    for d in (1, 2, 4): run(d)  # pools of every width kept in the parent
    ctx = mp.get_context("fork")
    for d in (1, 2, 4):
        q = ctx.Queue(); p = ctx.Process(target=child, args=(q, d)); p.start()
        kind, rows = q.get(timeout=240); p.join(60); probes += 1
        if kind != "ok": bad += 1; print("BAD", d, rows); continue
        got = pa.Table.from_pylist(rows).rename_columns(expected.column_names)
        pr = rows_mismatch(got, expected)
        if pr: bad += 1; print("BAD", d, pr[:200])
    print("probes", probes, "bad", bad)
