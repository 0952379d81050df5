"""TIMESTAMPTZ meeting TIMESTAMP in one column, and TRY_CAST of text to TIME, as DuckDB answers them.

Why (found by fuzz round 5, bench/fuzz_round5.py family ``temporal``): a set operation, CASE or coalesce over a
TIMESTAMP and a TIMESTAMPTZ took the finer unit's type, the leftmost on a tie, so ``SELECT n FROM t INTERSECT
SELECT ts FROM t`` was a TIMESTAMP where DuckDB's max type is TIMESTAMPTZ (a TIMESTAMP_NS stays TIMESTAMP_NS
there); and ``TRY_CAST(s AS TIME)`` raised "Could not convert string" on text that is no time instead of NULL.
DuckDB runs with ``SET TimeZone='UTC'``, the engine's zone.
"""

from __future__ import annotations

import datetime

import duckdb
import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb

UTC = datetime.timezone.utc
T = pa.table({
    "id": pa.array([1, 2, 3, 4], pa.int64()),
    "n": pa.array([datetime.datetime(2024, 1, 1), None, datetime.datetime(2024, 3, 1, 12),
                   datetime.datetime(2024, 2, 1)], pa.timestamp("us")),
    "ts": pa.array([datetime.datetime(2024, 1, 1, tzinfo=UTC), datetime.datetime(2024, 2, 1, tzinfo=UTC), None,
                    datetime.datetime(2023, 12, 31, 23, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
    "d": pa.array([datetime.date(2024, 1, 1), None, datetime.date(2024, 3, 1), datetime.date(2024, 2, 1)]),
    "p": pa.array(["12:00:00", " x ", None, "23:59:59.5"]),
})
T = T.append_column("nm", T.column("n").cast(pa.timestamp("ms"))).append_column(
    "nn", T.column("n").cast(pa.timestamp("ns")))

QUERIES = [
    "SELECT n FROM t INTERSECT SELECT ts FROM t",
    "SELECT n FROM t UNION ALL SELECT ts FROM t",
    "SELECT n FROM t EXCEPT SELECT ts FROM t",
    "SELECT nm FROM t UNION SELECT ts FROM t",
    "SELECT nn FROM t UNION ALL SELECT ts FROM t",
    "SELECT d FROM t UNION SELECT ts FROM t",
    "SELECT id, coalesce(n, ts) AS x, CASE WHEN id > 2 THEN n ELSE ts END AS y FROM t",
    "SELECT id, TRY_CAST(p AS TIME) AS x, TRY_CAST(CAST(p AS VARCHAR) || '!' AS TIME) AS y FROM t",
]


@pytest.mark.parametrize("fuse", [False, True])
def test_zoned_timestamps_mixed_with_naive_ones_and_text_to_time(device_name, fuse):
    from gpu_engine import Session

    session = Session(device=device_name, fuse=fuse)
    session.register("t", T)
    session.register("dt", T.set_column(4, "p", T.column("p").dictionary_encode()))
    connection = duckdb.connect()
    connection.execute("SET TimeZone='UTC'")
    connection.register("t", T)
    connection.register("dt", T.set_column(4, "p", T.column("p").dictionary_encode()))
    queries = QUERIES + ["SELECT id, TRY_CAST(p AS TIME) AS x FROM dt"]
    assert_queries_match_duckdb(session, connection, queries, exact_types=True)
