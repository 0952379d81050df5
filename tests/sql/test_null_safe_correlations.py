"""Subqueries correlated by ``IS [NOT] DISTINCT FROM`` (and other correlations that may hold where the outer value is
NULL) against DuckDB: scalar aggregates (count's 0, max's NULL), ORDER BY ... LIMIT 1, EXISTS / NOT EXISTS in
WHERE, with NULLs on both sides and an empty inner table.

Planned per distinct outer value (gpu_engine/sql/subquery_values.py ``_per_domain``); the domain row of a NULL outer
value is joined back null-safe, so a NULL outer value reads its own row (refused before: "a correlation that may
hold where t.a is NULL").
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

TABLES = {"t": pa.table({"a": pa.array([1, 2, None, 4, None, 1], pa.int64()),
                         "b": pa.array([1, None, None, 5, 2, 1], pa.int64()),
                         "c": pa.array([10, 20, 30, None, 50, 60], pa.int64()),
                         "s": pa.array(["x", None, "y", None, "x", "z"])})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT a, (SELECT count(*) FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a) AS n FROM t",
    "SELECT a, (SELECT count(*) FROM t t2 WHERE t2.b IS DISTINCT FROM t.a) AS n FROM t",
    "SELECT a, c, (SELECT max(t2.c) FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a AND t2.c > t.c) AS n FROM t",
    "SELECT a, s, (SELECT count(*) FROM t t2 WHERE t2.s IS NOT DISTINCT FROM t.s AND t2.b = t.a) AS n FROM t",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a AND t2.c <> t.c)",
    "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM t t2 WHERE t2.s IS NOT DISTINCT FROM t.s AND t2.a > 1)",
    "SELECT a, (SELECT c FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a ORDER BY c DESC LIMIT 1) AS x FROM t",
    "SELECT a, (SELECT count(*) FROM t t2 WHERE t2.b = t.a OR (t2.b IS NULL AND t.a IS NULL)) AS n FROM t",
    "SELECT a, (SELECT count(*) FROM e WHERE e.b IS NOT DISTINCT FROM t.a) AS n FROM t",
    "SELECT a, c, (SELECT count(*) FROM t t2 WHERE t2.c < coalesce(t.c, 0) + 25) AS n FROM t",
]


def test_null_safe_correlations_match_duckdb_on_cpu(reference):
    # Unfused: the plans are the subject, and each new expression shape would compile a generated kernel.
    session = session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=2, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


def test_a_null_safe_correlation_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name)
    assert_queries_match_duckdb(session, reference, QUERIES[:1], exact_types=True)
