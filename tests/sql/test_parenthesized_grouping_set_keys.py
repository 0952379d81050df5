"""A parenthesized expression inside a grouping-set tuple -- ``GROUPING SETS (((x > 0), k), ())``, ``CUBE
(((x > 0), k))`` -- is the key ``x > 0``, as a lone ``(x > 0)`` already was; it was refused as "column t.x is not
available here" (fuzz round 9, seed 2076)."""

from __future__ import annotations

import pyarrow as pa
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

TABLES = {"t": pa.table({"k": [1, 1, 2, None, 2], "x": [0.5, -1.0, None, 2.0, 0.0], "v": [1, 2, 3, 4, None]})}

QUERIES = [
    "SELECT (x > 0) AS g0, k, count(*) AS n FROM t GROUP BY GROUPING SETS (((x > 0), k), ()) HAVING (x > 0) IS NULL",
    "SELECT (x > 0) AS g0, k, sum(v) AS s FROM t GROUP BY GROUPING SETS ((k, (x > 0)), (k), ())",
    "SELECT (x > 0) AS g0, k, grouping((x > 0), k) AS g, count(*) AS n FROM t GROUP BY CUBE (((x > 0), k))",
    "SELECT k, (v % 2) AS p, count(*) AS n FROM t GROUP BY ROLLUP ((k, (v % 2)))",
]


def test_parenthesized_keys_in_grouping_set_tuples_match_duckdb(device_name):
    queries = QUERIES if device_name == "cpu" else QUERIES[:1]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection, queries)


#: Seed 2141's rows: with (x > 0) both alone and inside a tuple, the two spellings were two keys (wrong answers).
SEED_2141 = {"t": pa.table({
    "s": [None, None, None, None, "é", "", None, None, "x1", "-3"],
    "x": [1000.0, 0.0, None, 0.5, None, float("nan"), None, -1.25, -0.0, 2.0],
    "v": [-7, 5, 10, 1, -3, 1, None, -7, -1, 2],
})}


def test_a_key_parenthesized_alone_and_in_a_tuple_is_one_key(device_name):
    query = ("SELECT s AS g0, (x > 0) AS g1, v % 3 AS g2, grouping(v % 3) AS gr, count(DISTINCT v) AS a0 FROM t "
             "GROUP BY GROUPING SETS ((s, (x > 0), v % 3), (v % 3, s), ((x > 0)))")
    with duckdb_with_tables(SEED_2141) as connection:
        assert_queries_match_duckdb(session_with_tables(SEED_2141, device=device_name), connection, [query])
