"""A Task is cancelled inside one long simulated kernel launch, and the simulator's launch keeps its answers.

Issue 30's TPC-DS run on ``cuda-sim``: q78 was still inside one simulated
launch 13 minutes after its 240 s timeout, because the Task's cancel points sat
between launches. :mod:`gpu_engine.kernels.simulator_launch` puts them inside
(every element access of a launch's arrays).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from numba import cuda

from tests.conftest import GPU_PRESENT

pytestmark = pytest.mark.skipif(GPU_PRESENT, reason="numba's CUDA simulator is off where a GPU runs the CUDA twins")

GENEROUS_SECONDS = 5.0


def _simulated_threads() -> list[threading.Thread]:
    from numba.cuda.simulator.kernel import BlockThread

    return [thread for thread in threading.enumerate() if isinstance(thread, BlockThread) and thread.is_alive()]


def _engine_threads() -> list[str]:
    from gpu_engine.exec.driver_executors import DRIVER_THREAD_PREFIX, working_driver_threads

    working = {t.name for t in working_driver_threads()}
    return [t.name for t in threading.enumerate()
            if t.name.startswith("gpu-engine") and (t.name in working or not t.name.startswith(DRIVER_THREAD_PREFIX))]


def _a_long_launch_runs(hold: float = 0.3, limit: float = 60.0) -> bool:
    """Wait until one simulated CUDA thread stays alive ``hold`` seconds: a launch far from its end (blocks run in turn)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        seen = _simulated_threads()
        if seen:
            time.sleep(hold)
            if any(thread.is_alive() for thread in seen):
                return True
        time.sleep(0.01)
    return False


def test_cancelling_a_task_inside_one_long_simulated_launch_stops_it_and_leaves_no_thread():
    from gpu_engine import Session, TaskCancelled
    from gpu_engine.exec.task import TaskState

    # one split of 200k rows: the fused aggregation runs one launch over them (~15 s simulated, far more loaded)
    rows = 200_000
    table = pa.table({"a": pa.array(np.arange(rows, dtype=np.int64) % 1000),
                      "b": pa.array(np.arange(rows, dtype=np.int64))})
    session = Session(device="cuda-sim", drivers=1, batch_rows=1 << 20)
    session.register("t", table, split_rows=rows)
    errors: list[BaseException] = []

    def query() -> None:
        try:
            session.sql("SELECT a, sum(b) AS s FROM t GROUP BY a")
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            errors.append(error)

    runner = threading.Thread(target=query)
    runner.start()
    assert _a_long_launch_runs()
    start = time.monotonic()
    session.last_task.cancel()
    runner.join(GENEROUS_SECONDS)
    assert not runner.is_alive() and time.monotonic() - start <= GENEROUS_SECONDS
    assert len(errors) == 1 and isinstance(errors[0], TaskCancelled), errors
    assert session.last_task.state is TaskState.CANCELED
    assert _engine_threads() == []
    deadline = time.monotonic() + 1.0  # the block's other simulated threads end at their next array access
    while _simulated_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _simulated_threads() == []


@cuda.jit
def _doubled(values, out):
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, values.shape[0], step):
        out[i] = values[i] * 2


def test_a_launch_on_a_thread_running_a_task_writes_its_outputs_and_reads_read_only_inputs():
    """Watched arrays still write back, and read-only (Arrow-backed) inputs are read, not written back."""
    from gpu_engine.device import get_device
    from gpu_engine.exec.cancel_points import running_task
    from gpu_engine.kernels.launch import launch_cuda

    device = get_device("cuda-sim")

    class _Task:
        task_id = "t"
        is_terminating = False

    values = np.arange(40, dtype=np.int64)
    values.flags.writeable = False
    for task in (_Task(), None):
        out = np.zeros(40, dtype=np.int64)
        if task is None:
            launch_cuda(device, _doubled, 40, values, out)
        else:
            with running_task(task):
                launch_cuda(device, _doubled, 40, values, out)
        assert out.tolist() == (np.arange(40) * 2).tolist()
