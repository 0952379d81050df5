"""Sibling one-row aggregates over one FROM list, merged into one pass, against DuckDB; and what stays apart.

Derived tables of a comma-joined FROM list (TPC-DS q28, q88's shape) and scalar subqueries of a SELECT list
(q9's) that aggregate the same tables under different WHERE clauses are computed by one aggregation with a
FILTER per sibling (:mod:`gpu_engine.sql.one_row_aggregates`); DISTINCT aggregates of one value under
different FILTERs by one two-level aggregation (:mod:`gpu_engine.sql.filtered_distinct`). Checked: the
answers (NULLs, siblings no row passes, a sibling without its own condition, names two siblings share,
columns of siblings compared in the outer WHERE) and the number of scans the plan keeps.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

T = pa.table({
    "q": pa.array([1, 5, 12, 25, 33, None, 41, 7, 18, 25, 60, 3], pa.int32()),
    "p": pa.array([1.5, 2.0, None, 4.25, 2.0, 3.0, 9.0, 2.0, 1.5, 4.25, 7.0, None], pa.float64()),
    "d": pa.array([10, 0, 30, None, 50, 60, 70, 10, 30, 0, 5, 8], pa.int64()),
    "k": pa.array([1, 2, 3, 1, 2, 3, 1, 2, 3, 1, None, 2], pa.int64()),
})
U = pa.table({
    "k": pa.array([1, 2, 3], pa.int64()),
    "name": pa.array(["a", "b", "a"]),
})
TABLES = {"t": T, "u": U}

DERIVED = (
    "SELECT * FROM "
    "(SELECT avg(p) a1, count(p) c1, count(DISTINCT p) d1 FROM t WHERE q BETWEEN 0 AND 10 AND (d > 5 OR p > 1)) b1, "
    "(SELECT avg(p) a2, count(p) c2, count(DISTINCT p) d2 FROM t WHERE q BETWEEN 11 AND 30 AND (d > 5 OR p > 1)) b2, "
    "(SELECT avg(p) a3, count(p) c3, count(DISTINCT p) d3 FROM t WHERE q BETWEEN 31 AND 50 AND (d > 5 OR p > 1)) b3")
SCALARS = (
    "SELECT CASE WHEN (SELECT count(*) FROM t WHERE q BETWEEN 1 AND 20) > 3 "
    "THEN (SELECT avg(d) FROM t WHERE q BETWEEN 1 AND 20) ELSE (SELECT avg(p) FROM t WHERE q BETWEEN 1 AND 20) END b1, "
    "CASE WHEN (SELECT count(*) FROM t WHERE q BETWEEN 21 AND 40) > 3 "
    "THEN (SELECT avg(d) FROM t WHERE q BETWEEN 21 AND 40) "
    "ELSE (SELECT avg(p) FROM t WHERE q BETWEEN 21 AND 40) END b2 "
    "FROM u WHERE k = 1")
JOINED = (
    "SELECT * FROM "
    "(SELECT count(*) n1 FROM t, u WHERE t.k = u.k AND u.name = 'a' AND t.q < 10) s1, "
    "(SELECT count(*) n2 FROM t, u WHERE t.k = u.k AND u.name = 'a' AND t.q >= 10 AND t.q < 30) s2, "
    "(SELECT count(*) n3 FROM t, u WHERE t.k = u.k AND u.name = 'a' AND t.q >= 30) s3")

QUERIES = [
    DERIVED, SCALARS, JOINED,
    # a sibling no row passes (count 0, the others NULL), one without a condition of its own, a shared name
    "SELECT x.s sx, x.m mx, x.n nx, y.s sy, y.m my, y.n ny, z.s sz "
    "FROM (SELECT sum(d) s, min(p) m, count(*) n FROM t WHERE q > 1000) x, "
    "(SELECT sum(d) s, max(q) + 1 m, count(*) n FROM t) y, (SELECT sum(DISTINCT d) s FROM t WHERE q < 20) z",
    # siblings' columns compared in the outer WHERE and ORDER BY; a sibling table that is not one
    "SELECT x.c cx, y.c cy, u.name FROM (SELECT count(*) c FROM t WHERE q < 20) x, "
    "(SELECT count(*) c FROM t WHERE q >= 20) y, u WHERE x.c > y.c ORDER BY u.name",
    # DISTINCT of one value under different FILTERs, and of another value, without merging siblings
    "SELECT count(DISTINCT p) FILTER (WHERE q < 20) a, count(DISTINCT p) FILTER (WHERE q >= 20) b, "
    "sum(DISTINCT p) FILTER (WHERE d > 5) c, count(DISTINCT d) e, avg(q) f FROM t",
    # one DISTINCT value beside plain aggregates of every kind over a join (TPC-DS q94's shape), over no row too
    "SELECT count(DISTINCT t.k) a, sum(p) b, count(p) c, avg(p) e, min(name) f, max(q) g, count(*) h "
    "FROM t, u WHERE t.k = u.k AND u.name <> 'b'",
    "SELECT count(DISTINCT t.k) a, sum(p) b, count(p) c, avg(q) e, count(*) h FROM t, u WHERE t.k = u.k AND p > 99",
    # not merged: a division (it could fail on rows another sibling keeps), a GROUP BY, an aggregating SELECT
    "SELECT * FROM (SELECT sum(d / q) v FROM t WHERE q > 10) a, (SELECT sum(d) w FROM t WHERE q <= 10) b",
    "SELECT * FROM (SELECT k, count(*) n FROM t WHERE q > 10 GROUP BY k) a, (SELECT count(*) m FROM t WHERE q < 5) b",
    "SELECT count(*) + (SELECT count(*) FROM t WHERE q > 10) + (SELECT count(*) FROM t WHERE q < 10) total FROM u",
]
SIMULATED = [DERIVED, SCALARS]


def test_merged_siblings_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, device="cpu", drivers=2, split_rows=5, compile_mode="lowest")  # CI time
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_merged_siblings_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")  # CI time: no kernel generated
    assert_queries_match_duckdb(session, reference, SIMULATED)


def _scans(plan, table: str) -> int:
    from gpu_engine.plans.nodes import TableScanNode, walk_plan

    return sum(1 for node in walk_plan(plan) if isinstance(node, TableScanNode) and node.table_name == table)


@pytest.mark.parametrize("sql, scans", [
    (DERIVED, 1),  # grouped by p: the DISTINCT counts, sums and counts per value (were 6: two per sibling)
    (SCALARS, 1),  # six scalar subqueries
    (JOINED, 1),  # three joins of t and u
    (QUERIES[5], 3),  # p under two FILTERs, d, the plain avg
    (QUERIES[8], 2),  # not merged
    (QUERIES[6], 1),  # one DISTINCT value and plain aggregates over a join: grouped by the value (were 2)
])
def test_siblings_scan_their_table_once(sql, scans):
    session = session_with_tables(TABLES, device="cpu")
    assert _scans(session.sql_plan(sql), "t") == scans
