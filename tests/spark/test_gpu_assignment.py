"""GPU assignment per task on Spark's ``local-cluster``: each task's engine uses the address Spark assigned.

The cluster runs in a process of its own (tests/spark/local_cluster_gpus.py):
a JVM holds one SparkContext, and the other Spark tests share ``local[2]``.
Two single-core workers each discover one fake GPU ("1" and "2"); the runner's
stages ask one GPU per task through a TaskResourceProfile, and the engine
(``cuda-sim`` standing in for ``cuda``) picks the ordinal from the address.
Without the profile the same query's tasks get no address and fall back to
device 0. Spark's resource scheduling is the same code on a real GPU cluster;
only the discovery script and the device differ.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

pytestmark = pytest.mark.spark

CHILD = Path(__file__).with_name("local_cluster_gpus.py")


@pytest.fixture(scope="session")  # module scope ran the ~50 s child twice when xdist interleaved another module
def report(tmp_path_factory):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17: no java on PATH and no JAVA_HOME")
    if shutil.which("flock") is None:
        pytest.skip("the fake GPU discovery script needs flock")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, str(CHILD), str(tmp_path_factory.mktemp("gpus"))], env=env,
                          capture_output=True, text=True, timeout=400)
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    return json.loads(lines[-1][len("REPORT "):])


def test_each_task_uses_the_gpu_address_spark_assigned_it(report):
    run = report["with_profile"]
    assert run["rows"] == report["expected"]
    assert run["tasks"] and all(task["device"] == "cuda-sim" for task in run["tasks"])
    for task in run["tasks"]:
        (address,) = task["addresses"]
        assert task["ordinal"] == int(address) and task["reason"] == f"Spark task resource gpu={address}"
    assert {task["addresses"][0] for task in run["tasks"]} == {"1", "2"}  # both executors, each its own GPU
    assert len({task["stage"] for task in run["tasks"]}) == 2  # the partial and the final aggregation stage


def test_without_the_resource_profile_tasks_get_no_gpu_address(report):
    run = report["without_profile"]
    assert run["rows"] == report["expected"]
    assert run["tasks"] and all(task["addresses"] == [] and task["ordinal"] == 0 for task in run["tasks"])


def test_a_deterministic_engine_error_is_retried_by_spark_then_fails_the_job_once_with_the_engines_message(report):
    error = report["error"]
    assert error is not None and error["type"] == "ExecutionError"
    message = error["message"]
    assert message.startswith("Spark fragment stage 0 failed in stage ") and "on device cuda-sim" in message
    assert "Could not convert string 'x" in message and "to int32" in message
    assert " attempt 1 " in message  # the second attempt's error: Spark retried once, as maxFailures=2 allows
    assert "py4j" not in message and "Traceback" not in message and "\n" not in message
