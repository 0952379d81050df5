"""``time_bucket`` and ``try_strptime`` (issue 30 items 5-6) through Session.sql against DuckDB.

time_bucket: widths of time, days, weeks and months; the default origins (2000-01-03 for days and time, January
2000 for months); an offset, an origin (DATE or TIMESTAMP), a width column; DATE in DATE out; instants before
1970 and before the origin (floored); NULL widths, NULL instants; DuckDB's errors for a width mixing months with
days and for a width that is not positive. try_strptime: strptime's parse, NULL where the text does not match
(plain and dictionary-encoded strings, NULL texts, a NULL format), in SELECT, WHERE and an aggregate.
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import ExecutionError, PlanError

_D = datetime.datetime
TABLES = {
    "v": pa.table({
        "ts": pa.array([_D(2024, 1, 1, 10, 7), _D(2024, 1, 1, 10, 20), None, _D(1969, 12, 31, 23, 59, 59),
                        _D(2024, 2, 29, 23, 0)], pa.timestamp("us")),
        "d": pa.array([datetime.date(2024, 1, 1), None, datetime.date(2023, 12, 31), datetime.date(1969, 1, 1),
                       datetime.date(2024, 3, 1)]),
        "w": pa.array([(0, 0, 3600 * 10**9), None, (0, 2, 0), (0, 0, 45 * 60 * 10**9), (1, 0, 0)],
                      pa.month_day_nano_interval()),
    }),
    "u": pa.table({
        "p": pa.array(["2024-01-02 10:30", "02/01/2024", None, "x", "31/02/2024", "2024-13-01 00:00", ""]),
        "c": pa.array(["02/01/2024", "02/01/2024", None, "x", "", "1/1/1999", "31/12/2023"]).dictionary_encode(),
    }),
}
TABLES["e"] = TABLES["v"].slice(0, 0)

QUERIES = [
    "SELECT time_bucket(INTERVAL 15 MINUTE, ts) AS b, count(*) AS n FROM v GROUP BY b",
    "SELECT time_bucket(INTERVAL 1 MONTH, ts) AS a, time_bucket(INTERVAL 3 MONTH, d) AS b, "
    "time_bucket(INTERVAL 1 WEEK, d) AS c, time_bucket(INTERVAL 90 MINUTE, ts) AS f FROM v",
    "SELECT time_bucket(INTERVAL 7 DAY, ts) AS a, time_bucket(INTERVAL 2 DAY, d) AS b, "
    "time_bucket(INTERVAL 5 SECOND, ts) AS c FROM v",
    "SELECT time_bucket(w, ts) AS a, time_bucket(w, d) AS b FROM v",
    "SELECT time_bucket(INTERVAL 1 DAY, ts, INTERVAL 3 HOUR) AS a, time_bucket(INTERVAL 1 MONTH, ts, INTERVAL 3 DAY) "
    "AS b, time_bucket(INTERVAL 2 HOUR, ts, v.d) AS c FROM v",
    "SELECT time_bucket(INTERVAL 1 DAY, ts, TIMESTAMP '2024-01-01 03:00') AS a, "
    "time_bucket(INTERVAL 2 MONTH, ts, TIMESTAMP '2023-02-15') AS b, "
    "time_bucket(INTERVAL 1 DAY, d, DATE '2024-01-01') AS c FROM v",
    "SELECT time_bucket(NULL, d) AS a, time_bucket(NULL::INTERVAL, ts) AS b FROM v",
    "SELECT time_bucket(INTERVAL 1 HOUR, ts) AS b FROM e",
    "SELECT try_strptime(p, '%Y-%m-%d %H:%M') AS a, try_strptime(p, '%d/%m/%Y') AS b, "
    "try_strptime(c, '%d/%m/%Y') AS e FROM u",
    "SELECT try_strptime(p, NULL) AS a, try_strptime('2024-01-02', '%Y-%m-%d') AS b FROM u",
    "SELECT c FROM u WHERE try_strptime(c, '%d/%m/%Y') IS NULL",
    "SELECT count(try_strptime(p, '%d/%m/%Y')) AS n, max(try_strptime(c, '%d/%m/%Y')) AS m FROM u",
]

SIMULATED = [QUERIES[1], QUERIES[3], QUERIES[8]]


def _session(device_name: str, drivers: int = 1, batch_rows: int = 1 << 16):
    return session_with_tables(TABLES, device=device_name, drivers=drivers, batch_rows=batch_rows)


@pytest.mark.parametrize("drivers, batch_rows", [(1, 1 << 16), (2, 2)], ids=["drivers1", "drivers2-batches2"])
def test_time_bucket_and_try_strptime_match_duckdb_on_cpu(drivers, batch_rows, reference):
    assert_queries_match_duckdb(_session("cpu", drivers, batch_rows), reference, QUERIES, exact_types=True)


def test_time_bucket_and_try_strptime_match_duckdb_on_each_device(device_name, reference):
    assert_queries_match_duckdb(_session(device_name, 2, 3), reference, SIMULATED, exact_types=True)


@pytest.mark.parametrize("sql, message", [
    ("SELECT time_bucket(INTERVAL '1 month 1 day', d) AS b FROM v", "Month intervals cannot have day or time"),
    ("SELECT time_bucket(INTERVAL 0 DAY, d) AS b FROM v", "Period must be greater than 0"),
    ("SELECT time_bucket(INTERVAL '-2 hours', ts) AS b FROM v", "Period must be greater than 0"),
])
def test_time_bucket_raises_where_duckdb_raises(sql, message, reference):
    with pytest.raises(Exception, match=message):
        reference.sql(sql).fetchall()
    with pytest.raises(ExecutionError, match=message):
        _session("cpu").sql(sql)


@pytest.mark.parametrize("sql, message, column", [
    ("SELECT time_bucket(1, ts) AS b FROM v", "time_bucket() needs an INTERVAL bucket width as argument 1", 8),
    ("SELECT time_bucket(INTERVAL 1 DAY, ts, d) AS b FROM v", "an origin column must be written with its table", 8),
    ("SELECT try_strptime(p, '%Y', 1) AS b FROM u", "takes 2 arguments", 8),
])
def test_calls_the_engine_cannot_plan_are_refused_with_their_position(sql, message, column):
    with pytest.raises(PlanError) as info:
        _session("cpu").sql(sql)
    assert message in str(info.value) and f"column {column})" in str(info.value), str(info.value)
