"""A distinct set operation's ``SELECT DISTINCT`` branches run without their own grouping
(gpu_engine/optimizer/distinct_branches.py, a rule over the typed plan): answers against DuckDB, one grouping
where there were three, the same through a plan built with PlanBuilder, and every grouping kept where the
optimizer is off.

The DISTINCT stays where it changes the answer: the ALL forms (they count copies), a branch LIMIT / ORDER BY
reads the distinct rows, ``DISTINCT ON``. NULL rows, duplicates and an empty table are in the data.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import (
    assert_queries_match_duckdb, assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables,
)
from gpu_engine.optimizer import optimize_plan
from gpu_engine.plans.nodes import AggregationNode, walk_plan
from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator

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

@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


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


def _groupings(plan) -> int:
    return sum(isinstance(node, AggregationNode) for node in walk_plan(plan))


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
    session = session_with_tables(TABLES, device="cpu")
    assert _groupings(optimize_plan(session.sql_plan(sql))) == groupings


#: Kept by the rule though a duplicate-insensitive grouping is above: something between counts or orders copies,
#: or draws a random value per copy.
KEPT = [
    "SELECT a, count(*) AS n FROM (SELECT DISTINCT a, b FROM t) v GROUP BY a",
    "SELECT DISTINCT a FROM (SELECT DISTINCT a, b FROM t ORDER BY a LIMIT 3) v",
    "SELECT DISTINCT a, random() < 2 AS x FROM (SELECT DISTINCT a, b FROM t) v",
]


@pytest.mark.parametrize("sql", KEPT)
def test_a_distinct_stays_where_copies_are_counted_or_ordered(sql):
    session = session_with_tables(TABLES, device="cpu")
    plan = session.sql_plan(sql)
    assert _groupings(optimize_plan(plan)) == _groupings(plan) == 2


def _hand_built_union():
    """``SELECT a, b, min(b) FROM (SELECT DISTINCT a, b FROM t UNION ALL SELECT DISTINCT k, s FROM u) GROUP BY a, b``
    built by hand: each branch's DISTINCT an aggregation without aggregates, their union a LocalPartition of
    both, grouped again with an aggregate that ignores copies."""
    catalog = {name: table.schema for name, table in TABLES.items()}
    ids = PlanNodeIdGenerator()
    right = PlanBuilder(catalog, id_generator=ids).table_scan("u").project(["CAST(k AS INTEGER) AS a", "s AS b"]) \
        .aggregation(["a", "b"], [])
    return (PlanBuilder(catalog, id_generator=ids).table_scan("t").aggregation(["a", "b"], []).union_all(right)
            .aggregation(["a", "b"], ["min(b) AS least_b"]).plan())


def test_a_hand_built_union_of_distinct_branches_groups_once_and_answers_as_duckdb(reference):
    session = session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=3)
    plan = _hand_built_union()
    assert _groupings(plan) == 3 and _groupings(optimize_plan(plan)) == 1
    assert_same_rows(session.execute(plan), duckdb_table(reference,
        "SELECT a, b, min(b) AS least_b FROM (SELECT DISTINCT a, b FROM t UNION ALL "
        "SELECT DISTINCT k::INTEGER, s FROM u) v GROUP BY a, b"))


def test_without_the_optimizer_each_branch_keeps_its_distinct(reference):
    sql = QUERIES[0]
    session = session_with_tables(TABLES, device="cpu", optimize=False)
    assert _groupings(session.sql_plan(sql)) == 3
    assert_queries_match_duckdb(session, reference, [sql])
