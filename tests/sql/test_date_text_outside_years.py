"""DATE and TIMESTAMP values before year 1 or past year 9999 cast to text as DuckDB writes them.

DuckDB holds dates from about 5.8 million years BC to as many AD and writes them as ``10000-01-01`` (more
year digits) and ``0001-12-31 (BC)`` (year 0 is 1 BC; a timestamp's time follows the era), where the engine
raised "supports years 1 to 9999 only" (``DATE '9999-12-31' + INTERVAL 1 DAY`` is such a TIMESTAMP), and a
registered table holding such a date failed while planning (its statistics read the extremes as Python
dates). Checked on each device, fused and not, NULLs and constants included.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

# days since 1970: 1970, 0001-01-01 - 1 day (1 BC), year 0 - 1, 2 BC, 10000-01-01, 9999-12-31, NULL, far both ways
DAYS = [0, -719163, -719164, -719529, 2932897, 2932896, None, -2000000, 100000000, -100000000]
TABLES = {"t": pa.table({"d": pa.array(DAYS, pa.date32()), "i": pa.array(range(len(DAYS)), pa.int64())})}
QUERIES = [
    "SELECT i, CAST(d AS VARCHAR) AS v, d::VARCHAR || '|' AS w FROM t",
    "SELECT i, CAST(CAST(d AS TIMESTAMP) + INTERVAL 5 HOUR AS VARCHAR) AS v FROM t",
    "SELECT i, CAST(CAST(d AS TIMESTAMP) - INTERVAL 1500 MILLISECOND AS VARCHAR) AS v FROM t",
    "SELECT i, CAST(CAST(d AS TIMESTAMPTZ) AS VARCHAR) AS v FROM t",
    "SELECT CAST(min(d) AS VARCHAR) AS lo, CAST(max(d) AS VARCHAR) AS hi, count(*) AS n FROM t",
    "SELECT i, CAST(DATE '9999-12-31' + INTERVAL 1 DAY AS VARCHAR) AS v, "
    "CAST(DATE '0001-01-01' - INTERVAL 1 DAY AS VARCHAR) AS w, "
    "CAST(TIMESTAMP '0001-01-01 00:00:00.25' - INTERVAL 400 DAY AS VARCHAR) AS x FROM t WHERE i < 2",
    "SELECT i, CAST(DATE '0001-01-01' - CAST(i * 200 AS INTEGER) AS VARCHAR) AS v FROM t",
]


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_dates_outside_years_1_to_9999_as_text_match_duckdb_on_cpu(reference_tables, fuse):
    session = session_with_tables(TABLES, device="cpu", fuse=fuse, split_rows=3)
    assert_queries_match_duckdb(session, reference_tables, QUERIES)


def test_dates_outside_years_1_to_9999_as_text_match_duckdb_on_each_device(reference_tables, device_name):
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), reference_tables, QUERIES[:2])


@pytest.fixture(scope="module")
def reference_tables():
    connection = duckdb_with_tables(TABLES)
    yield connection
    connection.close()
