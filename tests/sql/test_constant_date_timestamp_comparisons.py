"""A DATE constant compared with a TIMESTAMP constant (``DATE '2024-01-01' < TIMESTAMP '1970-01-01 00:00:00'``,
BETWEEN with a DATE bound and a TIMESTAMP operand) is answered as DuckDB answers it (the date as its midnight).
sqlglot's simplifier evaluated it with Python's ``date < datetime`` and the planner refused the query with "cannot
plan the query: TypeError can't compare datetime.datetime to datetime.date" (fuzz round 10, seeds 136, 139, 233);
also where a side is a truncation or a cast the simplifier folds first (seeds 1258, 1371)."""

from __future__ import annotations

import pyarrow as pa
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

TABLES = {"t": pa.table({"v": pa.array([1, 2, None], pa.int64()),
                         "d": pa.array([None, 19000, 0], pa.int32()).cast(pa.date32())})}

QUERIES = [
    "SELECT v, DATE '2024-01-01' < TIMESTAMP '1970-01-01 00:00:00' AS a, "
    "DATE '2024-01-01' = TIMESTAMP '2024-01-01 00:00:00' AS b, TIMESTAMP '2024-01-01 00:00:01' > DATE '2024-01-01' AS c "
    "FROM t",
    "SELECT v, TIMESTAMP '2023-12-31 12:00:00' BETWEEN DATE '1900-03-01' AND DATE '1900-03-01' + 1 AS a, "
    "TIMESTAMP '2023-12-31 12:00:00' BETWEEN DATE '2023-12-31' AND TIMESTAMP '2024-01-01 00:00:00' AS b FROM t",
    "SELECT v FROM t WHERE DATE '2024-01-01' >= TIMESTAMP '2024-01-01 00:00:00' AND v > 1",
    "SELECT v, DATE '2024-01-01' <> TIMESTAMP '2024-01-01 00:00:00' OR v = 1 AS a, "
    "DATE '2024-01-01' - INTERVAL 1 HOUR < TIMESTAMP '2023-12-31 23:30:00' AS b FROM t",
    "SELECT v FROM t WHERE date_trunc('month', DATE '2024-01-01') = date_trunc('month', TIMESTAMP '1969-12-31 "
    "23:59:59.5') IS DISTINCT FROM NULL",
    "SELECT v, date_trunc('day', TIMESTAMP '2024-01-31 23:59:59.5') = DATE '2024-01-31' AS a, "
    "CAST(TIMESTAMP '2024-01-01 10:00:00' AS DATE) < TIMESTAMP '2024-01-01 00:00:01' AS b FROM t",
]


def test_constant_date_timestamp_comparisons_match_duckdb(device_name):
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection,
                                    QUERIES if device_name == "cpu" else QUERIES[:1])
