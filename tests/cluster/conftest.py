"""TPC-H data for the cluster tests: the same cached files tests/test_tpch_queries.py uses."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gpu_engine.connectors.tpch_data import ensure_tpch

SCALE_FACTOR_BY_DEVICE = {"cpu": 0.01, "cuda": 0.01, "cuda-sim": 0.001}
LINEITEM_SPLITS = 6


@pytest.fixture(scope="session")
def tpch_folder(request, tmp_path_factory):
    """Return a function: scale factor -> folder of TPC-H Parquet files, generated at most once."""
    data_root = os.environ.get("GPU_ENGINE_DATA")
    if data_root:
        root = Path(data_root) / "tpch"
    elif getattr(request.config, "cache", None) is not None:
        root = request.config.cache.mkdir("tpch")
    else:
        root = tmp_path_factory.mktemp("tpch")
    return lambda scale_factor: ensure_tpch(scale_factor, root, progress=False)


def register_lineitem(session, folder: Path) -> None:
    """Register lineitem in memory, cut into several splits, so every leaf Task gets some.

    The small scale factors write lineitem as a single row group: registered as
    Parquet it would be a single split, and all but one leaf Task would idle.
    """
    table = pq.read_table(folder / "lineitem.parquet")
    session.register("lineitem", table, split_rows=-(-table.num_rows // LINEITEM_SPLITS))
