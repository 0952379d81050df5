"""Run the primer query and TPC-H Q1, Q3, Q6 and Q18 through Spark + engine and compare with DuckDB.

Spark runs each fragment as a ``mapInArrow`` over 500-row Arrow batches, its
shuffles routed by the engine's partition ids; Q3 and Q18 broadcast their join
build sides. DuckDB reads the same Parquet files.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from duckdb_reference import assert_same_rows, duckdb_connection, duckdb_table  # noqa: E402
from gpu_engine.plans import tpch  # noqa: E402
from gpu_engine.spark import SparkRunner  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]

QUERIES = {
    "primer": (tpch.primer_query, tpch.PRIMER_SQL, False),
    "q1": (lambda catalog: tpch.query(1, catalog), tpch.sql(1), True),
    "q3": (lambda catalog: tpch.query(3, catalog), tpch.sql(3), True),
    "q6": (lambda catalog: tpch.query(6, catalog), tpch.sql(6), False),
    "q18": (lambda catalog: tpch.query(18, catalog), tpch.sql(18), True),
}
#: The simulator interprets every CUDA kernel in Python threads: it runs the small single-table queries only.
DEVICE_SCALE_FACTOR = 0.001


@pytest.fixture(scope="module")
def duckdb_results(spark_tpch_folder):
    """Return a function: (scale factor, query name) -> DuckDB's result, computed once."""
    results = {}

    def result_for(scale_factor: float, name: str):
        if (scale_factor, name) not in results:
            with duckdb_connection(spark_tpch_folder(scale_factor)) as connection:
                results[scale_factor, name] = duckdb_table(connection, QUERIES[name][1])
        return results[scale_factor, name]

    return result_for


def _check(runner: SparkRunner, name: str, tables, expected) -> None:
    build_plan, _, ordered = QUERIES[name]
    assert expected.num_rows > 0  # a check that can fail
    actual = runner.collect(build_plan(runner.catalog(tables)), tables)
    assert_same_rows(actual, expected, ordered=ordered)


@pytest.mark.parametrize("name", list(QUERIES))
def test_query_through_spark_matches_duckdb(name, spark, spark_tpch_tables, duckdb_results):
    _check(SparkRunner(spark, device="cpu"), name, spark_tpch_tables(), duckdb_results(0.01, name))


@pytest.mark.parametrize("drivers", [1, 2], ids=lambda d: f"drivers{d}")
@pytest.mark.parametrize("name", ["primer", "q6"])
def test_single_table_queries_on_each_device(name, drivers, device_name, spark, spark_tpch_tables, duckdb_results):
    runner = SparkRunner(spark, device=device_name, drivers=drivers)
    _check(runner, name, spark_tpch_tables(DEVICE_SCALE_FACTOR), duckdb_results(DEVICE_SCALE_FACTOR, name))


def test_shuffle_by_keys_where_spark_lacks_repartition_by_id(spark, spark_tpch_tables, duckdb_results):
    runner = SparkRunner(spark, device="cpu")
    runner.route_by_partition_id = False  # what Spark < 4.1 gets: repartition(n, keys), Spark hashes the keys
    plan = tpch.query(1, runner.catalog(spark_tpch_tables()))
    assert "-> keys" in runner.explain(plan) and "partition ids" not in runner.explain(plan)
    _check(runner, "q1", spark_tpch_tables(), duckdb_results(0.01, "q1"))


@pytest.mark.parametrize("engine_reads", [True, False], ids=["engine-reads-parquet", "fed-through-arrow"])
def test_a_bare_parquet_table_is_read_by_the_engine_or_fed_through_arrow(engine_reads, spark, spark_tpch_folder,
                                                                         duckdb_results):
    tables = {"lineitem": spark.read.parquet(str(spark_tpch_folder() / "lineitem.parquet"))}  # not repartitioned
    runner = SparkRunner(spark, device="cpu", engine_parquet_scans=engine_reads)
    plan = tpch.query(1, runner.catalog(tables))
    assert ("(engine reads 1 Parquet splits in 1 partitions)" in runner.explain(plan, tables)) is engine_reads
    _check(runner, "q1", tables, duckdb_results(0.01, "q1"))
    assert (runner.last_engine_scans == {0: ("lineitem", 1, 1)}) is engine_reads
