"""An uncorrelated scalar subquery of at most one row (``LIMIT 0`` / ``LIMIT 1``) under OR / NOT in WHERE.

``k = (SELECT u.k FROM u ORDER BY u.id LIMIT 1) OR id > 4`` was refused ("a subquery inside OR, NOT or an
expression"; the compose fuzz, seed 90180); it is now one aggregate row (``any_value`` over its at most one
row: the value, or NULL without a row) cross joined, as WHERE plans an aggregate subquery
(``gpu_engine/sql/subquery_values.py`` ``_one_row_aggregate``). Checked against DuckDB on cpu and cuda-sim.
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

T = pa.table({
    "id": pa.array(range(6), pa.int64()),
    "k": pa.array([1, None, 2, 3, 1, 2], pa.int32()),
    "s": pa.array(["a", None, "bc", "", "ä", "z"]),
    "dt": pa.array([10957, 10958, None, 11000, 10957, 12000], pa.date32()),
})
TABLES = {"t": T, "u": T.slice(0, 3), "e": T.slice(0, 0)}

QUERIES = [
    "SELECT id FROM t WHERE (k = (SELECT u.k FROM u ORDER BY u.id LIMIT 1) OR id > 4)",
    "SELECT id FROM t WHERE (k = (SELECT u.k FROM u ORDER BY u.id DESC LIMIT 1 OFFSET 1) OR id > 4)",
    "SELECT id FROM t WHERE (k = (SELECT u.k FROM e u ORDER BY u.id LIMIT 1) OR id > 4)",
    "SELECT id FROM t WHERE NOT (s = (SELECT u.s FROM u ORDER BY u.id LIMIT 1))",
    "SELECT id FROM t WHERE (k = (SELECT u.k FROM u ORDER BY u.id LIMIT 0) OR id > 4)",
    "SELECT id FROM t WHERE (dt > (SELECT u.dt FROM u ORDER BY u.id LIMIT 1 OFFSET 5) OR id = 1)",
    "SELECT id FROM t WHERE (k IS NULL) = ((SELECT u.k FROM u ORDER BY u.id DESC LIMIT 1) IS NULL)",
]


def test_limited_subquery_values_in_where_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, split_rows=4, device="cpu", drivers=2, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_limited_subquery_value_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, split_rows=4, device=device_name, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES[:1])
