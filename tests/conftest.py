"""Parametrize tests over the devices this machine can run.

Without a GPU, numba's CUDA simulator is switched on before anything imports
``numba.cuda``, so every test runs on ``cpu`` and on ``cuda-sim`` (the CUDA
kernels interpreted on NumPy arrays). With a GPU (CuPy sees one and
``NUMBA_ENABLE_CUDASIM`` is not set) the devices are ``cpu`` and ``cuda``; the
``cuda`` cases carry the ``gpu`` marker.
"""

from __future__ import annotations

import os

import pytest


def _gpu_present() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


GPU_PRESENT = _gpu_present()
if not GPU_PRESENT:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

DEVICE_PARAMS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda" if GPU_PRESENT else "cuda-sim", id="cuda" if GPU_PRESENT else "cuda-sim",
                 marks=[pytest.mark.gpu] if GPU_PRESENT else []),
]


@pytest.fixture(params=DEVICE_PARAMS)
def device_name(request) -> str:
    """Yield each device name this machine runs: ``cpu`` and ``cuda-sim`` (or ``cuda``)."""
    return request.param


@pytest.fixture
def device(device_name):
    """Yield the :class:`gpu_engine.device.Device` for :func:`device_name`."""
    from gpu_engine.device import get_device

    return get_device(device_name)
