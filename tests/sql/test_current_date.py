"""``current_date`` / ``today()`` / ``current_date()``: the local date when the query runs, as DuckDB's (its TimeZone
defaults to the local one), with DuckDB's column names and types; read when the query runs, so a plan kept for
the text (the plan cache) answers the day it runs, not the day it was planned.

The date can change between DuckDB's answer and the engine's (a run across midnight): each query is compared
with DuckDB's answer taken before and after the engine's, and passes when it equals either.
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from duckdb_reference import duckdb_table, duckdb_with_tables, rows_mismatch, session_with_tables

T = pa.table({
    "k": pa.array([1, None, 3, 4], pa.int32()),
    "d": pa.array([datetime.date(2020, 2, 29), None, datetime.date(1969, 12, 31), datetime.date(2099, 1, 1)],
                  pa.date32()),
})
EMPTY = T.slice(0, 0)
QUERIES = [
    "SELECT current_date, today(), current_date(), k FROM t",
    "SELECT current_date - d AS days, d < current_date AS past, date_diff('year', d, today()) AS years FROM t",
    "SELECT count(*) AS n FROM t WHERE d > current_date - INTERVAL 100 YEAR",
    "SELECT * FROM (SELECT today(), k FROM t) x WHERE k > 1",
    "SELECT current_date FROM e",
    "SELECT current_date + 1 AS tomorrow",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "e": EMPTY}) as connection:
        yield connection


def _check(device_name, reference, queries):
    session = session_with_tables({"t": T, "e": EMPTY}, device=device_name, drivers=2, batch_rows=2)
    for sql in queries:
        before = duckdb_table(reference, sql)
        actual = session.sql(sql)
        problems = [rows_mismatch(actual, expected) for expected in (before, duckdb_table(reference, sql))]
        assert None in problems, f"{sql}: {problems[0]}"
        assert actual.schema.names == before.schema.names
        assert [f.type for f in actual.schema] == [f.type for f in before.schema]


def test_current_date_matches_duckdb_on_cpu(reference):
    _check("cpu", reference, QUERIES)


@pytest.mark.cpu_case_in("test_current_date_matches_duckdb_on_cpu")
def test_current_date_matches_duckdb_on_each_device(device_name, reference):
    _check(device_name, reference, QUERIES[:2])


def test_a_kept_plan_reads_the_date_when_it_runs(monkeypatch):
    """The plan cache hands back the plan of a text run again: the date is read as each run evaluates it."""
    import gpu_engine.expressions.functions as functions

    session = session_with_tables({"t": T}, device="cpu")
    sql = "SELECT current_date AS c FROM t"
    first = session.sql(sql).column("c").to_pylist()

    today = functions.local_today
    monkeypatch.setattr(functions, "local_today", lambda: today() + datetime.timedelta(days=1))
    second = session.sql(sql).column("c").to_pylist()
    assert second == [day + datetime.timedelta(days=1) for day in first]
