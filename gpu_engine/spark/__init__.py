"""Run the engine across machines with Apache Spark: fragments as ``mapInArrow``, Spark's shuffles between stages.

``SparkRunner(spark, device="auto").execute(plan, tables={name: dataframe})``
cuts an ordinary single-node plan into stages and returns a Spark DataFrame;
``SparkRunner.collect`` returns a ``pyarrow.Table``; joins are broadcast or
shuffled by their build side's estimated size (``broadcast_threshold``). :func:`fragment_function`
is the low-level piece: one plan fragment as the callable ``mapInArrow``
runs, an engine Task per Spark partition. Needs PySpark (``pip install
'gpu-engine[spark]'``); nothing else in ``gpu_engine`` imports this package.
"""

from gpu_engine.spark.broadcast_joins import add_spark_exchanges
from gpu_engine.spark.executor_device import TaskDeviceLog, choose_executor_device
from gpu_engine.spark.join_sizes import SizeJoinStrategy
from gpu_engine.spark.map_in_arrow import FragmentFunction, fragment_function
from gpu_engine.spark.partition_ids import PARTITION_ID_COLUMN, partition_ids
from gpu_engine.spark.spark_runner import SparkRunner, SparkStage, StageInput
from gpu_engine.spark.spark_types import arrow_schema_for, spark_schema_for

__all__ = [
    "SparkRunner",
    "SparkStage",
    "StageInput",
    "FragmentFunction",
    "fragment_function",
    "add_spark_exchanges",
    "SizeJoinStrategy",
    "TaskDeviceLog",
    "choose_executor_device",
    "partition_ids",
    "PARTITION_ID_COLUMN",
    "arrow_schema_for",
    "spark_schema_for",
]
