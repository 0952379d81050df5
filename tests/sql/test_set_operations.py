"""SQL set operations (issue 30 item 2): UNION ALL, UNION, INTERSECT and EXCEPT against DuckDB.

UNION ALL is a LocalPartition with one source per branch; UNION groups the union by every column; INTERSECT and
EXCEPT group the side-tagged union (see gpu_engine/sql/set_operations.py). Checked: duplicates, NULLs (the
distinct forms treat NULLs as equal), empty branches, column types unified as DuckDB does (INTEGER with BIGINT,
an integer with a decimal or a double), the first branch's names, nested set operations, ORDER BY / LIMIT over
the whole operation, set operations in derived tables, CTEs and IN subqueries, at three drivers over batches of
2 rows, unfused (the planning is under test; no generated kernel to compile); one query of each operation (and
a nested one) runs fused on cpu and on the simulator at one pair of settings (it is an interpreter).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute  # noqa: F401 (pa.compute)
import pytest

from duckdb_reference import assert_queries_match_duckdb, rows_mismatch, session_with_tables

from gpu_engine.errors import PlanError

TABLES = {
    "t": pa.table({
        "a": pa.array([1, 2, 2, None, 3, None, 7], pa.int32()),
        "b": pa.array(["x", "y", "y", None, "z", None, "x"]),
        "d": pa.array([1.5, 2.0, 2.0, None, -0.5, None, 9.25], pa.float64()),
    }),
    "u": pa.table({
        "k": pa.array([2, None, 5, 5, 7, 1 << 40], pa.int64()),
        "s": pa.array(["y", None, "w", "w", "q", "big"]),
        "m": pa.array([2, 3, 5, 5, 1, 0], pa.int16()),
    }),
    "p": pa.table({"v": pa.array([1, 3, 2], pa.decimal128(12, 2)), "s": pa.array(["x", "z", "y"])}),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    # UNION ALL: every row of every branch, types unified (int32 with int64 is BIGINT), the left's names.
    "SELECT a, b FROM t UNION ALL SELECT k, s FROM u",
    "SELECT a FROM t UNION ALL SELECT a FROM t UNION ALL SELECT m FROM u",
    "SELECT d, b FROM t UNION ALL SELECT m, s FROM u",  # double with smallint: double
    "SELECT v, s FROM p UNION ALL SELECT a, b FROM t",  # decimal(12, 2) with integer: a wider decimal
    "SELECT a, b FROM t UNION ALL SELECT a, b FROM e",
    "SELECT a, b FROM e UNION ALL SELECT a, b FROM e",
    "SELECT a + 1 AS a1, upper_b FROM (SELECT a, b AS upper_b FROM t WHERE a > 1) x UNION ALL SELECT k, s FROM u "
    "WHERE k < 6",
    # A bare NULL column takes the other branch's type (DuckDB's rule), on either side.
    "SELECT NULL AS x, b FROM t UNION ALL SELECT k, s FROM u",
    "SELECT a, b, d FROM t UNION SELECT m, NULL, NULL FROM u",
    "SELECT NULL AS x FROM t INTERSECT SELECT a FROM t",
    # UNION (distinct): NULLs are one row, duplicates within and across branches go.
    "SELECT a, b FROM t UNION SELECT k, s FROM u",
    "SELECT b FROM t UNION SELECT s FROM u",
    "SELECT a, b FROM t UNION SELECT a, b FROM e",
    "SELECT a FROM e UNION SELECT a FROM e",
    # INTERSECT / EXCEPT (distinct, NULL equals NULL).
    "SELECT a, b FROM t INTERSECT SELECT k, s FROM u",
    "SELECT b FROM t INTERSECT SELECT s FROM u",
    "SELECT a, b FROM t EXCEPT SELECT k, s FROM u",
    "SELECT k, s FROM u EXCEPT SELECT a, b FROM t",
    "SELECT a FROM t EXCEPT SELECT a FROM e",
    "SELECT a FROM t INTERSECT SELECT a FROM e",
    "SELECT a FROM e EXCEPT SELECT k FROM u",
    # INTERSECT ALL / EXCEPT ALL: min(m, n) and max(m - n, 0) copies of each row, NULL rows equal.
    "SELECT a, b FROM t INTERSECT ALL SELECT a, b FROM t WHERE a IS NULL OR a = 2",
    "SELECT b FROM t INTERSECT ALL SELECT s FROM u",
    "SELECT a, b FROM t EXCEPT ALL SELECT a, b FROM t WHERE a = 2 OR b IS NULL",
    "SELECT k, s FROM u EXCEPT ALL SELECT a, b FROM t",
    "SELECT b FROM t EXCEPT ALL SELECT s FROM u",
    "SELECT a FROM t INTERSECT ALL SELECT a FROM e",
    "SELECT a FROM t EXCEPT ALL SELECT a FROM e",
    "SELECT a FROM e EXCEPT ALL SELECT k FROM u",
    "SELECT a FROM t UNION ALL SELECT a FROM t EXCEPT ALL SELECT a FROM t WHERE a = 2",
    "SELECT a FROM t UNION ALL SELECT a FROM t INTERSECT ALL SELECT a FROM t UNION ALL SELECT m FROM u",
    "SELECT a, count(*) AS n FROM (SELECT a FROM t EXCEPT ALL SELECT k FROM u) x GROUP BY a",
    "SELECT a FROM t INTERSECT ALL SELECT a FROM t ORDER BY a NULLS FIRST LIMIT 3",
    # Nested: the left-deep chain and parenthesized branches.
    "SELECT a FROM t UNION ALL SELECT k FROM u EXCEPT SELECT m FROM u",
    "SELECT a FROM t EXCEPT (SELECT k FROM u UNION SELECT m FROM u)",
    "(SELECT a FROM t INTERSECT SELECT k FROM u) UNION ALL (SELECT m FROM u EXCEPT SELECT a FROM t)",
    # ORDER BY / LIMIT / OFFSET apply to the whole set operation, by output name or position.
    "SELECT a, b FROM t UNION ALL SELECT k, s FROM u ORDER BY a DESC NULLS LAST, b LIMIT 4",
    "SELECT a, b FROM t UNION SELECT k, s FROM u ORDER BY 2, 1 NULLS FIRST",
    "SELECT a FROM t UNION ALL SELECT k FROM u ORDER BY a LIMIT 3 OFFSET 2",
    "(SELECT a FROM t ORDER BY a DESC NULLS LAST LIMIT 2) UNION ALL (SELECT k FROM u ORDER BY k LIMIT 1)",
    "(SELECT a FROM t UNION SELECT k FROM u) ORDER BY a NULLS FIRST LIMIT 3",
    # text beside a number, a date or a boolean: both branches as VARCHAR, as DuckDB casts them
    "SELECT a FROM t UNION SELECT s FROM u",
    "SELECT b, a FROM t UNION ALL SELECT s, m FROM u UNION ALL SELECT 'x', 'y' FROM p",
    "SELECT v FROM p EXCEPT SELECT s FROM p",
    # ORDER BY ALL after a set operation sorts by every output column (was 'unsupported SQL construct Var')
    "SELECT a, b FROM t EXCEPT ALL SELECT k, s FROM u ORDER BY ALL",
    "(SELECT b FROM t) INTERSECT SELECT s FROM u ORDER BY ALL DESC LIMIT 2",
    # In derived tables, CTEs and IN subqueries.
    "SELECT a, count(*) AS n FROM (SELECT a FROM t UNION ALL SELECT k FROM u) x GROUP BY a",
    "WITH q AS (SELECT b FROM t INTERSECT SELECT s FROM u) SELECT count(*) AS n FROM q",
    "SELECT a, b FROM t WHERE a IN (SELECT k FROM u UNION SELECT m FROM u)",
    "SELECT a, b FROM t WHERE a NOT IN (SELECT k FROM u WHERE k IS NOT NULL EXCEPT SELECT 7 FROM u)",
    "SELECT k FROM u WHERE k IN (SELECT a FROM t INTERSECT SELECT m FROM u)",
    "SELECT a FROM t WHERE a < (SELECT max(a) FROM t UNION ALL SELECT 100 FROM u ORDER BY 1 DESC LIMIT 1)",
    "SELECT k FROM u WHERE k = (SELECT min(a) FROM (SELECT a FROM t INTERSECT SELECT k FROM u) x)",
    "SELECT x.a, y.s FROM (SELECT a FROM t UNION SELECT m FROM u) x JOIN (SELECT k, s FROM u UNION ALL "
    "SELECT a, b FROM t) y ON x.a = y.k",
    # A UNION chain unifies as one (DuckDB): every branch cast straight to the chain's type, so a small integer
    # reads '2', not '2.0' through the double of a pair (before: pairwise, 2 of these 3 differed). INTERSECT /
    # EXCEPT chains, a UNION beside a UNION ALL and parenthesized operations unify pair by pair, as DuckDB does.
    "SELECT CAST(m AS TINYINT) AS x FROM u UNION ALL SELECT d FROM t UNION ALL SELECT b FROM t",
    "SELECT CAST(m AS TINYINT) AS x FROM u UNION SELECT d FROM t UNION SELECT b FROM t",
    "SELECT CAST(m AS TINYINT) AS x FROM u UNION ALL SELECT d FROM t UNION SELECT b FROM t",
    "(SELECT m AS x FROM u UNION ALL SELECT d FROM t) UNION ALL SELECT b FROM t",
    "SELECT a FROM t INTERSECT SELECT d FROM t INTERSECT SELECT '2.0' FROM t",
    "SELECT a, b FROM t UNION ALL SELECT m, s FROM u UNION ALL SELECT v, s FROM p",
    # A boolean beside a number takes the number's type (1 / 0), as in DuckDB (was refused).
    "SELECT a > 1 AS x FROM t UNION ALL SELECT d FROM t",
    "SELECT b IS NULL AS x, a FROM t UNION SELECT m, k FROM u",
    # Columns of NULLs only in some branches of a chain: the type the others agree on (each branch planned once).
    "SELECT NULL AS x, b FROM t UNION ALL SELECT NULL, s FROM u UNION ALL SELECT v, s FROM p",
    "SELECT a, NULL AS y FROM t UNION ALL SELECT NULL, b FROM t UNION ALL SELECT 3, NULL FROM p",
    "SELECT * FROM (VALUES (NULL), (NULL)) v(x) UNION ALL SELECT DATE '2020-01-02' FROM p UNION ALL "
    "SELECT NULL FROM t",
    # ORDER BY after a set operation names a later branch's column or a qualified column a branch selects.
    "SELECT a AS x, b FROM t UNION ALL SELECT k AS y, s FROM u ORDER BY y NULLS FIRST, b NULLS FIRST",
    "SELECT a, b FROM t UNION SELECT k, s FROM u ORDER BY t.a DESC NULLS LAST, b NULLS LAST",
    "SELECT a FROM t UNION ALL (SELECT k AS w FROM u UNION ALL SELECT m AS z FROM u) ORDER BY z NULLS FIRST LIMIT 4",
    "SELECT a, b FROM t UNION ALL SELECT k, s FROM u ORDER BY a + 1 DESC NULLS LAST, b LIMIT 3 OFFSET 1",
    # UNION [ALL] BY NAME (was refused): columns matched by name (case-insensitive), the first branch's names then
    # the ones later branches add, NULL where a branch lacks one.
    "SELECT a, b FROM t UNION ALL BY NAME SELECT s AS B, m AS a FROM u",
    "SELECT a, b FROM t UNION BY NAME SELECT s AS b, k FROM u UNION ALL BY NAME SELECT v AS d FROM p",
    "SELECT x.k FROM (SELECT a, b FROM t UNION ALL BY NAME SELECT s AS b, k FROM u) x WHERE x.k IS NOT NULL",
    "SELECT a, b FROM t UNION ALL BY NAME SELECT s AS b, k FROM u ORDER BY k NULLS FIRST, a NULLS FIRST, b NULLS FIRST",
    "SELECT a, b FROM t UNION ALL BY NAME SELECT b, d FROM t UNION ALL SELECT m, s, 2.5 FROM u",
]

#: Run fused, on cpu and on the simulator: UNION ALL, UNION, INTERSECT, EXCEPT, INTERSECT ALL, EXCEPT ALL and a
#: nested chain over ints and strings with NULLs. Every query of QUERIES runs unfused (CI time: fused, each query
#: compiled its own generated kernels, ~36 s of CPU on a cold cache, kernels the operator suite covers).
SIMULATED = [QUERIES[0], QUERIES[10], QUERIES[14], QUERIES[16], QUERIES[22], QUERIES[24], QUERIES[36],
             "SELECT CAST(m AS TINYINT) AS x FROM u UNION ALL SELECT d FROM t UNION ALL SELECT b FROM t"]


def _integer_types_differ(sql, actual, expected):
    """Say (without ORDER BY) how an integer column's type differs from DuckDB's, or return None."""
    if "ORDER BY" not in sql:
        for got, want in zip(actual.schema, expected.schema):
            if pa.types.is_integer(want.type) and got.type != want.type:
                return f"column {got.name} is {got.type}, DuckDB's {want.type}"
    return None


def _check_all(queries, device_name, drivers, batch_rows, reference, fuse=True):
    session = session_with_tables(TABLES, device=device_name, drivers=drivers, batch_rows=batch_rows, fuse=fuse)
    assert_queries_match_duckdb(session, reference, queries, check=_integer_types_differ,
                                ordered=lambda sql: "ORDER BY" in sql and "LIMIT 1)" not in sql)


# One setting (CI time): three drivers over batches of 2 rows; one driver runs the set operations of tests/sql/test_tpcds_queries.py.
# Unfused: SIMULATED runs fused below.
@pytest.mark.parametrize("drivers, batch_rows", [(3, 2)], ids=["drivers3-batches2"])
def test_set_operations_match_duckdb_on_cpu(drivers, batch_rows, reference):
    _check_all(QUERIES, "cpu", drivers, batch_rows, reference, fuse=False)


def test_set_operations_match_duckdb_on_each_device(device_name, reference):
    _check_all(SIMULATED, device_name, 2, 3, reference)


def _plan_error(sql: str) -> str:
    with pytest.raises(PlanError) as info:
        session_with_tables(TABLES, device="cpu").sql(sql)
    return str(info.value)


@pytest.mark.parametrize("sql, message", [
    ("SELECT a, b FROM t UNION ALL SELECT k FROM u", "each branch of UNION ALL must have the same number of "
                                                     "columns: the left has 2, the right 1"),
    ("SELECT * FROM t UNION SELECT a, b FROM t", "each branch of UNION must have the same number of columns: the "
                                                 "left has 3, the right 2"),
    # (a DATE beside a number, a TIME beside a DATE are DuckDB's DATE, failing when a row is cast:
    # test_set_operation_temporal_beside_number)
    ("SELECT a, b FROM t UNION ALL SELECT k, s FROM u ORDER BY zz",
     "ORDER BY zz: the result of UNION ALL has no such column (its columns: a, b)"),
    ("SELECT a FROM t INTERSECT BY NAME SELECT k AS a FROM u", "INTERSECT BY NAME (as in DuckDB, only UNION [ALL] "
                                                               "BY NAME matches columns by name)"),
    ("SELECT a FROM t WHERE a IN (SELECT k FROM u WHERE u.m = t.a UNION SELECT 1 FROM u)",
     "IN over a correlated set operation"),
    ("SELECT a FROM t WHERE a = (SELECT k FROM u WHERE u.m = t.a UNION SELECT 1 FROM u)",
     "a correlated scalar subquery over a set operation"),
])
def test_set_operations_the_engine_cannot_plan_are_refused_by_name(sql, message):
    error = _plan_error(sql)
    assert message in error and "$" not in error  # no internal name (was "column $subquery1.zz")


def test_union_all_is_one_local_partition_fed_by_each_branch():
    from gpu_engine.plans.nodes import LocalPartitionNode, walk_plan
    from gpu_engine.sql import plan_sql

    catalog = {name: table.schema for name, table in TABLES.items()}
    plan = plan_sql("SELECT a FROM t UNION ALL SELECT k FROM u UNION ALL SELECT m FROM u", catalog)
    unions = [n for n in walk_plan(plan) if isinstance(n, LocalPartitionNode)]
    assert [len(n.sources) for n in unions] == [2, 2]
    assert plan.output_schema.field(0).type == pa.int64() and plan.output_schema.names == ["a"]


@pytest.mark.parametrize("sql", ["SELECT a, b FROM t INTERSECT SELECT k, s FROM u",
                                 "SELECT a FROM t EXCEPT SELECT m FROM u", "SELECT a FROM t UNION SELECT m FROM u"])
def test_distinct_set_operations_group_each_drivers_rows_before_repartitioning(sql):
    """Each driver's rows are grouped (a partial step) before they cross the repartition, not after: the union
    hands batches on as they are (TPC-DS q14's INTERSECT hashed 2.5M rows of 3,837 distinct keys across drivers)."""
    from gpu_engine.planning import prepare_plan
    from gpu_engine.plans.nodes import AggregationStep, LocalPartitionNode, walk_plan

    session = session_with_tables(TABLES, device="cpu", drivers=2)
    prepared = prepare_plan(session.sql_plan(sql), session.device, 2, session.config).plan
    partial = [n for n in walk_plan(prepared) if getattr(n, "step", None) is AggregationStep.PARTIAL]
    assert partial and all(isinstance(n.source, LocalPartitionNode) and n.source.partition_kind == "arbitrary"
                           for n in partial)


@pytest.mark.parametrize("sql", [
    # Nations with suppliers and rich customers; rows per nation of both; big spenders never urgent; distinct pairs.
    "SELECT n_name FROM nation WHERE n_nationkey IN (SELECT s_nationkey FROM supplier INTERSECT "
    "SELECT c_nationkey FROM customer WHERE c_acctbal > 9000) ORDER BY n_name",
    "SELECT c_nationkey AS nation, count(*) AS n FROM (SELECT c_nationkey FROM customer UNION ALL "
    "SELECT s_nationkey FROM supplier) x GROUP BY c_nationkey ORDER BY nation",
    "SELECT o_custkey FROM orders WHERE o_totalprice > 300000 EXCEPT SELECT o_custkey FROM orders "
    "WHERE o_orderpriority = '1-URGENT' ORDER BY o_custkey LIMIT 20",
    "SELECT count(*) AS n FROM (SELECT l_orderkey, l_suppkey FROM lineitem WHERE l_quantity > 45 UNION "
    "SELECT l_orderkey, l_suppkey FROM lineitem WHERE l_discount = 0.1) x",
])
def test_set_operations_over_tpch_sf001_match_duckdb(sql, tpch_data):
    from duckdb_reference import duckdb_connection, duckdb_table

    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import register_tpch

    folder = tpch_data(0.01)
    session = Session(device="cpu", drivers=2)
    register_tpch(session, folder)
    with duckdb_connection(folder) as connection:
        expected = duckdb_table(connection, sql)
    assert expected.num_rows > 0
    problem = rows_mismatch(session.sql(sql), expected, ordered="ORDER BY" in sql)
    assert problem is None, problem


@pytest.mark.parametrize("sql", ["SELECT a FROM t UNION ALL SELECT k FROM u",
                                 "SELECT count(*) AS n FROM (SELECT a FROM t EXCEPT SELECT k FROM u) x"])
def test_a_local_cluster_refuses_set_operations_by_name_and_spark_plans_them(sql):
    """A LocalCluster refuses set operations with a clear error; SparkRunner plans each branch as its own stages
    (their answers are compared with Spark's in tests/spark/test_spark_windows.py)."""
    from gpu_engine.cluster.remote_exchanges import add_remote_exchanges
    from gpu_engine.spark.broadcast_joins import add_spark_exchanges
    from gpu_engine.sql import plan_sql

    plan = plan_sql(sql, {name: table.schema for name, table in TABLES.items()})
    with pytest.raises(PlanError, match=r"set operations \(UNION / INTERSECT / EXCEPT\) do not run on a LocalCluster"):
        add_remote_exchanges(plan)
    assert add_spark_exchanges(plan) is not None


def test_set_operation_plans_round_trip_through_json_and_validation_checks_each_branch():
    import dataclasses

    from gpu_engine.plans.nodes import LocalPartitionNode, walk_plan
    from gpu_engine.plans.plan_validation import validate_plan
    from gpu_engine.plans.serialization import plan_from_json, plan_to_json
    from gpu_engine.sql import plan_sql

    catalog = {name: table.schema for name, table in TABLES.items()}
    for sql in ("SELECT a, b FROM t UNION ALL SELECT k, s FROM u",
                "SELECT a FROM t EXCEPT SELECT k FROM u ORDER BY a LIMIT 2"):
        plan = plan_sql(sql, catalog)
        assert plan_from_json(plan_to_json(plan)) == plan
    union = next(n for n in walk_plan(plan_sql("SELECT a FROM t UNION ALL SELECT k FROM u", catalog))
                 if isinstance(n, LocalPartitionNode))
    narrower = dataclasses.replace(union, sources=(union.sources[0], union.sources[1].sources[0]))
    with pytest.raises(PlanError, match="input 2"):
        validate_plan(narrower)
    with pytest.raises(PlanError, match="at least 1 input"):
        validate_plan(dataclasses.replace(union, sources=()))


def test_plan_builder_union_all_feeds_one_local_partition_from_each_branch(device_name):
    from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator

    catalog = {name: table.schema for name, table in TABLES.items()}
    ids = PlanNodeIdGenerator()
    big = PlanBuilder(catalog, id_generator=ids).table_scan("t", ["a", "b"]).filter("a > 1")
    empty = PlanBuilder(catalog, id_generator=ids).table_scan("e", ["a", "b"])
    plan = PlanBuilder(catalog, id_generator=ids).table_scan("t", ["a", "b"]).union_all(big, empty).plan()
    session = session_with_tables(TABLES, device=device_name, drivers=2, batch_rows=3)
    expected = pa.concat_tables([TABLES["t"].select(["a", "b"]),
                                 TABLES["t"].filter(pa.compute.greater(TABLES["t"]["a"], 1)).select(["a", "b"])])
    assert rows_mismatch(session.execute(plan), expected) is None
    renamed = PlanBuilder(catalog, id_generator=ids).table_scan("u", ["k"]).project(["k AS a"])
    with pytest.raises(PlanError, match="UNION ALL branch yields 'a: int64' where the first yields 'a: int32'"):
        PlanBuilder(catalog, id_generator=ids).table_scan("t", ["a"]).union_all(renamed)


def test_the_pipeline_above_a_union_all_keeps_every_driver():
    from gpu_engine.exec.local_planner import LocalExchangeSource, plan_pipelines
    from gpu_engine.planning.local_exchanges import add_local_exchanges
    from gpu_engine.sql import plan_sql

    catalog = {name: table.schema for name, table in TABLES.items()}
    plan = plan_sql("SELECT a, count(*) AS n FROM (SELECT a FROM t UNION ALL SELECT k FROM u) x GROUP BY a", catalog)
    factories = plan_pipelines(add_local_exchanges(plan, 3), 3)
    above = [f for f in factories if any(isinstance(item, LocalExchangeSource) and len(item.node.sources) == 2
                                         for item in f.items)]
    assert len(above) == 1 and above[0].num_drivers == 3  # a GATHER would run the partial aggregation on one
