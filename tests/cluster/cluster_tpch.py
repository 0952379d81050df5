"""TPC-H data for the cluster tests: the scale factor per device and lineitem cut into several splits.

Why a module of its own: ``from conftest import`` binds whichever folder's ``conftest.py`` one pytest call imported
first, so the helpers tests import live in uniquely named modules and the conftest keeps the fixtures.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

SCALE_FACTOR_BY_DEVICE = {"cpu": 0.01, "cuda": 0.01, "cuda-sim": 0.001}
LINEITEM_SPLITS = 6


def register_lineitem(session, folder: Path) -> None:
    """Register lineitem in memory, cut into several splits, so every leaf Task gets some.

    The small scale factors write lineitem as a single row group: registered as
    Parquet it would be a single split, and all but one leaf Task would idle.
    """
    table = pq.read_table(folder / "lineitem.parquet")
    session.register("lineitem", table, split_rows=-(-table.num_rows // LINEITEM_SPLITS))
