"""Casts DuckDB binds but converts no value with (a number to DATE/TIMESTAMP/TIME/INTERVAL, a DATE or TIME to a
number, TIME <-> TIMESTAMP, DATE -> TIME), through Session.sql against DuckDB 2.0.1.

DuckDB types ``CAST(v AS DATE)`` of an INTEGER as DATE and raises "Unimplemented type for cast (INTEGER -> DATE)"
only when a non-NULL row reaches it: NULL rows, rows a filter dropped and empty tables answer. The engine refused every such cast while planning ("cannot cast int32 to
date32[day]"); it now plans them and raises DuckDB's error from the first non-NULL row (``TRY_CAST`` answers NULL,
as before); a constant's cast too (DuckDB does not fold it: an empty table answers).
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.errors import ExecutionError

T = pa.table({
    "k": pa.array([1, None, 3, None], pa.int32()),
    "v": pa.array([7, None, -2, None], pa.int64()),
    "x": pa.array([1.5, None, 2.0, None], pa.float64()),
    "b": pa.array([True, None, False, None]),
    "d": pa.array([datetime.date(2020, 1, 2), None, datetime.date(1999, 3, 4), None], pa.date32()),
    "tm": pa.array([datetime.time(10, 30), None, datetime.time(0, 0), None], pa.time64("us")),
})
TABLES = {"t": T, "e": T.slice(0, 0)}

ANSWERED = [  # only NULL rows (or none) reach the casts
    "SELECT CAST(v AS DATE) AS a, CAST(x AS TIMESTAMP) AS c, CAST(b AS TIME) AS f, CAST(d AS INTEGER) AS g "
    "FROM t WHERE k IS NULL",
    "SELECT CAST(k AS DATE) IS NULL AS a, CAST(CAST(v AS DATE) AS VARCHAR) AS c, CAST(tm AS TIMESTAMP) AS f, "
    "CAST(d AS TIME) AS g, CAST(CAST(k AS INTERVAL) AS VARCHAR) AS h FROM t WHERE v IS NULL",
    "SELECT CAST(v AS DATE) AS a, CAST(tm AS DOUBLE) AS c FROM e",
    "SELECT k, TRY_CAST(v AS DATE) AS a, TRY_CAST(d AS BIGINT) AS c FROM t",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def test_casts_only_null_rows_reach_answer_as_duckdb(reference):
    session = session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=2)
    assert_queries_match_duckdb(session, reference, ANSWERED, exact_types=True)


@pytest.mark.parametrize("sql, message", [
    ("SELECT CAST(k AS DATE) AS a FROM t", "Unimplemented type for cast (INTEGER -> DATE)"),
    ("SELECT CAST(v AS TIMESTAMP) AS a FROM t WHERE v < 0", "Unimplemented type for cast (BIGINT -> TIMESTAMP)"),
    ("SELECT CAST(x AS DATE) + 1 AS a FROM t", "Unimplemented type for cast (DOUBLE -> DATE)"),
    ("SELECT CAST(b AS INTERVAL) AS a FROM t", "Unimplemented type for cast (BOOLEAN -> INTERVAL)"),
    ("SELECT CAST(d AS INTEGER) AS a FROM t", "Unimplemented type for cast (DATE -> INTEGER)"),
    ("SELECT CAST(tm AS TIMESTAMP) AS a FROM t", "Unimplemented type for cast (TIME -> TIMESTAMP)"),
])
def test_a_non_null_row_raises_duckdbs_error(reference, sql, message):
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        reference.sql(sql).fetchall()
    with pytest.raises(ExecutionError) as raised:
        session_with_tables(TABLES, device="cpu").sql(sql)
    assert message in str(raised.value)


def test_a_constant_raises_only_when_a_row_reaches_it(reference):
    """DuckDB does not fold the failing constant cast: an empty table answers, one row raises."""
    session = session_with_tables(TABLES, device="cpu")
    assert_queries_match_duckdb(session, reference, ["SELECT CAST(1 AS DATE) AS a FROM e"], exact_types=True)
    for sql in ("SELECT CAST(1 AS DATE) AS a", "SELECT CAST(DATE '2020-01-01' AS INTEGER) AS a FROM t"):
        with pytest.raises(Exception, match="Unimplemented type for cast"):
            reference.sql(sql).fetchall()
        with pytest.raises(ExecutionError, match="Unimplemented type for cast"):
            session.sql(sql)


def test_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name)
    assert_queries_match_duckdb(session, reference, ANSWERED[:1], exact_types=True)
    with pytest.raises(ExecutionError, match="Unimplemented type for cast"):
        session.sql("SELECT CAST(k AS DATE) AS a FROM t")

