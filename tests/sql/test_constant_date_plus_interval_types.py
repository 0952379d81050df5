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
