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


def test_joins_on_date64_keys_match_duckdb(device_name):
    """A join's key filter (gpu_engine.exec.dynamic_filters) tested the probe's date64 milliseconds against the
    build's days: every row but 1970-01-01's was dropped (fuzz round 11, arrow family seed 221)."""
    days = pa.array([0, 24_855, -1, 0, None, 24_855], pa.int64())
    tables = {"t": pa.table({"id": pa.array(range(6), pa.int64()), "d": pa.compute.multiply(days, DAY).cast(pa.date64())}),
              "u": pa.table({"id": pa.array(range(3), pa.int64()),
                             "d": pa.array([24_855 * DAY, -DAY, None], pa.int64()).cast(pa.date64())})}
    queries = ["SELECT t.id AS a, u.id AS b FROM t JOIN u ON t.d = u.d",
               "SELECT id FROM t WHERE d IN (SELECT d FROM u)",
               "SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.d = t.d)"]
    with duckdb_with_tables(tables) as connection:
        session = session_with_tables(tables, device=device_name, compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, queries if device_name == "cpu" else queries[:1])
