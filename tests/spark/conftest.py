"""A local Spark session and TPC-H tables for the Spark integration tests.

Spark runs in local mode (``local[2]``, Java 17) with its UI off, few shuffle
partitions and tiny Arrow batches (``maxRecordsPerBatch`` = 500), so every
fragment sees many batches and shuffles leave some partitions empty. The
Python workers run this interpreter (``PYSPARK_PYTHON``), so they import the
same ``gpu_engine`` and inherit ``NUMBA_ENABLE_CUDASIM`` from tests/conftest.py.
Without PySpark the fixtures skip; without Java they skip too.

Every JVM the Spark tests start (this session's driver, the ``local-cluster``
of tests/spark/test_gpu_assignment.py with its executors, Spark's launcher)
runs with :data:`TEST_JVM_OPTIONS`, through ``JDK_JAVA_OPTIONS``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest


#: The client (C1) compiler only and the serial collector. Why: Spark's test jobs are small and short, so most of a
#: test JVM's CPU went to the C2 JIT's and the parallel collector's threads, on the 2-core CI machine where the
#: other xdist worker needs the second core. A JVM is not a child pytest waits for, so neither ``time make test``
#: nor the durations show it: a ``local[2]`` session running 5 small ``mapInArrow`` jobs used 19.1 s of JVM CPU
#: with the defaults, 13.2 s with C1 only, 17.6 s with the serial collector only, 10.8 s with both (same load).
#: Only how the JVM compiles and collects changes, not what Spark computes. A value the user set is kept.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("JDK_JAVA_OPTIONS", TEST_JVM_OPTIONS)  # read by every JDK 9+ ``java`` launcher, children too

#: Imported by the Spark Python workers at start (its sitecustomize): one compile of each cached kernel across them.
SPARK_WORKER_SITE = Path(__file__).resolve().parent.parent / "spark_workers"

SPARK_SCALE_FACTOR = 0.01
#: lineitem is one Parquet row group at SF 0.01 (one Spark partition); spread it so stages have several Tasks.
LINEITEM_PARTITIONS = 3
SPARK_TABLES = ("lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region")


@pytest.fixture(scope="session")
def spark():
    """Yield a local SparkSession shared by every Spark test."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17: no java on PATH and no JAVA_HOME")
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers must import this environment's gpu_engine
    session = (
        SparkSession.builder.master("local[2]")
        .appName("gpu_engine tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.executorEnv.PYTHONPATH", str(SPARK_WORKER_SITE))
        .config("spark.executorEnv.GPU_ENGINE_TESTS_COMPILE_ONCE", "1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_tpch_folder(tpch_data):
    """Return a function: scale factor -> TPC-H folder, the same cached files tests/test_tpch_queries.py uses."""
    return lambda scale_factor=SPARK_SCALE_FACTOR: tpch_data(scale_factor)


@pytest.fixture(scope="session")
def spark_tpch_tables(spark, spark_tpch_folder):
    """Return a function: scale factor -> {table name: Spark DataFrame} (lineitem in several partitions)."""
    cache: dict[float, dict] = {}

    def tables_for(scale_factor: float = SPARK_SCALE_FACTOR) -> dict:
        if scale_factor not in cache:
            folder = spark_tpch_folder(scale_factor)
            tables = {name: spark.read.parquet(str(folder / f"{name}.parquet")) for name in SPARK_TABLES}
            tables["lineitem"] = tables["lineitem"].repartition(LINEITEM_PARTITIONS)
            cache[scale_factor] = tables
        return cache[scale_factor]

    return tables_for


@pytest.fixture(scope="session")
def spark_tpcds(spark):
    """Return (TPC-DS SF 0.01 folder, {table name: ``spark.read.parquet`` of its file}); skip without ``tpcgen-cli``.

    The files are the ones tests/sql/test_tpcds_queries.py generates once under ``$GPU_ENGINE_DATA/tpcds``;
    bare Parquet scans, so the engine reads them itself in the scan stages.
    """
    from pathlib import Path

    from gpu_engine.connectors.tpcds_data import TPCDS_TABLES, TpcdsDataError, ensure_tpcds, find_tpcgen_cli

    try:
        find_tpcgen_cli()
    except TpcdsDataError as error:
        pytest.skip(f"TPC-DS data needs tpcgen-cli: {error}")
    folder = ensure_tpcds(SPARK_SCALE_FACTOR, Path(os.environ["GPU_ENGINE_DATA"]) / "tpcds")
    return folder, {table: spark.read.parquet(str(folder / f"{table}.parquet")) for table in TPCDS_TABLES
                    if (folder / f"{table}.parquet").is_file()}
