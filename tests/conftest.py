"""Parametrize tests over the devices this machine can run.

Without a GPU, numba's CUDA simulator is switched on before anything imports
``numba.cuda``, so every test runs on ``cpu`` and on ``cuda-sim`` (the CUDA
kernels interpreted on NumPy arrays). With a GPU (CuPy sees one and
``NUMBA_ENABLE_CUDASIM`` is not set) the devices are ``cpu`` and ``cuda``; the
``cuda`` cases carry the ``gpu`` marker.
"""

from __future__ import annotations

import os
from pathlib import Path

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


@pytest.fixture(scope="session")
def tpch_data(request, tmp_path_factory):
    """Return a function: scale factor -> folder of TPC-H Parquet files, generated at most once.

    The one place tests get TPC-H data: ``$GPU_ENGINE_DATA/tpch`` when set, else pytest's
    cache folder (kept between sessions), else a temporary folder.
    """
    from gpu_engine.connectors.tpch_data import ensure_tpch

    data_root = os.environ.get("GPU_ENGINE_DATA")
    if data_root:
        root = Path(data_root) / "tpch"
    elif getattr(request.config, "cache", None) is not None:
        root = request.config.cache.mkdir("tpch")  # kept between sessions
    else:  # the cache plugin is disabled (-p no:cacheprovider)
        root = tmp_path_factory.mktemp("tpch")
    folders: dict[float, Path] = {}

    def folder_for(scale_factor: float) -> Path:
        if scale_factor not in folders:
            folders[scale_factor] = ensure_tpch(scale_factor, root, progress=False)
        return folders[scale_factor]

    return folder_for
