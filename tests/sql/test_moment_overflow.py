"""Variance, covariance, correlation and ``regr_*`` over values near the largest double, against DuckDB.

DuckDB answers these from Welford states and, for ``regr_intercept`` / ``regr_avgx`` / ``regr_avgy``, plain
sums: a sum of values near 1e308 is infinite there, a variance whose squares overflow is inf, ``corr`` and
``regr_r2`` are 0 beside an infinite spread, and a zero slope times an infinite mean is NaN. The engine's
batch moments took a first mean from the plain sum (inf: every moment NaN once partial states merged or on
CUDA), subtracted an overflowed correction from an overflowed sum (NaN), and averaged without the sum
(finite intercepts). Each group below overflows whatever the order of its rows, so drivers 1-3 and small
batches must all agree with DuckDB; co-moments that overflow to both signs (an order-dependent NaN or inf in
DuckDB as well) are left out.
"""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_with_tables, session_with_tables

#: cuda-sim runs the kernels on NumPy scalars, which warn on the very overflows checked here
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

#: group -> (y, x): which sum or square overflows
GROUPS = {
    1: ([1e308, 1e308, 1.5e308], [1.0, 2.0, 3.0]),          # sum(y) (and y's squares)
    2: ([1.0, 2.0, 4.0], [1e308, 1.2e308, 1.5e308]),        # sum(x): slope 0 times avg(x) inf, a NaN intercept
    3: ([-1e308, -1e308, -1.5e308], [1.0, 3.0, 2.0]),       # sum(y) to -inf
    4: ([9e307, 9e307, 9e307, 9e307], [1.0, 2.0, 3.0, 4.0]),  # the sum only, a constant y
    5: ([1.7e308, 1.7e308], [1.0, 2.0]),                     # a constant near the largest double
    6: ([1.0, 2.0], [1.7e308, 1.7e308]),                     # a constant x: NULL slope and intercept
    7: ([1e160, 3e160, 2e160], [1.0, 2.0, 4.0]),            # the squares only
    # the sum of deviations from the batch's first mean (5 x +0.49e308): inf, a NaN mean once batches merged
    8: ([2.0] * 7, [1.7e308] * 5 + [0.0, 0.0]),
    9: ([1.5e308, 1.5e308, 0.5], [0.0, 1e-300, 0.0]),      # x's squares underflow to 0, not its co-moment: NaN slope
}
TABLE = pa.table({
    "g": pa.array([g for g, (y, _) in GROUPS.items() for _ in y], pa.int64()),
    "y": pa.array([v for y, _ in GROUPS.values() for v in y], pa.float64()),
    "x": pa.array([v for _, x in GROUPS.values() for v in x], pa.float64()),
})
PAIRED = ["regr_intercept", "regr_slope", "regr_r2", "corr", "covar_pop", "covar_samp", "regr_avgx", "regr_avgy",
          "regr_sxx", "regr_syy", "regr_sxy", "regr_count"]
SINGLE = ["var_pop", "var_samp", "stddev_pop", "stddev_samp"]
SELECTED = ", ".join([f"{f}(y, x) AS {f}" for f in PAIRED] + [f"{f}(y) AS {f}_y" for f in SINGLE]
                     + [f"{f}(x) AS {f}_x" for f in SINGLE])
QUERIES = [f"SELECT g, {SELECTED} FROM t GROUP BY g", f"SELECT {SELECTED} FROM t WHERE g = 1"]


def _check(device: str, drivers: int, split_rows: int | None, **options) -> None:
    tables = {"t": TABLE}
    session = session_with_tables(tables, device=device, drivers=drivers, split_rows=split_rows, **options)
    connection = duckdb_with_tables(tables)
    for sql in QUERIES:
        assert_same_rows(session.sql(sql), connection.sql(sql).to_arrow_table())


@pytest.mark.parametrize("drivers, split_rows", list(itertools.product([1, 2, 3], [None, 1, 2])))
def test_moments_over_overflowing_values_match_duckdb_on_cpu(drivers, split_rows):
    _check("cpu", drivers, split_rows)


@pytest.mark.parametrize("drivers", [2, 3])
def test_eager_moments_merged_across_drivers_match_duckdb(drivers):
    """The lowest tier merges the drivers' partial states by Chan's formula in the order they arrive: ``d * nb / n``
    passed the largest double for group 8 (two states of 1.7e308 joining one of 0), an infinite mean, and its
    covar / regr_slope were NaN or 0 by the order (1 run in 2 failed)."""
    _check("cpu", drivers, 1, compile_mode="lowest")


def test_moments_over_overflowing_values_match_duckdb_on_each_device(device_name):
    for drivers, split_rows in ((1, None), (2, 2)):
        _check(device_name, drivers, split_rows)


#: group -> (y, x): co-moments whose single products pass the largest double, to both signs (a product rounded
#: to +inf beside a co-moment of -inf was NaN). DuckDB's update is a fused multiply-add, whose product is never
#: rounded to inf first: its answer is the same for one driver, whatever the batches; merged across threads it
#: depends on their order (DuckDB's too), so drivers 2-3 are left out.
BOTH_SIGNS = {
    1: ([1e308, 1.1e308, 1.5e308], [1.5e308, 1.2e308, 1.4e308]),
    2: ([1e200, 2e200, -3e200, 5e200], [1e200, -2e200, 3e200, 4e200]),
}


@pytest.mark.parametrize("compile_mode", ["inline", "lowest"], ids=["fused", "eager"])
@pytest.mark.parametrize("split_rows", [None, 1])
def test_co_moments_overflowing_to_both_signs_match_duckdb_on_one_driver(compile_mode, split_rows):
    table = pa.table({
        "g": pa.array([g for g, (y, _) in BOTH_SIGNS.items() for _ in y], pa.int64()),
        "y": pa.array([v for y, _ in BOTH_SIGNS.values() for v in y], pa.float64()),
        "x": pa.array([v for _, x in BOTH_SIGNS.values() for v in x], pa.float64()),
    })
    session = session_with_tables({"t": table}, device="cpu", drivers=1, split_rows=split_rows,
                                  compile_mode=compile_mode)
    connection = duckdb_with_tables({"t": table})
    for sql in QUERIES:
        assert_same_rows(session.sql(sql), connection.sql(sql).to_arrow_table())
