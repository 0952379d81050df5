"""The README's Spark example runs as written; executors get a Python that imports the engine, or one line why not.

The shared session (tests/spark/conftest.py) started with ``PYSPARK_PYTHON``
pointing at this interpreter; the example must also run from a session that
did not, as a newcomer's does: PySpark then starts ``python3``, which in a
virtual environment is usually another interpreter without ``gpu_engine``.
"""

from __future__ import annotations

import stat
import sys

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from test_readme import _blocks  # noqa: E402 - tests/ is on sys.path (tests/conftest.py)

from gpu_engine.errors import ExecutionError  # noqa: E402
from gpu_engine.spark import SparkRunner  # noqa: E402
from gpu_engine.spark.executor_python import default_shuffle_partitions, executor_python  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]


@pytest.fixture
def as_started_without_pyspark_python(spark, monkeypatch):
    """Return the shared SparkContext as if it had started without ``PYSPARK_PYTHON`` (its workers: ``python3``)."""
    context = spark.sparkContext
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setattr(context, "pythonExec", "python3")
    return context


@pytest.mark.timeout(900)  # the first Spark test of a run also starts Spark and may generate SF 0.1 (~3 min loaded)
def test_the_spark_example_runs_as_written(as_started_without_pyspark_python, capsys):
    (block,) = [b for b in _blocks("python") if "SparkSession.builder" in b]
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    assert as_started_without_pyspark_python.pythonExec == sys.executable  # a local master: the driver's Python
    table = namespace["table"]
    assert isinstance(table, pa.Table) and table.num_rows == 4  # Q1: one row per (returnflag, linestatus)
    assert "l_returnflag" in table.column_names and "Stage" in capsys.readouterr().out
    assert namespace["runner"].partitions() == default_shuffle_partitions(namespace["spark"])


def test_executors_that_cannot_import_the_engine_fail_at_once_in_one_line(spark, monkeypatch, tmp_path):
    # A Python that starts (PySpark's own modules come from Spark's zip) but without site-packages: no gpu_engine.
    python = tmp_path / "python-without-site"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PYSPARK_PYTHON", str(python))  # the user's choice is kept, and checked
    monkeypatch.setattr(spark.sparkContext, "pythonExec", spark.sparkContext.pythonExec)  # restored afterwards
    with pytest.raises(ExecutionError) as raised:
        SparkRunner(spark, device="cpu")
    message = str(raised.value)
    assert "\n" not in message and "PYSPARK_PYTHON" in message
    assert "cannot import gpu_engine" in message and "gpu_engine" in message.split(";")[0]


@pytest.mark.parametrize("master, chosen, expected", [
    ("local[2]", None, "/driver/python"),
    ("local", None, "/driver/python"),
    ("local-cluster[2,1,1024]", None, "/driver/python"),
    ("local[2]", "/chosen/python", "/chosen/python"),
    ("spark://head:7077", None, None),  # a cluster: the driver's path means nothing there; Spark's choice, checked
    ("yarn", None, None),
    ("yarn", "/opt/conda/bin/python", "/opt/conda/bin/python"),
])
def test_local_masters_run_the_drivers_python_and_clusters_keep_sparks(master, chosen, expected):
    assert executor_python(master, chosen, "/driver/python") == expected


def test_default_shuffle_partitions_are_the_clusters_cores_unless_set(spark):
    assert default_shuffle_partitions(spark) == 4  # tests/spark/conftest.py sets spark.sql.shuffle.partitions
    spark.conf.unset("spark.sql.shuffle.partitions")
    try:
        assert default_shuffle_partitions(spark) == spark.sparkContext.defaultParallelism == 2  # local[2], not 200
        assert SparkRunner(spark, device="cpu").partitions() == 2
        assert SparkRunner(spark, device="cpu", shuffle_partitions=7).partitions() == 7
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")
