"""DuckDB's ``gamma(x)`` and ``lgamma(x)`` (C's tgamma and log |Γ(x)|; unknown functions until stop 54) against
DuckDB 2.0.1: ordinary values, lgamma's zeros (1 and 2), poles (0, -0.0, negative integers), overflow both ways,
infinities, NaN, NULLs and integer arguments, over splits of 7 rows, with fused kernels around it and without."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

VALUES = [5.0, 0.5, 1.0, 2.0, 1.0000001, 0.0, -0.0, -1.0, -1.5, -2.5, 171.7, 171.5, -171.5, -200.5, 1e-310, 1e-300,
          1e308, float("inf"), float("-inf"), float("nan"), None, 3.3, -0.5, 100.25]
T = pa.table({"r": pa.array(range(len(VALUES)), pa.int32()), "x": pa.array(VALUES, pa.float64()),
              "i": pa.array([i - 3 if i % 5 else None for i in range(len(VALUES))], pa.int32())})


@pytest.mark.parametrize("mode", ["lowest", "inline"])
def test_gamma_and_lgamma_match_duckdb(device_name, mode):
    if device_name != "cpu" and mode != "lowest":
        pytest.skip("the kernel runs the same values eagerly on the second device")
    with duckdb_with_tables({"t": T}) as connection:
        session = session_with_tables({"t": T}, split_rows=7, device=device_name, compile_mode=mode)
        assert_queries_match_duckdb(session, connection, [
            "SELECT r, gamma(x) AS g, lgamma(x) AS l, gamma(i) AS gi, lgamma(i) + 1 AS li FROM t",
            "SELECT gamma(NULL) AS a, lgamma(4) AS b"], exact_types=True)
