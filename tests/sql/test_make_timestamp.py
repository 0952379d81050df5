"""``make_timestamp(year, month, day, hour, minute, seconds)`` and ``make_timestamp(microseconds)`` as DuckDB's
(were refused as an unsupported function): fractional seconds rounded to the microsecond, seconds of 60 and up to
below 61 carried into the next minute, dates before 1970, NULL parts, an empty table; a part out of range raises
where DuckDB raises (for the first such row), never answers.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.errors import ExecutionError

T = pa.table({
    "y": pa.array([2020, 1969, None, 2000, 1, 2024], pa.int64()),
    "m": pa.array([1, 12, 3, 2, 1, 2], pa.int32()),
    "d": pa.array([2, 31, 4, 29, 1, 29], pa.int32()),
    "h": pa.array([3, 23, 0, None, 0, 12], pa.int32()),
    "mi": pa.array([4, 59, 0, 30, 0, 0], pa.int32()),
    "s": pa.array([5.5, 59.9999999, 60.5, 0.0, 1e-7, None], pa.float64()),
    "us": pa.array([1_600_000_000_000_000, -1, None, 0, 86_400_000_000, -86_400_000_001], pa.int64()),
})
QUERIES = [
    "SELECT make_timestamp(y, m, d, h, mi, s) AS a, make_timestamp(us) AS b FROM t",
    "SELECT make_timestamp(2020, 1, 2, 3, 4, 5.1234567) AS a, make_timestamp(2020, 1, 2, 23, 59, 60) AS b, "
    "make_timestamp(NULL, 1, 1, 0, 0, 0) AS c, make_timestamp(1600000000000000) AS e",
    "SELECT make_timestamp(y, m, d, h, mi, s) FROM e",
    "SELECT y FROM t WHERE make_timestamp(y, m, d, 0, 0, 0) < TIMESTAMP '2000-01-01'",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "e": T.slice(0, 0)}) as connection:
        yield connection


def test_make_timestamp_matches_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T, "e": T.slice(0, 0)}, device="cpu", batch_rows=4)
    assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


@pytest.mark.cpu_case_in("test_make_timestamp_matches_duckdb_on_cpu")
def test_make_timestamp_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T, "e": T.slice(0, 0)}, device=device_name, batch_rows=4)
    assert_queries_match_duckdb(session, reference, QUERIES[:1], exact_types=True)


@pytest.mark.parametrize("parts, message", [
    ("2020, 13, 2, 3, 4, 5", "Date out of range"), ("2020, 2, 30, 0, 0, 0", "Date out of range"),
    ("2020, 1, 2, 24, 4, 5", "Time out of range"), ("2020, 1, 2, 3, 60, 5", "Time out of range"),
    ("2020, 1, 2, 3, 4, 61", "Time out of range"), ("2020, 1, 2, 3, 4, -0.0000001", "Time out of range"),
])
def test_parts_out_of_range_raise(parts, message, reference):
    sql = f"SELECT make_timestamp({parts}) FROM t"
    with pytest.raises(Exception, match=message):
        reference.sql(sql).fetchall()
    with pytest.raises(ExecutionError, match=message):
        session_with_tables({"t": T}, device="cpu").sql(sql)
