"""A REAL (float32) compares with an integer or a decimal as a REAL, as DuckDB does (``r = 0.1`` is TRUE for 0.1::REAL).

Why: DuckDB's common type of FLOAT and an integer or a DECIMAL is FLOAT, so the other side is rounded to
float32 before the comparison; comparing the float32 widened to DOUBLE with the exact other side instead
found ``0.1::REAL = 0.1`` FALSE (0.10000000149 against 0.1) and ``16777217::REAL = 16777217`` FALSE.
A REAL against a DOUBLE compares as DOUBLE (``r = 0.1::DOUBLE`` stays FALSE).
"""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

T = pa.table({
    "r": pa.array([0.1, 16777216.0, None, 1.5, float("nan"), -0.3], pa.float32()),
    "d": pa.array([Decimal("0.10"), Decimal("0.30"), Decimal("1.50"), None, Decimal("2.00"), Decimal("-0.30")],
                  pa.decimal128(5, 2)),
    "i": pa.array([16777217, 1, 2, None, 3, 0], pa.int64()),
})

QUERIES = [
    "SELECT r, r = 0.1 AS a, r < 0.1 AS b, r > 0.1 AS c, 0.1 >= r AS e, r = 16777217 AS f, r = 0.1::DOUBLE AS g "
    "FROM t",
    "SELECT r, d, i, r = d AS a, r <= d AS b, d > r AS c, r = i AS e, r BETWEEN -0.3 AND 0.1 AS f FROM t",
    "SELECT count(*) AS n FROM t WHERE r = 0.1 OR r = -0.3",
]


def test_real_compares_with_integers_and_decimals_as_real(device_name):
    with duckdb_with_tables({"t": T}) as connection:
        assert_queries_match_duckdb(session_with_tables({"t": T}, device=device_name, fuse=False), connection, QUERIES)
