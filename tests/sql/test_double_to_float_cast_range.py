"""CAST of a DOUBLE to FLOAT as DuckDB: a finite double past FLOAT's range raises ("out of range for the destination
type FLOAT") and TRY_CAST gives NULL, while every other double rounds to the nearest float (just above FLOAT's
largest value to it) and NaN / infinities stay. The engine turned 1e308 into inf in all three, fused and unfused
(fuzz round 10: ``ORDER BY CAST(x AS FLOAT)`` answered where DuckDB raised; ``TRY_CAST`` gave inf for NULL)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine import ExecutionError

TOP = float(np.finfo(np.float32).max)
TABLES = {"t": pa.table({
    "k": [1, 1, 2, 2, 3, 3, None, 1],
    "x": [1e308, 1.5, float("nan"), float("inf"), TOP * (1 + 1e-9), -1e39, None, float("-inf")],
})}

ANSWERED = [
    "SELECT k, TRY_CAST(x AS FLOAT) AS f FROM t",
    "SELECT k, CAST(x AS FLOAT) AS f FROM t WHERE abs(x) < 1e38 OR isnan(x) OR isinf(x)",
    "SELECT k, count(TRY_CAST(x AS FLOAT)) AS c, max(TRY_CAST(x AS REAL)) AS hi FROM t GROUP BY k",
]
RAISED = [
    "SELECT k, CAST(x AS FLOAT) AS f FROM t",
    "SELECT k, max(CAST(x AS FLOAT)) AS hi FROM t GROUP BY k",
    "SELECT k FROM t WHERE CAST(x * 2 AS FLOAT) > 0",
]


@pytest.mark.parametrize("fuse", [True, False])
def test_double_to_float_casts_match_duckdb(device_name, fuse):
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device=device_name, fuse=fuse, split_rows=3)
        assert_queries_match_duckdb(session, connection, ANSWERED if device_name == "cpu" else ANSWERED[:1])
        for sql in RAISED if device_name == "cpu" else RAISED[1:2]:
            with pytest.raises(Exception):
                connection.sql(sql).fetchall()
            with pytest.raises(ExecutionError, match="out of range"):
                session.sql(sql)
