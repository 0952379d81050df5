"""Warm sql_plan of texts over a registered table and over files, and plan-cache misses after a new file set."""
import os, resource, sys, tempfile, time, statistics as st
import pyarrow as pa, pyarrow.parquet as pq
import gpu_engine
from gpu_engine import Session
print(gpu_engine.__file__, file=sys.stderr)
d = tempfile.mkdtemp(); os.chdir(d)
for n in range(4):
    pq.write_table(pa.table({"a": pa.array(range(n, n + 10), pa.int32())}), f"f{n}.parquet")
s = Session(device="cpu")
s.register("k", "f0.parquet")
texts = ["SELECT sum(a) AS t FROM k", "SELECT count(*) AS n FROM 'f1.parquet'", "SELECT max(a) AS m FROM 'f2.parquet' WHERE a > 3"]
for t in texts: s.sql_plan(t)
m = s.plan_cache.misses
s.sql_plan("SELECT count(*) FROM 'f3.parquet'")
for t in texts: s.sql_plan(t)
print("misses after a new file set:", s.plan_cache.misses - m, "(1 is the new text's own)")
def cpu(): r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
for t in texts:
    walls, cpus = [], []
    for _ in range(7):
        w, c = time.perf_counter(), cpu()
        for _ in range(2000): s.sql_plan(t)
        walls.append((time.perf_counter() - w) / 2000 * 1e6); cpus.append((cpu() - c) / 2000 * 1e6)
    print(f"{t[:45]:45s} warm sql_plan wall {st.median(walls):6.1f} us  cpu {st.median(cpus):6.1f} us")
