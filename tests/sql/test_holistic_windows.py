"""``median``, ``quantile_cont``/``quantile_disc``/``quantile`` and ``string_agg`` over a window through Session.sql
against DuckDB: over whole partitions (no ORDER BY, or a frame from UNBOUNDED PRECEDING to UNBOUNDED FOLLOWING, where
``string_agg`` joins in the window's order), with NULL values and keys, a partition of NULLs only, strings with
multi-byte characters, an empty input; a running median and a running ``mode`` stay refused by name (``mode`` over
whole partitions: test_mode_window.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.errors import PlanError

T = pa.table({
    "g": pa.array([1, 1, 2, 2, None, 1, 3, 2], pa.int32()),
    "x": pa.array([1.5, 2.0, 3.0, None, 5.0, -1.0, None, 4.25]),
    "i": pa.array([3, 1, 4, 1, 5, 9, None, 2], pa.int64()),
    "s": pa.array(["a", "b", None, "dé", "e", "f", None, "日本"]),
    "o": pa.array([8, 7, 6, 5, 4, 3, 2, 1], pa.int64()),
})

QUERIES = [
    "SELECT o, median(x) OVER (PARTITION BY g), median(i) OVER (), median(s) OVER (PARTITION BY g) FROM t",
    "SELECT o, quantile_cont(i, 0.25) OVER (PARTITION BY g), quantile_disc(x, 0.75) OVER (PARTITION BY g), "
    "quantile(i, 0.5) OVER (), quantile_cont(x, -0.3) OVER (PARTITION BY g) FROM t",
    "SELECT o, string_agg(s, '-') OVER (PARTITION BY g ORDER BY o ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED "
    "FOLLOWING) AS a, string_agg(s) OVER (PARTITION BY g ORDER BY o DESC ROWS BETWEEN UNBOUNDED PRECEDING AND "
    "UNBOUNDED FOLLOWING) AS b FROM t",
    "SELECT o, median(x) OVER (PARTITION BY g) + 1 AS m FROM t WHERE o > 100",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


def test_holistic_windows_match_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T}, split_rows=3, device="cpu", drivers=2, batch_rows=2)
    assert_queries_match_duckdb(session, reference, [q + " ORDER BY o" for q in QUERIES],
                                ordered=lambda sql: True)


def test_holistic_windows_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T}, split_rows=8, device=device_name, drivers=1, batch_rows=8)
    assert_queries_match_duckdb(session, reference, [QUERIES[0] + " ORDER BY o", QUERIES[2] + " ORDER BY o"],
                                ordered=lambda sql: True)


@pytest.mark.parametrize("sql, message", [
    ("SELECT median(x) OVER (PARTITION BY g ORDER BY o) FROM t", "median over a window is computed over whole "
                                                                   "partitions only"),
    ("SELECT string_agg(s, ',') OVER (ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t", "string_agg over a window"),
    ("SELECT mode(i) OVER (PARTITION BY g ORDER BY o) FROM t", "mode over a window is computed over whole partitions"),
    ("SELECT quantile_cont(x, 2) OVER () FROM t", "fraction must be a constant between -1 and 1"),
])
def test_frames_and_functions_left_are_refused_by_name(sql, message):
    session = session_with_tables({"t": T}, device="cpu")
    with pytest.raises(PlanError, match=message):
        session.sql_plan(sql)
