"""Review probe (stop 47): decimal and integer overflow inside a split fused aggregation's slice kernels (5c9cc11)
is an error as DuckDB's is, not a wrapped sum; exact decimal sums of large values stay exact.

    .venv/bin/python -m bench.review_stop47_slice_overflow [cpu|cuda-sim]
"""
import sys
from decimal import Decimal

import duckdb
import pyarrow as pa

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import rows_mismatch  # noqa: E402
from gpu_engine import Session  # noqa: E402
from gpu_engine.codegen import kernel_bounds  # noqa: E402


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    kernel_bounds.MAX_AGGREGATION_SLICE_NODES = 12
    big = Decimal("9" * 35 + ".99")
    n = 40
    t = pa.table({"g": pa.array([i % 3 for i in range(n)], pa.int64()),
                  "i": pa.array([(1 << 62) if i % 2 else 5 for i in range(n)], pa.int64()),
                  "d": pa.array([big if i % 8 else Decimal("-0.01") * i for i in range(n)], pa.decimal128(38, 2)),
                  "s": pa.array([Decimal(10) ** 16 + i for i in range(n)], pa.decimal128(18, 0))})
    con = duckdb.connect()
    con.register("t", t)
    queries = ["SELECT g, count(*), sum(s), max(d), min(d), sum(i) FROM t GROUP BY g",
               "SELECT g, count(*), sum(s), max(i), min(s), sum(d) FROM t GROUP BY g",
               "SELECT count(*), sum(s), max(d), min(i), sum(s * 2) FROM t",
               "SELECT g, min(i), max(i), sum(s), sum(s + 1), avg(s) FROM t GROUP BY g"]
    bad = 0
    for drivers, batch in ((1, 4096), (2, 3)):
        ses = Session(device=dev, drivers=drivers, batch_rows=batch, compile_mode="inline")
        ses.register("t", t, split_rows=7)
        for q in queries:
            try:
                e = con.sql(q).to_arrow_table()
            except Exception as ex:  # noqa: BLE001
                e = ex
            try:
                g = ses.sql(q)
                pr = (f"engine answered where DuckDB raised {e}" if isinstance(e, Exception)
                      else rows_mismatch(g.rename_columns(e.column_names), e))
            except Exception as ex:  # noqa: BLE001
                pr = None if isinstance(e, Exception) else f"EXC {type(ex).__name__}: {ex}"
                if pr is None:
                    print("both raised:", type(ex).__name__, str(ex)[:150], "| duckdb:", str(e)[:100])
            if pr:
                bad += 1
                print("BAD", drivers, batch, q, str(pr)[:400], flush=True)
    print("probes", 2 * len(queries), "bad", bad)


if __name__ == "__main__":
    main()
