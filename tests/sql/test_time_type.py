"""TIME (issue 30 item 6) through Session.sql against DuckDB 2.0.1.

The engine's TIME is DuckDB's: microseconds of the day (``24:00:00`` the day's end), Arrow ``time64[us]`` in and
out (``time32``/``time64[ns]`` inputs and Parquet TIME columns read as it). Literals, casts from text (a date or an
offset before or after it dropped, as DuckDB) and from TIMESTAMP, to text; comparisons with TIMEs, text columns and
text constants; ``extract``/``date_part``/``hour(...)`` of the time parts (a date part refused as DuckDB refuses it),
``make_time``, ``TIME ± INTERVAL`` (wrapped within the day), ``DATE + TIME``; min/max/arg_min/median, grouping,
ordering, joins, set operations, windows, CASE/coalesce; NULLs and empty inputs.
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine import Session
from gpu_engine.errors import PlanError

_T = datetime.time

T = pa.table({
    "k": pa.array([1, 2, 3, None, 5, 6], pa.int32()),
    "tm": pa.array([_T(10, 11, 12, 500000), None, _T(0, 0), _T(23, 59, 59, 999999), _T(10, 11, 12, 500000),
                    _T(6, 30)], pa.time64("us")),
    "tm2": pa.array([_T(1, 0), _T(2, 0), None, _T(23, 59, 59, 999999), _T(12, 0), _T(6, 30, 0, 1)],
                    pa.time64("us")),
    "ts": pa.array([1_700_000_000_123_456, None, 0, -1, 86_400_000_000 * 3 + 5, 7], pa.timestamp("us")),
    "d": pa.array([19_675, 1, None, -1, 0, 3], pa.date32()),
    "s": pa.array(["10:11:12.5", None, "2024-01-01 00:00:00", "24:00:00", "1:2:3.1234567", "06:30:00+02"]),
    "iv": pa.array([pa.MonthDayNano([1, 2, 3_600_000_000_000]), None, pa.MonthDayNano([0, 0, -1000]),
                    pa.MonthDayNano([0, 0, 1000]), pa.MonthDayNano([0, 0, -90_000_000_000_000]),
                    pa.MonthDayNano([0, 1, 0])], pa.month_day_nano_interval()),
})

QUERIES = [
    "SELECT k, tm, TIME '12:30:00' AS a, TIME '23:59:59.999999' AS b, CAST(s AS TIME) AS c, CAST(tm AS VARCHAR) AS e, "
    "CAST(ts AS TIME) AS f, typeof(tm) AS g FROM t",
    "SELECT k, tm < tm2 AS a, tm = tm2 AS b, tm = s AS c, tm > '06:30' AS e, tm BETWEEN '01:00' AND '12:00' AS f, "
    "tm IS DISTINCT FROM TIME '00:00' AS g FROM t",
    "SELECT k FROM t WHERE tm >= TIME '06:30:00' AND k > 0",
    "SELECT k, extract(hour FROM tm) AS a, minute(tm) AS b, second(tm) AS c, date_part('millisecond', tm) AS e, "
    "date_part('microsecond', tm) AS f, date_part('epoch', tm) AS g, hour(TIME '24:00:00') AS h FROM t",
    "SELECT k, make_time(k, 2, 3.5) AS a, make_time(23, 59, 59.9999999) AS b, make_time(1, k, 60) AS c FROM t",
    "SELECT k, tm + INTERVAL 1 HOUR AS a, tm - INTERVAL '25 hours' AS b, "
    "INTERVAL '1 month 3 days 2 minutes' + tm AS c, tm + iv AS e, tm - iv AS f, d + tm AS g, tm + d AS h FROM t",
    "SELECT min(tm) AS a, max(tm) AS b, count(DISTINCT tm) AS c, arg_min(k, tm) AS e, arg_max(tm, k) AS f, "
    "median(tm2) AS g, quantile_disc(tm, 0.5) AS h FROM t",
    "SELECT tm, count(*) AS n, max(tm2) AS m FROM t GROUP BY tm",
    "SELECT k FROM t ORDER BY tm DESC NULLS FIRST, k",
    "SELECT a.k, b.k AS k2 FROM t a JOIN t b ON a.tm = b.tm2",
    "SELECT tm FROM t UNION SELECT tm2 FROM t",
    "SELECT k, lag(tm) OVER (ORDER BY k) AS a, max(tm) OVER (PARTITION BY k > 2) AS b FROM t",
    "SELECT k, CASE WHEN k > 2 THEN tm ELSE tm2 END AS a, coalesce(tm, tm2, TIME '00:00:01') AS b, "
    "greatest(tm, tm2) AS c FROM t",
    "SELECT max(tm) AS a, min(CAST(s AS TIME)) AS b FROM t WHERE k > 100",
    "SELECT tm, count(*) AS n FROM t WHERE k > 100 GROUP BY tm",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_time_queries_match_duckdb(sql):
    with duckdb_with_tables({"t": T}) as connection:
        assert_queries_match_duckdb(session_with_tables({"t": T}, device="cpu", split_rows=2), connection, [sql],
                                    exact_types=True, ordered=lambda text: text.endswith("NULLS FIRST, k"))


def test_time_on_the_simulator_matches_duckdb(device_name):
    if device_name == "cpu":
        pytest.skip("the cpu matrix is above")
    with duckdb_with_tables({"t": T}) as connection:
        assert_queries_match_duckdb(session_with_tables({"t": T}, device=device_name), connection, [
            "SELECT k, tm + INTERVAL 1 HOUR AS a, hour(tm) AS b, tm < tm2 AS c, max(tm) OVER () AS e FROM t "
            "WHERE tm > '01:00'"], exact_types=True)


def test_parquet_time_columns_read_as_time(tmp_path):
    """pyarrow writes ``time64[us]``/``time32[ms]``/``time64[ns]`` as Parquet TIME of its unit; DuckDB reads the
    first two as TIME, and so does the engine; a nanosecond TIME DuckDB 2.0 reads as its TIME_NS, the engine as a
    TIME (nanoseconds cut)."""
    path = tmp_path / "times.parquet"
    us = T["tm"].combine_chunks()
    pq.write_table(pa.table({"us": us, "ms": us.cast(pa.time32("ms"), safe=False), "ns": us.cast(pa.time64("ns")),
                             "k": T["k"]}), path, store_schema=False)
    session = Session(device="cpu")
    session.register("p", str(path))
    with duckdb_with_tables({}) as connection:
        connection.execute(f"CREATE VIEW p AS SELECT * FROM read_parquet('{path}')")
        assert_queries_match_duckdb(session, connection, [
            "SELECT k, us, ms, hour(ms) AS h, us > '06:00' AS late FROM p"], exact_types=True)
    nanos = session.sql("SELECT ns FROM p")
    assert nanos.schema.field("ns").type == pa.time64("us") and nanos["ns"].equals(pa.chunked_array([us]))


@pytest.mark.parametrize("sql, message", [
    ("SELECT k FROM t WHERE tm > 'noon'", "invalid time literal 'noon'"),
    ("SELECT extract(year FROM tm) AS a FROM t", "cannot extract year"),
    ("SELECT tm - tm2 AS a FROM t", "cannot apply '-' to time64[us] and time64[us]"),
    ("SELECT date_trunc('hour', tm) AS a FROM t", "date_trunc() needs a date or timestamp as argument 2"),
])
def test_what_duckdb_refuses_of_a_time_is_refused_while_planning(sql, message):
    """DuckDB refuses each of these while binding (no TIME - TIME, no date_trunc or year of a TIME); the engine
    refuses them while planning, naming the types. (TIME <-> TIMESTAMP and DATE -> TIME casts DuckDB binds and
    raises for each non-NULL row: tests/sql/test_unimplemented_casts.py.)"""
    with pytest.raises(PlanError, match=None) as info:
        session_with_tables({"t": T}, device="cpu").sql(sql)
    assert message in str(info.value), str(info.value)
