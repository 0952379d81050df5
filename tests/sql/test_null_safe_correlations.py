"""Subqueries correlated by ``IS [NOT] DISTINCT FROM`` (and other correlations that may hold where the outer value is
NULL) against DuckDB: scalar aggregates (count's 0, max's NULL), ORDER BY ... LIMIT 1, GROUP BY / HAVING / window
shapes, EXISTS / NOT EXISTS in WHERE, under OR and as a value, with NULLs on both sides and an empty inner table.

``gpu_engine/sql/correlation_domains.py`` splits each on its outer column: ``CASE WHEN t.a IS NULL THEN <the
subquery, t.a read as NULL> ELSE <the subquery, t.a known not NULL: IS NOT DISTINCT FROM an equality key, the
rest over a domain> END``, both typed subqueries the optimizer's decorrelation rule joins (they were LEFT-joined
derived tables of the sqlglot tree, ``subquery_values._Joined._per_domain``, and the GROUP BY / HAVING / window
shapes were refused).
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables
from gpu_engine.optimizer.decorrelation import holds_subqueries

#: The last row repeats the one before: with ``c`` unique, the per-domain DISTINCTs over it were projections
#: (optimizer/unique_groupings.py).
TABLES = {"t": pa.table({"a": pa.array([1, 2, None, 4, None, 1, 1], pa.int64()),
                         "b": pa.array([1, None, None, 5, 2, 1, 1], pa.int64()),
                         "c": pa.array([10, 20, 30, None, 50, 60, 60], pa.int64()),
                         "s": pa.array(["x", None, "y", None, "x", "z", "z"])})}
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
    # refused before (GROUP BY / HAVING / a window, so correlated); two null-safe columns; EXISTS as a value, under OR
    "SELECT a, (SELECT sum(c) FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a GROUP BY t2.s ORDER BY 1 DESC NULLS LAST "
    "LIMIT 1) AS x FROM t",
    "SELECT a, (SELECT count(*) FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a HAVING count(*) > 1) AS x FROM t",
    "SELECT a, (SELECT sum(c) OVER () FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a LIMIT 1) AS x FROM t",
    "SELECT a, s, (SELECT count(*) FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a AND t2.s IS NOT DISTINCT FROM t.s) "
    "AS x FROM t",
    "SELECT a, EXISTS (SELECT 1 FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a AND t2.c > 15) AS e FROM t",
    "SELECT a, c FROM t WHERE a = 4 OR NOT EXISTS (SELECT 1 FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a)",
    "SELECT a, (SELECT count(*) FROM t t2 WHERE NOT (t2.b IS DISTINCT FROM t.a) AND t2.c < t.c) AS x FROM t",
    "SELECT a, count(*) AS n, (SELECT count(*) FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a) AS x FROM t GROUP BY a",
    # a WHERE conjunct: split too, its two subqueries one typed Filter (correlated_scalar_rows.conjunct_scalars)
    "SELECT a, c FROM t WHERE c > (SELECT min(t2.c) FROM t t2 WHERE t2.b IS NOT DISTINCT FROM t.a)",
]


def test_null_safe_correlations_match_duckdb_on_cpu(reference):
    # Unfused: the plans are the subject, and each new expression shape would compile a generated kernel.
    session = session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=2, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


def test_each_form_is_a_typed_subquery_before_the_rules():
    session = session_with_tables(TABLES, device="cpu")
    untyped = [sql for sql in QUERIES if not holds_subqueries(session.sql_plan(sql))]
    assert not untyped


def test_a_null_safe_correlation_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name)
    assert_queries_match_duckdb(session, reference, QUERIES[:1], exact_types=True)
