"""INTERVAL values (issue 30 items 5 and 6) through Session.sql against DuckDB 2.0.1.

Literals in every form DuckDB reads (``INTERVAL 3 DAY``, ``INTERVAL '1 year 2 months'``, ``INTERVAL (k) DAY``),
the constructors (``to_days(n)`` ...), dates and timestamps plus or minus interval columns (month ends clamped, leap
days), ``timestamp - timestamp`` and ``age`` (one argument: from today), interval arithmetic (fractional factors and
divisors too), ``min``/``max``, comparisons and ordering normalized as DuckDB
normalizes (``1 month = 30 days``), ``date_part``/``EXTRACT`` of an interval, casts to and from VARCHAR, NULLs, and
intervals in and out of Arrow (``month_day_nano_interval``). What stays refused is refused by name.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine import Session

_HOUR = 3_600_000_000_000  # nanoseconds


def _interval(months: int, days: int, micros: int) -> pa.MonthDayNano:
    return pa.MonthDayNano([months, days, micros * 1000])


def _timestamps(texts: list[str | None]) -> pa.Array:
    return pa.array(texts, pa.string()).cast(pa.timestamp("us"))


T = pa.table({
    "k": pa.array([1, -1, 13, None, 0, 2, 12], pa.int32()),
    "o": pa.array([36, -25, 1440, 7, None, 100000, -3], pa.int64()),
    "d": pa.array(["2020-01-31", "2020-02-29", "2019-12-31", None, "2021-03-31", "1999-06-30", "2024-02-29"],
                  pa.string()).cast(pa.date32()),
    "ts": _timestamps(["2020-01-31 10:00:00", "2020-02-29 23:59:59.5", "2019-12-31 00:00:00", None,
                       "2021-03-15 12:30:00", "1999-06-30 08:00:00.000001", "2024-02-29 00:00:00"]),
    "ts2": _timestamps(["2020-03-01 00:00:00", "2019-02-28 12:00:00", "2020-12-31 23:59:59", "2020-01-01 00:00:00",
                        None, "2000-01-31 07:59:59", "2023-02-28 00:00:01"]),
    "iv": pa.array([_interval(1, 0, 0), _interval(0, 30, 0), _interval(0, 0, 36 * 3_600_000_000), None,
                    _interval(-1, 2, -(3 * 3_600_000_000 + 4 * 60_000_000 + 5_500_000)), _interval(14, 3, 0),
                    _interval(0, 1, -1)], pa.month_day_nano_interval()),
    "iv2": pa.array([_interval(0, 1, 0), _interval(0, 30, 0), _interval(0, 1, 12 * 3_600_000_000),
                     _interval(2, 0, 0), None, _interval(0, 0, 0), _interval(-2, -45, 0)],
                    pa.month_day_nano_interval()),
    "s": pa.array(["1 year 2 months", "3 days 04:05:06", "-2 h", None, "1 day ago", "1.5 days", "42"]),
})

QUERIES = [
    # literals, constant and per row
    "SELECT k, INTERVAL 3 DAY AS a, INTERVAL '1 year 2 months 3 days' AS b, INTERVAL '36 hours' AS c, "
    "INTERVAL '-1 month 2 days 03:04:05.5' AS e, INTERVAL '1.5 days' AS f, INTERVAL '2 weeks' AS g, "
    "-INTERVAL 90 MINUTE AS h FROM t",
    "SELECT k, INTERVAL (k) DAY AS a, INTERVAL (o) HOUR AS b, INTERVAL (k) MONTH AS c, INTERVAL (k + 1) YEAR AS e FROM t",
    "SELECT k, to_years(k) AS a, to_months(k) AS b, to_days(o) AS c, to_hours(o) AS e, to_minutes(k) AS f, "
    "to_microseconds(o) AS g, to_weeks(k) AS h, to_milliseconds(o) AS i FROM t",
    # dates and timestamps plus or minus intervals (month ends clamped, leap days)
    "SELECT k, d + INTERVAL (k) DAY AS a, d + INTERVAL (k) MONTH AS b, d - INTERVAL (k) YEAR AS c, "
    "ts + iv AS e, ts - iv AS f, iv + d AS g, d - iv2 AS h, d + k * INTERVAL 1 DAY AS i FROM t",
    "SELECT k, d + INTERVAL '1 month 1 day' AS a, ts - INTERVAL '1 year 2 months 03:00:00' AS b, "
    "ts + INTERVAL 1 MILLISECOND AS c, d + to_months(k) AS e FROM t",
    # the interval between two instants
    "SELECT k, ts - ts2 AS a, ts2 - ts AS b, age(ts, ts2) AS c, age(ts2, ts) AS e, age(d, ts2) AS f, "
    "ts - d AS g FROM t",
    # interval arithmetic
    "SELECT k, iv + iv2 AS a, iv - iv2 AS b, iv * k AS c, o * iv2 AS e, -iv AS f, iv + INTERVAL 1 DAY AS g FROM t",
    # fractional factors and divisors (DuckDB's interval_mul: fractions cascade into days and microseconds),
    # age from today's midnight, min and max by the 30-day-month order
    "SELECT k, iv * 1.5 AS a, iv2 / 4 AS b, iv * (o / 7) AS c, 1.5 * iv2 AS e, iv / (k + 100) AS f, "
    "iv * CAST(o AS DECIMAL(10, 2)) AS g, iv2 * -0.3 AS h, age(ts) AS i, age(d) AS j FROM t",
    "SELECT k % 2 AS p, min(iv) AS a, max(iv) AS b, min(iv2) AS c, max(iv2) FILTER (WHERE k > 0) AS e, count(*) AS n "
    "FROM t GROUP BY k % 2",
    # comparisons, normalized as DuckDB compares them
    "SELECT k, iv = iv2 AS a, iv < iv2 AS b, iv >= iv2 AS c, iv <> iv2 AS e, iv > INTERVAL '1 month' AS f, "
    "iv = '30 days' AS g, INTERVAL '1 month' = INTERVAL '30 days' AS h, INTERVAL '1 day' = INTERVAL '24 hours' AS i, "
    "iv BETWEEN INTERVAL 1 DAY AND INTERVAL 2 MONTH AS j, INTERVAL '1 month -1 day' = INTERVAL '29 days' AS l, "
    "INTERVAL '1 month -1 day' > INTERVAL '29 days' AS m, INTERVAL '1 day -1 hour' < INTERVAL '23 hours' AS n, "
    "iv IN (INTERVAL 1 DAY, INTERVAL '1 month') AS o FROM t",
    "SELECT k FROM t WHERE iv > INTERVAL 1 DAY",
    "SELECT k, CASE WHEN k > 1 THEN iv ELSE iv2 END AS a, coalesce(iv, iv2, INTERVAL 0 DAY) AS b FROM t",
    # parts of an interval
    "SELECT k, date_part('year', iv) AS a, date_part('month', iv) AS b, date_part('day', iv) AS c, "
    "date_part('hour', iv) AS e, date_part('minute', iv) AS f, date_part('second', iv) AS g, "
    "date_part('millisecond', iv) AS h, date_part('microsecond', iv) AS i, date_part('quarter', iv) AS j, "
    "date_part('decade', iv2) AS l, date_part('epoch', iv) AS m, EXTRACT(day FROM iv2) AS n, "
    "EXTRACT(year FROM iv) AS p FROM t",
    # text
    "SELECT k, CAST(iv AS VARCHAR) AS a, CAST(iv2 AS VARCHAR) AS b, CAST(s AS INTERVAL) AS c, "
    "CAST(CAST(s AS INTERVAL) AS VARCHAR) AS e, '1 day'::INTERVAL AS f FROM t",
    # intervals in and out of Arrow, NULLs included; an outer join's missing side
    "SELECT k, iv, iv2 FROM t",
    "SELECT a.k, b.iv, b.ts - a.ts AS gap FROM t a LEFT JOIN t b ON a.k = b.k + 1",
    # min and max over windows: of the values' ranks in DuckDB's order (iv2 holds no two equal intervals)
    "SELECT k, min(iv2) OVER (PARTITION BY k % 2) AS a, max(iv2) OVER (ORDER BY o ROWS BETWEEN 1 PRECEDING AND 1 "
    "FOLLOWING) AS b, min(iv2) OVER (ORDER BY o ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS c "
    "FROM t",
]
SIMULATED = [QUERIES[3], QUERIES[5], QUERIES[8], QUERIES[9], QUERIES[-1]]
#: Intervals with no two equal after normalizing, so an ORDER BY has one answer.
ORDERED = [
    "SELECT k, iv2 FROM t ORDER BY iv2 NULLS FIRST, k",
    "SELECT k, age(ts, ts2) AS a FROM t ORDER BY a DESC NULLS LAST, k",
    "SELECT k, iv2 FROM t ORDER BY iv2 DESC NULLS LAST LIMIT 3",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


def _check(queries, device_name, reference, **options):
    session = session_with_tables({"t": T}, split_rows=4, device=device_name, drivers=2, batch_rows=3)
    assert_queries_match_duckdb(session, reference, queries, exact_types=True, **options)


def test_intervals_match_duckdb_on_cpu(reference):
    _check(QUERIES, "cpu", reference)


@pytest.mark.cpu_case_in("test_intervals_match_duckdb_on_cpu")
def test_intervals_match_duckdb_on_each_device(device_name, reference):
    _check(SIMULATED, device_name, reference)


def test_intervals_order_as_duckdb_orders_them(reference):
    _check(ORDERED, "cpu", reference, ordered=lambda sql: True)


def test_intervals_order_on_each_device(device_name, reference):
    _check(ORDERED[-1:], device_name, reference, ordered=lambda sql: True)


#: Intervals DuckDB equates in different forms (1 month = 30 days, 1 day = 24 hours), exact repeats and NULLs.
G = pa.table({
    "k": pa.array(range(1, 10), pa.int32()),
    "iv": pa.array([_interval(1, 0, 0), _interval(0, 30, 0), _interval(0, 1, 0), _interval(0, 0, 24 * 3_600_000_000),
                    None, _interval(1, 0, 0), _interval(0, 2, 0), _interval(0, 2, 0), None],
                   pa.month_day_nano_interval()),
})
#: Groups by intervals; the key is shown only where a group's rows share one form (DuckDB shows the form of a
#: row it met first, which the engine's drivers need not meet first).
GROUPED = [
    "SELECT count(*) AS n, sum(k) AS s FROM g GROUP BY iv",
    "SELECT iv, count(*) AS n FROM g WHERE k >= 5 GROUP BY iv",
    "SELECT DISTINCT iv FROM g WHERE k >= 5",
    "SELECT count(DISTINCT iv) AS n FROM g",
    "SELECT k, count(*) OVER (PARTITION BY iv) AS n FROM g",
    "SELECT a.k, b.k AS k2 FROM g a JOIN g b ON a.iv = b.iv",
    "SELECT k FROM g WHERE iv IN (SELECT iv FROM g WHERE k > 5)",
    "SELECT count(*) AS n FROM (SELECT iv FROM g UNION SELECT iv FROM g WHERE k < 3)",
    "SELECT max(k) AS m FROM g GROUP BY ROLLUP (iv)",
]


def test_intervals_group_as_duckdb_equates_them(device_name):
    with duckdb_with_tables({"g": G}) as connection:
        session = session_with_tables({"g": G}, split_rows=3, device=device_name, drivers=2, batch_rows=2)
        assert_queries_match_duckdb(session, connection, GROUPED if device_name == "cpu" else GROUPED[:1],
                                    exact_types=True)


def test_a_timestamp_with_time_zone_plus_an_interval_keeps_its_zone():
    zoned = pa.table({"k": pa.array([1, 2, None], pa.int32()),
                      "tz": pa.array([0, 10**12, None], pa.timestamp("us", tz="UTC")),
                      "tz2": pa.array([5 * 10**12, 10**11, 3], pa.timestamp("us", tz="UTC"))})
    with duckdb_with_tables({"z": zoned}) as connection:
        connection.execute("SET TimeZone = 'UTC'")  # the engine's session zone
        session = session_with_tables({"z": zoned}, device="cpu")
        assert_queries_match_duckdb(session, connection, [
            "SELECT k, tz + INTERVAL 1 DAY AS a, tz - INTERVAL '1 month 2 hours' AS b, tz + INTERVAL (k) MONTH AS c, "
            "tz - tz2 AS e, age(tz, tz2) AS f FROM z",
        ], exact_types=True)


def _random_table(rows: int, seed: int) -> pa.Table:
    """Return instants around month ends and leap days, with intervals of every sign mix (fixed seed)."""
    import random

    generator = random.Random(seed)
    day = 86_400_000_000
    ends = [-1, 0, 30, 58, 59, 60, 365, 1155, 11_016, 18_321, 18_322, 18_686, 19_782]  # month ends, Feb 29ths
    instants = [(generator.choice(ends) + generator.randint(-2, 2)) * day + generator.randint(0, day - 1)
                for _ in range(rows)]
    others = [(generator.choice(ends) + generator.randint(-40, 40)) * day + generator.randint(0, day - 1)
              for _ in range(rows)]
    intervals = [_interval(generator.randint(-25, 25), generator.randint(-70, 70),
                           generator.choice([0, generator.randint(-3 * day, 3 * day)])) for _ in range(rows)]
    return pa.table({
        "a": pa.array(instants, pa.timestamp("us")), "b": pa.array(others, pa.timestamp("us")),
        "iv": pa.array(intervals, pa.month_day_nano_interval()),
        "iv2": pa.array(intervals[1:] + intervals[:1], pa.month_day_nano_interval()),
    })


def test_random_instants_and_intervals_match_duckdb():
    table = _random_table(300, seed=30)
    with duckdb_with_tables({"r": table}) as connection:
        session = session_with_tables({"r": table}, device="cpu", split_rows=100)
        assert_queries_match_duckdb(session, connection, [
            "SELECT a, b, age(a, b) AS g, a - b AS d, a + iv AS s, CAST(a AS DATE) - iv AS e, "
            "CAST(iv AS VARCHAR) AS t, iv < iv2 AS lt, iv = iv2 AS eq, iv + iv2 AS p, iv * 3 AS m, "
            "date_part('epoch', iv) AS ep, date_part('minute', iv) AS mi FROM r",
        ], exact_types=True)


#: Interval texts in DuckDB's forms: units and their spellings, fractions spilled into smaller fields, clock
#: times, ``ago``, a bare number of seconds, signs.
TEXTS = pa.table({"s": pa.array([
    "1 year 2 months", "3 days 04:05:06", "-2 h", "1 day ago", "1.5 days", "42", "1.1 years", "1.5 months",
    "0.5 quarter", "1.5 weeks", "-1.5 days", "2 hours 30 minutes 15.25 seconds", "100 ms", "7 us", "1 decade",
    "2 centuries", "@ 3 days", "10:00", "-01:02:03.004", "1 mon 2 mons", "3 WEEKS", "1 millennium -1 day",
    "25:01:00", "0.3 seconds", "-0.25 years", None,
])})


def test_interval_texts_read_and_print_as_duckdb_reads_and_prints_them():
    with duckdb_with_tables({"p": TEXTS}) as connection:
        session = session_with_tables({"p": TEXTS}, device="cpu")
        assert_queries_match_duckdb(session, connection, [
            "SELECT s, CAST(s AS INTERVAL) AS a, CAST(CAST(s AS INTERVAL) AS VARCHAR) AS b FROM p",
        ], exact_types=True)


def test_a_select_without_from_returns_an_interval(reference):
    session = Session(device="cpu")
    assert_queries_match_duckdb(session, reference, [
        "SELECT INTERVAL 3 DAY AS a, INTERVAL '1 year 2 months 3 days' + INTERVAL 5 HOUR AS b",
        "SELECT age(TIMESTAMP '2024-03-31 10:00:00', TIMESTAMP '2023-02-28 12:30:00') AS a, "
        "age(DATE '2020-02-29', DATE '2021-03-01') AS b",
        "SELECT i, n FROM (VALUES (INTERVAL 1 DAY, 1), (INTERVAL '2 months', 2)) v(i, n)",
        # one unit and more text: a clock time, 'ago' (sqlglot alone would keep only '3 days')
        "SELECT INTERVAL '3 days 04:05:06' AS a, INTERVAL '2 weeks ago' AS b, INTERVAL '1.5 hours ago' AS c",
    ], exact_types=True)


@pytest.mark.parametrize("sql, message", [
    ("SELECT CAST(k AS INTERVAL) AS a FROM t", "Unimplemented type for cast (INTEGER -> INTERVAL)"),
    ("SELECT date_part('dow', iv) AS a FROM t", "date_part of an INTERVAL does not support the part 'dayofweek'"),
    ("SELECT to_days(o * 1.5) AS a FROM t", "to_days() needs an integer count"),
    ("SELECT CAST('3 fortnights' AS INTERVAL) AS a FROM t", "Could not convert string '3 fortnights' to INTERVAL"),
    ("SELECT iv - ts AS a FROM t", "cannot apply '-' to month_day_nano_interval and timestamp[us]"),
    ("SELECT INTERVAL '1.5' DAY AS a FROM t", "a fraction with the unit outside the text"),
    ("SELECT iv / (k - k) AS a FROM t", "Division by zero in INTERVAL division"),
    ("SELECT iv * 1e20 AS a FROM t", "Overflow in multiplication of INTERVAL"),
    ("SELECT 2 / iv AS a FROM t", "cannot apply '/' to int32 and month_day_nano_interval"),
])
def test_what_stays_refused_is_refused_by_name(sql, message):
    session = Session(device="cpu")
    session.register("t", T)
    with pytest.raises(Exception) as raised:
        session.sql(sql)
    assert message in str(raised.value)


def test_a_text_no_interval_reads_fails_the_query_naming_it():
    session = Session(device="cpu")
    session.register("t", pa.table({"s": pa.array(["1 day", "soon"])}))
    with pytest.raises(Exception, match="Could not convert string 'soon' to INTERVAL"):
        session.sql("SELECT CAST(s AS INTERVAL) AS a FROM t")


def test_an_interval_literal_survives_the_plan_format():
    from gpu_engine.plans.expressions import Literal
    from gpu_engine.plans.intervals import IntervalValue
    from gpu_engine.plans.serialization import PLAN_CODEC

    literal = Literal(IntervalValue(-1, 2, 3), pa.month_day_nano_interval())
    assert PLAN_CODEC.decode(PLAN_CODEC.encode(literal), Literal) == literal
