"""A distinct set operation's ``SELECT DISTINCT`` branches planned without their own grouping
(gpu_engine/sql/distinct_branches.py): answers against DuckDB, and one grouping where there were three.

The DISTINCT stays where it changes the answer: the ALL forms (they count copies), a branch LIMIT / ORDER BY
reads the distinct rows, ``DISTINCT ON``. NULL rows, duplicates and an empty table are in the data.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

TABLES = {
    "t": pa.table({
        "a": pa.array([1, 2, 2, None, 3, None, 7, 2], pa.int32()),
        "b": pa.array(["x", "y", "y", None, "z", None, "x", "y"]),
    }),
    "u": pa.table({
        "k": pa.array([2, None, 5, 5, 7, 2, 1], pa.int32()),
        "s": pa.array(["y", None, "w", "w", "x", "y", "x"]),
    }),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT DISTINCT a, b FROM t INTERSECT SELECT DISTINCT k, s FROM u",
    "SELECT DISTINCT a, b FROM t EXCEPT SELECT DISTINCT k, s FROM u",
    "SELECT DISTINCT k, s FROM u EXCEPT SELECT a, b FROM t",
    "SELECT DISTINCT b FROM t UNION SELECT DISTINCT s FROM u",
    "SELECT DISTINCT a FROM t INTERSECT SELECT DISTINCT k FROM u INTERSECT SELECT DISTINCT a FROM t WHERE a > 1",
    "SELECT count(*) AS n FROM (SELECT DISTINCT a, b FROM t INTERSECT (SELECT DISTINCT k, s FROM u)) x",
    "SELECT DISTINCT a FROM t INTERSECT SELECT DISTINCT a FROM e",
    "SELECT DISTINCT a FROM e EXCEPT SELECT DISTINCT k FROM u",
    # kept: the ALL forms count each branch's copies, which its DISTINCT sets to one
    "SELECT DISTINCT a, b FROM t INTERSECT ALL SELECT a, b FROM t",
    "SELECT a FROM t EXCEPT ALL SELECT DISTINCT a FROM t",
    "SELECT DISTINCT b FROM t UNION ALL SELECT DISTINCT s FROM u",
    # kept: a branch's LIMIT reads its distinct rows; DISTINCT ON keeps one row a key
    "(SELECT DISTINCT a FROM t ORDER BY a NULLS LAST LIMIT 3) INTERSECT SELECT k FROM u",
    "(SELECT DISTINCT a FROM t ORDER BY a NULLS FIRST LIMIT 2 OFFSET 1) EXCEPT SELECT k FROM u WHERE k > 5",
    "SELECT DISTINCT ON (a) a, b FROM t EXCEPT SELECT k, s FROM u",
]


def _groupings(sql: str) -> int:
    from gpu_engine.plans.nodes import AggregationNode, walk_plan

    session = session_with_tables(TABLES, device="cpu")
    return sum(isinstance(node, AggregationNode) for node in walk_plan(session.sql_plan(sql)))


def test_distinct_branches_of_set_operations_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, device="cpu", drivers=3, batch_rows=2, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_distinct_branches_of_set_operations_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name, drivers=2, batch_rows=3, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES[:2])


@pytest.mark.parametrize("sql, groupings", [
    ("SELECT DISTINCT a, b FROM t INTERSECT SELECT DISTINCT k, s FROM u", 1),
    ("SELECT DISTINCT a, b FROM t EXCEPT SELECT DISTINCT k, s FROM u", 1),
    ("SELECT DISTINCT b FROM t UNION SELECT DISTINCT s FROM u", 1),
    ("SELECT DISTINCT a FROM t INTERSECT SELECT DISTINCT k FROM u INTERSECT SELECT DISTINCT a FROM e", 2),
    ("SELECT DISTINCT a, b FROM t INTERSECT ALL SELECT a, b FROM t", 2),
    ("(SELECT DISTINCT a FROM t LIMIT 3) INTERSECT SELECT k FROM u", 2),
])
def test_a_distinct_set_operation_groups_its_distinct_branches_once(sql, groupings):
    """The set operation groups the branches' rows by every column: a branch's DISTINCT was that grouping again."""
    assert _groupings(sql) == groupings
