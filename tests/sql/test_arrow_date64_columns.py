"""A registered Arrow date64 column whose milliseconds are not a whole day (Arrow's spec asks for whole days; users'
code hands the engine others) reads as DuckDB reads it, the part of a day cut toward zero; the engine raised Arrow's
"Casting from date64[ms] to date32[day] would lose data" (fuzz round 11's ``arrow`` family). Sliced and chunked, as
a user's table may come."""

from __future__ import annotations

import pyarrow as pa
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

DAY = 86_400_000
WHOLE = pa.array([0, 1, -1, 2 * DAY + 5, -DAY - 1, None, 365 * DAY, -DAY], pa.date64())
TABLES = {"t": pa.table({"id": pa.array(range(7), pa.int64()),
                         "d": pa.chunked_array([WHOLE.slice(1, 3), WHOLE.slice(4, 4)])})}

QUERIES = [
    "SELECT id, d FROM t",
    "SELECT d, count(*) AS n FROM t GROUP BY d",
    "SELECT id FROM t WHERE d < DATE '1970-01-02'",
]


def test_date64_milliseconds_past_a_day_are_cut_as_duckdb_cuts_them(device_name):
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, QUERIES if device_name == "cpu" else QUERIES[:1],
                                    exact_types=True)
