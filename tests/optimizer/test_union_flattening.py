"""A chain of UNION ALLs (and of UNIONs, once their inner groupings go) runs as one union of all its branches
(gpu_engine/optimizer/union_flattening.py): one LocalPartition with a source per branch, one Exchange with a
producer per branch under SparkRunner; answers against DuckDB with NULLs, duplicates, an empty branch, types
unified across the chain, a filter pushed into every branch and ORDER BY / LIMIT over the whole chain.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, assert_same_rows, duckdb_with_tables, session_with_tables
from gpu_engine.optimizer import optimize_plan
from gpu_engine.plans.nodes import AggregationNode, FilterNode, LocalPartitionNode, walk_plan
from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator

TABLES = {
    "t": pa.table({"a": pa.array([1, 2, 2, None, 3, None, 7], pa.int32()),
                   "b": pa.array(["x", "y", "y", None, "z", None, "x"])}),
    "u": pa.table({"k": pa.array([2, None, 5, 5, 7, 1 << 40], pa.int64()),
                   "s": pa.array(["y", None, "w", "w", "q", "big"])}),
    "v": pa.table({"n": pa.array([3, 3, None, 9], pa.int16()), "c": pa.array(["z", "z", None, "q"])}),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT a, b FROM t UNION ALL SELECT k, s FROM u UNION ALL SELECT n, c FROM v",
    "SELECT a, b FROM t UNION ALL SELECT k, s FROM u UNION ALL SELECT a, b FROM e UNION ALL SELECT n, c FROM v",
    "SELECT b FROM t UNION SELECT s FROM u UNION SELECT c FROM v",
    "SELECT a FROM t UNION SELECT k FROM u UNION ALL SELECT n FROM v",  # the inner UNION's grouping stays
    "SELECT a FROM t UNION ALL SELECT k FROM u UNION SELECT n FROM v",
    "SELECT x, y FROM (SELECT a AS x, b AS y FROM t UNION ALL SELECT k, s FROM u UNION ALL SELECT n, c FROM v) w "
    "WHERE x > 2 OR y IS NULL",
    "SELECT a, b FROM t UNION ALL SELECT k, s FROM u UNION ALL SELECT n, c FROM v ORDER BY a DESC NULLS LAST, b "
    "LIMIT 5",
    "SELECT a, count(*) AS rows_ FROM (SELECT a FROM t UNION ALL SELECT k FROM u UNION ALL SELECT n FROM v) w "
    "GROUP BY a",
    "SELECT a FROM t UNION ALL (SELECT k FROM u INTERSECT SELECT n FROM v) UNION ALL SELECT n FROM v",
    "SELECT a FROM e UNION ALL SELECT a FROM e UNION ALL SELECT a FROM e",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def _optimized(sql: str):
    return optimize_plan(session_with_tables(TABLES, device="cpu").sql_plan(sql))


def _unions(plan) -> list[LocalPartitionNode]:
    return [n for n in walk_plan(plan) if isinstance(n, LocalPartitionNode) and len(n.sources) > 1]


@pytest.mark.parametrize("sql, inputs", [
    (QUERIES[0], [3]),
    (QUERIES[1], [4]),
    (QUERIES[2], [3]),  # the inner UNION's grouping goes (the outer one removes the same duplicates), then its union
    (QUERIES[3], [2, 2]),  # UNION ALL over a UNION: the UNION's grouping is between the two
    (QUERIES[8], [3, 2]),  # an INTERSECT's grouping stays between
])
def test_a_union_chain_is_one_local_partition_of_its_branches(sql, inputs):
    assert sorted(len(u.sources) for u in _unions(_optimized(sql))) == sorted(inputs)


def test_a_distinct_union_chain_groups_once():
    assert sum(isinstance(n, AggregationNode) for n in walk_plan(_optimized(QUERIES[2]))) == 1


def test_a_filter_over_a_union_chain_reaches_every_branch():
    plan = _optimized(QUERIES[5])
    (union,) = _unions(plan)
    assert len(union.sources) == 3
    assert all(any(isinstance(n, FilterNode) for n in walk_plan(branch)) for branch in union.sources)
    assert not any(isinstance(n, FilterNode) for n in walk_plan(plan) if n not in set(walk_plan(union)))


def test_union_chains_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, device="cpu", drivers=3, batch_rows=2, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_union_chains_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name, drivers=2, batch_rows=3, fuse=False)
    assert_queries_match_duckdb(session, reference, [QUERIES[2], QUERIES[5]])


def _nested_hand_built():
    """``t UNION ALL (u UNION ALL v)`` built by hand, the inner union under a renaming Project."""
    catalog = {name: table.schema for name, table in TABLES.items()}
    ids = PlanNodeIdGenerator()
    u = PlanBuilder(catalog, id_generator=ids).table_scan("u").filter("k < 1000").project(
        ["CAST(k AS INTEGER) AS x", "s AS y"])
    v = PlanBuilder(catalog, id_generator=ids).table_scan("v").project(["CAST(n AS INTEGER) AS x", "c AS y"])
    inner = u.union_all(v).project(["x AS a", "y AS b"])
    return PlanBuilder(catalog, id_generator=ids).table_scan("t").union_all(inner).plan()


def test_a_hand_built_nested_union_all_runs_as_one_and_answers_as_duckdb(reference):
    plan = _nested_hand_built()
    assert [len(u.sources) for u in _unions(plan)] == [2, 2]
    assert [len(u.sources) for u in _unions(optimize_plan(plan))] == [3]
    session = session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=2)
    from duckdb_reference import duckdb_table

    assert_same_rows(session.execute(plan), duckdb_table(reference, (
        "SELECT a, b FROM t UNION ALL SELECT k::INTEGER, s FROM u WHERE k < 1000 UNION ALL SELECT n, c FROM v")))


def test_spark_reads_a_flattened_union_chain_through_one_exchange():
    """SparkRunner cuts a stage per branch and one Exchange reads them all (no Spark needed to plan it)."""
    from gpu_engine.plans.nodes import ExchangeNode
    from gpu_engine.spark.broadcast_joins import add_spark_exchanges

    plan = add_spark_exchanges(_optimized(QUERIES[0]))
    producers = sorted(len(n.sources) for n in walk_plan(plan) if isinstance(n, ExchangeNode))
    assert producers[-1] == 3


def test_columns_nobody_reads_leave_every_branch_of_a_union(reference):
    """Projection pruning through a LocalPartition of several sources: each branch keeps the columns at the
    positions read above (a window, which outputs all its input, gets a Project of them)."""
    from duckdb_reference import duckdb_table
    from gpu_engine.plans.nodes import ProjectNode, TableScanNode

    catalog = {name: table.schema for name, table in TABLES.items()}
    ids = PlanNodeIdGenerator()
    numbered = PlanBuilder(catalog, id_generator=ids).table_scan("t").window([], [], ["row_number() AS n"])
    plan = (PlanBuilder(catalog, id_generator=ids).table_scan("t").project(["a", "b", "CAST(7 AS BIGINT) AS n"])
            .union_all(numbered).project(["b"]).plan())
    optimized = optimize_plan(plan)
    (union,) = _unions(optimized)
    assert union.output_schema.names == ["b"]
    assert [branch.output_schema.names for branch in union.sources] == [["b"], ["b"]]
    assert isinstance(union.sources[1], ProjectNode)  # over the window, which still outputs a, b and n
    scans = [n.columns for n in walk_plan(optimized) if isinstance(n, TableScanNode)]
    assert ("b",) in scans
    session = session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=2)
    assert_same_rows(session.execute(plan), duckdb_table(reference, (
        "SELECT b FROM (SELECT a, b, 7 AS n FROM t UNION ALL SELECT a, b, row_number() OVER () FROM t)")))


@pytest.mark.parametrize("operation", ["INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"])
def test_a_filter_over_an_intersect_or_except_reaches_both_branches(operation, reference):
    """INTERSECT / EXCEPT [ALL] are a grouping (and for ALL a window numbering copies) keyed on every column over
    the side-tagged union: a filter on the output columns passes the keys down into each branch."""
    sql = f"SELECT * FROM (SELECT a, b FROM t {operation} SELECT k, s FROM u) x WHERE a > 1 OR b IS NULL"
    plan = _optimized(sql)
    (union,) = _unions(plan)
    assert all(any(isinstance(n, FilterNode) for n in walk_plan(branch)) for branch in union.sources)
    assert not any(isinstance(n, FilterNode) and "setop" not in n.predicate.sql() for n in walk_plan(plan)
                   if n not in set(walk_plan(union)))
    session = session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=2, fuse=False)
    assert_queries_match_duckdb(session, reference, [sql])


def test_a_flattened_union_round_trips_through_json():
    from gpu_engine.plans.serialization import plan_from_json, plan_to_json

    plan = _optimized(QUERIES[2])
    assert plan_from_json(plan_to_json(plan)) == plan
