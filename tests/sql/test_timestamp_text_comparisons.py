"""A TIMESTAMP compared with a string constant (``ts > '2020-01-01 10:00:00'``, ``BETWEEN``, ``IN``) reads the text
as a TIMESTAMP, as DuckDB does, through Session.sql against DuckDB: several units, NULLs, dates without a time,
fractions, an empty table; a text that is no timestamp is refused while planning (DuckDB's binder refuses it).
An explicit ``TIMESTAMP '...'`` (``CAST('...' AS TIMESTAMP)``, ``'...'::TIMESTAMP``) likewise: a plan-time value, a
bad text refused while planning with its position (it was a cast of the text, parsed per batch)."""

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


LITERAL_QUERIES = [
    "SELECT k, ts > TIMESTAMP '2020-01-01 10:00:00' AS a, ts = TIMESTAMP '2020-01-01 10:00:00.000001' AS b, "
    "tm >= CAST('1970-01-02 00:00:00.003' AS TIMESTAMP) AS c, ts < '1970-01-01'::TIMESTAMP AS e FROM t",
    "SELECT k, TIMESTAMP '1969-12-31 23:59:59.5' AS v, ts - TIMESTAMP '1970-01-01' AS d FROM t",
    "SELECT count(*) AS n FROM t WHERE ts BETWEEN TIMESTAMP '1970-01-01' AND TIMESTAMP '2001-09-09 01:46:40'",
]


def test_timestamp_literals_match_duckdb_and_are_values_in_the_plan(device_name, reference):
    from gpu_engine.plans.expressions import Cast, Literal, walk
    from gpu_engine.plans.nodes import walk_plan
    from gpu_engine.planning.placement import node_expressions

    session = session_with_tables({"t": T}, split_rows=3, device=device_name, drivers=2, batch_rows=2)
    assert_queries_match_duckdb(session, reference, LITERAL_QUERIES if device_name == "cpu" else LITERAL_QUERIES[:1])
    for sql in LITERAL_QUERIES:  # no text left for a kernel to parse: a timestamp-typed Literal holding a value
        found = [e for node in walk_plan(session.sql_plan(sql)) for top in node_expressions(node) for e in walk(top)]
        assert not any(isinstance(e, Cast) and isinstance(e.operand, Literal) for e in found), sql
        assert any(isinstance(e, Literal) and pa.types.is_timestamp(e.dtype) for e in found), sql


@pytest.mark.parametrize("literal", ["TIMESTAMP '2020-13-01 10:00:00'", "CAST('not a time' AS TIMESTAMP)",
                                     "'2020-02-30'::TIMESTAMP"])
def test_a_bad_timestamp_literal_is_refused_while_planning_naming_it_and_its_position(reference, literal):
    sql = f"SELECT k FROM t WHERE ts > {literal}"
    with pytest.raises(Exception, match="Conversion Error"):
        reference.sql(sql).fetchall()
    session = session_with_tables({"t": T}, split_rows=8, device="cpu", drivers=1)
    text = literal.split("'")[1]
    column = sql.index(f"'{text}'") + 1  # the text's own position
    with pytest.raises(PlanError, match=rf"invalid timestamp literal '{text}'.*\(line 1, column {column}\)"):
        session.sql_plan(sql)


@pytest.mark.parametrize("sql, kind", [
    ("SELECT k FROM t WHERE ts + INTERVAL 1 DAY >= TIMESTAMP '20200101'", "timestamp"),
    ("SELECT k, ts - INTERVAL 2 HOUR < CAST('2020-02-30' AS TIMESTAMP) AS a FROM t", "timestamp"),
    ("SELECT k FROM t WHERE CAST(ts AS DATE) + INTERVAL 1 DAY >= DATE '20200101'", "date"),
    ("SELECT k FROM t WHERE CAST(ts AS DATE) >= DATE '20200101' - INTERVAL 1 MONTH", "date"),
])
def test_a_bad_text_with_interval_arithmetic_is_refused_as_without_it(reference, sql, kind):
    """sqlglot's simplifier folded the INTERVAL into the constant, reading '20200101' leniently: an answer where
    DuckDB raises."""
    with pytest.raises(Exception, match="Conversion Error"):
        reference.sql(sql).fetchall()
    session = session_with_tables({"t": T}, split_rows=8, device="cpu", drivers=1)
    with pytest.raises(PlanError, match=f"invalid {kind} literal"):
        session.sql_plan(sql)


def test_a_bad_text_under_a_false_connective_goes_with_it_as_in_duckdb(reference):
    session = session_with_tables({"t": T}, split_rows=8, device="cpu", drivers=1)
    assert_queries_match_duckdb(session, reference, [
        "SELECT k FROM t WHERE FALSE AND ts + INTERVAL 1 DAY >= TIMESTAMP '20200101'",
        "SELECT k FROM t WHERE ts + INTERVAL 1 DAY >= TIMESTAMP '2020-1-1' OR k = 0",
    ])


@pytest.mark.parametrize("sql, kind, text", [
    ("SELECT k FROM t WHERE ts < TIMESTAMP 'infinity'", "TIMESTAMP", "infinity"),
    ("SELECT k, ts > '-infinity' AS a FROM t", "TIMESTAMP", "-infinity"),
    ("SELECT k FROM t WHERE CAST(ts AS DATE) < DATE 'Infinity'", "DATE", "Infinity"),
    ("SELECT k FROM t WHERE CAST(ts AS DATE) + INTERVAL 1 DAY > DATE '-infinity'", "DATE", "-infinity"),
])
def test_an_infinite_date_or_timestamp_is_refused_naming_it_and_why(reference, sql, kind, text):
    """DuckDB's infinities are special values its temporal functions treat apart; the engine's DATE/TIMESTAMP has
    none, so the text is refused by name with a bound to write instead (it was 'invalid timestamp literal')."""
    reference.sql(sql).fetchall()  # DuckDB answers
    session = session_with_tables({"t": T}, split_rows=8, device="cpu", drivers=1)
    with pytest.raises(PlanError, match=rf"{kind} '{text}' is not supported: the engine's {kind} has no infinite "
                                        rf"values.*write a bound such as {kind} '(9999|0001)-"):
        session.sql_plan(sql)
