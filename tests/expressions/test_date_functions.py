"""Check the date functions against DuckDB 2.0.1 (date_part/EXTRACT fields, date_trunc, date_diff, + INTERVAL on
columns, make_date, date text without zero padding): values and types at year, ISO-week and month-end edges,
before 1970, NULLs, through the translator, PlanBuilder and Session.sql."""

from __future__ import annotations

import datetime
import re

import duckdb
import pyarrow as pa
import pytest

from duckdb_check import batch_of, small_table
from duckdb_reference import assert_same_rows
from function_check import check_sql as _check_sql, duckdb_type, schema_of
from gpu_engine import Session
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.expressions import evaluate
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.expressions import Extract
from gpu_engine.plans.sql_translator import parse_expression

DATES = [datetime.date(*parts) if parts else None for parts in [
    (1970, 1, 1), (1969, 12, 31), (2000, 2, 29), (2020, 12, 31), (2021, 1, 1), (2021, 1, 3), (2021, 1, 4),
    (2008, 12, 29), (2010, 1, 3), (1900, 3, 1), (1, 1, 1), (9999, 12, 31), (2024, 2, 29), (2023, 1, 1), None,
    (1999, 12, 31), (2000, 1, 1), (1600, 2, 29), (2020, 1, 31), (2019, 3, 31), (2001, 1, 1), (1000, 6, 15),
]]
ROWS = len(DATES)
MICROS = [None if k % 7 == 3 else (k - 10) * 37_123_456_789_123 + k * 1_000_003 for k in range(ROWS)]
TABLE = small_table(
    d=pa.array(DATES, pa.date32()),
    d2=pa.array(list(reversed(DATES)), pa.date32()),
    ts=pa.array(MICROS, pa.timestamp("us")),
    y=pa.array([2020, 1999, None, 2024, 1, 9999, 2000, 1900, 2023, 1970] * 2 + [5, 6], pa.int64()),
    m=pa.array([1, 2, 12, 2, 7, None, 6, 2, 11, 12] * 2 + [1, 1], pa.int32()),
    dd=pa.array([31, 28, 1, 29, 15, 30, None, 28, 30, 31] * 2 + [2, 3], pa.int32()),
)


def check_sql(device, sql: str, table: pa.Table = TABLE):
    """Check ``sql`` against DuckDB: its type, then its values."""
    return _check_sql(device, sql, table)


PARTS = ["year", "month", "day", "quarter", "dow", "dayofweek", "isodow", "doy", "dayofyear", "week", "yearweek",
         "isoyear", "decade", "century", "millennium", "hour", "minute", "second", "millisecond", "microsecond",
         "ms", "m", "s"]


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("column", ["d", "ts"])
def test_date_part(device, part, column):
    check_sql(device, f"date_part('{part}', {column})")
    check_sql(device, f"extract({part} FROM {column})")


@pytest.mark.parametrize("sql", ["quarter(d)", "dayofweek(d)", "dayofyear(ts)", "week(d)", "weekofyear(d)",
                                 "year(ts)", "extract(epoch FROM d)", "extract(epoch FROM ts)",
                                 "datepart('month', d)", "hour(ts)", "minute(ts)", "second(ts)", "hour(d)",
                                 "last_day(d)", "last_day(ts)"])
def test_named_parts(device, sql):
    check_sql(device, sql)


@pytest.mark.parametrize("sql", ["dayname(d)", "monthname(d)", "dayname(ts)", "monthname(ts)", "dayname(NULL)",
                                 "monthname(d2) || '/' || dayname(d2)", "upper(dayname(d))", "length(monthname(ts))"])
def test_calendar_names(device, sql):
    """dayname / monthname: DuckDB's English names (before 1970, leap days, NULLs), as a dictionary column."""
    check_sql(device, sql)


@pytest.mark.parametrize("part", ["year", "quarter", "month", "week", "day", "decade", "century", "millennium",
                                  "hour", "minute", "second", "millisecond"])
@pytest.mark.parametrize("column", ["d", "ts"])
def test_date_trunc(device, part, column):
    table = TABLE
    if part in ("decade", "century", "millennium"):  # 0001-01-01 truncates to year 0, which Python cannot hold
        table = TABLE.filter(pa.compute.not_equal(TABLE.column("rid"), 10))
    check_sql(device, f"date_trunc('{part}', {column})", table)


@pytest.mark.parametrize("part", ["year", "quarter", "month", "week", "day", "decade", "century", "millennium",
                                  "hour", "minute", "second", "millisecond", "microsecond"])
def test_date_diff(device, part):
    check_sql(device, f"date_diff('{part}', d, d2)")
    check_sql(device, f"date_diff('{part}', ts, d)")
    check_sql(device, f"datediff('{part}', d2, DATE '2000-03-01')")


@pytest.mark.parametrize("sql", [
    "d + INTERVAL 1 DAY", "d - INTERVAL '3' DAY", "d + INTERVAL 2 WEEK", "d + INTERVAL 1 MONTH",
    "d - INTERVAL 1 MONTH", "d + INTERVAL 13 MONTH", "d + INTERVAL '1' YEAR", "d - INTERVAL 4 YEAR",
    "INTERVAL 1 MONTH + d", "ts + INTERVAL 1 MONTH", "ts - INTERVAL 10 DAY", "date_add(d, INTERVAL 1 MONTH)",
    "d + INTERVAL 3 HOUR", "ts - INTERVAL 90 SECOND", "ts + INTERVAL '45' MINUTE", "d - INTERVAL 1 SECOND",
    "DATE '2020-01-01' + INTERVAL 3 HOUR", "date_add(ts, INTERVAL 2 HOUR)",
])
def test_interval_arithmetic_on_columns(device, sql):
    table = TABLE.filter(pa.compute.not_equal(TABLE.column("rid"), 11))  # 9999-12-31 + 1 month leaves DuckDB's range
    table = table.filter(pa.compute.not_equal(table.column("rid"), 10))  # 0001-01-01 - 1 month: before year 1
    check_sql(device, sql, table)


def test_make_date(device):
    table = TABLE.filter(pa.compute.less(TABLE.column("rid"), 20))
    valid = pa.compute.fill_null(pa.compute.not_equal(table.column("rid"), 1), True)  # 1999-02-28 fine
    table = table.filter(valid)
    check_sql(device, "make_date(y, m, dd)", table.filter(pa.compute.not_equal(table.column("rid"), 3)))
    bad = small_table(y=pa.array([2021, None], pa.int64()), m=pa.array([2, 1], pa.int64()),
                      dd=pa.array([29, 1], pa.int64()))
    with pytest.raises(duckdb.Error):
        with duckdb.connect() as connection:
            connection.register("t", bad)
            connection.sql("SELECT make_date(y, m, dd) FROM t").fetchall()
    with pytest.raises(ExecutionError, match="Date out of range"):
        evaluate(parse_expression("make_date(y, m, dd)", schema_of(bad), "Project[0]"), batch_of(bad, device))


@pytest.mark.parametrize("text", ["2002-3-01", "2002-3-1", " 2002-03-01 ", "2002/3/1", "2002 3 1", "02-3-1",
                                  "2002-01-01 00:00:00", "2002-01-01T00:00:00"])
def test_date_text_without_zero_padding(device, text):
    check_sql(device, f"CAST('{text}' AS DATE)")
    check_sql(device, f"d < '{text}'")


@pytest.mark.parametrize("text", ["2002.3.1", "2002-3/1", "2002-003-01", "2002-02-30", "+2002-01-01", "2002-01-01x"])
def test_dates_duckdb_refuses_are_refused(text):
    with pytest.raises(duckdb.Error):
        duckdb.connect().sql(f"SELECT CAST('{text}' AS DATE)").fetchall()
    with pytest.raises(PlanError, match="invalid date literal"):
        parse_expression(f"CAST('{text}' AS DATE)", schema_of(TABLE), "Project[0]")


def test_year_month_day_stay_extract_nodes():
    """date_part of year/month/day is the Extract node, which fused kernels evaluate."""
    expr = parse_expression("date_part('month', d)", schema_of(TABLE), "Project[0]")
    assert isinstance(expr, Extract) and expr.field == "month"


@pytest.mark.parametrize("sql, message", [
    ("date_part('nanosecond', d)", "does not support the part 'nanosecond'"),
    ("date_trunc('fortnight', d)", "does not support the part 'fortnight'"),
    ("date_part(s, d)", "must be a constant"),
    ("date_diff('day', d, 3)", "needs a date or timestamp as argument 3"),
    ("make_date(y, m, 1.5)", "needs integers"),
    ("strptime(s, '%Y %z')", "strptime() does not support a time zone (TIMESTAMP WITH TIME ZONE) %z"),
    ("d * INTERVAL 1 MILLISECOND", "cannot apply '*' to date32[day] and month_day_nano_interval"),
])
def test_refusals_name_the_function(sql, message):
    table = TABLE.append_column("s", pa.array(["day"] * ROWS))
    with pytest.raises(PlanError) as raised:
        parse_expression(sql, schema_of(table), "Project[2]")
    assert "Project[2]" in str(raised.value) and message in str(raised.value)


def _duckdb(sql: str, table: pa.Table) -> pa.Table:
    with duckdb.connect() as connection:
        connection.register("t", table)
        return connection.sql(sql).to_arrow_table()


def test_plan_builder_and_session(device_name):
    table = TABLE.drop_columns(["rid"]).slice(0, 10)
    projections = ["date_trunc('month', d) AS m", "date_diff('day', d, d2) AS n", "extract(isodow FROM d) AS w",
                   "d + INTERVAL 1 MONTH AS next"]
    plan = PlanBuilder().values(table).filter("d >= '1900-3-1'").project(projections).plan()
    session = Session(device=device_name)
    expected = _duckdb(f"SELECT {', '.join(projections)} FROM t WHERE d >= '1900-3-1'", table)
    assert_same_rows(session.execute(plan), expected)
    session.register("t", table)
    query = ("SELECT date_part('quarter', d) AS q, count(*) AS c, max(date_diff('month', d2, d)) AS x "
             "FROM t WHERE d BETWEEN CAST('1969-1-01' AS DATE) AND CAST('2021-1-4' AS DATE) + INTERVAL 30 DAY "
             "GROUP BY date_part('quarter', d) ORDER BY q")
    assert_same_rows(session.sql(query), _duckdb(query, table), ordered=True)


@pytest.mark.parametrize("sql", ["d + 5", "5 + d", "d - 40000", "d + m", "d - dd", "d + CAST(m AS SMALLINT)",
                                 "d - d2", "d2 - DATE '2000-01-01'", "(d - d2) // 7"])
def test_date_integer_arithmetic(device, sql):
    rid = TABLE.column("rid")
    inside = pa.compute.and_(pa.compute.not_equal(rid, 10), pa.compute.not_equal(rid, 11))
    check_sql(device, sql, TABLE.filter(inside))  # without 0001-01-01 and 9999-12-31: Python's dates end there


@pytest.mark.parametrize("sql, message", [
    ("d + y", "a date and int64 do not add"),
    ("d * 2", "cannot apply '*' to date32[day] and int32"),
    ("5 - d", "cannot apply '-' to int32 and date32[day]"),
    ("d + d2", "cannot apply '+' to date32[day] and date32[day]"),
])
def test_date_arithmetic_duckdb_refuses_is_refused(sql, message):
    with pytest.raises(duckdb.Error):
        duckdb_type(sql, TABLE)
    with pytest.raises(PlanError, match=re.escape(message)):
        parse_expression(sql, schema_of(TABLE), "Project[0]")


@pytest.mark.parametrize("fmt", ["%Y-%m-%d", "%d/%m/%y", "%-d.%-m.%Y", "%a %A %b %B %w %u", "%j %-j %U %W %V %G",
                                 "%H:%M:%S.%f %p %I %-I %-H %-M %-S", "%c | %x | %X", "%g %n", "100%% %Y", "%z%Z", "plain"])
@pytest.mark.parametrize("column", ["d", "ts"])
def test_strftime(device, fmt, column):
    result = check_sql(device, f"strftime({column}, '{fmt}')")
    assert result.is_dictionary  # each distinct instant formatted once


@pytest.mark.parametrize("fmt, specifier", [("%e", "%e"), ("%Q-%m", "%Q"), ("%-a", "%-a"), ("50%", "%")])
def test_strftime_refuses_what_duckdb_refuses(fmt, specifier):
    with pytest.raises(duckdb.Error):
        duckdb.connect().sql(f"SELECT strftime(DATE '2020-01-01', '{fmt}')").fetchall()
    with pytest.raises(PlanError, match=re.escape(f"does not support the format specifier {specifier}")):
        parse_expression(f"strftime(d, '{fmt}')", schema_of(TABLE), "Project[0]")


def test_date_text_without_zero_padding_is_estimated_as_its_date():
    """The planner's range estimate reads CAST('2002-3-01' AS DATE) as the date, as the translator does."""
    import sqlglot

    from gpu_engine.sql.statistics import ColumnStatistics, selectivity

    stats = ColumnStatistics(100.0, datetime.date(2002, 1, 1), datetime.date(2002, 12, 31))
    padded, unpadded = (selectivity(sqlglot.parse_one(f"d < CAST('{text}' AS DATE)", dialect="duckdb"),
                                    lambda column: stats) for text in ("2002-03-01", "2002-3-1"))
    assert padded == unpadded and 0.1 < padded < 0.2
