"""Shuffles through Spark: each row lands in the partition the engine's PartitionedOutput would send it to.

The oracle is the engine itself: the same rows run through a Task whose root is
a PartitionedOutput, and its output buffers say which destination got which
row. Through Spark, the producing fragment computes partition ids on the
device and ``repartitionById`` moves the rows; ``spark_partition_id()`` tells
where they landed.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from gpu_engine.device import get_device  # noqa: E402
from gpu_engine.exec.query_ctx import QueryCtx  # noqa: E402
from gpu_engine.exec.serialized_page import deserialize_page  # noqa: E402
from gpu_engine.exec.split import ArrowSplit  # noqa: E402
from gpu_engine.exec.task import Task  # noqa: E402
from gpu_engine.plans import PlanBuilder  # noqa: E402
from gpu_engine.spark import PARTITION_ID_COLUMN, fragment_function  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]

PARTITIONS = 4


def _keys_table(rows: int = 600) -> pa.Table:
    return pa.table({
        "k": pa.array([None if i % 11 == 0 else i * 7919 % 97 for i in range(rows)], pa.int64()),
        "s": pa.array([None if i % 13 == 0 else f"key-{i % 23}" for i in range(rows)]),
        "v": pa.array(range(rows), pa.int64()),
    })


def _engine_destinations(table: pa.Table, device_name: str) -> dict[int, Counter]:
    """Return destination -> rows, as the engine's PartitionedOutput operator routes ``table``."""
    plan = PlanBuilder({"t": table.schema}).table_scan("t").partitioned_output(["k", "s"], PARTITIONS).plan()
    query_ctx = QueryCtx.create(get_device(device_name), threads=2)
    task = Task("routing-oracle", plan, query_ctx)
    try:
        task.start()
        task.add_split(plan.source.id, ArrowSplit(table))
        task.no_more_splits(plan.source.id)
        task.wait(60)
        manager = query_ctx.output_buffer_manager
        destinations = {}
        for destination in range(PARTITIONS):
            rows, sequence, at_end = [], 0, False
            while not at_end:
                pages, sequence, at_end = manager.get_data(task.task_id, destination, 1 << 30, sequence)
                rows += [tuple(r.values()) for page in pages for r in deserialize_page(page).to_pylist()]
            destinations[destination] = Counter(rows)
        manager.delete_results(task.task_id)
        return destinations
    finally:
        query_ctx.shutdown()


def test_repartition_by_id_puts_each_row_where_the_engine_decided(spark, device_name):
    from pyspark.sql import functions as F

    table = _keys_table()
    frame = spark.createDataFrame(table).repartition(3)
    plan = PlanBuilder({"t": table.schema}).table_scan("t").partitioned_output(["k", "s"], PARTITIONS).plan()
    function = fragment_function(plan, device=device_name, spark=spark)
    assert function.spark_schema.names == ["k", "s", "v", PARTITION_ID_COLUMN]
    routed = (frame.mapInArrow(function, function.spark_schema)
              .repartitionById(PARTITIONS, PARTITION_ID_COLUMN)
              .withColumn("landed", F.spark_partition_id())
              .toArrow())
    assert routed.column(PARTITION_ID_COLUMN).to_pylist() == routed.column("landed").to_pylist()
    by_spark = {p: Counter() for p in range(PARTITIONS)}
    for row in routed.select(["k", "s", "v", "landed"]).to_pylist():
        by_spark[row["landed"]][(row["k"], row["s"], row["v"])] += 1
    engine = _engine_destinations(table, device_name)
    assert by_spark == engine
    assert sum(1 for rows in engine.values() if rows) > 1  # the keys really spread over partitions
