"""A hash join with a large build side: its key tables advised huge pages ("on") vs not ("off"), alternating.

``python -m bench.huge_page_join_ab BUILD_ROWS PROBE_ROWS ROUNDS``: one Session (cpu, 2 drivers), a build table of
BUILD_ROWS distinct int64 keys and a probe table of PROBE_ROWS rows drawn from them, ``count(*)`` and a sum over the
join. Each side drops the buffer recycler's kept buffers and runs once unmeasured (its tables allocated and
touched), then once measured (process CPU, user+sys). The side is switched by patching the join module's
``advise_huge_pages`` (off: a no-op). DuckDB's answer is printed beside the sides' first ones.
"""
import sys, time, resource, os, statistics
import numpy as np, pyarrow as pa, duckdb
from gpu_engine import Session
from gpu_engine.exec import buffer_recycler as br
import gpu_engine.kernels.hash_join as hj
from gpu_engine.host_allocator import advise_huge_pages
build_rows, probe_rows, rounds = int(float(sys.argv[1])), int(float(sys.argv[2])), int(sys.argv[3])
rng = np.random.default_rng(1)
keys = rng.permutation(build_rows * 4)[:build_rows].astype(np.int64) * 7 + 3
b = pa.table({"k": keys, "v": rng.random(build_rows)})
p = pa.table({"k": keys[rng.integers(0, build_rows, probe_rows)], "w": rng.random(probe_rows)})
s = Session(device="cpu", drivers=2); s.register("b", b); s.register("p", p)
sql = "SELECT count(*) AS n, sum(b.v * p.w) AS s FROM p JOIN b ON p.k = b.k"
con = duckdb.connect(); con.execute("set threads=2"); con.register("b", b); con.register("p", p)
SIDES = {"off": lambda array: False, "on": advise_huge_pages}
def ru():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
print("duckdb", con.sql(sql).fetchall())
for n in SIDES:
    hj.advise_huge_pages = SIDES[n]; br.release_kept(0); print(n, s.sql(sql).to_pylist())
res = {n: [] for n in SIDES}
duck = []
for i in range(rounds):
    c = ru(); con.sql(sql).fetchall(); duck.append(ru() - c)
    for n in (list(SIDES) if i % 2 == 0 else list(SIDES)[::-1]):
        hj.advise_huge_pages = SIDES[n]; br.release_kept(0); s.sql(sql)
        c = ru(); s.sql(sql); res[n].append(ru() - c)
        print(n, round(res[n][-1], 3), "load", os.getloadavg()[0], flush=True)
print("SUMMARY duckdb", round(statistics.median(duck), 3), [round(x, 3) for x in duck])
for n in SIDES: print("SUMMARY", n, round(statistics.median(res[n]), 3), [round(x, 3) for x in res[n]])
