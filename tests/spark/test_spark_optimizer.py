"""SparkRunner runs the optimizer rules on the whole plan before cutting stages (gpu_engine.optimizer).

A filter written above a shuffled join reaches the scan stage below the shuffle, and a branch that can output
nothing leaves no stage behind; the rows stay DuckDB's.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from gpu_engine.plans import PlanBuilder  # noqa: E402
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator  # noqa: E402
from gpu_engine.spark import SparkRunner  # noqa: E402
from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]

TABLES = {
    "t": pa.table({"k": pa.array([1, 2, 3, None, 2], pa.int64()), "v": pa.array([5, 6, None, 8, 9], pa.int64())}),
    "u": pa.table({"k2": pa.array([1, 2, 2, None], pa.int64()), "w": pa.array([10, 20, 30, 40], pa.int64())}),
}


def test_a_filter_above_a_shuffled_join_runs_in_the_scan_stage_and_an_empty_branch_leaves_no_stage(spark):
    frames = {name: spark.createDataFrame(table).repartition(2) for name, table in TABLES.items()}
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=2, joins="shuffle")
    catalog = runner.catalog(frames)
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(catalog, id_generator=ids).table_scan("u").plan()
    never = (PlanBuilder(catalog, id_generator=ids).table_scan("t").filter("1 = 2")
             .project(["k", "v", "v AS w"]).plan())
    plan = (PlanBuilder(catalog, id_generator=ids).table_scan("t").hash_join(["k"], ["k2"], build, ["k", "v", "w"])
            .union_all(never).filter("v > 5 AND w < 35").plan())
    stages = runner.plan_stages(plan)
    scans = [stage.plan for stage in stages if stage.input.kind == "table"]
    # the never-true branch's scan is gone
    assert len(scans) == 2, [(stage.input.describe(), stage.output) for stage in stages]
    assert all("Filter" in {node.kind for node in _walk(scan)} for scan in scans)
    with duckdb_with_tables(TABLES) as connection:
        expected = duckdb_table(connection, "SELECT k, v, w FROM t JOIN u ON k = k2 WHERE v > 5 AND w < 35")
    assert_same_rows(runner.collect(plan, frames), expected)


def _walk(node):
    yield node
    for source in node.sources:
        yield from _walk(source)
