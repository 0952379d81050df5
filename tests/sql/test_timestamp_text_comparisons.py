"""A TIMESTAMP compared with a string constant (``ts > '2020-01-01 10:00:00'``, ``BETWEEN``, ``IN``) reads the text
as a TIMESTAMP, as DuckDB does, through Session.sql against DuckDB: several units, NULLs, dates without a time,
fractions, an empty table; a text that is no timestamp is refused while planning (DuckDB's binder refuses it)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.errors import PlanError

MICROS = [0, 86_400_000_000 + 3, None, 10**15, 1_577_872_800_000_000, 1_577_872_800_000_001, -1, None]
T = pa.table({
    "k": pa.array(range(len(MICROS)), pa.int64()),
    "ts": pa.array(MICROS, pa.int64()).cast(pa.timestamp("us")),
    "tm": pa.array([None if m is None else m // 1000 for m in MICROS], pa.int64()).cast(pa.timestamp("ms")),
})

QUERIES = [
    "SELECT k, ts > '2020-01-01 10:00:00' AS a, ts = '2020-01-01 10:00:00.000001' AS b, '1970-01-01' <= ts AS c, "
    "ts <> '1969-12-31 23:59:59.999999' AS e FROM t",
    "SELECT k, ts BETWEEN '1970-01-01' AND '1970-01-02 00:00:00.000003' AS a, tm >= '1970-01-02 00:00:00.003' AS b, "
    "tm < '2020-01-01T10:00' AS c FROM t",
    "SELECT k, ts IN ('1970-01-02 00:00:00.000003', '2001-09-09 01:46:40') AS a, "
    "ts NOT IN ('1970-01-01', NULL) AS b FROM t",
    "SELECT count(*) AS n FROM t WHERE ts >= '1970-01-01' AND tm < '2020-01-01 10:00:00'",
    "SELECT k FROM t WHERE ts > '2020-01-01' AND k < 0",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


def test_timestamp_text_comparisons_match_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T}, split_rows=3, device="cpu", drivers=2, batch_rows=2)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_timestamp_text_comparisons_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T}, split_rows=8, device=device_name, drivers=1, batch_rows=8)
    assert_queries_match_duckdb(session, reference, QUERIES[:1])


@pytest.mark.parametrize("text", ["not a time", "2020-02-30", "2020-01-01 25:00"])
def test_a_text_that_is_no_timestamp_is_refused_while_planning(reference, text):
    sql = f"SELECT ts > '{text}' FROM t"
    with pytest.raises(Exception, match="Conversion Error"):
        reference.sql(sql).fetchall()
    session = session_with_tables({"t": T}, split_rows=8, device="cpu", drivers=1)
    with pytest.raises(PlanError, match=f"invalid timestamp literal '{text}'"):
        session.sql_plan(sql)
