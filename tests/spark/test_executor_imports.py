"""A Spark executor's Python worker imports the fragment's side of ``gpu_engine.spark`` only, not the driver's.

Why (issue 29 item 4): every executor worker is a new process; unpickling a fragment function imports
``gpu_engine.spark`` first, and the package used to import the runner, its exchange rules and the local
cluster they build on with it: 36 modules, ~0.04 s of CPU a worker (engine imports after PySpark's, with
bytecode: 416-508 -> 359-425 ms, four runs each, load ~25). Module sets, not seconds, so the test holds on a
loaded machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]

#: The driver's side: planning a query into stages and submitting them.
DRIVER_SIDE = ("gpu_engine.spark.spark_runner", "gpu_engine.spark.broadcast_joins", "gpu_engine.spark.join_sizes",
               "gpu_engine.cluster.local_cluster")


def _run(statement: str) -> dict:
    code = "import sys, json\n" + statement
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_unpickling_and_running_a_fragment_imports_no_driver_side_module():
    loaded = _run("import pyspark.sql\n"
                  "import gpu_engine.spark.map_in_arrow, gpu_engine.spark.fragment_task\n"
                  f"print(json.dumps([m for m in {DRIVER_SIDE!r} if m in sys.modules]))")
    assert loaded == []


def test_the_package_still_offers_every_public_name():
    names = _run("import gpu_engine.spark as spark\n"
                 "import gpu_engine.spark.partition_ids\n"  # the submodule must not shadow the function
                 "print(json.dumps({n: type(getattr(spark, n)).__name__ for n in spark.__all__}))")
    assert set(names) == {"SparkRunner", "SparkStage", "StageInput", "FragmentFunction", "fragment_function",
                          "add_spark_exchanges", "SizeJoinStrategy", "TaskDeviceLog", "choose_executor_device",
                          "partition_ids", "PARTITION_ID_COLUMN", "arrow_schema_for", "spark_schema_for"}
    assert names["partition_ids"] == "function" and names["fragment_function"] == "function"
    assert "module" not in names.values()
