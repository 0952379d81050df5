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
the thread pool's initializer.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gpu_engine.device import Device, get_device

__all__ = ["ExecutorDevice", "choose_executor_device", "task_gpu_addresses", "cuda_ordinal"]


@dataclass(frozen=True)
class ExecutorDevice:
    """The device a Task runs on and, for ``cuda``, which GPU and why that one."""

    device: Device
    ordinal: int | None = None
    reason: str = ""

    def executor(self, threads: int) -> ThreadPoolExecutor:
        """Return a thread pool whose threads all use this GPU (any pool on other devices)."""
        if self.ordinal is None:
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
    if not device.is_gpu:
        return ExecutorDevice(device)
    ordinal, reason = cuda_ordinal(task_gpu_addresses(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    return ExecutorDevice(device, ordinal, reason)
