"""Set operations of a DATE/TIMESTAMP/TIME/INTERVAL column beside numbers/booleans/NULLs against DuckDB (leftovers5).

Usage: python -m bench.leftovers5_probe_set_temporal. What differs: EXCEPT/INTERSECT with a constant-false side,
which DuckDB prunes while planning (by data, it raises as the engine does).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from duckdb_reference import session_with_tables, duckdb_with_tables
from bench.duckdb_probes import duckdb_probe_problem
import pyarrow as pa
t = pa.table({'d': pa.array([1, 2], pa.date32()), 'i': pa.array([1, 2]), 'f': pa.array([1.5, 2.5]), 'b': pa.array([True, None]), 'n': pa.array([None, None], pa.int32())})
s = session_with_tables({'t': t}); c = duckdb_with_tables({'t': t})
moments = ["d", "CAST(d AS TIMESTAMP)", "CAST(d AS TIMESTAMPTZ)", "TIME '10:00:00'", "INTERVAL 2 DAY", "DATE '2020-01-01'"]
others = ["i", "f", "b", "1", "2.5", "true", "CAST(i AS DECIMAL(10,2))", "n", "NULL"]
bad = n = 0
for m in moments:
    for o in others:
        for op in ["UNION ALL", "UNION", "EXCEPT", "INTERSECT"]:
            for wl, wr in [("", " WHERE false"), (" WHERE false", ""), ("", ""), (" WHERE false", " WHERE false")]:
                for q in [f"SELECT {m} AS x FROM t{wl} {op} SELECT {o} FROM t{wr}", f"SELECT {o} AS x FROM t{wl} {op} SELECT {m} FROM t{wr}"]:
                    n += 1
                    p = duckdb_probe_problem(c, s, q)
                    if p:
                        bad += 1
                        if "EXCEPT" not in q and "INTERSECT" not in q: print(q, "->", p[:200])
print("cases", n, "bad", bad)
