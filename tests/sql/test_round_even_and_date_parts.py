"""round_even and the date parts DuckDB has that the engine refused: ``round_even(x, n)`` (``roundbankers``),
``date_part`` 'julian' / 'era' (and ``julian(d)`` / ``era(d)``), ``date_trunc`` 'microsecond' / 'isoyear' and the
parts DuckDB reads as another ('doy', 'dow', 'isodow', 'julian' as the day, 'yearweek' as the week, 'epoch' as the
second), ``date_diff`` / ``date_sub`` over those and 'isoyear' (fuzz10's refusals), each answered as DuckDB."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

MOMENTS = [dt.datetime(2021, 1, 3, 10, 11, 12, 345678), dt.datetime(2019, 12, 29, 9, 0, 0, 500000),
           dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(2020, 12, 28), None, dt.datetime(1001, 1, 8)]
TABLES = {"t": pa.table({
    "ts": pa.array(MOMENTS, pa.timestamp("us")),
    "ts2": pa.array(MOMENTS[::-1], pa.timestamp("us")),
    "d": pa.array([m.date() if m else None for m in MOMENTS], pa.date32()),
    "f": pa.array([2.5, 0.125, 2.675, -2.5, None, float("inf")]),
    "i": pa.array([12345, 25, -25, 15, None, 2**62]),
    "n": pa.array([decimal.Decimal(v) for v in ["2.500", "0.125", "-2.675", "99.995", "0.000", "-0.500"]],
                  pa.decimal128(10, 3)),
})}
QUERIES = [
    "SELECT round_even(f, 0), round_even(f, 2), round_even(f, -1), round_even(f, 400), round_even(f, -400) FROM t",
    "SELECT round_even(i, -1), round_even(i, 2), roundbankers(n, 2), round_even(n, 0), round_even(n, -1) FROM t",
    "SELECT date_part('julian', ts), date_part('julian', d), julian(d), date_part('era', d), era(ts - INTERVAL "
    "1100 YEAR) AS e FROM t",
    "SELECT date_trunc('isoyear', ts), date_trunc('isoyear', d), date_trunc('microsecond', ts), "
    "date_trunc('doy', ts), date_trunc('yearweek', d), date_trunc('epoch', ts) FROM t",
    "SELECT date_diff('doy', ts, ts2), date_diff('isoyear', d, CAST(ts2 AS DATE)), date_diff('epoch', ts, ts2), "
    "date_diff('yearweek', ts2, ts), date_diff('isodow', d, CAST(ts2 AS DATE)) FROM t",
    "SELECT date_sub('dow', ts, ts2), date_sub('isoyear', ts, ts2), date_sub('julian', d, CAST(ts2 AS DATE)), "
    "date_sub('epoch', ts2, ts) FROM t",
]


@pytest.fixture(scope="module")
def reference():
    connection = duckdb_with_tables(TABLES)
    yield connection
    connection.close()


def test_round_even_and_date_parts_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, device="cpu", compile_mode="lowest")
    assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


def test_round_even_and_date_parts_match_duckdb_on_each_device(reference, device_name):
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference, [QUERIES[0], QUERIES[2], QUERIES[3]])


def test_round_even_needs_its_decimal_places():
    with pytest.raises(Exception, match=r"round_even\(\) takes 2 arguments"):
        session_with_tables(TABLES, device="cpu").sql("SELECT round_even(f) FROM t")


#: Decimals of scale 0 at their precision's limit: round / round_even to tens and beyond carry into one more digit.
WIDE = {"t": pa.table({
    "b": pa.array([decimal.Decimal(v) for v in ["999999999999999999", "-999999999999999995", "5", "0"]],
                  pa.decimal128(18, 0)),
    "e": pa.array([decimal.Decimal(v) for v in ["99999", "-50000", "4", "-99995"]], pa.decimal128(5, 0)),
})}


def test_round_to_tens_of_a_full_decimal_widens_as_duckdb(device_name):
    """``round(DECIMAL(p, 0), -k)`` is a DECIMAL(p + 1, 0) in DuckDB (99999 -> 100000, for k up to p): the engine
    kept DECIMAL(p, 0) and raised "value is out of range" for 999999999999999999 (fuzz round 12)."""
    with duckdb_with_tables(WIDE) as connection:
        session = session_with_tables(WIDE, device=device_name)
        assert_queries_match_duckdb(session, connection, [
            "SELECT round(b, -1) AS a, round(b, -18) AS c, round_even(e, -1) AS d, round(e, -5) AS f, "
            "round(e, -6) AS g FROM t", "SELECT sum(round(b, -1)) AS s, max(round(e, -2)) AS m FROM t"],
            exact_types=True)
