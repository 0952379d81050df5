"""left / right with counts past the longest string a substring reaches (2**32 - 1 characters), as DuckDB: right
clamps the count to each string's length (right(s, 2**63 - 1) is s, right(s, -2**63) is ''), left(s, n > 2**32 - 1)
raises "Substring length outside of supported range" for a non-NULL string. The engine gave '' for right(s, 2**63 -
1) (fuzz round 10, seed 320), raised a raw OverflowError for right(s, -2**63 + 1) and answered left(s, 2**63 - 1)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine import ExecutionError

PLAIN = pa.array(["abc", "é日本", None, "", "😀x"])
TABLES = {"t": pa.table({"s": PLAIN, "sd": PLAIN.dictionary_encode()}),
          "n": pa.table({"s": pa.array([None, None], pa.string())})}
BIG, SMALLEST = 2**63 - 1, -(2**63)

QUERIES = [
    f"SELECT s, right(s, {BIG}) AS a, right(sd, {BIG}) AS b, right(s, 4294967297) AS c FROM t",
    f"SELECT s, right(s, -{BIG}) AS a, right(sd, {SMALLEST}) AS b, right(s, -4294967297) AS c, "
    f"left(s, {SMALLEST}) AS d FROM t",
    "SELECT s, right(s, 2) AS a, right(sd, -1) AS b, left(s, 2) AS c, left(sd, 4294967295) AS d FROM t",
    f"SELECT left(s, {BIG}) AS a FROM n",
]


def test_left_right_with_huge_counts_match_duckdb(device_name):
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device=device_name)
        assert_queries_match_duckdb(session, connection, QUERIES if device_name == "cpu" else QUERIES[:1])
        for column in ("s", "sd"):
            with pytest.raises(ExecutionError, match=r"Substring length outside of supported range \(> 4294967295\)"):
                session.sql(f"SELECT left({column}, {BIG}) AS a FROM t")
