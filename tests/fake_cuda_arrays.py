"""Stand-ins for device arrays, backed by NumPy host memory, for testing the driver launch path without a GPU.

Why: :mod:`gpu_engine.kernels.driver_launch` reads CuPy's attributes
(``dtype``, ``ndim``, ``size``, ``data.ptr``, ``shape``, ``strides``,
``_c_contiguous``, ``_f_contiguous``) and falls back to the CUDA array
interface for other arrays. These classes offer exactly one of the two, and
point ``data.ptr`` at the NumPy buffer, so a test can check every packed
pointer, extent and stride against the array it came from.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CupyLikeArray", "InterfaceOnlyArray", "as_fake_argument"]


class _MemoryPointer:
    __slots__ = ("ptr",)

    def __init__(self, pointer: int) -> None:
        self.ptr = pointer


class CupyLikeArray:
    """Mimic a ``cupy.ndarray``: its attributes are class-level descriptors, as CuPy's Cython attributes are."""

    __slots__ = ("host", "dtype", "ndim", "size", "data", "shape", "strides", "_c_contiguous", "_f_contiguous")

    def __init__(self, host: np.ndarray) -> None:
        self.host = host
        self.dtype = host.dtype
        self.ndim = host.ndim
        self.size = host.size
        self.data = _MemoryPointer(host.ctypes.data)
        self.shape = host.shape
        self.strides = host.strides
        self._c_contiguous = bool(host.flags.c_contiguous)
        self._f_contiguous = bool(host.flags.f_contiguous)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return _interface(self.host, strides=None if self._c_contiguous else self.strides)


class InterfaceOnlyArray:
    """An array known only through ``__cuda_array_interface__`` (as from cuDF, PyTorch or numba)."""

    def __init__(self, host: np.ndarray, omit_contiguous_strides: bool = True) -> None:
        self.host = host
        contiguous = host.flags.c_contiguous and omit_contiguous_strides
        self.__cuda_array_interface__ = _interface(host, strides=None if contiguous else host.strides)


def _interface(host: np.ndarray, strides: Any) -> dict[str, Any]:
    return {"shape": host.shape, "typestr": host.dtype.str, "data": (host.ctypes.data, False), "strides": strides,
            "version": 3}


def as_fake_argument(value: Any, kind: type = CupyLikeArray) -> Any:
    """Wrap NumPy arrays as ``kind``; leave scalars alone."""
    return kind(value) if isinstance(value, np.ndarray) else value
