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
]


def test_date_plus_interval_under_other_arithmetic_and_dates_in_a_timestamp_in_list(device_name):
    queries = OPERAND_QUERIES if device_name == "cpu" else OPERAND_QUERIES[:1]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection, queries)
