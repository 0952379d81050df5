"""``string_agg(x, sep ORDER BY y) OVER (PARTITION BY ...)`` (issue 30 item 6) against DuckDB.

Over whole partitions the ORDER BY inside orders each partition's values: written as the window's own order with
a whole-partition frame (gpu_engine/sql/rewrite.py ``_ordered_string_agg_window``), so the Window operator's
holistic string_agg joins them so. Checked: ascending and descending keys, NULLs first and last, NULL values
skipped, a partition of only NULLs, no PARTITION BY, an explicit whole frame replacing the window's order, the
default separator, FILTER, multi-byte text, an empty table; a running form refused by name with its position.
(The keys have no ties inside a partition: tied values may be joined in any order, in DuckDB too.)
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import PlanError

TABLES = {"t": pa.table({
    "k": pa.array([1, 1, 2, 2, 2, None, 3, 1], pa.int32()),
    "o": pa.array([5, 3, None, 1, 7, 2, 4, 8], pa.int64()),
    "s": pa.array(["a", "é", "c", None, "日本", "x", None, "b"]),
})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT k, o, string_agg(s, ',' ORDER BY o) OVER (PARTITION BY k) AS x FROM t",
    "SELECT k, o, string_agg(s, '|' ORDER BY o DESC NULLS FIRST) OVER (PARTITION BY k) AS x FROM t",
    "SELECT k, o, string_agg(s, '' ORDER BY o NULLS FIRST) OVER (PARTITION BY k) AS x FROM t",
    "SELECT o, string_agg(s ORDER BY o) OVER () AS x FROM t",
    "SELECT k, o, string_agg(s, '-' ORDER BY o DESC) OVER (PARTITION BY k ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING "
    "AND UNBOUNDED FOLLOWING) AS x FROM t",
    "SELECT k, o, string_agg(s, ',' ORDER BY o) FILTER (WHERE o > 2) OVER (PARTITION BY k) AS x FROM t",
    "SELECT k, o, string_agg(s, ',' ORDER BY o) OVER (PARTITION BY k) AS x, count(*) OVER (PARTITION BY k) AS n "
    "FROM t",
    "SELECT k, string_agg(s, ',' ORDER BY o) OVER (PARTITION BY k) AS x FROM e",
]


def _session(device_name: str, drivers: int = 1, batch_rows: int = 1 << 16):
    return session_with_tables(TABLES, device=device_name, drivers=drivers, batch_rows=batch_rows)


@pytest.mark.parametrize("drivers, batch_rows", [(1, 1 << 16), (2, 3)], ids=["drivers1", "drivers2-batches3"])
def test_ordered_string_agg_windows_match_duckdb_on_cpu(drivers, batch_rows, reference):
    assert_queries_match_duckdb(_session("cpu", drivers, batch_rows), reference, QUERIES, exact_types=True)


def test_ordered_string_agg_windows_match_duckdb_on_each_device(device_name, reference):
    assert_queries_match_duckdb(_session(device_name, 2, 3), reference, QUERIES[:2], exact_types=True)


def test_a_running_ordered_string_agg_is_refused_by_name():
    with pytest.raises(PlanError) as info:
        _session("cpu").sql("SELECT string_agg(s, ',' ORDER BY o) OVER (ORDER BY o) AS x FROM t")
    assert "running string_agg" in str(info.value) and "(line 1, column" in str(info.value), str(info.value)
