"""How a plan becomes Spark stages: boundaries, broadcasts, refusals, table checks, and the executor's device."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from gpu_engine.device import gpu_available  # noqa: E402
from gpu_engine.errors import DeviceError, PlanError  # noqa: E402
from gpu_engine.plans import PlanBuilder, tpch  # noqa: E402
from gpu_engine.plans.nodes import ExchangeNode  # noqa: E402
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator  # noqa: E402
from gpu_engine.spark import SparkRunner, add_spark_exchanges, choose_executor_device  # noqa: E402
from gpu_engine.spark.executor_device import cuda_ordinal, task_gpu_addresses  # noqa: E402
from gpu_engine.spark.join_sizes import SizeJoinStrategy  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])
CATALOG = {"t": SCHEMA, "u": SCHEMA}


def _stage_lines(runner: SparkRunner, plan, tables=None) -> list[str]:
    return [line for line in runner.explain(plan, tables).splitlines() if line.startswith("Stage")]


def test_q3_broadcasts_both_join_build_sides_and_finishes_its_top_n_in_one_partition(spark, spark_tpch_tables):
    runner = SparkRunner(spark, device="cpu")
    plan = tpch.query(3, runner.catalog(spark_tpch_tables()))
    assert _stage_lines(runner, plan) == [
        "Stage 0: table customer -> broadcast (per partition)",
        "Stage 1: table orders, broadcast 4.build from stage 0 -> broadcast (per partition)",
        "Stage 2: table lineitem, broadcast 7.build from stage 1 -> partition ids (per partition)",
        "Stage 3: stage 2, shuffle into 4 by [l_orderkey, o_orderdate, o_shippriority] -> gather (per partition)",
        "Stage 4: stage 3, gather into 1 -> rows (1 partition)",
    ]
    stages = runner.plan_stages(plan)
    assert [s.plan.kind for s in stages] == ["Filter", "HashJoin", "PartitionedOutput", "TopN", "Project"]


def test_aggregations_run_partial_before_the_shuffle_and_final_after_it(spark):
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=3)
    plan = PlanBuilder(CATALOG).table_scan("t").aggregation(["k"], ["sum(v) AS s"]).plan()
    producer, consumer = runner.plan_stages(plan)
    assert producer.output == "partition ids" and producer.plan.num_partitions == 3
    assert producer.plan.source.describe().startswith("PARTIAL")
    assert consumer.input.kind == "shuffle" and consumer.input.partitions == 3
    assert consumer.plan.describe().startswith("FINAL") and consumer.output == "rows"


def test_one_shuffle_partition_is_a_gather(spark):
    table = pa.table({"k": pa.array([1, 2, 1, None], pa.int64()), "v": pa.array([1, 2, 3, 4], pa.int64())})
    frame = spark.createDataFrame(table).repartition(2)
    runner = SparkRunner(spark, device="cpu", shuffle_partitions=1)
    plan = PlanBuilder(runner.catalog({"t": frame})).table_scan("t").aggregation(["k"], ["sum(v) AS s"]).plan()
    producer, consumer = runner.plan_stages(plan)
    assert producer.output == "gather" and consumer.input.kind == "gather"
    assert sorted(runner.collect(plan, {"t": frame}).to_pylist(), key=str) == sorted(
        [{"k": 1, "s": 4}, {"k": 2, "s": 2}, {"k": None, "s": 4}], key=str)


def test_only_a_bare_parquet_scan_is_read_by_the_engine(spark, tmp_path):
    import pyarrow.parquet as pq

    from gpu_engine.exec.split_serialization import split_from_json
    from gpu_engine.spark.parquet_scans import parquet_scan_files, parquet_split_documents

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": pa.array(range(100), pa.int64()), "v": pa.array(range(100), pa.int64())}), path,
                   row_group_size=10)
    frame = spark.read.parquet(str(path))
    assert parquet_scan_files(frame) == [str(path)]
    assert parquet_scan_files(frame.filter("k > 3")) is None and parquet_scan_files(frame.select("k")) is None
    assert parquet_scan_files(spark.createDataFrame(pa.table({"k": [1]}))) is None
    merged = [split_from_json(doc) for doc in parquet_split_documents([str(path)], SCHEMA, 3, split_rows=10)]
    assert [s.row_groups for s in merged] == [(0, 1, 2), (3, 4, 5), (6, 7, 8, 9)]
    assert parquet_split_documents([str(path)], pa.schema([("k", pa.int32())])) is None  # Spark's type differs
    assert parquet_split_documents([str(path)], pa.schema([("w", pa.int64())])) is None


@pytest.mark.parametrize("join_type", ["right", "full", "right_semi", "right_anti"])
def test_joins_that_cannot_broadcast_their_build_side_are_shuffled_and_refuse_a_broadcast(join_type):
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("u").project(["k AS uk", "v AS uv"])
    output = ["uk", "uv"] if join_type.startswith("right_") else ["k", "v", "uv"]
    plan = (PlanBuilder(CATALOG, id_generator=ids).table_scan("t")
            .hash_join(["k"], ["uk"], build, output, join_type=join_type).plan())
    distributed = add_spark_exchanges(plan)
    assert [source.id for source in distributed.sources] == [f"{plan.id}.probe", f"{plan.id}.build"]
    assert [source.source.keys for source in distributed.sources] == [("k",), ("uk",)]
    with pytest.raises(PlanError, match=f"a {join_type} join cannot run with a broadcast build side"):
        add_spark_exchanges(plan, lambda join: "broadcast")
    with pytest.raises(PlanError, match=f"join strategy 'hash' for join {plan.id} is not one of broadcast, shuffle"):
        SizeJoinStrategy(None, 0, {plan.id: "hash"})


def test_join_strategy_follows_the_build_sides_parquet_size_and_per_join_overrides(spark, spark_tpch_folder):
    from gpu_engine.spark.join_sizes import table_scan_bytes

    folder = spark_tpch_folder()
    tables = {name: spark.read.parquet(str(folder / f"{name}.parquet")) for name in ("lineitem", "orders",
                                                                                       "customer")}
    orders_bytes = table_scan_bytes(tables["orders"], ["o_orderkey", "o_custkey", "o_orderdate",
                                                       "o_shippriority"])
    customer_bytes = table_scan_bytes(tables["customer"], ["c_custkey", "c_mktsegment"])
    assert 0 < customer_bytes < orders_bytes < table_scan_bytes(tables["orders"], tables["orders"].columns)
    runner = SparkRunner(spark, device="cpu", broadcast_threshold=(customer_bytes + orders_bytes) // 2)
    plan = tpch.query(3, runner.catalog(tables))  # lineitem JOIN (orders JOIN customer)
    lines = _stage_lines(runner, plan, tables)
    assert sum("joined with" in line for line in lines) == 1 and sum("-> broadcast" in line for line in lines) == 1
    chosen = runner.last_join_strategies
    assert sorted(strategy for strategy, _ in chosen.values()) == ["broadcast", "shuffle"]
    orders_join = next(join for join, (strategy, _) in chosen.items() if strategy == "broadcast")
    lineitem_join = next(join for join in chosen if join != orders_join)
    assert chosen[lineitem_join][1] > chosen[orders_join][1]  # the estimate: a sum over the build side's scans
    everything = SparkRunner(spark, device="cpu", broadcast_threshold=-1)  # Spark's -1: never broadcast
    assert sum("joined with" in line for line in _stage_lines(everything, plan, tables)) == 2
    overridden = everything.explain(plan, tables, {lineitem_join: "broadcast"})
    assert overridden.count("joined with") == 1 and everything.last_join_strategies[lineitem_join][0] == "broadcast"
    runner_default = SparkRunner(spark, device="cpu", joins="shuffle")  # the plan's override wins over the runner's
    runner_default.plan_stages(plan, tables, {orders_join: "broadcast"})
    assert {join: strategy for join, (strategy, _) in runner_default.last_join_strategies.items()} == {
        orders_join: "broadcast", lineitem_join: "shuffle"}
    assert SparkRunner(spark, device="cpu").broadcast_threshold() == 10 * 1024 * 1024  # Spark's default


def test_a_join_over_two_given_shuffles_is_co_partitioned_and_a_shuffle_beside_a_table_is_refused(spark):
    ids = PlanNodeIdGenerator()
    left = PlanBuilder(CATALOG, id_generator=ids).table_scan("t").partitioned_output(["k"], 4).plan()
    right = (PlanBuilder(CATALOG, id_generator=ids).table_scan("u").project(["k AS uk", "v AS uv"])
             .partitioned_output(["uk"], 4).plan())
    right_exchange = PlanBuilder(id_generator=ids).exchange(right.output_schema)
    consumer = (PlanBuilder(id_generator=ids).exchange(left.output_schema)
                .hash_join(["k"], ["uk"], right_exchange, ["k", "v", "uv"]).plan())
    left_id, right_id = consumer.sources[0].id, consumer.sources[1].id
    plan = replace(consumer, sources=(replace(consumer.sources[0], sources=(left,)),
                                      replace(consumer.sources[1], sources=(right,))))
    assert all(isinstance(plan.sources[i], ExchangeNode) for i in (0, 1)) and left_id != right_id
    joined = SparkRunner(spark, shuffle_partitions=4).plan_stages(plan)[-1]
    assert (joined.input.node_id, joined.build_input.node_id) == (left_id, right_id)
    assert joined.input.keys == ("k",) and joined.build_input.keys == ("uk",)
    table_side = PlanBuilder(CATALOG, id_generator=ids).table_scan("u").project(["k AS uk", "v AS uv"])
    mixed = (PlanBuilder(id_generator=ids).exchange(left.output_schema)
             .hash_join(["k"], ["uk"], table_side, ["k", "v", "uv"]).plan())
    mixed = replace(mixed, sources=(replace(mixed.sources[0], sources=(left,)), mixed.sources[1]))
    with pytest.raises(PlanError, match="reads one partitioned input .two for a shuffled join. and broadcasts"):
        SparkRunner(spark).plan_stages(mixed)


def test_tables_are_checked_before_anything_runs(spark):
    frame = spark.createDataFrame(pa.table({"k": pa.array([1], pa.int32()), "v": pa.array([2], pa.int64())}))
    runner = SparkRunner(spark, device="cpu")
    plan = PlanBuilder(CATALOG).table_scan("t").plan()
    with pytest.raises(PlanError, match="unknown table 't'"):
        runner.execute(plan, {"other": frame})
    with pytest.raises(PlanError, match="column 'k' of table 't' is int32 in Spark but the plan reads int64"):
        runner.execute(plan, {"t": frame})
    with pytest.raises(PlanError, match="table 't' has no column 'v'"):
        runner.execute(plan, {"t": frame.selectExpr("CAST(k AS bigint) AS k")})
    with pytest.raises(TypeError):
        SparkRunner(spark, no_such_setting=1)


def test_engine_and_spark_types_map_both_ways(spark):
    from gpu_engine.spark.spark_types import arrow_schema_for, spark_schema_for

    schema = pa.schema([("a", pa.int16()), ("b", pa.decimal128(38, 4)), ("c", pa.string()), ("d", pa.date32()),
                        ("e", pa.timestamp("us", tz="UTC")), ("f", pa.timestamp("us")), ("g", pa.float64()),
                        ("h", pa.bool_()), ("i", pa.uint32())])
    spark_schema = spark_schema_for(schema)
    assert spark_schema.simpleString() == ("struct<a:smallint,b:decimal(38,4),c:string,d:date,e:timestamp,"
                                           "f:timestamp_ntz,g:double,h:boolean,i:bigint>")
    back = arrow_schema_for(spark_schema, "UTC")
    assert back.field("i").type == pa.int64() and back.remove(8).equals(schema.remove(8))
    with pytest.raises(PlanError, match="no Spark type holds"):
        spark_schema_for(pa.schema([("x", pa.list_(pa.int64()))]))


@pytest.mark.parametrize("addresses, visible, ordinal", [
    (["1"], None, 1),          # Spark's address is the physical GPU
    (["3"], "2,3", 1),         # ... found by its place among the visible devices
    ([], "5,6", 0),            # no Spark resource: the first visible device
    ([], None, 0),             # nothing at all: device 0
])
def test_the_gpu_ordinal_follows_spark_then_cuda_visible_devices_then_zero(addresses, visible, ordinal):
    assert cuda_ordinal(addresses, visible)[0] == ordinal


def test_task_gpu_addresses_come_from_the_task_context(monkeypatch):
    from pyspark import TaskContext
    from pyspark.resource import ResourceInformation

    class FakeContext:
        def resources(self):
            return {"gpu": ResourceInformation("gpu", ["2"])}

    monkeypatch.setattr(TaskContext, "get", classmethod(lambda cls: FakeContext()))
    assert task_gpu_addresses() == ["2"]
    monkeypatch.setattr(TaskContext, "get", classmethod(lambda cls: None))
    assert task_gpu_addresses() == []


@pytest.mark.skipif(gpu_available(), reason="checks the fallback on a machine without a GPU")
def test_auto_is_cpu_on_an_executor_without_a_gpu(spark):
    def device_names(batches):
        from gpu_engine.spark import choose_executor_device

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{"device": choose_executor_device("auto").device.name}])

    names = spark.range(4, numPartitions=2).mapInArrow(device_names, "device string").toArrow()
    assert names.column("device").to_pylist() == ["cpu", "cpu"]
    assert choose_executor_device("auto").ordinal is None
    with pytest.raises(DeviceError):
        choose_executor_device("cuda")


def test_routed_by_names_the_keys_an_aggregated_side_is_already_shuffled_by():
    from gpu_engine.cluster import add_remote_exchanges
    from gpu_engine.spark.broadcast_joins import routed_by

    catalog = {"t": pa.schema([("a", pa.int64()), ("b", pa.int64()), ("v", pa.int64())])}

    def grouped() -> PlanBuilder:
        return PlanBuilder(catalog).table_scan("t").aggregation(["a", "b"], ["sum(v) AS s"])

    def side(builder: PlanBuilder):  # the plan under the gather add_remote_exchanges puts at a spread root
        return add_remote_exchanges(builder.plan()).source.source

    assert routed_by(side(grouped())) == ("a", "b")
    assert routed_by(side(grouped().filter("s > 0").project(["b AS bb", "a AS aa", "s"]))) == ("aa", "bb")
    assert routed_by(side(grouped().project(["a", "s"]))) is None  # b is projected away: no longer known
    assert routed_by(PlanBuilder(catalog).table_scan("t").plan()) is None
