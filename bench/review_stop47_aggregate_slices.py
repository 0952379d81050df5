"""Review probe (stop 47): fused aggregations split into a key kernel and slice kernels (5c9cc11), against DuckDB,
with the slice budget shrunk so every shape splits: NULL keys and values, FILTER clauses, min/max (non-zero
fills), avg, decimals, floats, string keys and string min/max, DISTINCT + aggregates, HAVING, no keys, empty
inputs, first batches over the sampling threshold, drivers 1..4 x batch rows 1..7/4096 x flushing partial steps.

    NUMBA_DISABLE_JIT=1 .venv/bin/python -m bench.review_stop47_aggregate_slices cpu [budget]
    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m bench.review_stop47_aggregate_slices cuda-sim
    .venv/bin/python -m bench.review_stop47_aggregate_slices cpu 40 1,2  (jitted, string-key shapes)

(NUMBA_DISABLE_JIT runs the CPU twins as Python: every shape without a compile, the same code paths.)
"""
import itertools
import sys
from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import rows_mismatch  # noqa: E402
from gpu_engine import Session  # noqa: E402
from gpu_engine.codegen import kernel_bounds  # noqa: E402
import gpu_engine.operators.fused_aggregation as operator  # noqa: E402


def table(n: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 9, n)
    v = rng.integers(-50, 100, n)
    return pa.table({
        "g": pa.array([None if x == 0 else int(x) for x in g], pa.int64()),
        "s": pa.array([None if x % 5 == 0 else f"key{x % 4}" for x in rng.integers(0, 40, n)]),
        "v": pa.array([None if i % 7 == 3 else int(x) for i, x in enumerate(v)], pa.int64()),
        "w": pa.array([None if i % 11 == 5 else int(x) for i, x in enumerate(rng.integers(0, 1000, n))], pa.int32()),
        "f": pa.array([None if i % 13 == 1 else float(x) / 8 for i, x in enumerate(rng.integers(-99, 99, n))]),
        "d": pa.array([None if i % 6 == 2 else Decimal(int(x)) / 100 for i, x in enumerate(rng.integers(-9999, 9999, n))],
                      pa.decimal128(12, 2)),
        "t": pa.array([None if i % 9 == 4 else f"t{x}" for i, x in enumerate(rng.integers(0, 300, n))]),
    })


AGGS = [
    "sum(v), count(v), min(v), max(v), count(*), sum(w), avg(v), min(w), max(w)",
    "sum(d), min(d), max(d), avg(d), sum(d * 2), count(d), sum(v + w), max(f), min(f), sum(f)",
    "sum(v) FILTER (WHERE w > 500), count(*) FILTER (WHERE v < 0), max(v) FILTER (WHERE s IS NULL), "
    "min(d) FILTER (WHERE w < 100), sum(CASE WHEN v > 10 THEN d ELSE 0 END), count(t), min(t), max(t)",
    "sum(v * w), sum(v - w), max(v + w), min(v * 2), count(DISTINCT v), sum(v)",
    "bool_and(v > 0), bool_or(w > 990), sum(v), max(d), count(f), min(s), max(s)",
]
SHAPES = [
    "SELECT g, {a} FROM t GROUP BY g",
    "SELECT s, {a} FROM t GROUP BY s",
    "SELECT g, s, {a} FROM t WHERE v IS NOT NULL OR w > 100 GROUP BY g, s",
    "SELECT {a} FROM t",
    "SELECT {a} FROM t WHERE w > 10000",
    "SELECT g, {a} FROM t WHERE w > 10000 GROUP BY g",
    "SELECT g, {a} FROM t GROUP BY g HAVING count(*) > 3",
    "SELECT w % 37 AS k, {a} FROM t GROUP BY w % 37",
]


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    budget = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    kernel_bounds.MAX_AGGREGATION_SLICE_NODES = budget
    seen = []
    original = operator.generate_fused_aggregation

    def recording(program, functions, layout):
        generated = original(program, functions, layout)
        seen.append(generated.slices)
        return generated

    operator.generate_fused_aggregation = recording
    tables = {"small": table(61), "large": table(1500, 3)}
    grid = ([(2, 16, None, "small")] if dev != "cpu" else
            list(itertools.product([1, 3], [1, 7, 4096], [None, 2], ["small"])) + [(2, 4096, None, "large"),
                                                                                     (1, 1000, 3, "large")])
    shapes = SHAPES
    if len(sys.argv) > 3:  # jitted: a few shapes (indices), one setting (NUMBA_DISABLE_JIT cannot run string keys)
        shapes = [SHAPES[int(i)] for i in sys.argv[3].split(",")]
        grid = [(2, 7, 2, "small")]
    probes = bad = 0
    for drivers, batch, pmax, which in grid:
        tb = tables[which]
        con = duckdb.connect()
        con.register("t", tb)
        extra = {} if pmax is None else {"partial_aggregation_max_groups": pmax}
        ses = Session(device=dev, drivers=drivers, batch_rows=batch, compile_mode="inline", **extra)
        ses.register("t", tb, split_rows=max(1, len(tb) // 4))
        for shape, aggs in itertools.product(shapes, AGGS):
            sql = shape.format(a=aggs)
            probes += 1
            try:
                e = con.sql(sql).to_arrow_table()
                g = ses.sql(sql).rename_columns(e.column_names)
                pr = rows_mismatch(g, e)
            except Exception as ex:
                pr = f"EXC {type(ex).__name__}: {ex}"
            if pr:
                bad += 1
                print("BAD", drivers, batch, pmax, which, sql, str(pr)[:400], flush=True)
        print("grid", drivers, batch, pmax, which, "probes", probes, "bad", bad, "split kernels", sum(1 for s in seen if s),
              "of", len(seen), flush=True)
    print("probes", probes, "bad", bad)


if __name__ == "__main__":
    main()
