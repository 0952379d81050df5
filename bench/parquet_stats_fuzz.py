"""Fuzz Parquet row-group statistics: lying min/max/null/distinct counts must never crash a query or change an answer
otherwise than DuckDB's over the same file.

Why: the engine reads statistics for estimates (join order, build sides,
partial steps) and prunes row groups by them under join runtime filters
(:func:`gpu_engine.connectors.runtime_filters.prune_row_groups`); a statistic
cannot be checked without reading the data, so a range narrower than the data
may drop rows there, as DuckDB's zone maps do. Each case rewrites 1-3
statistics values of a small file (bytes zeroed / all-ones / extreme, NaN or
-inf doubles, a flipped bit, counts set to 0, -1, 2^40, ...), then runs
:data:`QUERIES` through a Session in a child process (a crash is a result)
and DuckDB over the same file, comparing multisets.

Run from the repository root::

    python -m bench.parquet_stats_fuzz cpu 0:60     # device, seeds START:STOP; prints SUMMARY
"""
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench import parquet_surgery as ps

ROOT = Path(__file__).resolve().parent.parent

def make(path, seed):
    rng = np.random.default_rng(seed)
    n = 400
    t = pa.table({"k": pa.array(np.arange(n, dtype=np.int64) * 3 - 200),
                  "g": pa.array(rng.integers(0, 20, n).astype(np.int32), mask=rng.random(n) < 0.1),
                  "d": pa.array(rng.random(n) * 100),
                  "s": pa.array([f"s{x}" for x in rng.integers(0, 30, n)]),
                  "dt": pa.array(rng.integers(9000, 9500, n).astype(np.int32)).cast(pa.date32())})
    pq.write_table(t, path, row_group_size=100, use_dictionary=False, compression="none")
    dim = pa.table({"k": pa.array([1, 4, 301, 601, 1000], pa.int64()), "name": ["a", "b", "c", "d", "e"]})
    pq.write_table(dim, path.replace(".parquet", "_dim.parquet"))

def binaries(data):
    f = ps.footer(data)
    out = []
    for g in f.get(4).members:
        for c, chunk in enumerate(g.get(1).members):
            md = chunk.get(3)
            if not md.has(12): continue
            st = md.get(12)
            for m in st.members:
                out.append((g.id, c, m.id, m))
    return out

def mutate(data, how, rng):
    items = binaries(data)
    group, col, fid, m = items[rng.integers(len(items))]
    if m.kind == 8:  # binary
        size, pos = ps._varint(data, m.start)
        if how == "zero": data[pos:m.end] = bytes(m.end - pos)
        elif how == "ff": data[pos:m.end] = b"\xff" * (m.end - pos)
        elif how == "max": data[pos:m.end] = b"\xff" * (m.end - pos - 1) + b"\x7f"
        elif how == "min": data[pos:m.end] = bytes(m.end - pos - 1) + b"\x80"
        elif how == "nan" and m.end - pos == 8: data[pos:m.end] = struct.pack("<d", float("nan"))
        elif how == "inf" and m.end - pos == 8: data[pos:m.end] = struct.pack("<d", float("-inf"))
        else:
            data[pos + rng.integers(max(m.end - pos, 1)) if m.end > pos else pos] ^= 0x40
    elif m.kind in (4, 5, 6):
        v = [0, -1, 1 << 40, (1 << 31) - 1, 10 ** 6][rng.integers(5)]
        try: ps.write_int(data, m, v)
        except ValueError: pass
    return data, (group, col, fid, how)

QUERIES = [
 "SELECT count(*) FROM t",
 "SELECT g, count(*), sum(k) FROM t GROUP BY g",
 "SELECT count(DISTINCT k), count(DISTINCT s), min(d), max(d) FROM t",
 "SELECT count(*) FROM t WHERE k = 301",
 "SELECT count(*) FROM t WHERE k BETWEEN 0 AND 500",
 "SELECT count(*) FROM t WHERE dt >= DATE '1995-01-01'",
 "SELECT t.k, dim.name FROM t JOIN dim ON t.k = dim.k",
 "SELECT s, count(*) FROM t GROUP BY s",
 "SELECT k, g FROM t ORDER BY k DESC LIMIT 3",
 "SELECT a.g, count(*) FROM t a JOIN t b ON a.k = b.k GROUP BY a.g",
]

def norm(v):
    import decimal, math
    if isinstance(v, decimal.Decimal) and v == v.to_integral_value(): return int(v)
    if isinstance(v, float): return "nan" if math.isnan(v) else round(v, 9)
    return v

def child(path, dev):
    import duckdb
    if dev == "cuda-sim": os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    from gpu_engine import Session
    s = Session(device=dev, drivers=1)
    s.register("t", path); s.register("dim", path.replace(".parquet", "_dim.parquet"))
    res = []
    for q in QUERIES:
        con = duckdb.connect()
        con.sql(f"CREATE VIEW t AS SELECT * FROM '{path}'")
        con.sql(f"CREATE VIEW dim AS SELECT * FROM '{path.replace('.parquet', '_dim.parquet')}'")
        try:
            exp = sorted(repr(tuple(norm(v) for v in r)) for r in con.sql(q).fetchall())
        except Exception as e:
            exp = "duckdb error " + str(e)[:100]
        try:
            got = sorted(repr(tuple(norm(v) for v in r.values())) for r in s.sql(q).to_pylist())
        except Exception as e:
            from gpu_engine.errors import GpuEngineError
            got = ("clean " if isinstance(e, GpuEngineError) else "UNCLEAN ") + type(e).__name__ + ": " + str(e)[:150]
        res.append((q, got == exp, str(got)[:200], str(exp)[:200]))
    print(json.dumps(res))

if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3]); sys.exit()
    dev = sys.argv[1]; lo, hi = map(int, sys.argv[2].split(":"))
    hows = ["zero", "ff", "max", "min", "nan", "inf", "flip", "int"]
    summary = {"cases": 0, "equal_all": 0, "diff": 0, "crash": 0, "unclean": 0, "clean_error": 0}
    for seed in range(lo, hi):
        rng = np.random.default_rng(seed)
        folder = os.environ.get("STATS_FUZZ_DIR", "/tmp/parquet-stats-fuzz")
        os.makedirs(folder, exist_ok=True)
        path = f"{folder}/{dev}-{seed}.parquet"
        make(path, seed)
        data = bytearray(open(path, "rb").read())
        muts = []
        for _ in range(int(rng.integers(1, 4))):
            data, m = mutate(data, hows[rng.integers(len(hows))], rng); muts.append(m)
        open(path, "wb").write(data)
        try:
            p = subprocess.run([sys.executable, "-m", "bench.parquet_stats_fuzz", "child", path, dev], capture_output=True,
                               text=True, timeout=600, cwd=ROOT)
        except subprocess.TimeoutExpired:
            print(seed, "HANG", muts); summary["crash"] += 1; continue
        summary["cases"] += 1
        if p.returncode != 0:
            print(seed, "CRASH", p.returncode, muts, p.stderr[-800:]); summary["crash"] += 1; continue
        res = json.loads(p.stdout.strip().splitlines()[-1])
        bad = [r for r in res if not r[1]]
        for r in bad:
            kind = "unclean" if r[2].startswith("UNCLEAN") else "clean_error" if r[2].startswith("clean") else "diff"
            summary[kind] += 1
            print(seed, kind, muts, r[0], "| engine", r[2], "| duckdb", r[3])
        if not bad: summary["equal_all"] += 1
        print(seed, "ok" if not bad else "", flush=True)
    print("SUMMARY", dev, sys.argv[2], json.dumps(summary))
