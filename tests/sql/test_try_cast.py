"""TRY_CAST (issue 30 item 6) against DuckDB: CAST's value where the value converts, NULL where it does not.

Text to integers, decimals, doubles (``1_000`` separators), dates (a time of day dropped), booleans and
timestamps (malformed text,
out-of-range values, blanks, signs, rounding, ``24:00:00``), timestamps back to text,
numbers to narrower integers and decimals (overflow, NaN, rounding at the edge), 38-digit decimals (checked on the
host), numbers and dates back to text, NULLs and empty inputs, TRY_CAST inside WHERE, aggregates and arithmetic,
and DuckDB's column names (``TRY_CAST(s AS INTEGER)``). Between types with no conversion (numbers <-> DATE,
DATE -> numbers, to TIME or INTERVAL) every row is NULL, as DuckDB answers (fuzz round 7 found them refused). Plus:
a type the engine lacks stays refused at plan time, with its position; CAST itself still raises on the values
TRY_CAST turns into NULL.
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import ExecutionError, PlanError

TABLES = {
    "t": pa.table({
        "s": pa.array(["1", "x", None, "2.5", " -7 ", "", "128", "-129", "1e2", "99.995", "2020-01-02", "inf"]),
        "n": pa.array([1.5, None, 300.0, float("nan"), -99.96, 127.5, -128.5, 2.5e9, 0.0, -0.05, 1e300, 7.0]),
        "k": pa.array([32767, 32768, None, 99, 100, -100, 1 << 40, 0, -1, 5, 6, 7], pa.int64()),
        "m": pa.array([decimal.Decimal(v) if v is not None else None for v in
                       ["12.5", "99.99", None, "-999.99", "0.01", "127.49", "-128.5", "1", "2", "3", "4", "5"]],
                      pa.decimal128(5, 2)),
        "w": pa.array([10**30, -(10**30), None, 7, -7, 2**31, 12, 13, 14, 15, 16, 17], pa.decimal128(38, 0)),
        "d": pa.array(["2020-01-02", "2020-13-01", "2021-2-3", None, "2020-02-30", "x", "0001-01-01",
                       " 1999-12-31 ", "2020-1-1 10:00:00", "", "2020-01-02T23:59:59.5Z", "2000-02-29 24:00:00"]),
        "b": pa.array(["true", "T", "yes", None, "n", "0", "1", "on", " true", "False", "", "2"]),
        "ts": pa.array(["2020-01-02 03:04:05", "2020-01-02T03:04", "2020-1-2 3:4:5.25", None, "2020-01-02",
                        " 2020-01-02 03:04:05.1234567 ", "2020-01-02 24:00:00", "2020-01-02 03:04:60", "epoch",
                        "2020-02-30 00:00:00", "2020/01/02 10:00:00Z", "x"]),
    }),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT s, TRY_CAST(s AS INTEGER) AS i, TRY_CAST(s AS TINYINT) AS ti, TRY_CAST(s AS BIGINT) AS b FROM t",
    "SELECT s, TRY_CAST(s AS DECIMAL(4, 2)) AS d42, TRY_CAST(s AS DECIMAL(18, 3)) AS d183 FROM t",
    "SELECT s, TRY_CAST(s AS DOUBLE) AS f FROM t",
    "SELECT d, TRY_CAST(d AS DATE) AS day FROM t",
    "SELECT n, TRY_CAST(n AS TINYINT) AS ti, TRY_CAST(n AS INTEGER) AS i, TRY_CAST(n AS DECIMAL(3, 1)) AS d31 FROM t",
    "SELECT k, TRY_CAST(k AS SMALLINT) AS si, TRY_CAST(k AS DECIMAL(4, 2)) AS d42, TRY_CAST(k AS UTINYINT) AS u "
    "FROM t",
    "SELECT m, TRY_CAST(m AS TINYINT) AS ti, TRY_CAST(m AS DECIMAL(3, 1)) AS d31, TRY_CAST(m AS DECIMAL(4, 0)) AS d40 "
    "FROM t",
    "SELECT w, TRY_CAST(w AS INTEGER) AS i, TRY_CAST(w AS BIGINT) AS b, TRY_CAST(w AS DECIMAL(20, 2)) AS d FROM t",
    "SELECT TRY_CAST(k AS VARCHAR), TRY_CAST(m AS VARCHAR), TRY_CAST(TRY_CAST(d AS DATE) AS VARCHAR) FROM t",
    "SELECT TRY_CAST(s AS INTEGER) FROM t",
    "SELECT b, TRY_CAST(b AS BOOLEAN) AS v, TRY_CAST(s AS BOOLEAN) AS w FROM t",
    "SELECT ts, TRY_CAST(ts AS TIMESTAMP) AS v, TRY_CAST(TRY_CAST(ts AS TIMESTAMP) AS VARCHAR) AS text FROM t",
    "SELECT CAST(v AS TIMESTAMP) AS t1, CAST(CAST(v AS TIMESTAMP) AS VARCHAR) AS t2, CAST(w AS BOOLEAN) AS b1 "
    "FROM (VALUES ('2020-01-02 03:04:05.5', 'yes'), ('0044-03-15 23:59:59.000001', 'F'), (NULL, NULL)) x(v, w)",
    "SELECT s, TRY_CAST(s AS DOUBLE) AS f FROM (VALUES ('1_000'), ('1_000.5_5'), ('1__0'), ('_1'), ('1_')) x(s)",
    "SELECT s, TRY_CAST(s AS DECIMAL(38, 0)) AS a FROM (VALUES ('1234567890123456789'), ('-9223372036854775807'), "
    "('123456789012345678901234567890123456789'), (' 7 '), ('.5'), ('5.'), ('x'), ('1e99999'), (NULL), ('2.5')) x(s)",
    "SELECT s, TRY_CAST(s AS DECIMAL(22, 2)) AS b, TRY_CAST(s AS DECIMAL(38, 10)) AS c FROM (VALUES ('-123456.25'), "
    "('0.125'), ('1e8'), ('0.00000000005'), ('1_000.5'), ('x'), ('1e99999'), (NULL)) x(s)",
    "SELECT count(TRY_CAST(s AS INTEGER)) AS ints, sum(TRY_CAST(s AS DOUBLE)) AS total FROM t",
    "SELECT s FROM t WHERE TRY_CAST(s AS INTEGER) IS NULL",
    "SELECT TRY_CAST(s AS INTEGER) + 1 AS next FROM t WHERE TRY_CAST(s AS INTEGER) > 0",
    "SELECT TRY_CAST('12' AS INTEGER) AS x, TRY_CAST('x' AS DATE) AS y, TRY_CAST(NULL AS DOUBLE) AS z",
    "SELECT TRY_CAST(s AS INTEGER) AS i, TRY_CAST(d AS DATE) AS day FROM e",
    "SELECT s, TRY_CAST(s AS INTERVAL) AS v FROM (VALUES ('1 day'), ('x'), ('2 hours 3 minutes'), (NULL), (''), "
    "('3 days 04:05:06'), ('1 fortnight'), ('-1 month ago'), ('99999999999 years')) x(s)",
    "SELECT s, TRY_CAST(s AS INTERVAL) AS v FROM t",
    # Types with no conversion between them: DuckDB binds TRY_CAST and answers NULL for every row.
    "SELECT k, TRY_CAST(k AS DATE) AS a, TRY_CAST(m AS DATE) AS b, TRY_CAST(n AS TIMESTAMP) AS c, "
    "TRY_CAST(TRY_CAST(d AS DATE) AS INTEGER) AS e, TRY_CAST(TRY_CAST(d AS DATE) AS DECIMAL(38, 2)) AS f, "
    "TRY_CAST(TRY_CAST(d AS DATE) AS DOUBLE) AS g, TRY_CAST(k > 0 AS TIME) AS h, TRY_CAST(k AS INTERVAL) AS i FROM t",
    "SELECT count(*) AS n, count(TRY_CAST(k AS DATE)) AS c FROM t WHERE TRY_CAST(TRY_CAST(d AS DATE) AS BIGINT) IS NULL",
    "SELECT TRY_CAST(k AS DATE) AS a, TRY_CAST(TRY_CAST(d AS DATE) AS INTEGER) AS b FROM e",
    "SELECT TRY_CAST(3 AS DATE) AS a, TRY_CAST(DATE '2024-02-29' AS INTEGER) AS b, TRY_CAST(NULL::INT AS DATE) AS c",
]

SIMULATED = [QUERIES[0], QUERIES[3], QUERIES[4], QUERIES[9], QUERIES[11], QUERIES[-4]]


def _session(device_name: str, batch_rows: int = 1 << 16):
    return session_with_tables(TABLES, device=device_name, batch_rows=batch_rows)


def _check_all(queries, session, reference):
    assert_queries_match_duckdb(session, reference, queries)


@pytest.mark.parametrize("batch_rows", [1 << 16, 5])
def test_try_cast_matches_duckdb_on_cpu(batch_rows, reference):
    _check_all(QUERIES, _session("cpu", batch_rows), reference)


def test_try_cast_matches_duckdb_on_each_device(device_name, reference):
    _check_all(SIMULATED, _session(device_name), reference)


def test_cast_still_raises_where_try_cast_gives_null():
    session = _session("cpu")
    with pytest.raises(ExecutionError, match="Could not convert string 'x'"):
        session.sql("SELECT CAST(s AS INTEGER) FROM t")
    with pytest.raises(ExecutionError, match="out of range"):
        session.sql("SELECT CAST(k AS SMALLINT) FROM t")
    with pytest.raises(ExecutionError, match="needs more than 64 bits"):  # as every function's wide result
        session.sql("SELECT TRY_CAST('12345678901234567890' AS DECIMAL(38, 0)) AS v")
    with pytest.raises(ExecutionError, match="Could not convert string 'on' to bool"):
        session.sql("SELECT CAST(b AS BOOLEAN) FROM t")
    with pytest.raises(ExecutionError, match="Could not convert string '2020-01-02 03:04:60' to timestamp"):
        session.sql("SELECT CAST(ts AS TIMESTAMP) FROM t")
    with pytest.raises(ExecutionError, match="Could not convert string 'x' to INTERVAL"):
        session.sql("SELECT CAST(s AS INTERVAL) FROM t")


@pytest.mark.parametrize("sql, message", [
    ("SELECT TRY_CAST(d AS BLOB) FROM t", "type BLOB is not supported"),
])
def test_try_cast_refuses_at_plan_time_what_cast_cannot_do(sql, message):
    with pytest.raises(PlanError) as info:
        _session("cpu").sql_plan(sql)
    assert message in str(info.value) and "(line 1, column " in str(info.value), str(info.value)
