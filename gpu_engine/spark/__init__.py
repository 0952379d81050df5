"""Run the engine across machines with Apache Spark: fragments as ``mapInArrow``, Spark's shuffles between stages.

``SparkRunner(spark, device="auto").execute(plan, tables={name: dataframe})``
cuts an ordinary single-node plan into stages and returns a Spark DataFrame;
``SparkRunner.collect`` returns a ``pyarrow.Table``; joins are broadcast or
shuffled by their build side's estimated size (``broadcast_threshold``). :func:`fragment_function`
is the low-level piece: one plan fragment as the callable ``mapInArrow``
runs, an engine Task per Spark partition. Needs PySpark (``pip install
'gpu-engine[spark]'``); nothing else in ``gpu_engine`` imports this package.
"""

import importlib

# bound here, not on first use: importing the submodule would set the package's ``partition_ids`` to the module
from gpu_engine.spark.partition_ids import PARTITION_ID_COLUMN, partition_ids

#: Where each public name lives. Loaded on first use (PEP 562): a Spark executor's Python worker unpickles a
#: fragment function, which imports this package first; importing the driver's side with it (the runner,
#: the exchange rules, the local cluster they build on: 36 modules) cost each new worker ~0.04 s of CPU.
_HOMES = {
    "add_spark_exchanges": "broadcast_joins",
    "TaskDeviceLog": "executor_device",
    "choose_executor_device": "executor_device",
    "SizeJoinStrategy": "join_sizes",
    "FragmentFunction": "map_in_arrow",
    "fragment_function": "map_in_arrow",
    "SparkRunner": "spark_runner",
    "SparkStage": "spark_runner",
    "StageInput": "spark_runner",
    "arrow_schema_for": "spark_types",
    "spark_schema_for": "spark_types",
}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


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
