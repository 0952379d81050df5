"""DuckDB's one-argument part functions through Session.sql: values, types and DuckDB's column names.

``weekday``, ``yearweek``, ``isoyear``, ``millisecond``, ``microsecond``, ``decade``, ``century``, ``millennium``
(plain calls to sqlglot), ``dayofmonth`` and ``isodow`` were refused as unknown or unsupported functions;
``year(ts)``, ``millisecond(ts)``, ... are named ``"year"(ts)`` by DuckDB (the names are keywords), which the
engine printed unquoted. Dates before 1970, leap days, ISO-week edges, NULLs and an empty table.
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

DATES = [datetime.date(*parts) if parts else None for parts in [
    (1970, 1, 1), (1969, 12, 31), (2000, 2, 29), (2020, 12, 31), (2021, 1, 3), (2008, 12, 29), None, (1600, 2, 29),
    (2001, 1, 1), (1000, 6, 15)]]
T = pa.table({
    "d": pa.array(DATES, pa.date32()),
    "ts": pa.array([None if k == 4 else (k - 5) * 37_123_456_789_123 + k * 1_000_003 for k in range(len(DATES))],
                   pa.timestamp("us")),
})
FUNCTIONS = ["weekday", "yearweek", "isoyear", "millisecond", "microsecond", "decade", "century", "millennium",
             "dayofmonth", "isodow", "year", "month", "day", "hour", "minute", "second", "quarter", "week"]
QUERIES = [f"SELECT {', '.join(f'{name}({column})' for name in FUNCTIONS)} FROM {table}"
           for column in ("d", "ts") for table in ("t", "e")]
QUERIES.append("SELECT * FROM (SELECT weekday(d), count(*) FROM t GROUP BY 1) x")


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "e": T.slice(0, 0)}) as connection:
        yield connection


def test_part_functions_match_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T, "e": T.slice(0, 0)}, device="cpu", drivers=2, batch_rows=4)
    assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


@pytest.mark.cpu_case_in("test_part_functions_match_duckdb_on_cpu")
def test_part_functions_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T, "e": T.slice(0, 0)}, device=device_name, drivers=2, batch_rows=4)
    assert_queries_match_duckdb(session, reference, QUERIES[:2], exact_types=True)
