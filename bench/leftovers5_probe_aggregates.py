"""The aggregate library over NULLs, empty input, int64 / double overflow against DuckDB, drivers 1-3 (leftovers5).

Usage: python -m bench.leftovers5_probe_aggregates. Differences left: ties (arg_min/min_by, mode, any_value: DuckDB
keeps an input-order one) and named refusals.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from duckdb_reference import session_with_tables, duckdb_with_tables
from bench.duckdb_probes import duckdb_probe_problem
import pyarrow as pa
T = pa.table({
  "g": pa.array([1, 1, 1, 2, 2, 3, 4, 4, 4, 4], pa.int64()),
  "i": pa.array([5, None, -3, None, None, 7, 9223372036854775807, 1, -9223372036854775807, 2], pa.int64()),
  "s": pa.array([3, 1, None, None, None, 2, 4, 4, 4, None], pa.int16()),
  "f": pa.array([1.5, None, -2.0, None, None, 1e308, 1e308, 1e308, -0.0, float("nan")], pa.float64()),
  "b": pa.array([True, None, False, None, None, True, True, True, None, False]),
  "t": pa.array(["b", None, "a", None, None, "c", "x", "y", "x", None]),
  "k": pa.array([1, 1, 2, None, None, 3, 1, 1, 2, 2], pa.int64()),
})
sessions = [session_with_tables({"t1": T}, device="cpu", drivers=d, split_rows=sr) for d, sr in [(1, None), (2, 3), (3, 1)]]
c = duckdb_with_tables({"t1": T})
AGGS = ["bit_and(i)", "bit_or(i)", "bit_xor(i)", "bit_and(s)", "bit_xor(s)", "bool_and(b)", "bool_or(b)",
        "arg_min(t, k)", "arg_max(t, k)", "arg_min(k, t)", "arg_max(i, f)", "arg_min(f, i)", "mode(k)", "mode(t)", "mode(f)",
        "approx_count_distinct(k)", "approx_count_distinct(t)", "product(f)", "product(i)", "product(s)", "kurtosis(f)", "kurtosis(i)",
        "skewness(f)", "skewness(i)", "entropy(k)", "entropy(t)", "entropy(f)", "string_agg(t, ',' ORDER BY t)", "string_agg(t ORDER BY k, t)",
        "string_agg(DISTINCT t, '|' ORDER BY t)", "list(t ORDER BY t)", "list(k ORDER BY k)", "count(DISTINCT t)", "sum(i)", "avg(i)", "sum(f)", "avg(f)",
        "min(f)", "max(f)", "median(f)", "median(i)", "quantile_cont(i, 0.5)", "first(t ORDER BY t)", "kurtosis_pop(f)", "var_samp(i)", "fsum(f)", "favg(f)", "histogram(k)",
        "bool_and(i > 0)", "sum(s)", "avg(s)", "geomean(f)", "max_by(t, k)", "min_by(t, k)", "arg_max(t, k, 2)", "bitstring_agg(k)", "any_value(t)", "count_if(b)", "sem(f)", "mad(f)", "mad(i)"]
WHERES = ["", " WHERE false", " WHERE g = 2", " WHERE g = 4", " WHERE g = 1"]
bad = n = 0
for a in AGGS:
    for w in WHERES:
        for q in [f"SELECT {a} AS v FROM t1{w}", f"SELECT g, {a} AS v FROM t1{w} GROUP BY g"]:
            for s in sessions:
                n += 1
                p = duckdb_probe_problem(c, s, q)
                if p:
                    bad += 1
                    print(q, "->", p[:230].replace("\n", " "))
                    break
print("cases", n, "bad", bad)
