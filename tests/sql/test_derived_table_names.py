"""Unaliased expressions inside derived tables and CTEs, and ``count(*) OVER``, named as DuckDB names them.

Why: ``SELECT * FROM (SELECT k, count(*) FROM t GROUP BY k)`` showed ``_col_1`` (sqlglot's qualifier's name) where
DuckDB shows ``count_star()``, and a query could not name such a column as DuckDB lets it (``WHERE "(k + 1)" > 2``);
``count(*) OVER ()`` is ``count() OVER ()`` to DuckDB (``count_star()`` only as an aggregate). Each query is
compared with DuckDB's answer, names included: NULLs, an empty table, repeated names (``(k + 1)_1``), a set
operation named by its first branch, multi-byte strings.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

T = pa.table({
    "k": pa.array([1, 1, 2, None, 2, 3], pa.int32()),
    "o": pa.array([3, -7, None, 2, 5, 12], pa.int64()),
    "s": pa.array(["a", "é", None, "", "日本", "a"]),
})
EMPTY = T.slice(0, 0)

QUERIES = [
    "SELECT * FROM (SELECT k, count(*), sum(o) + 1, o * 2 FROM t GROUP BY k, o) x",
    "WITH c AS (SELECT k, count(*) FROM t GROUP BY k) SELECT * FROM c",
    "WITH c AS (SELECT k, count(*) FROM e GROUP BY k) SELECT * FROM c",
    "SELECT * FROM (SELECT k + 1, upper(s), s || 'é' FROM t) x",
    "SELECT x.* FROM (SELECT k + 1, k + 1 FROM t) x",
    "SELECT * FROM (SELECT k + 1 FROM t) x JOIN (SELECT o * 2 FROM t) y ON true",
    "SELECT * FROM (SELECT k, k + 1 FROM t UNION ALL SELECT 1, 2) u",
    "SELECT * FROM (SELECT k + 1 FROM t) x WHERE \"(k + 1)\" > 2",
    "SELECT \"count_star()\" AS n FROM (SELECT s, count(*) FROM t GROUP BY s) x WHERE s IS NOT NULL",
    "SELECT * FROM (SELECT count(*) OVER () FROM t) x",
    "SELECT * FROM (SELECT k + 1, k FROM t) x(a)",
    "SELECT * FROM (SELECT 1, 'é', NULL) x",
    "SELECT k, count(*) OVER (), count(*) OVER (PARTITION BY k ORDER BY o), count(o) OVER () FROM t",
    "SELECT k, count(*) FILTER (WHERE k > 1) OVER (PARTITION BY k), sum(count(*)) OVER (), count(*) + 1 "
    "FROM t GROUP BY k",
    "SELECT count(*) OVER w FROM e WINDOW w AS (PARTITION BY k)",
]
SIMULATED = [QUERIES[0], QUERIES[3], QUERIES[12]]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "e": EMPTY}) as connection:
        yield connection


def test_derived_table_names_match_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T, "e": EMPTY}, device="cpu", drivers=2, batch_rows=4)
    assert_queries_match_duckdb(session, reference, QUERIES)


@pytest.mark.cpu_case_in("test_derived_table_names_match_duckdb_on_cpu")
def test_derived_table_names_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T, "e": EMPTY}, device=device_name, drivers=2, batch_rows=4)
    assert_queries_match_duckdb(session, reference, SIMULATED)
