"""Give Spark's executors a Python that imports ``gpu_engine``, and a shuffle width that fits the cluster.

Why: a fragment's ``mapInArrow`` function runs in the executors' Python
workers, which PySpark starts with ``PYSPARK_PYTHON`` (read once, when the
SparkContext starts; ``python3`` when unset). Run from a virtual environment
without it, ``python3`` is usually another interpreter, and every fragment
failed with ``No module named 'gpu_engine.plans'`` inside a hundred lines of
Java and Python traces.

- A local master (``local``, ``local[N]``, ``local-cluster[...]``) runs its
  workers on this machine, so they get the driver's own interpreter
  (``sys.executable``), unless the user chose one (``PYSPARK_PYTHON`` or
  ``spark.pyspark.python``).
- On a cluster the driver's path means nothing to the executors: the runner
  keeps Spark's choice and checks it once with a one-task job that imports
  ``gpu_engine`` on an executor; where that fails it raises one line that
  says so and how to choose the executors' Python.

Spark's default of 200 shuffle partitions suits its own operators, not a
query whose every partition is an engine Task with its own start-up cost (TPC-H
Q1 at SF 0.1 on two cores: 39 s with 200, 1.1 s with 2), so a shuffle is as
wide as the cluster has cores (``defaultParallelism``) unless
``spark.sql.shuffle.partitions`` was set.
"""

from __future__ import annotations

import os
import sys

from gpu_engine.errors import ExecutionError

__all__ = ["executor_python", "use_engine_python", "default_shuffle_partitions"]

_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def executor_python(master: str, chosen: str | None, driver_python: str) -> str | None:
    """Return the Python the executors should run, or None to leave Spark's own choice.

    ``chosen`` is the user's ``PYSPARK_PYTHON`` / ``spark.pyspark.python``, if any.
    """
    if chosen:
        return chosen
    if master.startswith("local"):
        return driver_python
    return None


def use_engine_python(spark) -> None:
    """Point the executors' Python workers at a Python with ``gpu_engine``, or raise one line saying why not.

    Raises
    ------
    ExecutionError
        When an executor cannot import ``gpu_engine`` (or cannot start its Python).
    """
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect: the server starts the workers; nothing to point from here
        return
    chosen = os.environ.get("PYSPARK_PYTHON") or context.getConf().get("spark.pyspark.python")
    python = executor_python(context.master, chosen, sys.executable)
    if python is not None:
        context.pythonExec = python  # read when each Python function is shipped, so it applies from now on
    if context.pythonExec != sys.executable or not context.master.startswith("local"):
        _check_executors_import_the_engine(context)


def _check_executors_import_the_engine(context) -> None:
    """Run one task that imports ``gpu_engine`` on an executor; raise ExecutionError in one line if it cannot."""
    how = ("set PYSPARK_PYTHON to a Python that has gpu-engine installed on every executor before the "
           "SparkSession starts (spark-submit: --conf spark.pyspark.python=PATH)")

    def import_engine(_rows):  # nested, so Spark ships it by value: unpickling it must not need gpu_engine
        import importlib
        import sys as executor_sys

        try:
            importlib.import_module("gpu_engine.plans")
        except Exception as error:  # noqa: BLE001 - every reason is reported, in one line
            yield executor_sys.executable, f"{type(error).__name__}: {error}"
            return
        yield executor_sys.executable, None

    try:
        ((python, error),) = context.parallelize([0], 1).mapPartitions(import_engine).collect()
    except Exception as failure:  # the worker did not start: a missing interpreter, a wrong Python version
        first = next((line.strip() for line in str(failure).splitlines() if "Exception" in line or "Error" in line),
                     type(failure).__name__).rsplit("): ", 1)[-1]  # past Spark's "Lost task ... (executor ...): "
        raise ExecutionError(f"Spark executors cannot run Python {context.pythonExec!r} ({first[:200]}); "
                             f"{how}") from None
    if error is not None:
        raise ExecutionError(f"Spark executors cannot import gpu_engine (Python {python}: {error}); {how}")


def default_shuffle_partitions(spark) -> int:
    """Return ``spark.sql.shuffle.partitions`` where the user set it, else the cluster's cores."""
    try:
        configured = spark.conf.getAll.get(_SHUFFLE_PARTITIONS)
    except Exception:  # an older RuntimeConfig without getAll
        configured = None
    if configured is None:
        try:
            return max(1, int(spark.sparkContext.defaultParallelism))
        except Exception:  # Spark Connect: no SparkContext; Spark's own setting
            configured = spark.conf.get(_SHUFFLE_PARTITIONS)
    return int(configured)
