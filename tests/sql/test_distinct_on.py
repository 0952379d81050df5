"""``SELECT DISTINCT ON (keys) ... ORDER BY ...`` through Session.sql against DuckDB: the first row of each key.

Planned as ``QUALIFY row_number() OVER (PARTITION BY keys ORDER BY <the ORDER BY>) = 1`` (a TopNRowNumber of one
row per key). Checked with NULL keys (one group, first or last as the ORDER BY says), ties broken by later ORDER BY
keys, keys and ORDER BY keys that are output names, expressions or ordinals, over joins and aggregation, with
LIMIT, and over no rows. Queries whose kept row the ORDER BY does not decide select only what decides it.
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.plans.nodes import TopNRowNumberNode

T = pa.table({
    "a": pa.array([1, 2, 3, 4, None, 2, 7, 5], pa.int32()),
    "b": pa.array(["x", "y", "x", None, "z", "y", "q", None]),
    "c": pa.array([1.5, 2.5, None, 4.0, 5.0, 2.5, 1.0, 0.5], pa.float64()),
})
U = pa.table({"x": pa.array([1, 2, 3, 7, 2], pa.int64()), "w": pa.array([10, 20, 30, 40, 50], pa.int32())})
TABLES = {"t": T, "u": U}

ORDERED = [
    "SELECT DISTINCT ON (b) b, a FROM t ORDER BY b, a",
    "SELECT DISTINCT ON (b) b, a FROM t ORDER BY b NULLS FIRST, a DESC NULLS FIRST",
    "SELECT DISTINCT ON (b) b, a * 2 AS d FROM t ORDER BY b, d DESC",
    "SELECT DISTINCT ON (b, c) b, c, a FROM t ORDER BY b NULLS FIRST, c, a",
    "SELECT DISTINCT ON (b) b, a FROM t ORDER BY a DESC NULLS LAST, b LIMIT 3",
    "SELECT DISTINCT ON (upper(b)) b, a FROM t ORDER BY upper(b), a",
    "SELECT DISTINCT ON (d) b, a % 2 AS d FROM t ORDER BY d, a, b",
    "SELECT DISTINCT ON (b) b, count(*) AS n FROM t GROUP BY b, a ORDER BY b, n DESC, a",
    "SELECT DISTINCT ON (t.b) t.b, u.w FROM t JOIN u ON t.a = u.x ORDER BY t.b, u.w DESC",
    "SELECT DISTINCT ON (b) b, a FROM t WHERE a > 100 ORDER BY b, a",
    "SELECT DISTINCT ON (1) b, a FROM t ORDER BY 1, 2",
]
UNORDERED = [
    "SELECT DISTINCT ON (b) b FROM t",
    "SELECT DISTINCT ON (b) b, a, sum(a) OVER (PARTITION BY b) AS s FROM t ORDER BY b, a",
]


def test_distinct_on_matches_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, device="cpu", fuse=False)
    assert_queries_match_duckdb(session, reference, ORDERED, ordered=lambda sql: True)
    assert_queries_match_duckdb(session, reference, UNORDERED)


def test_distinct_on_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name)
    assert_queries_match_duckdb(session, reference, ORDERED[:2], ordered=lambda sql: True)


def test_distinct_on_is_a_top_one_row_number_per_key():
    session = session_with_tables(TABLES, device="cpu")
    plan = session.sql_plan("SELECT DISTINCT ON (b) b, a FROM t ORDER BY b, a")
    nodes, stack = [], [plan]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.sources)
    assert [node.limit for node in nodes if isinstance(node, TopNRowNumberNode)] == [1]
