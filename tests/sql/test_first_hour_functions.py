"""The functions a DuckDB user tries in the first hour (issue 30 items 4 and 5) through Session.sql against DuckDB.

One query per family of the issue's lists: strings (``upper``/``lower``, ``||``, ``concat``, the trim family,
``replace``, ``strpos``/``position``, ``left``/``right``, ``lpad``/``rpad``, ``length``, ``ILIKE``,
``regexp_matches``/``regexp_replace``), numbers (``round``/``floor``/``ceil``/``abs``/``sqrt``/``power``/``ln``/
``log``/``exp``/``sign``, ``//``), ``greatest``/``least`` (strings too), ``nullif``, dates (``date_trunc``/
``date_part``/``date_diff``/``date_add``/``make_date``/``strftime``, a column plus or minus an INTERVAL), and the
aggregates (``bool_and``/``bool_or``, ``bit_and``/``bit_or``/``bit_xor``, ``count_if``, ``product``, covariance and
``regr_*``). NULLs in every column; one query per family on the simulator.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables


T = pa.table({
    "k": pa.array([1, 1, 2, None, 2, 1, 3], pa.int32()),
    "o": pa.array([3, -7, 2, 2, None, 12, 5], pa.int64()),
    "v": pa.array([1.5, -2.25, None, 4.0, 0.5, 6.125, 7.0], pa.float64()),
    "s": pa.array(["ab", " Cd ", "a", None, "xyz", "Ab", "b"]),
    "d": pa.array([150, -225, None, 400, 5, 612, 70], pa.decimal128(9, 2)),
    "b": pa.array([True, False, None, True, True, False, True]),
    "dt": pa.array([19000 + 41 * i for i in range(7)], pa.date32()),
})

QUERIES = [
    "SELECT upper(s) AS a, lower(s) AS b, s || 'x' AS c, concat(s, k, 'y') AS e, length(s) AS f FROM t",
    "SELECT trim(s) AS a, ltrim(s) AS b, rtrim(s) AS c, trim(s, 'a') AS e, replace(s, 'a', 'zz') AS f FROM t",
    "SELECT strpos(s, 'b') AS a, position('b' IN s) AS b, left(s, 1) AS c, right(s, 2) AS e, lpad(s, 4, '*') AS f, "
    "rpad(s, 4, '-') AS g FROM t",
    "SELECT s ILIKE 'a%' AS a, s NOT ILIKE '%B' AS b, regexp_matches(s, '^[ab]') AS c, "
    "regexp_replace(s, '[ab]', 'q') AS e FROM t",
    "SELECT round(v) AS a, round(v, 1) AS b, floor(v) AS c, ceil(v) AS e, abs(v) AS f, sign(v) AS g, round(d, 1) AS h, "
    "floor(d) AS i, abs(d) AS j FROM t",
    "SELECT sqrt(abs(v)) AS a, power(v, 2) AS b, ln(abs(v) + 1) AS c, log(abs(v) + 1) AS e, exp(v) AS f, "
    "o // 2 AS g, -o // 3 AS h, v // 2 AS i FROM t",
    "SELECT greatest(k, o) AS a, least(k, o, 2) AS b, nullif(k, 1) AS c, greatest(s, 'b') AS e, "
    "least(s, 'b', upper(s)) AS f, greatest(s, NULL) AS g FROM t",
    "SELECT date_trunc('month', dt) AS a, date_part('year', dt) AS b, date_diff('day', dt, DATE '2023-01-01') AS c, "
    "date_add(dt, INTERVAL 3 DAY) AS e, make_date(2020, 2, 29) AS f, strftime(dt, '%Y/%m/%d') AS g FROM t",
    "SELECT dt + INTERVAL 1 MONTH AS a, dt - INTERVAL 2 DAY AS b, dt + INTERVAL '1' YEAR AS c, dt + 5 AS e FROM t",
    "SELECT k, bool_and(b) AS a, bool_or(b) AS c, count_if(b) AS e, bit_and(o) AS f, bit_or(o) AS g, "
    "bit_xor(o) AS h, product(v) AS i FROM t GROUP BY k",
    "SELECT covar_samp(v, o) AS a, covar_pop(v, o) AS b, regr_slope(v, o) AS c, regr_intercept(v, o) AS e, "
    "regr_r2(v, o) AS f, regr_count(v, o) AS g, corr(v, o) AS h FROM t",
]
SIMULATED = [QUERIES[0], QUERIES[6], QUERIES[9]]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


def _check_all(queries, device_name, reference):
    session = session_with_tables({"t": T}, split_rows=4, device=device_name, drivers=2, batch_rows=3)
    assert_queries_match_duckdb(session, reference, queries)


def test_first_hour_functions_match_duckdb_on_cpu(reference):
    _check_all(QUERIES, "cpu", reference)


@pytest.mark.cpu_case_in("test_first_hour_functions_match_duckdb_on_cpu")
def test_first_hour_functions_match_duckdb_on_each_device(device_name, reference):
    _check_all(SIMULATED, device_name, reference)
