"""bench/ptx_ahead.py records launches on cuda-sim with the argument types the GPU's driver launch path keys on."""

from __future__ import annotations

import numpy as np
import pytest

from bench.ptx_ahead import _signature, argument_items
from gpu_engine.kernels.driver_launch import argument_signature


class _DeviceArray:
    """What the driver path reads of a CuPy array (the launch key: dtype, ndim, contiguity)."""

    __slots__ = ("dtype", "ndim", "size", "shape", "strides", "_c_contiguous", "_f_contiguous", "data",
                 "__cuda_array_interface__")

    def __init__(self, host: np.ndarray):
        self.dtype, self.ndim, self.size, self.shape, self.strides = (host.dtype, host.ndim, host.size, host.shape,
                                                                       host.strides)
        self._c_contiguous, self._f_contiguous = host.flags.c_contiguous, host.flags.f_contiguous
        self.data = None
        self.__cuda_array_interface__ = {}


def test_recorded_arguments_give_the_signature_the_driver_path_compiles():
    host = [np.zeros(5, np.int64), np.zeros(5, np.uint8), np.zeros(4, np.bool_), np.zeros((3, 2), np.uint64),
            np.zeros((3, 2), np.float32)[:, 0], np.asfortranarray(np.zeros((2, 3)))]
    scalars = [7, 1 << 63, True, 2.5, np.int32(3), np.uint64(9), np.float32(1.5)]
    recorded = _signature(argument_items(host + scalars))
    assert recorded == argument_signature([_DeviceArray(a) for a in host] + scalars)
    assert str(recorded[1]) == "array(uint8, 1d, C)" and str(recorded[4]) == "array(float32, 1d, A)"


def test_an_argument_the_driver_path_cannot_launch_is_not_recorded():
    with pytest.raises(TypeError, match="cannot record an argument of type object"):
        argument_items([object()])
