"""TIMESTAMP WITH TIME ZONE (issue 30 item 6) through Session.sql against DuckDB 2.0.1 with its TimeZone at UTC.

The engine's TIMESTAMPTZ is DuckDB's: UTC microseconds, read in the Session's zone, UTC (DuckDB's default setting
where the machine's zone is UTC; the reference connection SETs it so, and ``%Z`` prints its name). Literals and
casts from text apply a numeric offset or a zone's name; casts to and from TIMESTAMP, DATE and VARCHAR (``+00``),
comparisons with TIMESTAMP, DATE and text constants, ``± INTERVAL``, differences, ``date_trunc``/``time_bucket`` (a
TIMESTAMPTZ stays one), ``extract``, aggregates, grouping, joins and set operations, NULLs and empty inputs; Arrow
``timestamp[us, tz=UTC]`` in and out, and Parquet timestamps with ``isAdjustedToUTC=true``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine import Session
from gpu_engine.errors import ExecutionError, PlanError

_ZONED = pa.timestamp("us", tz="UTC")

T = pa.table({
    "k": pa.array([1, 2, 3, None, 5, 6], pa.int32()),
    "tz": pa.array([1_700_000_000_123_456, None, 0, 86_400_000_000 * 59 + 1, -1, 1_700_000_000_123_456], _ZONED),
    "ts": pa.array([1_700_000_000_123_456, 5, None, 86_400_000_000 * 59, 0, 7], pa.timestamp("us")),
    "d": pa.array([19_675, None, 0, 59, -1, 3], pa.date32()),
    "s": pa.array(["2024-01-01 10:00:00+02", None, "2024-03-31 02:30:00 Europe/Berlin", "1970-03-01 00:00:00.000001Z",
                   "2024-10-27 02:30:00 Europe/Berlin", "2023-11-14T17:13:20.123456-05"], pa.string()),
})

QUERIES = [
    # literals, casts from text (offsets, zone names, skipped and repeated wall times), to and from the others
    "SELECT TIMESTAMPTZ '2024-01-01 10:00:00+02' AS a, TIMESTAMPTZ '2024-01-01' AS b, "
    "CAST('2024-01-01 10:00:00.5 America/New_York' AS TIMESTAMPTZ) AS c, '2024-06-01 01:02:03-05:30'::TIMESTAMPTZ AS e",
    "SELECT k, CAST(s AS TIMESTAMPTZ) AS a, CAST(tz AS VARCHAR) AS b, CAST(ts AS TIMESTAMPTZ) AS c, "
    "CAST(tz AS TIMESTAMP) AS e, CAST(tz AS DATE) AS f, CAST(d AS TIMESTAMPTZ) AS g FROM t",
    # comparisons with TIMESTAMPTZ, TIMESTAMP, DATE, text columns and constants
    "SELECT k, tz < ts AS a, tz = ts AS b, tz >= d AS c, tz > '2020-01-01 00:00:00+02' AS e, tz = s AS f, "
    "tz IS DISTINCT FROM ts AS g FROM t",
    "SELECT k FROM t WHERE tz BETWEEN DATE '1970-01-01' AND '2024-01-01 00:00:00-01'",
    # arithmetic with INTERVAL, differences, date functions in the Session's zone
    "SELECT k, tz + INTERVAL 1 DAY AS a, tz - INTERVAL '1 month' AS b, tz - ts AS c, tz + INTERVAL '26 hours' AS i, "
    "ts - tz AS e, age(tz, ts) AS f, date_diff('hour', tz, ts) AS g FROM t",
    "SELECT k, date_trunc('day', tz) AS a, date_trunc('month', tz) AS b, time_bucket(INTERVAL 1 HOUR, tz) AS c, "
    "extract(hour FROM tz) AS e, date_part('epoch', tz) AS f, year(tz) AS g, strftime(tz, '%Y-%m-%d %H %z %Z') AS h, "
    "last_day(tz) AS i FROM t",
    # aggregates, grouping, ordering, joins, set operations, CASE/coalesce
    "SELECT min(tz) AS a, max(tz) AS b, count(DISTINCT tz) AS c, arg_min(k, tz) AS e FROM t",
    "SELECT tz, count(*) AS n FROM t GROUP BY tz",
    "SELECT a.k, b.k AS k2 FROM t a JOIN t b ON a.tz = b.ts",
    "SELECT tz FROM t UNION SELECT ts FROM t",
    "SELECT k, coalesce(tz, ts) AS a, CASE WHEN k > 2 THEN tz ELSE ts END AS b, greatest(tz, ts) AS c FROM t",
    # empty inputs
    "SELECT max(tz) AS a, min(CAST(s AS TIMESTAMPTZ)) AS b FROM t WHERE k > 100",
    "SELECT date_trunc('day', tz) AS a FROM t WHERE k > 100",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_timestamptz_queries_match_duckdb(sql):
    with duckdb_with_tables({"t": T}) as connection:
        assert_queries_match_duckdb(session_with_tables({"t": T}, device="cpu", split_rows=2), connection, [sql],
                                    exact_types=True)


def test_timestamptz_on_the_simulator_matches_duckdb(device_name):
    if device_name == "cpu":
        pytest.skip("the cpu matrix is above")
    with duckdb_with_tables({"t": T}) as connection:
        assert_queries_match_duckdb(session_with_tables({"t": T}, device=device_name), connection, [
            "SELECT k, tz + INTERVAL 1 DAY AS a, date_trunc('day', tz) AS b, tz < ts AS c FROM t WHERE tz > "
            "'1970-01-01 00:00:00+01'"], exact_types=True)


def test_parquet_timestamps_adjusted_to_utc_read_as_timestamptz(tmp_path):
    """pyarrow reads ``isAdjustedToUTC=true`` as ``timestamp[unit, tz=UTC]`` and DuckDB as TIMESTAMPTZ: the
    engine's column is a TIMESTAMPTZ of the file's unit (DuckDB's is microseconds: the values compare equal)."""
    path = tmp_path / "zoned.parquet"
    pq.write_table(pa.table({"us": T["tz"], "ms": pa.array([1_700_000_000_123, None, 0], pa.timestamp("ms", "UTC"))
                             .take([0, 1, 2, 0, 1, 2])}), path, store_schema=False)
    assert "isAdjustedToUTC=true" in str(pq.ParquetFile(path).schema)
    session = Session(device="cpu")
    session.register("z", str(path))
    with duckdb_with_tables({}) as connection:
        connection.execute(f"CREATE VIEW z AS SELECT * FROM read_parquet('{path}')")
        assert_queries_match_duckdb(session, connection, [
            "SELECT us, date_trunc('hour', us) AS h, CAST(us AS VARCHAR) AS v, us = ms AS same FROM z"],
            exact_types=True)
        assert_queries_match_duckdb(session, connection, ["SELECT ms FROM z WHERE ms > '1970-01-01 00:00:01+00'"])


def test_bad_zoned_text_fails_naming_it():
    """A constant compared with a TIMESTAMPTZ, a TIMESTAMPTZ literal and a cast of constant text are checked
    while planning (as DuckDB's binder does), naming the text and its position; a text column's fails when it
    runs."""
    session = session_with_tables({"t": T}, device="cpu")
    with pytest.raises(PlanError, match="invalid timestamp literal 'not a time'"):
        session.sql("SELECT k FROM t WHERE tz > 'not a time'")
    with pytest.raises(PlanError, match="invalid timestamp literal '2024-01-01 10:00:00 Nowhere/Zone' .*offset or "
                                        r"zone name.*\(line 1, column 20\)"):
        session.sql("SELECT TIMESTAMPTZ '2024-01-01 10:00:00 Nowhere/Zone' AS a")
    bad = session_with_tables({"b": pa.table({"s": ["2024-01-01 10:00:00 Nowhere/Zone"]})}, device="cpu")
    with pytest.raises(ExecutionError, match="Could not convert string '2024-01-01 10:00:00 Nowhere/Zone'"):
        bad.sql("SELECT CAST(s AS TIMESTAMPTZ) AS a FROM b")


def test_arrow_timestamps_of_another_zone_read_as_utc_timestamptz(device_name, tmp_path):
    """An Arrow timestamp labelled with a zone other than UTC ('America/New_York', '+02:00'; in memory, or a
    Parquet file's stored schema) is the same instant: DuckDB reads it as a TIMESTAMPTZ shown in its session zone
    (UTC); the engine kept the label, so its results said another zone (same instants, another type)."""
    zoned = pa.table({"k": pa.array([1, 2, 3], pa.int32()),
                      "ny": pa.array([1, 1_700_000_000_123_456, None], pa.timestamp("us", tz="America/New_York")),
                      "plus": pa.array([None, 5, -86_400_000_001], pa.timestamp("us", tz="+02:00"))})
    path = tmp_path / "zoned_elsewhere.parquet"
    pq.write_table(zoned.select(["k", "ny"]), path)
    session = session_with_tables({"a": zoned}, device=device_name, split_rows=2, compile_mode="lowest")
    session.register("p", str(path))
    with duckdb_with_tables({"a": zoned}) as connection:
        connection.execute(f"CREATE VIEW p AS SELECT * FROM read_parquet('{path}')")
        assert_queries_match_duckdb(session, connection, [
            "SELECT * FROM a", "SELECT k, extract(hour FROM ny) AS h, date_trunc('day', ny) AS d, ny < plus AS c FROM a",
            "SELECT ny FROM a UNION ALL SELECT plus FROM a", "SELECT k, ny FROM p WHERE ny > '2000-01-01 00:00:00+00'"],
            exact_types=True)
