"""Launches / host syncs per operator, the canonical-dictionary recode on vs off, over a 16-row-group file whose
string column lists its 7 values in another order in every row group (as Parquet writers leave them).

Why: what ``parquet_columns.CanonicalDictionary`` buys beyond CPU time -- on cuda a lookup table or interned key
per distinct dictionary is work (launches, syncs) per batch. Answers are checked against DuckDB.

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m bench.canonical_dictionary_counts cuda-sim
    .venv/bin/python -m bench.canonical_dictionary_counts cpu
"""
import os, sys, tempfile
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
import gpu_engine.connectors.parquet_columns as pc_mod
from gpu_engine import Session
device = sys.argv[1]
path = os.path.join(tempfile.mkdtemp(), "modes.parquet")
rng = np.random.default_rng(5)
modes = ["MAIL", "SHIP", "AIR", "RAIL", "TRUCK", "FOB", "REG AIR"]
with pq.ParquetWriter(path, pa.schema([("mode", pa.string()), ("v", pa.int64())]), use_dictionary=["mode"]) as w:
    for g in range(16):
        order = list(rng.permutation(modes))
        col = order + [order[i] for i in rng.integers(0, 7, 1017)]
        w.write_table(pa.table({"mode": col, "v": rng.integers(0, 100, len(col))}))
text = ("SELECT mode, sum(CASE WHEN mode IN ('MAIL', 'SHIP') THEN v ELSE 0 END) s, count(*) c FROM t "
        "WHERE mode <> 'FOB' GROUP BY mode ORDER BY mode")
import duckdb
want = duckdb.sql(text.replace(" t ", f" '{path}' ")).fetchall()
for max_values in (4096, 0, 4096, 0):
    pc_mod.CANONICAL_DICTIONARY_MAX_VALUES = max_values
    s = Session(device=device, drivers=1, batch_rows=1024)
    s.register("t", path)
    got = s.sql(text)
    assert [tuple(r.values()) for r in got.to_pylist()] == want, (got.to_pylist(), want)
    ops = {}
    for stats in s.last_stats().operator_stats_by_node().values():
        for st in stats:
            a = ops.setdefault(st.operator_type, [0, 0, 0])
            a[0] += st.kernel_launches; a[1] += st.host_syncs; a[2] += st.output_batches
    print(device, "recode" if max_values else "no recode", ops)
