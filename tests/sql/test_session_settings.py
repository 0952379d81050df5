"""SET TimeZone = 'UTC' / RESET TimeZone through Session.sql (gpu_engine.sql.settings), against DuckDB.

The engine reads TIMESTAMPTZ in UTC; a script that starts by setting that zone runs, with DuckDB's result for a SET
(no rows, a BOOLEAN ``Success`` column) and the same answers after it. Another zone or another setting is refused by
name with the statement's position, never answered in the wrong zone.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.errors import PlanError

_T = pa.table({"k": pa.array([1, None, 3], pa.int32()),
               "tz": pa.array([1_700_000_000_123_456, None, -1], pa.timestamp("us", tz="UTC"))})
_QUERY = "SELECT k, CAST(tz AS VARCHAR) AS s, extract(hour FROM tz) AS h, CAST(tz AS DATE) AS d FROM t"


@pytest.mark.parametrize("statement", ["SET TimeZone = 'UTC'", "set timezone to 'utc'", "SET SESSION TimeZone='UTC';",
                                       "  -- zone\n SET GLOBAL TimeZone = 'UTC'", "RESET TimeZone"])
def test_setting_the_utc_zone_runs_as_duckdb_s(statement: str):
    session = Session(device="cpu")
    session.register("t", _T)
    con = duckdb.connect()
    con.register("t", _T)
    con.execute("SET TimeZone = 'UTC'")
    result = session.sql(statement)
    expected = con.execute(statement)
    assert result.column_names == [d[0] for d in expected.description] == ["Success"]
    assert result.num_rows == len(expected.fetchall()) == 0
    assert result.schema.field("Success").type == pa.bool_()
    assert session.sql(_QUERY).to_pylist() == [dict(zip(("k", "s", "h", "d"), row)) for row in con.sql(_QUERY).fetchall()]


@pytest.mark.parametrize("statement, name", [
    ("SET TimeZone = 'America/New_York'", "America/New_York"),
    ("SET timezone TO 'Europe/Berlin'", "Europe/Berlin"),
    ("SET threads = 4", "threads"),
    ("RESET threads", "threads"),
])
def test_another_zone_or_setting_is_refused_by_name(statement: str, name: str):
    session = Session(device="cpu")
    with pytest.raises(PlanError) as error:
        session.sql(statement)
    assert name in str(error.value) and "TimeZone" in str(error.value)
    assert "line 1" in str(error.value)


def test_planning_a_setting_names_where_it_runs():
    with pytest.raises(PlanError, match="Session.sql runs SET TimeZone = 'UTC'"):
        Session(device="cpu").sql_plan("SET TimeZone = 'UTC'")
