"""Continuous quantiles and ``regr_avgx`` / ``regr_avgy`` over infinite doubles and sums past 1.8e308, as DuckDB
(fuzz round 9): DuckDB interpolates a quantile as ``lo * (1 - d) + hi * d`` (``-inf`` and 1 at 0.6 is ``-inf``; the
engine's ``lo + (hi - lo) * d`` gave NaN, and ``inf`` for -1e308 and 1e308 where DuckDB says 0), and averages a
regression variable as a double sum over a count (``inf`` where the engine's moments gave NaN or a finite mean)."""

from __future__ import annotations

import pyarrow as pa
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

INF = float("inf")
TABLES = {"t": pa.table({
    "k": [1, 1, 2, 2, 3, 3, 4, 4, 5],
    "x": [-INF, 1.0, 1.0, INF, -1e308, 1e308, 1e308, 1.7e308, None],
    "v": [1, 2, 3, None, 5, 6, 7, 8, 9],
})}

QUERIES = [
    "SELECT k, quantile_cont(x, 0.6) AS a, median(x) AS b, quantile_cont(x, 0.25) AS c FROM t GROUP BY k",
    "SELECT quantile_cont(x, 0.3) AS a, quantile_cont(x, 0.9) AS b FROM t WHERE x < 1e300",
    "SELECT k, median(x) OVER (PARTITION BY k) AS a FROM t",
    "SELECT k, regr_avgx(v, x) AS a, regr_avgy(x, v) AS b, regr_avgy(v, x) AS c FROM t GROUP BY k",
    "SELECT regr_avgx(v, x) AS a, regr_avgy(x, v) FILTER (WHERE v > 4) AS b FROM t",
    "SELECT regr_avgx(v, x) FROM t WHERE k > 2",  # the column keeps its name
]


def test_quantiles_and_regression_averages_over_infinities_match_duckdb(device_name):
    queries = QUERIES if device_name == "cpu" else QUERIES[:1] + QUERIES[3:4]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection, queries)


#: One NaN / infinite value per group among NULLs, read in one-row splits by two drivers: merged partial moments.
ONE_VALUE = {"t": pa.table({"k": [1, 1, 1, 2, 2, 3], "x": [None, float("nan"), None, INF, None, -INF],
                            "y": [1.0, 2.0, None, 1.0, 3.0, 4.0]})}


def test_population_variance_of_one_nan_or_infinite_value_is_zero_when_merged(device_name):
    """DuckDB's var_pop / stddev_pop / regr_sxx / regr_syy of a single value are 0 whatever it is; merging
    partial moments gave NaN (a single NaN's deviation from its own mean, NaN, squared times its count)."""
    query = ("SELECT k, var_pop(x) AS a, stddev_pop(x) AS b, regr_sxx(y, x) AS c, regr_syy(x, y) AS d, "
             "var_samp(x) AS e FROM t GROUP BY k")
    with duckdb_with_tables(ONE_VALUE) as connection:
        assert_queries_match_duckdb(session_with_tables(ONE_VALUE, device=device_name, split_rows=1, drivers=2),
                                    connection, [query])
