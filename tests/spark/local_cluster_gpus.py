"""Run SparkRunner on Spark's ``local-cluster`` with fake GPUs and print what each task got, as JSON.

Run by tests/spark/test_gpu_assignment.py in a process of its own: a JVM
holds one SparkContext, and the other Spark tests share a ``local[2]`` one.
Usage: ``python local_cluster_gpus.py <scratch folder>``.

Two workers of one core each; each runs the GPU discovery script written
here, which hands out a fresh fake address per call ("1", then "2": never
"0", the address a task without a Spark resource would fall back to). Every
executor holds one GPU, but the application asks no GPU per task
(``spark.task.resource.gpu.amount`` unset), so only a stage with a
TaskResourceProfile requesting one gets addresses: the runner's stages with
``profile=``, then a plain run without it for contrast. The engine runs on
``cuda-sim`` in place of ``cuda``. Last, a plan that fails on every attempt
shows what the driver raises once Spark has retried it (``spark.task.maxFailures`` = 2).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

DISCOVERY_SCRIPT = """#!/bin/bash
exec 9>"{folder}/lock"
flock 9
count=$(cat "{folder}/count" 2>/dev/null || echo 0)
echo $((count + 1)) > "{folder}/count"
echo '{{"name": "gpu", "addresses": ["'$((count + 1))'"]}}'
"""


def main(folder: Path) -> dict:
    import pyarrow as pa
    from pyspark.resource import ResourceProfileBuilder, TaskResourceRequests
    from pyspark.sql import SparkSession

    from gpu_engine.plans import PlanBuilder
    from gpu_engine.spark import SparkRunner

    script = folder / "gpus.sh"
    script.write_text(DISCOVERY_SCRIPT.format(folder=folder))
    script.chmod(0o755)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("gpu_engine gpu assignment")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.executor.memory", "512m").config("spark.driver.memory", "512m")
             .config("spark.worker.resource.gpu.amount", "1")
             .config("spark.worker.resource.gpu.discoveryScript", str(script))
             .config("spark.executor.resource.gpu.amount", "1")
             .config("spark.locality.wait", "0").config("spark.sql.shuffle.partitions", "4")
             .config("spark.task.maxFailures", "2")
             .config("spark.executorEnv.NUMBA_ENABLE_CUDASIM", "1")
             .getOrCreate())
    try:
        spark.sparkContext.setLogLevel("ERROR")
        deadline = time.monotonic() + 120
        while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver and 2 executors
            if time.monotonic() > deadline:
                raise TimeoutError("the local-cluster executors did not register in 120 s")
            time.sleep(0.5)
        table = pa.table({"k": pa.array([i % 7 for i in range(400)], pa.int64()),
                          "v": pa.array(range(400), pa.int64())})
        tables = {"t": spark.createDataFrame(table).repartition(4)}
        profile = ResourceProfileBuilder().require(TaskResourceRequests().cpus(1).resource("gpu", 1.0)).build
        report = {"profile": type(profile).__name__}
        for label, runner in (("with_profile", SparkRunner(spark, device="cuda-sim", profile=profile)),
                              ("without_profile", SparkRunner(spark, device="cuda-sim"))):
            plan = PlanBuilder(runner.catalog(tables)).table_scan("t").aggregation(["k"], ["sum(v) AS s"]).plan()
            rows = sorted(([row["k"], int(row["s"])] for row in runner.collect(plan, tables).to_pylist()), key=str)
            report[label] = {"rows": rows, "tasks": runner.task_devices.records}
        # A deterministic engine error: Spark retries the task as usual (spark.task.maxFailures), then the job
        # fails once and the driver raises the engine's own message, naming the stage and the last attempt.
        strings = {"t": spark.createDataFrame(pa.table({"g": ["x1", "x2"]})).repartition(1)}
        runner = SparkRunner(spark, device="cuda-sim")
        failing = PlanBuilder(runner.catalog(strings)).table_scan("t").project(["cast(g AS integer) AS n"]).plan()
        try:
            runner.collect(failing, strings)
            report["error"] = None
        except Exception as error:  # noqa: BLE001 - the test checks the type
            report["error"] = {"type": type(error).__name__, "message": str(error)}
        report["expected"] = sorted(([k, sum(v for v in range(400) if v % 7 == k)] for k in range(7)), key=str)
        return report
    finally:
        spark.stop()


if __name__ == "__main__":
    print("REPORT " + json.dumps(main(Path(sys.argv[1]))))
