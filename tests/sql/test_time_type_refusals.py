"""TIME WITH TIME ZONE (no engine column holds it) is refused by name with the forms to write instead (issue 30
item 6): a time of day as a TIME converted to UTC, or the instant as a TIMESTAMPTZ. Each alternative named is checked
to answer as DuckDB does. TIME and TIMESTAMPTZ are types of their own: tests/sql/test_time_type.py and
tests/sql/test_timestamptz.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.errors import PlanError

TABLES = {"t": pa.table({"ts": pa.array([1700000000123456, None, 0], pa.timestamp("us", tz="UTC"))})}


@pytest.mark.parametrize("sql, column", [
    ("SELECT TIMETZ '12:30:00+02' AS a", 15),
    ("SELECT CAST(ts AS TIMETZ) AS a FROM t", 13),
])
def test_time_with_time_zone_is_refused_with_the_forms_to_write_instead(sql, column):
    with pytest.raises(PlanError) as info:
        session_with_tables(TABLES, device="cpu").sql(sql)
    message = "type TIMETZ is not supported; keep a time of day as a TIME converted to UTC, or the instant as a " \
              "TIMESTAMPTZ"
    assert message in str(info.value) and f"column {column})" in str(info.value), str(info.value)


def test_the_forms_named_instead_answer_as_duckdb():
    with duckdb_with_tables(TABLES) as reference:
        reference.execute("SET TimeZone = 'UTC'")  # the engine Session's zone
        assert_queries_match_duckdb(session_with_tables(TABLES, device="cpu"), reference, [
            "SELECT CAST(CAST(ts AS TIMESTAMP) AS TIME) AS utc_time, ts FROM t",
            "SELECT CAST('12:30:00+02' AS TIME) AS wall_time, TIMESTAMPTZ '2024-01-01 12:30:00+02' AS instant"],
            exact_types=True)
