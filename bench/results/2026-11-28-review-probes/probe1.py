import sys, itertools, decimal, random
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "tests"))
import numpy as np, pyarrow as pa, duckdb
from duckdb_reference import rows_mismatch
from gpu_engine import Session

device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
rng = np.random.default_rng(11)
N = 203

def mk():
    ints = pa.array([None if i % 7 == 3 else int(x) for i, x in enumerate(rng.integers(-1000, 1000, N))], pa.int64())
    i8 = pa.array([None if i % 5 == 1 else int(x) for i, x in enumerate(rng.integers(-100, 100, N))], pa.int8())
    u32 = pa.array([None if i % 9 == 2 else int(x) for i, x in enumerate(rng.integers(0, 2**32 - 1, N))], pa.uint32())
    f = pa.array([None if i % 6 == 0 else float(x) for i, x in enumerate(rng.normal(size=N))], pa.float64())
    b = pa.array([None if i % 4 == 2 else bool(x) for i, x in enumerate(rng.integers(0, 2, N))], pa.bool_())
    s = [None if i % 8 == 5 else ("" if i % 11 == 0 else f"s{int(x)}") for i, x in enumerate(rng.integers(0, 30, N))]
    dec = pa.array([None if i % 10 == 7 else decimal.Decimal(int(x)) / 100 for i, x in enumerate(rng.integers(-99999, 99999, N))], pa.decimal128(12, 2))
    import datetime
    dt = pa.array([None if i % 13 == 1 else datetime.date(2000, 1, 1) + datetime.timedelta(days=int(x)) for i, x in enumerate(rng.integers(0, 5000, N))], pa.date32())
    ts = pa.array([None if i % 12 == 1 else int(x) for i, x in enumerate(rng.integers(0, 10**15, N))], pa.timestamp("us"))
    return pa.table({"i": ints, "i8": i8, "u": u32, "f": f, "b": b, "s": pa.array(s, pa.string()),
                     "ls": pa.array(s, pa.large_string()), "d": pa.array(s, pa.string()).dictionary_encode(),
                     "dec": dec, "dt": dt, "ts": ts,
                     "k": pa.array(rng.integers(0, 5, N), pa.int32())})

base = mk()
variants = {}
for off, ln in [(0, N), (3, 150), (9, 1), (13, 0), (1, 201), (77, 100)]:
    variants[f"slice{off}_{ln}"] = base.slice(off, ln)
# chunked: concat of slices at odd offsets
variants["chunked"] = pa.concat_tables([base.slice(5, 50), base.slice(61, 70), base.slice(140, 0), base.slice(141, 60)])
# chunked with different dictionaries per chunk
variants["chunked_dicts"] = pa.concat_tables([base.slice(3, 40), base.slice(100, 90)])
queries = [
    "SELECT i, i8, u, f, b, s, ls, d, dec, dt, ts FROM t",
    "SELECT count(*), count(i), sum(i), sum(i8), sum(u), sum(f), count(b), sum(dec), min(dt), max(ts), min(s), max(ls), max(d) FROM t",
    "SELECT k, count(*), sum(i), count(b), sum(CASE WHEN b THEN 1 ELSE 0 END), min(s), max(d) FROM t GROUP BY k",
    "SELECT s, count(*), sum(i) FROM t GROUP BY s",
    "SELECT ls, count(*), sum(i) FROM t GROUP BY ls",
    "SELECT d, count(*), sum(f) FROM t GROUP BY d",
    "SELECT * FROM t WHERE b",
    "SELECT i, s FROM t WHERE NOT b OR b IS NULL",
    "SELECT i FROM t WHERE i8 > 10 AND dt > DATE '2005-01-01'",
    "SELECT t.i, u2.s FROM t JOIN t u2 ON t.i = u2.i",
    "SELECT t.i, u2.s FROM t JOIN t u2 ON t.s = u2.d",
    "SELECT count(*) FROM t JOIN t u2 ON t.dt = u2.dt AND t.i8 = u2.i8",
    "SELECT dec, count(*) FROM t GROUP BY dec",
    "SELECT b, count(*), sum(dec) FROM t GROUP BY b",
]
probes = bad = 0
for (vname, table), drivers, batch in itertools.product(variants.items(), [1, 2, 4] if device == "cpu" else [2], [1, 7, 64, 65536] if device == "cpu" else [16]):
    ses = Session(device=device, drivers=drivers, batch_rows=batch)
    split = max(1, table.num_rows // 3)
    ses.register("t", table, split_rows=split)
    con = duckdb.connect(); con.register("t", table)
    for q in queries:
        probes += 1
        try:
            got = ses.sql(q)
            exp = con.sql(q).to_arrow_table()
            got = got.rename_columns(exp.column_names) if got.num_columns == exp.num_columns else got
            p = rows_mismatch(got, exp)
        except Exception as e:
            p = f"EXC {type(e).__name__}: {e}"
        if p:
            bad += 1
            print("BAD", vname, drivers, batch, q, str(p)[:300], flush=True)
    ses.close() if hasattr(ses, "close") else None
print("probes", probes, "bad", bad)
