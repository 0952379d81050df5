"""Pick the device an engine Task uses on a Spark executor.

Why: Spark, not the engine, decides which GPU a task may use. With
``spark.executor.resource.gpu.amount`` and ``spark.task.resource.gpu.amount``
set, each task is handed GPU addresses in ``TaskContext.get().resources()["gpu"]``;
two tasks sharing an executor must each stay on their own GPU. Without that
(no resource scheduling, or a plain Python process) the executor's process sees
the GPUs ``CUDA_VISIBLE_DEVICES`` names, and the first of them is device 0 of
the process. The choice is made where the Task runs, never on the driver: the
driver may have no GPU while the executors do, which is why ``auto`` is
resolved here and falls back to ``cpu`` on an executor without a GPU.

CuPy keeps its current device per thread, so the chosen ordinal is made
current on every thread of the Task's executor (the drivers' threads) through
the thread pool's initializer. ``cuda-sim`` (numba's simulator, one pretend
GPU) stands in for ``cuda`` in tests: the ordinal is chosen from Spark's
addresses the same way, but there is no GPU to make current.

Stage-level scheduling: with a ``pyspark.resource.ResourceProfile`` whose task
requests hold ``gpu`` (``TaskResourceRequests().cpus(1).resource("gpu", 1.0)``,
a TaskResourceProfile; standalone and local-cluster accept one without dynamic
allocation), Spark hands each task of that stage its own GPU address even when
``spark.task.resource.gpu.amount`` is not set for the application: pass it as
``SparkRunner(..., profile=...)``. :class:`TaskDeviceLog` brings back, per
task, what Spark assigned and what the engine chose.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pyspark.accumulators import AccumulatorParam

from gpu_engine.device import Device, get_device

__all__ = ["ExecutorDevice", "choose_executor_device", "task_gpu_addresses", "cuda_ordinal", "TaskDeviceLog"]


@dataclass(frozen=True)
class ExecutorDevice:
    """The device a Task runs on and, for ``cuda``, which GPU and why that one."""

    device: Device
    ordinal: int | None = None
    reason: str = ""
    addresses: tuple[str, ...] = ()

    def executor(self, threads: int) -> ThreadPoolExecutor:
        """Return a thread pool whose threads all use this GPU (any pool on other devices)."""
        if self.ordinal is None or not self.device.is_gpu:
            return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gpu-engine-driver")
        ordinal = self.ordinal

        def use_gpu() -> None:
            import cupy

            cupy.cuda.Device(ordinal).use()

        return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gpu-engine-driver", initializer=use_gpu)


def task_gpu_addresses() -> list[str]:
    """Return the GPU addresses Spark assigned to the running task (empty outside a task or without any)."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - the module is only used with pyspark
        return []
    context = TaskContext.get()
    if context is None:
        return []
    gpu = context.resources().get("gpu")
    return list(gpu.addresses) if gpu is not None else []


def cuda_ordinal(addresses: list[str], visible_devices: str | None) -> tuple[int, str]:
    """Return the CUDA ordinal for Spark's GPU addresses, given ``CUDA_VISIBLE_DEVICES``, and the reason.

    Spark's addresses are what its discovery script reported: physical GPU
    indices. When ``CUDA_VISIBLE_DEVICES`` narrows what the process sees, an
    address is found by its position in that list.
    """
    visible = [entry.strip() for entry in (visible_devices or "").split(",") if entry.strip()]
    if addresses:
        address = addresses[0]
        if address in visible:
            return visible.index(address), f"Spark task resource gpu={address} (CUDA_VISIBLE_DEVICES={visible_devices})"
        if address.isdigit():
            return int(address), f"Spark task resource gpu={address}"
    if visible:
        return 0, f"first of CUDA_VISIBLE_DEVICES={visible_devices}"
    return 0, "device 0 (no Spark GPU resource, no CUDA_VISIBLE_DEVICES)"


def choose_executor_device(requested: str) -> ExecutorDevice:
    """Resolve ``requested`` (``auto``, ``cpu``, ``cuda``, ``cuda-sim``) on this executor.

    ``auto`` is ``cuda`` when CuPy sees a GPU here, else ``cpu``; ``cuda`` on
    an executor without a GPU raises :class:`~gpu_engine.errors.DeviceError`.
    """
    device = get_device(requested)
    if device.kernel_flavor != "cuda":  # cpu: no GPU to choose
        return ExecutorDevice(device)
    addresses = task_gpu_addresses()
    ordinal, reason = cuda_ordinal(addresses, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return ExecutorDevice(device, ordinal, reason, tuple(addresses))


def _task_position() -> tuple[int, int, int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return -1, -1, -1
    return context.stageId(), context.partitionId(), context.attemptNumber()


class _ListParam(AccumulatorParam):
    """Accumulate lists by concatenation."""

    def zero(self, value):
        return []

    def addInPlace(self, first, second):
        first.extend(second)
        return first


class TaskDeviceLog:
    """Bring back from the executors, per Task, the GPU addresses Spark assigned and the device the engine chose.

    Why: which GPU a task used is decided on the executor; a Spark
    accumulator (updates travel back with each finished task) is the one
    channel that needs no extra job. ``records`` are dicts with ``stage``,
    ``partition``, ``attempt``, ``addresses``, ``device``, ``ordinal`` and
    ``reason``; an attempt that is retried appears once per attempt.
    """

    def __init__(self, spark):
        self.accumulator = spark.sparkContext.accumulator([], _ListParam())

    @property
    def records(self) -> list[dict]:
        """Return what the finished tasks reported so far (on the driver)."""
        return list(self.accumulator.value)

    @staticmethod
    def add(accumulator, chosen: ExecutorDevice) -> None:
        """Report ``chosen`` for the running task (on the executor)."""
        stage, partition, attempt = _task_position()
        accumulator.add([{"stage": stage, "partition": partition, "attempt": attempt,
                          "addresses": list(chosen.addresses), "device": chosen.device.name,
                          "ordinal": chosen.ordinal, "reason": chosen.reason}])
