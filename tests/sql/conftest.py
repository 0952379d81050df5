"""Fixtures the SQL tests share."""

from __future__ import annotations

import pytest

from duckdb_reference import duckdb_with_tables


@pytest.fixture(scope="module")
def reference(request):
    """Yield one DuckDB connection per test module over the module's ``TABLES`` (name -> Arrow table).

    The reference answers of the ``assert_queries_match_duckdb`` tests: the engine's session registers the same
    tables (``session_with_tables``), so both answer over the very same rows. A module with other tables defines
    its own ``reference`` fixture, which takes precedence over this one.
    """
    with duckdb_with_tables(request.module.TABLES) as connection:
        yield connection
