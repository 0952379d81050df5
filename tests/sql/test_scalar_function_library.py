"""DuckDB's scalar functions a user reaches for next, through Session.sql against DuckDB on cpu and cuda-sim.

``pi``, ``isnan``/``isinf``/``isfinite``, ``regexp_extract`` (group index, options), ``SIMILAR TO``, ``md5``,
``date_sub`` (whole parts between two dates or timestamps), ``strptime``, ``epoch``/``epoch_ms`` (both ways),
``to_timestamp``, ``printf`` and ``format``. NULLs in every column, NaN and infinities, empty strings, instants
before 1970 with sub-millisecond parts, month ends. Functions that stay refused (``hash``: DuckDB's own
values) and forms outside the subset (``%x``, ``{:d}``) name themselves, their position
and an alternative.
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.sql.errors import SqlError

_MICROS = [-86_400_000_001, 1_612_137_600_123_456, None, 1_582_934_400_000_000, 1_583_020_799_999_999, 0,
           1_609_459_200_000_000]
T = pa.table({
    "i": pa.array([1, -2, None, 40, 0, 7, 1_000], pa.int32()),
    "v": pa.array([1.5, float("nan"), None, float("inf"), float("-inf"), -0.0, 2.0], pa.float64()),
    "d": pa.array([150, -225, None, 400, 5, 612, 70], pa.decimal128(9, 2)),
    "s": pa.array(["a12", "B7x", None, "", "qx", "zz99 y3", "q"]),
    "dt": pa.array([datetime.date(2020, 1, 31), datetime.date(2019, 2, 28), datetime.date(2020, 2, 29), None,
                    datetime.date(1969, 12, 31), datetime.date(2021, 3, 31), datetime.date(2000, 1, 1)], pa.date32()),
    "ts": pa.array(_MICROS, pa.timestamp("us")),
    "txt": pa.array(["05/01/2020 10:11", "31/12/1969 23:59", None, "1/2/2003 4:05", "29/02/2020 00:00",
                     "05/01/2020 10:11", "15/08/1947 12:30"]),
})

QUERIES = [
    "SELECT pi() AS p, isnan(v) AS a, isinf(v) AS b, isfinite(v) AS c, isnan(i) AS e, isfinite(d) AS f, "
    "isinf(CAST(i AS REAL)) AS g FROM t",
    "SELECT regexp_extract(s, '([a-z])([0-9]+)') AS a, regexp_extract(s, '([a-z])([0-9]+)', 2) AS b, "
    "regexp_extract(s, '[a-z]+', 0, 'i') AS c, regexp_extract(s, 'q(x)?', 1) AS e, regexp_extract(s, '^$') AS f, "
    "regexp_extract('k' || s, 'k(.)', 1) AS g, regexp_extract(s, '(a)[(]', 2) AS h, "
    "regexp_extract(s, '(?:[0-9])(?P<n>[0-9])', 1) AS j, regexp_extract(s || 'abcdefghi', "
    "'(a)(b)(c)(d)(e)(f)(g)(h)(i)', 9) AS k FROM t",
    "SELECT s SIMILAR TO '[a-z][0-9]+' AS a, s NOT SIMILAR TO 'q.*' AS b, md5(s) AS c, md5('') AS e FROM t",
    "SELECT date_sub('month', dt, DATE '2021-03-31') AS a, date_sub('year', dt, DATE '2021-02-28') AS b, "
    "date_sub('day', dt, ts) AS c, date_sub('hour', ts, TIMESTAMP '2021-01-01 12:00:00') AS e, "
    "date_sub('quarter', ts, dt) AS f, datesub('week', dt, DATE '2020-01-01') AS g, "
    "date_sub('month', ts, TIMESTAMP '2020-02-29 23:00:00') AS h, date_sub('decade', dt, DATE '1900-05-05') AS j, "
    "date_sub('minute', dt, ts) AS k FROM t",
    "SELECT strptime(txt, '%d/%m/%Y %H:%M') AS a, epoch(ts) AS b, epoch(dt) AS c, epoch_ms(ts) AS e, "
    "epoch_ms(i) AS f, epoch_ms(dt) AS g FROM t",
    "SELECT to_timestamp(i) AS a, to_timestamp(d) AS b FROM t",
    "SELECT i FROM t WHERE s SIMILAR TO '.*[0-9]' AND isfinite(v) AND date_sub('month', dt, DATE '2021-01-01') > 3",
    "SELECT printf('%d|%5s|%-4s|%.2f|%+.3e|%g|%%', i, s, dt, v, d, v) AS a, format('{} and {}', s, i) AS b, "
    "format('{}/{}/{}/{}', v, d, dt, i > 0) AS c, printf('%s', i > 0, v) AS e, printf('%05.1f', i * 1.25) AS f FROM t",
]
SIMULATED = [QUERIES[1], QUERIES[3]]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


def test_scalar_function_library_matches_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T}, device="cpu")
    assert_queries_match_duckdb(session, reference, QUERIES)


@pytest.mark.cpu_case_in("test_scalar_function_library_matches_duckdb_on_cpu")
def test_scalar_function_library_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T}, device=device_name)
    assert_queries_match_duckdb(session, reference, SIMULATED)


def test_strptime_names_the_text_that_does_not_parse():
    from gpu_engine.errors import ExecutionError

    session = session_with_tables({"t": T}, device="cpu")
    with pytest.raises(ExecutionError, match='Could not parse string "05/01/2020 10:11" according to format'):
        session.sql("SELECT strptime(txt, '%d/%m/%Y %H:%M:%S') AS a FROM t")


@pytest.mark.parametrize("sql, message", [
    ("SELECT hash(s) AS a FROM t", "md5(CAST(x AS VARCHAR))"),
    ("SELECT strptime(txt, '%d %z') AS a FROM t", "time zone (TIMESTAMP WITH TIME ZONE) %z"),
    ("SELECT regexp_extract(s, '(a)', i) AS a FROM t", "group (argument 3) must be a constant"),
    ("SELECT isnan(s) AS a FROM t", "isnan() needs a number"),
    ("SELECT printf('%x', i) AS a FROM t", "printf() does not support the specifier '%x'"),
    ("SELECT printf('%s', i) AS a FROM t", "%s does not format a value of type int32"),
    ("SELECT printf('%d %d', i) AS a FROM t", "2 specifier(s) for 1 argument(s)"),
    ("SELECT format('{:d}', i) AS a FROM t", "{} only, not '{:d}'"),
])
def test_refused_scalar_functions_name_the_function_position_and_alternative(sql, message):
    session = session_with_tables({"t": T}, device="cpu")
    with pytest.raises(SqlError) as raised:
        session.sql(sql)
    assert message in str(raised.value) and raised.value.line == 1 and raised.value.column_number is not None
