"""db-benchmark questions in one Session: fused slot tables advised huge pages ("on") vs not ("off"), alternating.

``python -m bench.huge_page_tables_ab ROWS ROUNDS q10[,q3...]``: one Session (cpu, 2 drivers, the table in memory)
and DuckDB (2 threads) in the same process. Each side first drops the buffer recycler's kept buffers, runs once
("first": its tables freshly allocated and touched), then once more ("steady": the tables reused from the
recycler, as in a burst of queries); a DuckDB run ends each round. Process CPU (user+sys), minor faults, wall
and the process's AnonHugePages are printed; answers of both sides are checked equal first (sorted tables, floats within 1e-9).
Why "first" is reported: a huge page's first touch may cost more than 512 small ones' (bench/results/
2026-11-28-dbbench3-huge-page-tables.md).
"""
import sys, time, resource, os, statistics
import pyarrow.parquet as pq, duckdb
from bench.dbbench import QUESTIONS, ensure_groupby
from gpu_engine import Session
from gpu_engine.exec import buffer_recycler as br
from gpu_engine.codegen.background_compiles import background_compiler
import gpu_engine.operators.fused_aggregation as fa
ON = fa.advise_huge_pages
SIDES = {"off": lambda array: False, "on": ON}
rows = int(float(sys.argv[1])); rounds = int(sys.argv[2]); qs = sys.argv[3].split(",")
t = pq.read_table(ensure_groupby(rows, 100))
s = Session(device="cpu", drivers=2); s.register("x", t)
con = duckdb.connect(); con.execute("set threads=2"); con.execute("CREATE TABLE x AS SELECT * FROM t")
def ru():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime, r.ru_minflt
def _assert_equal(got, want, what):
    """Sorted tables equal: floats within 1e-9 relative (sums' order differs with the drivers' splits), the rest exact."""
    import numpy as np, pyarrow as pa
    assert got.num_rows == want.num_rows and got.column_names == want.column_names, what
    for name in got.column_names:
        a, b = got.column(name).combine_chunks(), want.column(name).combine_chunks()
        if pa.types.is_floating(a.type):
            assert np.allclose(a.to_numpy(zero_copy_only=False), b.to_numpy(zero_copy_only=False), rtol=1e-9, equal_nan=True), (what, name)
        else:
            assert a.equals(b), (what, name)
def huge_kb():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("AnonHugePages"): return int(line.split()[1])
def measure(f):
    c0, f0 = ru(); w0 = time.time(); out = f(); w = time.time() - w0; c1, f1 = ru(); return c1 - c0, f1 - f0, w, out
for q in qs:
    sql = QUESTIONS[q]
    ref = None
    for name in SIDES:
        fa.advise_huge_pages = SIDES[name]; br.release_kept(0)
        r = s.sql(sql); background_compiler().wait_idle(timeout=300)
        r = r.sort_by([(c, "ascending") for c in r.column_names])
        if ref is None: ref = r
        else: _assert_equal(r, ref, (q, name))
    d = con.sql(sql).to_arrow_table().sort_by([(c, "ascending") for c in ref.column_names])
    print(q, "answers equal on both sides;", "rows", ref.num_rows, "duckdb rows", d.num_rows, flush=True)
    del ref, r, d
    res = {n: [] for n in SIDES}; first = {n: [] for n in SIDES}; duck = []
    for i in range(rounds):
        order = list(SIDES) if i % 2 == 0 else list(SIDES)[::-1]
        for name in order:
            fa.advise_huge_pages = SIDES[name]; br.release_kept(0)
            c, f, w, _ = measure(lambda: s.sql(sql)); first[name].append(c)  # fresh tables: first touch
            c, f, w, _ = measure(lambda: s.sql(sql)); res[name].append(c)
            print(f"{q} {name} round {i}: first {first[name][-1]:.3f} s cpu | steady cpu {c:.3f} minflt {f} wall {w:.2f} hugeKB {huge_kb()} load {os.getloadavg()[0]:.1f}", flush=True)
        c, f, w, _ = measure(lambda: con.sql(sql).to_arrow_table()); duck.append(c)
        print(f"{q} duckdb round {i}: cpu {c:.3f} wall {w:.2f}", flush=True)
    dm = statistics.median(duck)
    for n in SIDES:
        m = statistics.median(res[n])
        print(f"SUMMARY {q} {n}: steady cpu median {m:.3f} s ({m/dm:.2f}x duckdb {dm:.3f}) runs {[round(x,3) for x in res[n]]}; first-after-release median {statistics.median(first[n]):.3f} runs {[round(x,3) for x in first[n]]}", flush=True)
