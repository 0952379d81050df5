"""Choose the array module and the kernel twin a query runs with.

A :class:`Device` is the only place that knows whether buffers are NumPy or
CuPy arrays and whether kernels launch their numba njit (CPU) twin or their
numba.cuda twin. Operators and the expression evaluator are written once against
``device.xp`` and the kernel entry points; they never branch on the device.

Three devices exist:

``cpu``
    NumPy buffers, numba ``njit(nogil=True)`` kernels (drivers on threads use all cores).
``cuda``
    CuPy buffers on the GPU, numba.cuda kernels (or CuPy library calls).
``cuda-sim``
    NumPy buffers, the *CUDA* kernels run in numba's CUDA simulator. Slow, but it
    executes the exact CUDA kernel code on a machine with no GPU, so CI checks
    every GPU kernel. The simulator must be switched on before ``numba.cuda`` is
    first imported (``NUMBA_ENABLE_CUDASIM=1``); :func:`get_device` does it when
    it still can and raises :class:`DeviceError` when it cannot.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import Any, Sequence

import numpy as np

from gpu_engine.errors import DeviceError
from gpu_engine.exec.device_counters import count_host_sync

__all__ = ["Device", "get_device", "gpu_available", "DEVICE_NAMES"]

DEVICE_NAMES = ("auto", "cpu", "cuda", "cuda-sim")


@dataclass(frozen=True)
class Device:
    """Describe where buffers live and which kernel twin runs.

    Attributes
    ----------
    name
        ``"cpu"``, ``"cuda"`` or ``"cuda-sim"``.
    xp
        The array module of this device's buffers (NumPy or CuPy).
    kernel_flavor
        ``"cpu"`` runs njit twins; ``"cuda"`` runs numba.cuda twins.
    threads_per_block, max_blocks
        Launch shape for CUDA twins. Under the simulator every thread is a Python
        thread, so the shape is kept tiny and kernels use grid-stride loops.
    """

    name: str
    xp: ModuleType = field(compare=False, repr=False)
    kernel_flavor: str = "cpu"
    threads_per_block: int = 256
    max_blocks: int = 65535

    @property
    def is_gpu(self) -> bool:
        """Return True when buffers live in GPU memory."""
        return self.name == "cuda"

    def launch_shape(self, n: int, max_blocks: int | None = None) -> tuple[int, int]:
        """Return ``(blocks, threads)`` covering ``n`` items with a grid-stride loop (at most ``max_blocks`` blocks)."""
        threads = self.threads_per_block
        limit = self.max_blocks if max_blocks is None else min(self.max_blocks, max_blocks)
        blocks = max(1, min(limit, (n + threads - 1) // threads))
        return blocks, threads

    def asarray(self, host_array: Any) -> Any:
        """Move a host (NumPy) array to this device; a no-op on host devices."""
        if self.xp is np:
            return np.asarray(host_array)
        return self.xp.asarray(host_array)

    def to_host(self, array: Any) -> np.ndarray:
        """Return a NumPy copy (or view, on host devices) of a device array, counted as one host sync.

        Why counted on every device: on ``cuda`` the copy waits for the
        stream, and :mod:`gpu_engine.exec.device_counters` makes that cost
        visible on ``cpu`` and ``cuda-sim`` too.
        """
        count_host_sync()
        if isinstance(array, np.ndarray):
            return array
        return array.get()

    def read_scalar(self, array: Any, index: Any = None) -> Any:
        """Return ``array[index]`` (or a 0-d ``array``) as a Python scalar, counted as one host sync.

        Why: ``int(array[i])``, ``bool(xp.any(...))`` and ``.item()`` each
        stall the host on a GPU; reading through here keeps them counted.
        """
        count_host_sync()
        value = array if index is None else array[index]
        return value.item()

    def read_scalars(self, values: Sequence[Any]) -> list[int]:
        """Return several integer or bool device scalars (0-d or 1-element arrays) as ints, in one host sync.

        Why: each separate read is a stall on a GPU; packing the values into
        one small array first costs a few tiny kernels and a single copy.
        """
        if not values:
            return []
        count_host_sync()
        xp = self.xp
        packed = xp.concatenate([xp.reshape(value, (1,)).astype(xp.int64, copy=False) for value in values])
        host = packed if isinstance(packed, np.ndarray) else packed.get()
        return [int(value) for value in host.tolist()]

    def any(self, mask: Any) -> bool:
        """Return True when some element of a device bool array is true, counted as one host sync."""
        return bool(self.read_scalar(self.xp.any(mask)))

    def synchronize(self) -> None:
        """Wait for queued device work, so a clock read afterwards is honest (counted as a host sync)."""
        count_host_sync()
        if self.is_gpu:
            self.xp.cuda.get_current_stream().synchronize()


@cache
def gpu_available() -> bool:
    """Return True when CuPy imports and sees at least one CUDA device."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def _simulator_enabled() -> bool:
    if "numba.cuda" in sys.modules:
        from numba import config

        return bool(config.ENABLE_CUDASIM)
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def _enable_simulator() -> None:
    """Switch numba.cuda to its simulator, or explain why it is too late."""
    if "numba.cuda" in sys.modules:
        if not _simulator_enabled():
            raise DeviceError(
                "device 'cuda-sim' needs numba's CUDA simulator, but numba.cuda was already "
                "imported without it; set NUMBA_ENABLE_CUDASIM=1 before starting Python"
            )
        return
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    from numba import config

    config.ENABLE_CUDASIM = 1


def _import_cuda_twins() -> None:
    """Import numba.cuda now that a device runs CUDA twins (a cpu process never does: gpu_engine.kernels.lazy_cuda),
    so kernels are numba's dispatchers before any launch."""
    from gpu_engine.kernels.lazy_cuda import real_cuda

    real_cuda()


@cache
def _make_device(name: str) -> Device:
    if name == "cpu":
        return Device("cpu", np, kernel_flavor="cpu")
    if name == "cuda-sim":
        _enable_simulator()
        _import_cuda_twins()
        return Device("cuda-sim", np, kernel_flavor="cuda", threads_per_block=8, max_blocks=2)
    if name == "cuda":
        if _simulator_enabled():
            raise DeviceError(
                "device 'cuda' is unavailable in a process running numba's CUDA simulator "
                "(NUMBA_ENABLE_CUDASIM=1); use 'cuda-sim' or a fresh process"
            )
        if not gpu_available():
            raise DeviceError("device 'cuda' needs CuPy and a CUDA GPU; none was found (use 'cpu' or 'auto')")
        import cupy

        _import_cuda_twins()
        return Device("cuda", cupy, kernel_flavor="cuda")
    raise DeviceError(f"unknown device {name!r}; choose one of {', '.join(DEVICE_NAMES)}")


def get_device(name: str | Device = "auto") -> Device:
    """Resolve a device name; ``auto`` is ``cuda`` when a GPU and CuPy are present, else ``cpu``."""
    if isinstance(name, Device):
        return name
    if name == "auto":
        name = "cuda" if gpu_available() else "cpu"
    return _make_device(name)
