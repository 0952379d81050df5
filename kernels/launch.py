"""Launch a kernel twin over ``n`` items: the one place that turns a device into a launch.

Why: entry points then read as one call per kernel, and the launch details stay
in one spot: the CUDA twin gets ``device.launch_shape(n)`` (its kernels loop
grid-stride, so any shape covers ``n``), and numba's CUDA simulator gets what it
needs: it runs one kernel at a time per process (drivers on threads would
collide), so simulated launches take a lock; and it copies every array argument
back to the host after a launch, so read-only NumPy arrays (Arrow-backed
buffers) are handed over as inputs only.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np
from numba import cuda

from gpu_engine.device import Device

__all__ = ["launch_cuda", "launch_twin"]

_SIMULATOR_LOCK = threading.Lock()


def _simulator_argument(argument: Any) -> Any:
    if isinstance(argument, np.ndarray) and argument.ndim > 0 and not argument.flags.writeable:
        return cuda.In(argument)
    return argument


def launch_cuda(device: Device, kernel: Any, n: int, *arguments: Any) -> None:
    """Launch a numba.cuda ``kernel`` covering ``n`` items (nothing when ``n`` is 0)."""
    if n == 0:
        return
    blocks, threads = device.launch_shape(n)
    if device.is_gpu:
        kernel[blocks, threads](*arguments)
        return
    arguments = tuple(_simulator_argument(argument) for argument in arguments)
    with _SIMULATOR_LOCK:
        kernel[blocks, threads](*arguments)


def launch_twin(device: Device, n: int, cpu_kernel: Callable[..., Any], cuda_kernel: Any, *arguments: Any) -> None:
    """Run ``cpu_kernel(*arguments)`` on the cpu device, else launch ``cuda_kernel`` over ``n`` items."""
    if device.kernel_flavor == "cpu":
        if n:
            cpu_kernel(*arguments)
        return
    launch_cuda(device, cuda_kernel, n, *arguments)
