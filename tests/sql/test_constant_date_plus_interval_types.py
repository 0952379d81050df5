"""``DATE 'x' + INTERVAL n unit`` as a value is DuckDB's TIMESTAMP (midnight), as the same arithmetic over a date
column is; only as a side of a comparison / BETWEEN / IN may it be folded to a DATE (a date compares with the
midnight TIMESTAMP as with its own day). sqlglot's simplifier folded it to a DATE everywhere: a SELECT column of
type date32 where DuckDB's is timestamp, and ``(DATE + INTERVAL) - DATE`` a day count where DuckDB's is an INTERVAL
(fuzz round 9)."""

from __future__ import annotations

import datetime

import pyarrow as pa
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

TABLES = {"t": pa.table({"id": [1, 2, 3], "d": pa.array([datetime.date(2024, 3, 29), None, datetime.date(2023, 2, 28)],
                                                         pa.date32())})}

QUERIES = [
    "SELECT id, DATE '2024-02-29' + INTERVAL 1 MONTH AS a, DATE '2024-02-29' - INTERVAL 1 YEAR AS b FROM t",
    "SELECT DATE '2000-02-29' + INTERVAL 1 YEAR AS a, DATE '2024-01-31' + INTERVAL '1 month' AS b",
    "SELECT id, coalesce(d, DATE '2024-01-01' + INTERVAL 2 DAY) AS a FROM t",
    "SELECT id FROM t WHERE d = DATE '2024-02-29' + INTERVAL 1 MONTH OR d < (DATE '2023-03-01' - INTERVAL 1 DAY)",
    "SELECT id FROM t WHERE d BETWEEN DATE '2023-01-01' AND DATE '2024-02-29' + INTERVAL 1 MONTH",
    "SELECT id, date_diff('day', d, DATE '2024-02-29' + INTERVAL 1 WEEK) AS a FROM t",
]


def test_constant_date_plus_interval_is_duckdbs_timestamp(device_name):
    queries = QUERIES if device_name == "cpu" else QUERIES[:1]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection, queries)


#: The sum as an operand of other arithmetic under a comparison is a value, DuckDB's TIMESTAMP (``d - it`` an
#: INTERVAL); and a DATE in the IN list of a TIMESTAMP compares as its midnight (review stop 50: both refused,
#: 'cannot compare month_day_nano_interval with int64' and 'IN list value DATE ... does not match timestamp[us]').
OPERAND_QUERIES = [
    "SELECT id FROM t WHERE d - (DATE '2024-01-01' + INTERVAL 1 DAY) > INTERVAL 30 DAY",
    "SELECT id, d - (DATE '2024-01-01' + INTERVAL 1 DAY) < INTERVAL 30 DAY AS a FROM t",
    "SELECT id FROM t WHERE CAST(d AS TIMESTAMP) IN (DATE '2024-03-29', DATE '2023-01-01')",
    "SELECT id, CAST(d AS TIMESTAMP) NOT IN (DATE '2023-02-28', DATE '2024-03-28' + INTERVAL 1 DAY) AS a FROM t",
    "SELECT id, d IN (DATE '2024-03-29', TIMESTAMP '2023-02-28 00:00:00') AS a FROM t",
    "SELECT id FROM t WHERE d NOT IN (TIMESTAMP '2023-02-28 06:00:00', DATE '2024-03-29' - INTERVAL 1 YEAR)",
]


def test_date_plus_interval_under_other_arithmetic_and_dates_in_a_timestamp_in_list(device_name):
    queries = OPERAND_QUERIES if device_name == "cpu" else OPERAND_QUERIES[:1]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection, queries)


#: A constant DATE +/- an INTERVAL under a day, compared, is DuckDB's TIMESTAMP off midnight: sqlglot's simplifier
#: folded it to a DATE (``ts = DATE '2024-04-01' - INTERVAL 12 HOUR`` compared ts with DATE '2024-03-31', a wrong
#: answer; review stop 50).
TIMESTAMPS = {"t": pa.table({"id": [1, 2, 3], "ts": pa.array(
    [datetime.datetime(2024, 3, 31, 12), datetime.datetime(2024, 3, 31), None], pa.timestamp("us"))})}
SUB_DAY_QUERIES = [
    "SELECT id, ts = DATE '2024-04-01' - INTERVAL 12 HOUR AS a, ts < DATE '2024-03-31' + INTERVAL 1 HOUR AS b FROM t",
    "SELECT id FROM t WHERE ts = DATE '2024-03-01' + INTERVAL 1 MONTH - INTERVAL 12 HOUR",
    "SELECT id FROM t WHERE ts BETWEEN DATE '2024-03-31' + INTERVAL 1 MINUTE AND DATE '2024-04-01'",
    "SELECT id FROM t WHERE ts IN (DATE '2024-03-30' + INTERVAL 36 HOUR, DATE '2024-01-01')",
    "SELECT id FROM t WHERE ts < (DATE '2024-03-01' + INTERVAL 2 HOUR + INTERVAL 30 DAY)",
    "SELECT id, ts - DATE '2024-02-29' - INTERVAL 12 WEEK > INTERVAL 1 DAY AS a FROM t",
]


def test_date_plus_an_interval_under_a_day_compared_keeps_its_time(device_name):
    queries = SUB_DAY_QUERIES if device_name == "cpu" else SUB_DAY_QUERIES[:1]
    with duckdb_with_tables(TIMESTAMPS) as connection:
        assert_queries_match_duckdb(session_with_tables(TIMESTAMPS, device=device_name), connection, queries)


#: Parenthesized, as a value: sqlglot's simplifier folded through the parentheses to a DATE, the time of day lost
#: ((DATE '2024-02-29' - INTERVAL 30 HOUR) read DATE '2024-02-27'; review stop 50).
PARENTHESIZED_QUERIES = [
    "SELECT id, (DATE '2024-02-29' - INTERVAL 30 HOUR) AS a, ((DATE '2024-02-29' + INTERVAL 1 MONTH)) AS b FROM t",
    "SELECT id, coalesce(d, (DATE '2024-01-31' + INTERVAL 1 MONTH)) AS a FROM t",
]


def test_a_parenthesized_date_plus_interval_is_a_timestamp(device_name):
    queries = PARENTHESIZED_QUERIES if device_name == "cpu" else PARENTHESIZED_QUERIES[:1]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection, queries)
