"""The TIME type (no engine column holds it) is refused by name with the forms to write instead (issue 30 item 6):
a time of day as a TIMESTAMP, as the INTERVAL since midnight or as text. Each alternative named is checked to answer
as DuckDB does. TIMESTAMPTZ is a type of its own now: tests/sql/test_timestamptz.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.errors import PlanError

TABLES = {"t": pa.table({"ts": pa.array([1700000000123456, None, 0], pa.timestamp("us"))})}


@pytest.mark.parametrize("sql, message, column", [
    ("SELECT TIME '12:30:00' AS a", "type TIME is not supported; keep a time of day as a TIMESTAMP", 13),
    ("SELECT CAST(ts AS TIME) AS a FROM t", "the INTERVAL since midnight (ts - date_trunc('day', ts))", 13),
])
def test_time_types_are_refused_with_the_forms_to_write_instead(sql, message, column):
    with pytest.raises(PlanError) as info:
        session_with_tables(TABLES, device="cpu").sql(sql)
    assert message in str(info.value) and f"column {column})" in str(info.value), str(info.value)


def test_the_forms_named_instead_answer_as_duckdb():
    with duckdb_with_tables(TABLES) as reference:
        assert_queries_match_duckdb(session_with_tables(TABLES, device="cpu"), reference, [
            "SELECT ts - date_trunc('day', ts) AS since_midnight, strftime(ts, '%H:%M:%S') AS text FROM t"])
