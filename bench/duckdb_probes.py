"""One probe of the review scripts: a SQL text run by DuckDB and by a Session, and what differs.

Why: each ``bench/review_stop48_*.py`` probe compares the engine with DuckDB the same way — both raising is
agreement, DuckDB raising alone or the engine raising alone or other rows is a problem — and that rule is written
once here rather than in every script.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from duckdb_reference import rows_mismatch  # noqa: E402

__all__ = ["duckdb_probe_problem"]


def duckdb_probe_problem(con, session, sql: str) -> str | None:
    """Return what differs between DuckDB's answer to ``sql`` (connection ``con``) and ``session``'s, or None.

    Both raising counts as agreement; DuckDB raising where the engine answers, the engine raising where DuckDB
    answers, or another multiset of rows (columns matched by position) is a problem, described in a short text.
    """
    try:
        expected = con.sql(sql).to_arrow_table()
    except Exception as error:  # noqa: BLE001 - any DuckDB error is compared with the engine's outcome
        expected = error
    try:
        got = session.sql(sql)
    except Exception as error:  # noqa: BLE001
        return None if isinstance(expected, Exception) else f"EXC {type(error).__name__}: {str(error)[:150]}"
    if isinstance(expected, Exception):
        return f"duckdb raised {str(expected)[:100]}"
    return rows_mismatch(got.rename_columns(expected.column_names), expected)
