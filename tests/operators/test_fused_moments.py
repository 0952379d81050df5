"""Variance, standard deviation, covariance, correlation and ``regr_*`` in the fused aggregation kernel, against DuckDB.

Why a file of its own: these aggregates ran only on the eager HashAggregation (TPC-DS q39's partial
aggregation spent 50 ms there at SF1, beside the fused kernel of its other aggregates). The generated kernel now
folds them in the same kernel as the other aggregates: the CPU twin by Welford's update (the eager CPU kernel's
arithmetic), the CUDA twin as sums of deviations from a shift the group's first row claims (atomics only), and
both merge partial states by Chan's formula (:class:`~gpu_engine.aggregation.functions.Moments`). The table
mixes NULLs on either side of a pair, groups of one row (the sample forms NULL), groups every row of which
the filter removes, values offset from 0 (a plain sum of squares would cancel; near 1e9 DuckDB itself loses
digits), decimals and integers; drivers 1-3 and batch sizes from 7 rows merge partial states in several orders.
"""

import decimal

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_with_tables, optimized_sql_plan, session_with_tables

#: Rows of the table per device: the simulator interprets every kernel row by row.
ROWS = {"cpu": 420, "cuda-sim": 48, "cuda": 420}
#: One query shape: each new kernel shape compiles for seconds in CI.
AGGREGATES = ("stddev_samp(x) AS ss, var_pop(d) AS vd, covar_samp(x, i) AS cs, corr(i, d) AS r, "
              "regr_intercept(i, x) AS ri, count(*) AS n")
QUERIES = [f"SELECT g, {AGGREGATES} FROM t WHERE k <> 3 GROUP BY g",
           f"SELECT {AGGREGATES} FROM t WHERE k <> 3",
           f"SELECT {AGGREGATES} FROM t WHERE k > 100"]  # no row passes: NULLs (regr_count 0), as DuckDB


def _table(rows: int) -> pa.Table:
    """Groups ``g`` of many rows, of one row (g >= 1000) and one whose rows all have k = 3 (filtered out)."""
    g = [i % 5 if i % 11 else 1000 + i for i in range(rows)]
    return pa.table({
        "g": pa.array(g, pa.int64()),
        "k": pa.array([3 if v == 4 else i % 7 for i, v in enumerate(g)], pa.int64()),
        "x": pa.array([None if i % 13 == 5 else 1e3 + (i * 7919) % 17 - 8 for i in range(rows)], pa.float64()),
        "i": pa.array([None if i % 9 == 2 else (i * 31) % 101 - 50 for i in range(rows)], pa.int32()),
        "d": pa.array([None if i % 10 == 7 else decimal.Decimal((i * 37) % 1000 - 500).scaleb(-2) for i in range(rows)],
                      pa.decimal128(9, 2)),
    })


def _every_aggregation_fused(explained: str) -> bool:
    """Return True when the plan's aggregations (one at least) are all fused aggregations."""
    steps = [line for line in explained.splitlines() if line.lstrip().startswith("--") and "Aggregation[" in line]
    return bool(steps) and all("FusedAggregation[" in line for line in steps)


def test_moments_plan_as_a_fused_aggregation():
    """Each moment aggregate plans into the fused kernel beside a sum (before: a HashAggregation)."""
    table = _table(ROWS["cpu"])
    session = session_with_tables({"t": table})
    for aggregate in ("stddev_samp(x)", "var_pop(i)", "covar_samp(x, i)", "corr(d, x)", "regr_slope(i, x)"):
        plan = optimized_sql_plan(session, f"SELECT g, {aggregate} AS a, sum(i) AS t FROM t WHERE k > 0 GROUP BY g")
        assert _every_aggregation_fused(session.explain(plan)), aggregate


@pytest.mark.simulator_pairs((1, None), (2, 7))  # the simulator interprets every kernel: two of the three
@pytest.mark.parametrize("drivers, batch_rows", [(1, None), (2, 7), (3, 64)])
def test_fused_moments_match_duckdb(device_name, drivers, batch_rows):
    """The fused kernel's moments (the generated tier only: compiled inline) equal DuckDB's, NULLs and all."""
    table = _table(ROWS[device_name])
    session = session_with_tables({"t": table}, device=device_name, drivers=drivers, compile_mode="inline",
                                  split_rows=max(1, table.num_rows // 4),
                                  **({} if batch_rows is None else {"batch_rows": batch_rows}))
    connection = duckdb_with_tables({"t": table})
    for sql in QUERIES:
        assert _every_aggregation_fused(session.explain(optimized_sql_plan(session, sql))), sql
        assert_same_rows(session.sql(sql), connection.sql(sql).to_arrow_table())
