"""``lag(x, -n)`` is ``lead(x, n)`` and ``lead(x, -n)`` is ``lag(x, n)``, as DuckDB reads a negative offset: through
Session.sql against DuckDB with partitions, defaults, NULL values and keys, strings, offsets past the partition, an
empty table; the column keeps the name the user wrote."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

T = pa.table({
    "x": pa.array([1, 2, 3, None, 5, 6, 7, 8], pa.int64()),
    "g": pa.array([1, 1, 2, 2, 1, 2, 1, None], pa.int32()),
    "s": pa.array(["a", "é", None, "", "c", "日本", "e", "f"]),
})

QUERIES = [
    "SELECT x, lag(x, -1) OVER (ORDER BY x), lead(x, -2, 0) OVER (PARTITION BY g ORDER BY x), "
    "lag(s, -1, 'z') OVER (PARTITION BY g ORDER BY x NULLS FIRST) FROM t",
    "SELECT x, lag(x, -0) OVER (ORDER BY x) AS a, lead(x, -1) OVER (ORDER BY x) AS b, "
    "lag(x, -100) OVER (ORDER BY x) AS c, lead(s, -3) OVER (PARTITION BY g ORDER BY x) AS e FROM t",
    "SELECT x, lag(x, -1) OVER (ORDER BY x) AS a FROM t WHERE x < 0",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


def test_negative_offsets_match_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T}, split_rows=3, device="cpu", drivers=2, batch_rows=2)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_negative_offsets_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T}, split_rows=8, device=device_name, drivers=1, batch_rows=8)
    assert_queries_match_duckdb(session, reference, QUERIES[:1])
