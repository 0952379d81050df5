"""Spark's function names in ``dialect="spark"`` give Spark's values and types (gpu_engine/sql/spark_functions.py).

Issue 30, item 6: sqlglot reads Spark's calls into nodes with DuckDB's meaning
(``dayofweek`` from 0, ``date_add`` a TIMESTAMP, ``datediff`` without a unit)
or into nodes the engine refused (``nvl2``, ``if``, ``isnull``, ``pmod``,
``to_date``, ``trunc``, ``date_format``, ``year(d)``). Each Spark expression
is compared with a DuckDB expression that computes Spark's answer (values and
type), as checked against PySpark 4.3 in local mode: ``dayofweek`` 1 = Sunday,
``weekday`` 0 = Monday, ``date_add``/``add_months``/``trunc`` and DATE +
INTERVAL of days or months a DATE, ``datediff(end, start)`` an INT,
``pmod(-7, 3) = 2``, ``pmod(7, -3) = 1``, ``pmod(-7, -3) = -1``,
``percentile_approx`` a value of the column (of its type), ``percentile``
interpolated.
"""

from __future__ import annotations

import datetime

import duckdb
import pyarrow as pa
import pytest

from gpu_engine.sql import SqlError

T = pa.table({
    "k": pa.array([1, 2, 3, 4, 5, 6], pa.int32()),
    # a Wednesday at a month's end, a Sunday, a Saturday, a leap day, NULL, a year's first day
    "d": pa.array([datetime.date(2024, 1, 31), datetime.date(2024, 3, 3), datetime.date(2023, 12, 30),
                   datetime.date(2024, 2, 29), None, datetime.date(2021, 1, 1)], pa.date32()),
    "d2": pa.array([datetime.date(2024, 3, 1), None, datetime.date(2020, 1, 1), datetime.date(2024, 2, 29),
                    datetime.date(2024, 1, 1), datetime.date(2020, 12, 31)], pa.date32()),
    "ts": pa.array([datetime.datetime(2024, 1, 31, 13, 5, 6), None, datetime.datetime(2020, 1, 1),
                    datetime.datetime(2024, 2, 29, 23, 59, 59), datetime.datetime(2023, 7, 2, 8, 0, 1),
                    datetime.datetime(1999, 12, 31, 0, 0, 0)], pa.timestamp("us")),
    "s": pa.array(["2024-02-29", None, "bad", "2023-1-5", "", "1999-12-31"]),
    "i": pa.array([7, -7, None, 3, 0, -3], pa.int32()),
    "f": pa.array([1.5, float("nan"), None, float("inf"), float("-inf"), -0.0]),
})

# (Spark expression, DuckDB expression giving Spark's answer)
EXPRESSIONS = [
    ("dayofweek(d)", "CAST(isodow(d) % 7 + 1 AS INTEGER)"),
    ("dayofweek(ts)", "CAST(isodow(ts) % 7 + 1 AS INTEGER)"),
    ("weekday(d)", "CAST(isodow(d) - 1 AS INTEGER)"),
    ("year(d)", "CAST(year(d) AS INTEGER)"),
    ("month(ts)", "CAST(month(ts) AS INTEGER)"),
    ("dayofmonth(d)", "CAST(day(d) AS INTEGER)"),
    ("dayofyear(d)", "CAST(dayofyear(d) AS INTEGER)"),
    ("weekofyear(d)", "CAST(weekofyear(d) AS INTEGER)"),
    ("quarter(d)", "CAST(quarter(d) AS INTEGER)"),
    ("date_add(d, 3)", "d + 3"),
    ("date_add(ts, i)", "CAST(ts AS DATE) + i"),
    ("date_sub(d, i)", "d - i"),
    ("add_months(d, 1)", "CAST(d + INTERVAL 1 MONTH AS DATE)"),
    ("add_months(d, -13)", "CAST(d - INTERVAL 13 MONTH AS DATE)"),
    ("d + INTERVAL 1 DAY", "CAST(d + INTERVAL 1 DAY AS DATE)"),
    ("d - INTERVAL 1 YEAR", "CAST(d - INTERVAL 1 YEAR AS DATE)"),
    ("d + INTERVAL 2 HOURS", "d + INTERVAL 2 HOUR"),
    ("ts + INTERVAL 1 DAY", "ts + INTERVAL 1 DAY"),
    ("to_date(s)", "TRY_CAST(s AS DATE)"),
    ("to_date(s, 'yyyy-MM-dd')", "TRY_CAST(s AS DATE)"),
    ("to_date('2024-01-05')", "DATE '2024-01-05'"),
    ("datediff(d2, d)", "CAST(d2 - d AS INTEGER)"),
    ("datediff(ts, d)", "CAST(CAST(ts AS DATE) - d AS INTEGER)"),
    ("date_format(d, 'yyyy-MM-dd')", "strftime(d, '%Y-%m-%d')"),
    ("date_format(ts, 'yyyy/MM/dd HH:mm:ss')", "strftime(ts, '%Y/%m/%d %H:%M:%S')"),
    ("date_format(d, 'd/M/yy')", "strftime(d, '%-d/%-m/%y')"),
    ("date_format(ts, 'EEE, MMM d hh:mm a')", "strftime(ts, '%a, %b %-d %I:%M %p')"),
    ("trunc(d, 'MM')", "CAST(date_trunc('month', d) AS DATE)"),
    ("trunc(ts, 'year')", "CAST(date_trunc('year', ts) AS DATE)"),
    ("trunc(d, 'quarter')", "CAST(date_trunc('quarter', d) AS DATE)"),
    ("trunc(d, 'week')", "CAST(date_trunc('week', d) AS DATE)"),
    ("date_trunc('MM', ts)", "date_trunc('month', ts)"),
    ("date_trunc('yyyy', d)", "CAST(date_trunc('year', d) AS TIMESTAMP)"),
    ("date_trunc('DD', ts)", "date_trunc('day', ts)"),
    ("make_date(2024, k, 29)", "TRY_CAST(make_date(2024, k, 29) AS DATE)"),
    ("nvl(i, 0)", "COALESCE(i, 0)"),
    ("nvl2(i, s, 'none')", "CASE WHEN i IS NOT NULL THEN s ELSE 'none' END"),
    ("if(i > 0, 'p', 'n')", "CASE WHEN i > 0 THEN 'p' ELSE 'n' END"),
    ("if(i > 0, k, NULL)", "CASE WHEN i > 0 THEN k END"),
    ("nanvl(f, 0.0)", "CASE WHEN isnan(f) THEN 0.0 ELSE f END"),
    ("nanvl(f, CAST(i AS DOUBLE))", "CASE WHEN isnan(f) THEN CAST(i AS DOUBLE) ELSE f END"),
    ("isnull(i)", "i IS NULL"),
    ("isnotnull(s)", "s IS NOT NULL"),
    ("CAST('2024-01-01 10:00:00' AS TIMESTAMP)", "TIMESTAMP '2024-01-01 10:00:00'"),
    ("CAST(d AS TIMESTAMP)", "CAST(d AS TIMESTAMP)"),
    ("hour(ts)", "CAST(hour(ts) AS INTEGER)"),
    ("second(ts)", "CAST(second(ts) AS INTEGER)"),
    ("length(s)", "CAST(length(s) AS INTEGER)"),
    ("char_length(s)", "CAST(length(s) AS INTEGER)"),
    ("instr(s, '2')", "CAST(strpos(s, '2') AS INTEGER)"),
    ("locate('-', s)", "CAST(strpos(s, '-') AS INTEGER)"),
    ("substr(s, 0, 4)", "substring(s, 1, 4)"),  # Spark: position 0 is the first character
    ("substr(s, 2, 3)", "substring(s, 2, 3)"),
    ("lcase(s)", "lower(s)"),
    ("ucase(s)", "upper(s)"),
    ("chr(i)", "CASE WHEN i < 0 THEN '' ELSE chr(CAST(i % 256 AS INTEGER)) END"),  # Spark's: n % 256, '' if negative
    ("chr(k + 250)", "chr(CAST((k + 250) % 256 AS INTEGER))"),
    ("octet_length(s)", "CAST(strlen(s) AS INTEGER)"),
    ("bit_length(s)", "CAST(bit_length(s) AS INTEGER)"),
    ("ascii(s)", "ascii(s)"),
    ("translate(s, '2-', 'x')", "translate(s, '2-', 'x')"),
]


def _spark_and_duckdb(device_name: str, pairs) -> tuple[pa.Table, pa.Table]:
    from gpu_engine import Session

    session = Session(device=device_name)
    session.register("t", T)
    columns = ", ".join(f"{spark} AS c{n}" for n, (spark, _) in enumerate(pairs))
    engine = session.sql(f"SELECT k, {columns} FROM t ORDER BY k", dialect="spark")
    connection = duckdb.connect()
    connection.register("t", T)
    columns = ", ".join(f"{duck} AS c{n}" for n, (_, duck) in enumerate(pairs))
    expected = connection.sql(f"SELECT k, {columns} FROM t ORDER BY k").to_arrow_table()
    return engine, expected


def test_spark_functions_give_sparks_values_and_types(device_name):
    """Every expression in one projection (one compilation per device); each column checked by name."""
    engine, expected = _spark_and_duckdb(device_name, EXPRESSIONS)
    for n, (spark, duck) in enumerate(EXPRESSIONS):
        got, want = engine.column(f"c{n}"), expected.column(f"c{n}")
        assert got.type == want.type, f"{spark}: type {got.type}, Spark's is {want.type} ({duck})"
        assert got.to_pylist() == want.to_pylist(), f"{spark}: {got.to_pylist()} != {want.to_pylist()} ({duck})"


def test_pmod_is_sparks_positive_modulus_and_null_for_a_zero_divisor(device_name):
    """Spark: ``pmod(-7, 3) = 2``, ``pmod(7, -3) = 1``, ``pmod(-7, -3) = -1`` (PySpark 4.3); NULL for 0 as ``/``."""
    from gpu_engine import Session

    session = Session(device=device_name)
    session.register("t", T)
    result = session.sql("SELECT k, pmod(i, 3) AS a, pmod(i, -3) AS b, pmod(i, 0) AS z, pmod(CAST(i AS BIGINT), k) "
                         "AS c FROM t ORDER BY k", dialect="spark")
    # i = 7, -7, NULL, 3, 0, -3; k = 1..6
    assert result.column("a").to_pylist() == [1, 2, None, 0, 0, 0]
    assert result.column("b").to_pylist() == [1, -1, None, 0, 0, 0]
    assert result.column("z").to_pylist() == [None] * 6
    assert result.column("c").to_pylist() == [0, 1, None, 3, 0, 3]
    assert result.schema.field("a").type == pa.int32() and result.schema.field("c").type == pa.int64()


def test_sparks_percentiles_and_first_ignoring_nulls(device_name):
    """``percentile_approx`` returns a value of the column (Spark: 2 for 1..4 at 0.5), ``percentile`` interpolates
    (2.5), ``first(x, true)`` skips NULLs."""
    from gpu_engine import Session

    session = Session(device=device_name)
    session.register("v", pa.table({"g": pa.array([1, 1, 1, 1, 2, 2, 3, 3, 3, 3, 3], pa.int32()),
                                    "x": pa.array([4, 1, 3, 2, None, 9, 5, 4, 3, 2, 1], pa.int64())}))
    result = session.sql("SELECT g, percentile_approx(x, 0.5) AS pa, percentile_approx(x, 0.25, 100) AS pq, "
                         "percentile_approx(x, 0.45) AS pr, percentile(x, 0.5) AS p, first(x, true) AS f "
                         "FROM v GROUP BY g ORDER BY g", dialect="spark")
    assert result.column("pa").to_pylist() == [2, 9, 3] and result.schema.field("pa").type == pa.int64()
    assert result.column("pq").to_pylist() == [1, 9, 2]
    assert result.column("pr").to_pylist() == [2, 9, 3]  # Spark: the value at rank ceil(q * n); 1..5 at 0.45: 3
    assert result.column("p").to_pylist() == [2.5, 9.0, 3.0]
    first = result.column("f").to_pylist()
    assert first[0] in (1, 2, 3, 4) and first[1] == 9 and first[2] in (1, 2, 3, 4, 5)


def test_sparks_first_and_last_over_a_window_are_first_value_and_last_value(device_name):
    """Spark's ``first(x, true) OVER (...)`` (an aggregate used as a window function) was refused as 'first'."""
    pairs = [
        ("first(i, true) OVER (ORDER BY d)", "first_value(i IGNORE NULLS) OVER (ORDER BY d NULLS FIRST)"),
        ("first(i) OVER (ORDER BY d)", "first_value(i) OVER (ORDER BY d NULLS FIRST)"),
        ("last(i) IGNORE NULLS OVER (ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
         "last_value(i IGNORE NULLS) OVER (ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"),
        ("last(s, true) OVER (PARTITION BY k % 2 ORDER BY k)", "last_value(s IGNORE NULLS) OVER (PARTITION BY k % 2 "
                                                              "ORDER BY k)"),
    ]
    engine, expected = _spark_and_duckdb(device_name, pairs)
    for n, (spark, duck) in enumerate(pairs):
        assert engine.column(f"c{n}").to_pylist() == expected.column(f"c{n}").to_pylist(), spark


def test_months_between_gives_sparks_values(device_name):
    """Spark's ``months_between`` (PySpark 4.3's answers): whole months for equal days or two month ends, else the
    whole seconds between over 31 days, rounded half up to 8 digits (not with ``false``); it was refused."""
    from gpu_engine import Session

    at = datetime.datetime
    pairs = [(at(2024, 2, 29), at(2024, 3, 3)), (at(2024, 1, 31, 13, 5, 6), at(2024, 3, 1)),
             (at(2024, 2, 29, 23, 59, 59), at(2024, 2, 29)), (at(2024, 4, 30), at(2024, 2, 29)),
             (at(2020, 1, 1), at(2024, 1, 1)), (at(2024, 3, 15, 10), at(2024, 3, 14, 11, 30, 0, 500_000)),
             (None, at(2024, 1, 1))]
    session = Session(device=device_name)
    session.register("m", pa.table({"k": pa.array(range(len(pairs)), pa.int32()),
                                    "a": pa.array([p[0] for p in pairs], pa.timestamp("us")),
                                    "b": pa.array([p[1] for p in pairs], pa.timestamp("us"))}))
    result = session.sql("SELECT k, months_between(a, b) AS r, months_between(a, b, false) AS u, "
                         "months_between(CAST(a AS DATE), CAST(b AS DATE)) AS d FROM m ORDER BY k", dialect="spark")
    assert result.schema.field("r").type == pa.float64()
    assert result.column("r").to_pylist() == [-0.16129032, -1.0146707, 0.0, 2.0, -48.0, 0.03024194, None]
    assert result.column("d").to_pylist()[:2] == [-0.16129032, -1.03225806]
    assert result.column("u").to_pylist()[0] == pytest.approx(-5 / 31, rel=1e-15)
    strings = session.sql("SELECT months_between('2024-03-15', '2023-01-01') AS x, months_between(DATE '2024-03-01', "
                          "DATE '2024-01-31', false) AS y FROM m LIMIT 1", dialect="spark")
    assert strings.column("x").to_pylist() == [14.4516129] and strings.column("y").to_pylist() == [1.032258064516129]


@pytest.mark.parametrize("call, named", [
    ("collect_list(i)", "collect_list"), ("collect_set(i)", "collect_set"), ("array_agg(i)", "array_agg"),
    ("to_date(s, 'dd/MM/yyyy')", "to_date with a format"), ("trunc(d, 'day')", "trunc format"),
    ("trunc(d, s)", "trunc format"),  # sqlglot reads the column s as the unit SECOND: refused all the same
    ("pmod(i)", "pmod takes 2 arguments"), ("initcap(s)", "initcap is not supported"),
    ("format_string('%d', i)", "format_string is not supported"),
    ("date_format(d, s)", "format of date_format"),
    ("date_format(ts, 'HH:mm:ss.SSS')", "pattern letter.*'S'"),  # milliseconds: no strftime code
    ("date_format(d, 'yyyy Q')", "pattern letter.*'Q'"),
])
def test_spark_calls_the_engine_cannot_compute_are_refused_by_name(call, named):
    from gpu_engine import Session

    session = Session(device="cpu")
    session.register("t", T)
    with pytest.raises(SqlError, match=named):
        session.sql(f"SELECT {call} AS x FROM t", dialect="spark")


def test_the_duckdb_dialect_keeps_duckdbs_meaning():
    """Only ``dialect="spark"`` is rewritten: DuckDB's dayofweek counts Sunday as 0, date + INTERVAL a TIMESTAMP."""
    from gpu_engine import Session

    session = Session(device="cpu")
    session.register("t", T)
    result = session.sql("SELECT k, dayofweek(d) AS w, d + INTERVAL 1 DAY AS n FROM t ORDER BY k")
    assert result.column("w").to_pylist()[:3] == [3, 0, 6]
    assert result.schema.field("n").type == pa.timestamp("us")
