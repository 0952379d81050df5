"""``0 << n`` for n at or past the type's width is 0 in DuckDB (its check exempts a zero input); the engine raised
"Left-shift value is out of range" (fuzz round 10, seed 2337: ``v << 64`` over a row with v = 0). Any other number
still raises, and a negative count raises even for 0, as DuckDB's checks run in that order."""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine import ExecutionError

TABLES = {"t": pa.table({"v": pa.array([0, 0, None], pa.int64()), "i": pa.array([0, 1, None], pa.int32())})}

QUERIES = [
    "SELECT v, v << 64 AS a, v << 1000 AS b, CAST(v AS TINYINT) << 8 AS c, CAST(v AS UTINYINT) << 9 AS d FROM t",
    "SELECT i, i << 31 AS a FROM t WHERE i = 0 OR i IS NULL",
]


def test_left_shift_of_zero_matches_duckdb(device_name):
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device=device_name)
        assert_queries_match_duckdb(session, connection, QUERIES if device_name == "cpu" else QUERIES[:1])
        for sql, message in [("SELECT i << 32 AS a FROM t", "out of range"), ("SELECT v << -1 AS a FROM t", "negative")]:
            with pytest.raises(Exception):
                connection.sql(sql).fetchall()
            with pytest.raises(ExecutionError, match=message):
                session.sql(sql)
