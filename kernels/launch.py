"""Launch a kernel twin over ``n`` items: the one place that turns a device into a launch.

Why: entry points then read as one call per kernel, and the launch details stay
in one spot: the CUDA twin gets ``device.launch_shape(n)`` (its kernels loop
grid-stride, so any shape covers ``n``), and numba's CUDA simulator gets what it
needs (:mod:`gpu_engine.kernels.simulator_launch`: one launch at a time, the
launching Task's cancel points inside a launch, read-only arrays as inputs).

On a GPU a kernel is launched through the CUDA driver API from PTX that
numba compiled once per machine (:mod:`gpu_engine.kernels.driver_launch`; the
H100 probe of that way of launching measured 5.4 µs of host time per launch,
numba's dispatcher typing CuPy arguments 130 µs); kernels and arguments that path cannot take, and every kernel
when ``GPU_ENGINE_KERNEL_LAUNCHER=numba``, go through numba's dispatcher.

Either way a kernel goes on CuPy's current stream, which inside a driver is the
driver's own stream (:mod:`gpu_engine.exec.driver_stream`): numba launches on
``numba.cuda.external_stream(ptr)`` of that stream, so a kernel is ordered
after the CuPy operations that made its inputs and before those that read its
outputs, with no synchronization. For the same reason numba is told not to
synchronize on the stream a CuPy array names in its ``__cuda_array_interface__``
(``CUDA_ARRAY_INTERFACE_SYNC``): by default it would block the host once per
array argument of every launch.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numba import cuda

from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_kernel_launch
from gpu_engine.exec.made_once import MadeOnce
from gpu_engine.kernels.driver_launch import launch_through_driver

__all__ = ["launch_cuda", "launch_twin", "launch_stream", "read_only"]

_NUMBA_STREAMS: MadeOnce[int, Any] = MadeOnce()  # CUDA stream handle -> numba's wrapper of it
_cai_sync_disabled = False


def _disable_array_interface_sync() -> None:
    """Stop numba from synchronizing the producer's stream of every CAI argument (see the module docstring)."""
    global _cai_sync_disabled
    if _cai_sync_disabled:
        return
    import importlib
    import os

    os.environ.setdefault("NUMBA_CUDA_ARRAY_INTERFACE_SYNC", "0")  # should numba re-read its config
    for name in ("numba.cuda.core.config", "numba.core.config"):  # numba-cuda's own config, then numba's
        try:
            config = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(config, "CUDA_ARRAY_INTERFACE_SYNC"):
            config.CUDA_ARRAY_INTERFACE_SYNC = False
    _cai_sync_disabled = True


def launch_stream(device: Device) -> Any:
    """Return the numba stream wrapping CuPy's current stream, or None for the legacy default stream.

    The wrappers are cached per stream handle: ``external_stream`` does not
    own the stream, so a cached wrapper stays right even when CuPy later
    reuses a handle for a new stream.
    """
    handle = int(device.xp.cuda.get_current_stream().ptr)
    if handle == 0:
        return None
    return _NUMBA_STREAMS.get(handle, lambda: cuda.external_stream(handle))


def launch_cuda(device: Device, kernel: Any, n: int, *arguments: Any, max_blocks: int | None = None) -> None:
    """Launch a numba.cuda ``kernel`` covering ``n`` items (nothing when ``n`` is 0) in at most ``max_blocks`` blocks."""
    if n == 0:
        return
    count_kernel_launch()
    blocks, threads = device.launch_shape(n, max_blocks)
    if device.is_gpu:
        if launch_through_driver(kernel, blocks, threads, device.xp.cuda.get_current_stream().ptr, arguments):
            return  # see gpu_engine.kernels.driver_launch; GPU_ENGINE_KERNEL_LAUNCHER=numba skips it
        _disable_array_interface_sync()
        stream = launch_stream(device)
        if stream is None:
            kernel[blocks, threads](*arguments)
        else:
            kernel[blocks, threads, stream](*arguments)
        return
    from gpu_engine.kernels.simulator_launch import launch_simulated  # imported on the simulator only

    launch_simulated(kernel, blocks, threads, arguments)


def launch_twin(device: Device, n: int, cpu_kernel: Callable[..., Any], cuda_kernel: Any, *arguments: Any,
                max_blocks: int | None = None) -> None:
    """Run ``cpu_kernel(*arguments)`` on the cpu device, else launch ``cuda_kernel`` over ``n`` items.

    ``max_blocks`` caps the CUDA grid (the kernel's grid-stride loop covers the rest): kernels that
    merge per-block state into global memory at their end want about one resident wave of blocks.

    Both count one kernel launch when ``n`` is not 0 (:mod:`gpu_engine.exec.device_counters`).
    """
    if device.kernel_flavor == "cpu":
        if n:
            count_kernel_launch()
            cpu_kernel(*arguments)
        return
    launch_cuda(device, cuda_kernel, n, *arguments, max_blocks=max_blocks)


def read_only(xp: Any, values: Any) -> Any:
    """Return ``values`` contiguous, and on the host as a read-only view (a device array as it is).

    Why: numba types a read-only array apart from a writable one, so a CPU twin given a column's values had
    two signatures per type: a column read from Parquet is a read-only Arrow buffer, one computed (a cast, an
    expression) a new writable array. Set-up (:mod:`gpu_engine.codegen.static_kernels`) runs TPC-H, whose
    tables have no DOUBLE columns, so a first query gathering or hashing a Parquet DOUBLE column compiled its
    read-only signature on a driver. A kernel's read-only inputs passed through here have one signature a type.
    """
    values = xp.ascontiguousarray(values)
    if isinstance(values, np.ndarray) and values.flags.writeable:
        values = values.view()
        values.flags.writeable = False
    return values
