"""The mapInArrow callable: JSON on the wire, batches fed as they arrive, empty partitions, types, errors."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import pickle
import pickletools

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from duckdb_reference import assert_same_rows, duckdb_table  # noqa: E402
from gpu_engine.errors import ExecutionError, PlanError  # noqa: E402
from gpu_engine.plans import PlanBuilder  # noqa: E402
from gpu_engine.plans.serialization import plan_from_json, plan_to_json  # noqa: E402
from gpu_engine.spark import FragmentFunction, SparkRunner, fragment_function  # noqa: E402
from gpu_engine.spark.fragment_task import ERROR_MARKER  # noqa: E402
from gpu_engine.spark.spark_types import wire_schema_for  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]


def _numbers(rows: int, start: int = 0) -> pa.Table:
    values = list(range(start, start + rows))
    return pa.table({
        "x": pa.array([v if v % 7 else None for v in values], pa.int64()),
        "g": pa.array([f"g{v % 5}" for v in values], pa.string()),
    })


def _duckdb(sql: str, **tables: pa.Table) -> pa.Table:
    import duckdb

    connection = duckdb.connect()
    for name, table in tables.items():
        connection.register(name, table)
    return duckdb_table(connection, sql)


def _batches(table: pa.Table, rows: int) -> list[pa.RecordBatch]:
    return table.to_batches(max_chunksize=rows)


def test_the_fragment_travels_as_json_not_as_pickled_objects():
    table = _numbers(10)
    plan = PlanBuilder({"t": table.schema}).table_scan("t").filter("x > 3").plan()
    function = fragment_function(plan, device="cpu")
    assert plan_to_json(plan_from_json(function.plan_json)) == plan_to_json(plan)
    # What Spark pickles names one class, the callable's own: every field is text, a number, a flag or absent.
    assert all(isinstance(getattr(function, f.name), (str, int, bool, tuple, type(None)))
               for f in dataclasses.fields(function))
    opcodes = [op.name for op, _, _ in pickletools.genops(pickle.dumps(function))]
    assert opcodes.count("STACK_GLOBAL") + opcodes.count("GLOBAL") == 1


def test_batches_are_fed_as_they_arrive_and_output_flows_back_before_the_input_ends(device_name):
    table = _numbers(2_000)
    plan = PlanBuilder({"t": table.schema}).table_scan("t").filter("x % 2 = 0").project(["x", "g"]).plan()
    # batch_rows: on a GPU small Spark batches are gathered into device batches of batch_rows rows.
    function = fragment_function(plan, device=device_name, config={"batch_rows": 100})
    consumed = 0

    def partition():
        nonlocal consumed
        for batch in _batches(table, 50):
            consumed += 1
            yield batch

    outputs, consumed_at_first_output = [], None
    for batch in function(partition()):
        if consumed_at_first_output is None:
            consumed_at_first_output = consumed
        outputs.append(batch)
    assert consumed == 40 and consumed_at_first_output < consumed
    assert all(b.schema == wire_schema_for(function.spark_schema, "UTC", False) for b in outputs)
    assert_same_rows(pa.Table.from_batches(outputs), _duckdb("SELECT x, g FROM t WHERE x % 2 = 0", t=table))


@pytest.mark.parametrize("partition", [[], "zero-row batches"], ids=["no-batches", "zero-row-batches"])
def test_an_empty_partition_yields_nothing(partition):
    table = _numbers(10)
    if partition:
        partition = [table.to_batches()[0].slice(0, 0)] * 3
    builder = PlanBuilder({"t": table.schema}).table_scan("t")
    for plan in (builder.plan(), PlanBuilder({"t": table.schema}).table_scan("t")
                 .partial_aggregation([], ["count(*) AS n", "sum(x) AS s"]).plan()):
        assert list(fragment_function(plan, device="cpu")(iter(partition))) == []


def test_a_global_aggregation_on_an_empty_partition_yields_its_default_row():
    table = _numbers(10)
    plan = PlanBuilder({"t": table.schema}).table_scan("t").aggregation([], ["count(*) AS n", "sum(x) AS s"]).plan()
    function = fragment_function(plan, device="cpu")
    assert function.runs_when_empty
    (batch,) = list(function(iter([])))
    assert batch.to_pylist() == [{"n": 0, "s": None}]


@pytest.mark.parametrize("rows", [3, 0], ids=["three-rows-in-eight-partitions", "no-rows"])
def test_global_aggregation_through_spark_produces_one_row(spark, rows):
    table = _numbers(rows, start=1)
    frame = spark.createDataFrame(table).repartition(8)  # most partitions are empty
    runner = SparkRunner(spark, device="cpu")
    plan = (PlanBuilder(runner.catalog({"t": frame})).table_scan("t")
            .aggregation([], ["count(*) AS n", "sum(x) AS s", "count(x) AS c"]).plan())
    actual = runner.collect(plan, {"t": frame})
    assert actual.num_rows == 1
    assert_same_rows(actual, _duckdb("SELECT count(*) AS n, sum(x) AS s, count(x) AS c FROM t", t=table))


def test_grouped_aggregation_over_empty_partitions_through_spark(spark):
    table = _numbers(40)
    frame = spark.createDataFrame(table).repartition(8).filter("x < 12")  # many partitions lose all rows
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=6)
    plan = (PlanBuilder(runner.catalog({"t": frame})).table_scan("t")
            .aggregation(["g"], ["count(*) AS n", "sum(x) AS s"]).plan())
    assert_same_rows(runner.collect(plan, {"t": frame}),
                     _duckdb("SELECT g, count(*) AS n, sum(x) AS s FROM t WHERE x < 12 GROUP BY g", t=table))


def _typed_table() -> pa.Table:
    new_york = pa.timestamp("us", tz="America/New_York")
    return pa.table({
        "i8": pa.array([1, -2, None, 4], pa.int8()),
        "f": pa.array([1.5, None, -0.25, 2.0], pa.float32()),
        "b": pa.array([True, False, None, True]),
        "d": pa.array([decimal.Decimal("12.34"), None, decimal.Decimal("-0.01"), decimal.Decimal("99999.99")],
                      pa.decimal128(7, 2)),
        "day": pa.array([datetime.date(1998, 9, 2), None, datetime.date(1970, 1, 1), datetime.date(2024, 2, 29)]),
        "ts": pa.array([datetime.datetime(2020, 1, 1, 12, 30), None, datetime.datetime(1999, 12, 31, 23, 59, 59, 5),
                        datetime.datetime(2024, 7, 4, 1)], new_york),
        "ntz": pa.array([datetime.datetime(2020, 1, 1), datetime.datetime(2021, 6, 1, 8), None,
                         datetime.datetime(1960, 3, 1)], pa.timestamp("us")),
        "s": pa.array(["alpha", None, "", "δέλτα"]),
    })


def test_every_type_comes_back_exactly_through_spark(spark):
    from pyspark.sql import functions as F

    table = _typed_table()
    frame = spark.createDataFrame(table).withColumn("ntz", F.col("ntz").cast("timestamp_ntz")).repartition(3)
    runner = SparkRunner(spark, device="cpu")
    catalog = runner.catalog({"t": frame})
    assert catalog["t"].field("ts").type == pa.timestamp("us", tz="UTC")  # Spark's session time zone
    assert catalog["t"].field("ntz").type == pa.timestamp("us")
    plan = (PlanBuilder(catalog).table_scan("t").filter("i8 IS NULL OR i8 <> 4")
            .project(["i8", "f", "b", "d", "d * 2 AS d2", "day", "ts", "ntz", "s"]).plan())
    expected = _duckdb("SELECT i8, f, b, d, d * 2 AS d2, day, ts, ntz, s FROM t WHERE i8 IS NULL OR i8 <> 4", t=table)
    actual = runner.collect(plan, {"t": frame})
    assert actual.schema == plan.output_schema
    assert_same_rows(actual, expected)


def test_output_is_cast_to_the_declared_wire_types():
    table = _typed_table()
    plan = PlanBuilder({"t": table.schema}).table_scan("t").plan()
    function = fragment_function(plan, device="cpu", time_zone="Europe/Paris", large_var_types=True)
    (batch,) = list(function(iter(table.to_batches())))
    assert batch.schema.field("s").type == pa.large_string()
    assert batch.schema.field("ts").type == pa.timestamp("us", tz="Europe/Paris")
    assert batch.schema.field("d").type == pa.decimal128(7, 2)
    assert batch.schema.field("i8").type == pa.int8()
    assert batch.column("ts").cast(pa.int64()).equals(table.column("ts").combine_chunks().cast(pa.int64()))
    assert batch.column("s").to_pylist() == table.column("s").to_pylist()


def _failing_plan(catalog):
    return PlanBuilder(catalog).table_scan("t").project(["g", "cast(g AS integer) AS n"]).plan()


def test_a_failing_fragment_raises_a_clear_engine_error_on_the_driver(spark, device_name):
    frame = spark.createDataFrame(_numbers(100)).repartition(2)
    runner = SparkRunner(spark, device=device_name)
    with pytest.raises(ExecutionError, match="Could not convert string 'g[0-4]' to int32") as caught:
        runner.collect(_failing_plan(runner.catalog({"t": frame})), {"t": frame})
    message = str(caught.value)
    assert f"on device {device_name}" in message and "Spark fragment stage 0" in message
    assert "py4j" not in message and "Traceback" not in message


def test_a_failing_fragment_composed_by_hand_names_the_engine_error(spark):
    frame = spark.createDataFrame(_numbers(100))
    function = fragment_function(_failing_plan({"t": frame.toArrow().schema}), device="cpu", spark=spark)
    with pytest.raises(Exception, match="Could not convert string") as caught:
        frame.select(*function.input_columns).mapInArrow(function, function.spark_schema).collect()
    assert ERROR_MARKER in str(caught.value)


def test_fragment_function_checks_its_inputs():
    table = _numbers(5)
    ids = PlanBuilder({"t": table.schema})
    plan = ids.table_scan("t").plan()
    with pytest.raises(PlanError, match="broadcast input 'nope'"):
        fragment_function(plan, broadcast_inputs={"nope": table})
    with pytest.raises(TypeError):
        fragment_function(plan, config={"no_such_setting": 1})
    assert isinstance(fragment_function(plan_to_json(plan)), FragmentFunction)


def test_an_interval_column_is_refused_by_name_before_spark_runs():
    table = pa.table({"iv": pa.array([pa.MonthDayNano([1, 2, 3000])], pa.month_day_nano_interval())})
    plan = PlanBuilder({"t": table.schema}).table_scan("t").plan()
    with pytest.raises(PlanError, match="Spark's CalendarInterval does not cross Arrow"):
        fragment_function(plan, device="cpu")
