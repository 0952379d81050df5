"""A subquery correlated inside a derived table of its FROM (``FROM (SELECT * FROM u WHERE u.k = t.k) w``).

Decorrelation read the correlation from the subquery's own WHERE only and refused these ("EXISTS without an
equality between a subquery column and an outer column"; the compose fuzz's correlated derived ``SELECT *``);
the correlated conjuncts of a derived table that only filters and projects now move to the subquery's WHERE
(gpu_engine/sql/correlated_derived_tables.py), over its outputs, a pruned column added back. EXISTS, NOT EXISTS,
IN, under OR, nested derived tables and inner joins, NULL keys, against DuckDB on cpu and cuda-sim.
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

T = pa.table({
    "id": pa.array(range(8), pa.int64()),
    "k": pa.array([1, 1, 2, None, 3, 2, 4, 1], pa.int32()),
    "i": pa.array([5, 1, 2, None, 7, 0, 3, 2], pa.int64()),
    "j": pa.array([0, 6, 2, 3, 1, 2, None, 5], pa.int32()),
})
U = pa.table({
    "id": pa.array(range(100, 109), pa.int64()),
    "k": pa.array([1, 1, 2, 2, 3, None, 1, 5, 3], pa.int32()),
    "i": pa.array([3, -1, 5, 2, None, 1, 7, 0, 2], pa.int64()),
    "j": pa.array([1, 2, 3, 4, 0, 6, None, 2, 2], pa.int32()),
})
ONE = pa.table({"j": pa.array([2], pa.int32())})
TABLES = {"t": T, "u": U, "one": ONE}

QUERIES = [
    "SELECT id FROM t WHERE EXISTS (SELECT * FROM (SELECT * FROM u WHERE u.k = t.k) w)",
    "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM (SELECT * FROM u WHERE u.k = t.k) w WHERE w.i > 0)",
    "SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM (SELECT u.k AS kk, u.i FROM u WHERE u.k = t.k AND u.j < t.j) w "
    "WHERE w.i > 0)",
    "SELECT id FROM t WHERE t.i IN (SELECT w.i FROM (SELECT * FROM (SELECT u.i, u.k FROM u WHERE u.k = t.k) v) w)",
    "SELECT id FROM t WHERE t.j = 0 OR EXISTS (SELECT 1 FROM (SELECT * FROM u WHERE u.k = t.k) w WHERE w.i > 0)",
    "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM (SELECT u.k FROM u WHERE u.i = t.i) w WHERE w.k = t.k)",
    "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM one JOIN (SELECT * FROM u WHERE u.k = t.k) w ON w.j = one.j)",
]


def test_correlation_inside_derived_tables_matches_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, batch_rows=4)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_correlation_inside_derived_tables_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, split_rows=3, device=device_name)
    assert_queries_match_duckdb(session, reference, QUERIES[1:2] + QUERIES[3:4])
