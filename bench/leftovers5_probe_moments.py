"""Moments (var/stddev/covar/corr/regr_*) over values near the largest double against DuckDB, drivers 1-3 x splits.

Usage: python -m bench.leftovers5_probe_moments [cpu|cuda-sim under NUMBA_ENABLE_CUDASIM=1]. The 'both' and 'squares'
groups overflow co-moments to both signs: DuckDB's own answer then depends on row order (not a wrong answer).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import sys, math, itertools
import pyarrow as pa
from duckdb_reference import duckdb_with_tables, session_with_tables, rows_mismatch
FUNCS2 = ["regr_intercept", "regr_slope", "regr_r2", "corr", "covar_pop", "covar_samp", "regr_avgx", "regr_avgy",
          "regr_sxx", "regr_syy", "regr_sxy", "regr_count"]
FUNCS1 = ["var_pop", "var_samp", "stddev_pop", "stddev_samp", "avg", "sum"]
DATA = {
  "sum_y": ([1e308, 1e308, 1.5e308], [1.0, 2.0, 3.0]),
  "sum_x": ([1.0, 2.0, 4.0], [1e308, 1.2e308, 1.5e308]),
  "both": ([1e308, 1.1e308, 1.5e308], [1.5e308, 1.2e308, 1.4e308]),
  "neg": ([-1e308, -1e308, -1.5e308], [1.0, 3.0, 2.0]),
  "squares": ([1e200, 2e200, -3e200, 5e200], [1e200, -2e200, 3e200, 4e200]),
  "squares_small": ([1e160, 3e160, 2e160], [1.0, 2.0, 4.0]),
  "half": ([9e307, 9e307, 9e307, 9e307], [1.0, 2.0, 3.0, 4.0]),
  "const_big": ([1.7e308, 1.7e308], [1.0, 2.0]),
  "big_x_const": ([1.0, 2.0], [1.7e308, 1.7e308]),
}
def tables(y, x):
    return {"t": pa.table({"g": pa.array([i % 1 for i in range(len(y))], pa.int64()), "y": pa.array(y, pa.float64()), "x": pa.array(x, pa.float64())})}
dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
bad = 0; total = 0
for name, (y, x) in DATA.items():
    tb = tables(y, x)
    con = duckdb_with_tables(tb)
    sel = ", ".join([f"{f}(y, x) AS {f}" for f in FUNCS2] + [f"{f}(y) AS {f}_y" for f in FUNCS1] + [f"{f}(x) AS {f}_x" for f in FUNCS1])
    for q in [f"SELECT {sel} FROM t", f"SELECT g, {sel} FROM t GROUP BY g"]:
        exp = con.sql(q).to_arrow_table()
        for drivers, split in itertools.product([1, 2, 3], [None, 1, 2]):
            s = session_with_tables(tb, device=dev, split_rows=split, drivers=drivers)
            got = s.sql(q)
            total += 1
            for col in exp.column_names:
                e, g = exp[col].to_pylist()[0], got[col].to_pylist()[0]
                same = (e is None and g is None) or (e is not None and g is not None and (
                    (isinstance(e, float) and math.isnan(e) and math.isnan(g)) or e == g or (
                    isinstance(e, float) and math.isfinite(e) and abs(e - g) <= 1e-9 * abs(e))))
                if not same:
                    bad += 1
                    print(name, drivers, split, "group" if "GROUP" in q else "", col, "duck", e, "got", g)
print("runs", total, "bad cells", bad)
