"""DuckDB's ``range(...)`` / ``generate_series(...)`` table functions in FROM (issue 30 items 5-7) against DuckDB.

Planned as a Range source (gpu_engine/sql/series_sources.py, gpu_engine/operators/range.py): integer and
timestamp series, exclusive and inclusive ends, negative steps, NULL arguments (no rows), empty series, the int64
edges (``range(-2**63, 2**63 - 1, 2**63 - 1)``), month steps clamped at month ends as DuckDB clamps them, column
aliases (``range(3) r`` names its column ``r`` and answers to ``r.range``, as DuckDB), joins to a table, CTEs,
IN subqueries and aggregates over them; split over drivers batch by batch. The
refusals (a column of no FROM item before it, no overload, a zero step) name the function and its position; a
series reading another item's columns is tests/sql/test_unnested_series.py's.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, rows_mismatch, session_with_tables

from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.plans.nodes import RangeNode, walk_plan

TABLES = {"t": pa.table({"n": pa.array([3, None, 0, 2], pa.int64()), "s": pa.array(["a", "b", None, "d"])})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT * FROM range(5)",
    "SELECT * FROM range(2, 10, 3)",
    "SELECT * FROM generate_series(5)",
    "SELECT * FROM generate_series(1, 3)",
    "SELECT * FROM range(5, 1, -2)",
    "SELECT * FROM generate_series(5, 1, -2)",
    "SELECT * FROM generate_series(1, 10, 9223372036854775807)",
    "SELECT * FROM range(0)",
    "SELECT * FROM range(5, 1)",
    "SELECT * FROM range(1, 10, -1)",
    "SELECT * FROM generate_series(0, -3)",
    "SELECT * FROM range(NULL)",
    "SELECT * FROM range(1, NULL)",
    "SELECT * FROM generate_series(1, 3, NULL)",
    "SELECT * FROM range(9223372036854775800, 9223372036854775807, 5)",
    "SELECT * FROM generate_series(9223372036854775800, 9223372036854775807, 5)",
    "SELECT * FROM range(-9223372036854775808, -9223372036854775800, 3)",
    "SELECT * FROM range(-9223372036854775808, 9223372036854775807, 9223372036854775807)",
    "SELECT * FROM range(2 + 3)",
    "SELECT * FROM range(1::INT, 4::TINYINT)",
    "SELECT * FROM range(3) t(x)",
    "SELECT * FROM range(3) t(a, b)",
    "SELECT r.range FROM range(3) r",
    "SELECT * FROM range(3) r",
    "SELECT range, r FROM range(3) r",
    "SELECT * FROM generate_series(1, 3) a, generate_series(1, 2) b",
    "SELECT r.r * 2 AS y FROM range(3) r WHERE r.range > 0 ORDER BY r.range",
    "SELECT count(*) AS c FROM range(3) r WHERE EXISTS (SELECT 1 FROM t WHERE t.n = r.range)",
    "SELECT x * 2 AS y FROM range(0) t(x)",
    "SELECT count(*) AS n, min(range) AS lo, max(range) AS hi FROM range(1000)",
    "SELECT a.range AS a, b.range AS b FROM range(2) a JOIN range(3) b ON a.range = b.range",
    "WITH c AS (SELECT * FROM range(3)) SELECT count(range) AS n, max(range) AS m FROM c",
    "SELECT * FROM range(3) WHERE range IN (SELECT * FROM range(2))",
    "SELECT t.n, g.x FROM t JOIN generate_series(0, 3) g(x) ON g.x <= t.n",
    "SELECT g.x, count(t.n) AS c FROM generate_series(0, 4) g(x) LEFT JOIN t ON t.n = g.x GROUP BY g.x",
    "SELECT g.x, count(e.n) AS c FROM generate_series(0, 2) g(x) LEFT JOIN e ON e.n = g.x GROUP BY g.x",
    "SELECT x FROM range(10) t(x) ORDER BY x DESC LIMIT 3",
    "SELECT * FROM generate_series(DATE '2024-01-31', DATE '2024-06-01', INTERVAL 1 MONTH)",
    "SELECT * FROM generate_series(DATE '2023-11-30', DATE '2021-01-01', INTERVAL '-3 months')",
    "SELECT * FROM generate_series(TIMESTAMP '2024-01-31 10:30:00', TIMESTAMP '2025-03-31', INTERVAL 1 MONTH)",
    "SELECT * FROM generate_series(DATE '2024-02-29', DATE '2032-03-01', INTERVAL 12 MONTH)",
    "SELECT * FROM range(TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-02', INTERVAL 6 HOUR)",
    "SELECT * FROM generate_series(TIMESTAMP '2024-01-02', TIMESTAMP '2024-01-01', INTERVAL '-5 hours')",
    "SELECT * FROM generate_series(DATE '2024-03-01', DATE '2024-02-01', INTERVAL 1 DAY)",
    "SELECT * FROM range(DATE '2024-01-01', NULL, INTERVAL 1 DAY)",
    "SELECT count(*) AS n FROM range(TIMESTAMP '2024-01-01', TIMESTAMP '2024-03-01', INTERVAL '1 day 2 hours')",
]

SIMULATED = [QUERIES[1], QUERIES[5], QUERIES[13], QUERIES[17], QUERIES[33], QUERIES[37]]


def _session(device_name: str, drivers: int = 1, batch_rows: int = 1 << 16):
    return session_with_tables(TABLES, device=device_name, drivers=drivers, batch_rows=batch_rows)


def _check_all(queries, session, reference):
    assert_queries_match_duckdb(session, reference, queries, ordered=lambda sql: "ORDER BY" in sql, exact_types=True)


@pytest.mark.parametrize("drivers, batch_rows", [(1, 1 << 16), (3, 2)], ids=["drivers1", "drivers3-batches2"])
def test_series_sources_match_duckdb_on_cpu(drivers, batch_rows, reference):
    _check_all(QUERIES, _session("cpu", drivers, batch_rows), reference)


def test_series_sources_match_duckdb_on_each_device(device_name, reference):
    _check_all(SIMULATED, _session(device_name, 2, 3), reference)


def test_a_series_is_one_range_node_and_round_trips_through_json():
    from gpu_engine.plans.plan_builder import PlanBuilder
    from gpu_engine.plans.serialization import plan_from_json, plan_to_json
    from gpu_engine.sql import plan_sql

    plan = plan_sql("SELECT x FROM generate_series(1, 10, 4) g(x)", {})
    ranges = [n for n in walk_plan(plan) if isinstance(n, RangeNode)]
    assert len(ranges) == 1 and ranges[0].inclusive
    session = _session("cpu")
    assert session.execute(plan_from_json(plan_to_json(plan))).column(0).to_pylist() == [1, 5, 9]
    built = PlanBuilder({}).range("DATE '2024-01-01'", "DATE '2024-01-03'", "INTERVAL 1 DAY", inclusive=True,
                                  name="d").plan()
    assert built.output_schema.field("d").type == pa.timestamp("us")
    assert len(session.execute(plan_from_json(plan_to_json(built)))) == 3
    assert "Range[" in session.explain(built)


@pytest.mark.parametrize("spark, duckdb", [
    ("SELECT * FROM range(5)", "SELECT * FROM range(5) r(id)"),
    ("SELECT id * 2 AS x FROM range(1, 10, 3) r", "SELECT id * 2 AS x FROM range(1, 10, 3) r(id)"),
    ("SELECT count(*) AS n, max(id) AS m FROM range(0, 100, 7, 4)",
     "SELECT count(*) AS n, max(id) AS m FROM range(0, 100, 7) r(id)"),
    ("SELECT r.id FROM range(10, 0, -3) AS r", "SELECT r.id FROM range(10, 0, -3) AS r(id)"),
])
def test_sparks_range_is_the_exclusive_series_named_id(spark, duckdb, reference):
    actual = _session("cpu", 2, 2).sql(spark, dialect="spark")
    problem = rows_mismatch(actual, reference.sql(duckdb).to_arrow_table())
    assert problem is None and actual.schema.names == reference.sql(duckdb).columns, problem


def test_a_series_runs_once_on_a_local_cluster(reference):
    """A series is a single-Task source: each Task generating it would repeat its rows."""
    from gpu_engine.cluster.local_cluster import LocalCluster

    session = _session("cpu")
    sql = "SELECT g.x % 3 AS k, count(*) AS n FROM range(1000) g(x) GROUP BY g.x % 3"
    actual = LocalCluster(session, (3, 2, 1)).execute(session.sql_plan(sql))
    problem = rows_mismatch(actual, reference.sql(sql).to_arrow_table())
    assert problem is None, problem


@pytest.mark.parametrize("sql, message, column", [
    ("SELECT t.n FROM t WHERE EXISTS (SELECT * FROM range(t.n))", "range(...) reads t.n, not a column of a FROM "
     "item before it", 55),
    ("SELECT * FROM range(3.5)", "range(int32, decimal128(2, 1), int32) has no overload", 15),
    ("SELECT * FROM range((SELECT max(n) FROM t))", "a subquery as an argument of range(...)", 33),
    ("SELECT * FROM range(DATE '2024-01-01', DATE '2024-02-01', 1)", "has no overload", 15),
])
def test_series_the_engine_cannot_plan_are_refused_with_their_position(sql, message, column):
    with pytest.raises(PlanError) as info:
        _session("cpu").sql(sql)
    assert message in str(info.value) and f"column {column})" in str(info.value), str(info.value)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM range(1, 5, 0)",
    "SELECT * FROM range(TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-02', INTERVAL 0 HOUR)",
])
def test_a_zero_step_raises_as_duckdb_does(sql, reference):
    with pytest.raises(Exception, match="interval cannot be 0"):
        reference.sql(sql).fetchall()
    with pytest.raises(ExecutionError, match="interval cannot be 0"):
        _session("cpu").sql(sql)
