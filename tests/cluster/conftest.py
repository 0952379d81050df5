"""TPC-H data for the cluster tests: the same cached files tests/test_tpch_queries.py uses."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tpch_folder(tpch_data):
    """Return a function: scale factor -> folder of TPC-H Parquet files (tests/conftest.py's ``tpch_data``)."""
    return tpch_data
