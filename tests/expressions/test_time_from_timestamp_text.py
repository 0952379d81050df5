"""A text cast to TIME that is no time is read as a TIMESTAMP and keeps its time of day, as DuckDB does.

DuckDB's time parse falls back to its timestamp parse: ``CAST('2020-01-01' AS TIME)`` is 00:00:00,
``'2020-01-01 24:00:00'`` 00:00:00 (of the next day), ``'epoch'`` 00:00:00, and a text whose date is no date
(``'2020-02-30 10:00'``) no TIME. The engine read only times (a date prefix skipped unchecked): the first was an
error (TRY_CAST: NULL), the second 24:00:00, the last 10:00:00.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.errors import ExecutionError

TEXTS = ["2020-01-01", "2020-1-1", "2020-01-01 24:00:00", "2020-01-01 10:30:00+02", "2020-02-30", "2020-02-30 10:00",
         "epoch", "2020/01/02 03:04", "1969-12-31 23:00:00.5", "10:00", "1:2:3", "24:00:00", "2020-13-45", "abc", "",
         None]
TABLES = {"t": pa.table({"s": pa.array(TEXTS, pa.string())}), "e": pa.table({"s": pa.array([], pa.string())})}


def test_try_cast_of_timestamp_texts_to_time_matches_duckdb(device_name):
    queries = ["SELECT s, CAST(TRY_CAST(s AS TIME) AS VARCHAR) AS v FROM t",
               "SELECT s FROM t WHERE TRY_CAST(s AS TIME) = TIME '00:00:00'", "SELECT TRY_CAST(s AS TIME) FROM e"]
    if device_name != "cpu":
        queries = queries[:1]
    with duckdb_with_tables(TABLES) as reference:
        for drivers, batch_rows in ((1, 4096), (2, 3)) if device_name == "cpu" else ((1, 4096),):
            session = session_with_tables(TABLES, split_rows=5, device=device_name, drivers=drivers,
                                          batch_rows=batch_rows)
            assert_queries_match_duckdb(session, reference, queries)


@pytest.mark.parametrize("text, fails", [("2020-01-01", False), ("2020-01-01 24:00:00", False),
                                         ("2020-02-30 10:00", True)])
def test_cast_of_a_timestamp_text_to_time_answers_or_fails_as_duckdb(text, fails):
    table = {"u": pa.table({"s": pa.array([text])})}
    sql = "SELECT CAST(CAST(s AS TIME) AS VARCHAR) AS v FROM u"
    with duckdb_with_tables(table) as reference:
        session = session_with_tables(table, device="cpu")
        if not fails:
            assert_queries_match_duckdb(session, reference, [sql])
            return
        with pytest.raises(Exception, match="Conversion Error"):
            reference.execute(sql).fetchall()
        with pytest.raises(ExecutionError, match="Could not convert string"):
            session.sql(sql)
