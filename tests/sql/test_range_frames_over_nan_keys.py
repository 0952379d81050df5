"""RANGE frames with an offset over a DOUBLE key holding NaN, as DuckDB orders it (NaN greatest, equal to NaN): a
NaN row's frame is its NaN peers, and the other rows' frames are unchanged. The binary search for a frame's bound
compared with ``<`` / ``<=``, false against NaN: with two NaNs in a partition every row's frame came out empty
(NULL), with one the NaN row's (fuzz round 9, seed 3146)."""

from __future__ import annotations

import pyarrow as pa
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

NAN, INF = float("nan"), float("inf")
TABLES = {"t": pa.table({
    "id": list(range(10)),
    "k": [1, 1, 1, 1, 2, 2, 2, 3, 3, None],
    "x": [NAN, 1.0, NAN, 1.25, 0.0, NAN, None, INF, 2.0, NAN],
})}

QUERIES = [
    "SELECT id, min(x) OVER (PARTITION BY k ORDER BY x DESC RANGE BETWEEN 0.5 PRECEDING AND 0.5 FOLLOWING) AS a, "
    "count(*) OVER (PARTITION BY k ORDER BY x RANGE BETWEEN 0.5 PRECEDING AND 0.5 FOLLOWING) AS b FROM t",
    "SELECT id, count(x) OVER (ORDER BY x NULLS FIRST RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) AS a, "
    "sum(x) OVER (ORDER BY x DESC NULLS LAST RANGE BETWEEN CURRENT ROW AND 2 FOLLOWING) AS b FROM t",
    "SELECT id, max(id) OVER (PARTITION BY k ORDER BY x RANGE BETWEEN 3 FOLLOWING AND 10 FOLLOWING) AS a FROM t",
]


def test_range_frames_over_nan_keys_match_duckdb(device_name):
    queries = QUERIES if device_name == "cpu" else QUERIES[:1]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection, queries)
