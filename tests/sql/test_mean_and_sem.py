"""DuckDB's ``mean`` (avg's alias) and ``sem`` (the standard error of the mean), grouped, with FILTER and DISTINCT, and
over windows, against DuckDB 2.0.1.

Both were unknown until stop 54 (``mean(x)`` in a grouped query failed as "column t.x is not available here").
``sem(x)`` is planned as ``stddev_pop(x) / sqrt(count(x))``, DuckDB's definition: 0 for one value, NULL for none.
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

T = pa.table({
    "g": pa.array([1, 1, 2, 2, 3, 4, 1], pa.int32()),
    "x": pa.array([2.0, 4.0, None, 7.5, 1.0, None, -0.25]),
    "i": pa.array([3, None, 5, 6, 1, None, 3], pa.int32()),
})

QUERIES = [
    "SELECT g, mean(x) AS a, mean(i) AS b, sem(x) AS c, sem(i) AS d FROM t GROUP BY g",
    "SELECT mean(x) AS a, sem(DISTINCT i) AS b, sem(i) + 1 AS c, sem(x) FILTER (WHERE g > 1) AS e, "
    "mean(x) FILTER (WHERE g > 1) AS f FROM t",
    "SELECT g, x, mean(x) OVER (PARTITION BY g) AS a, sem(x) OVER (ORDER BY g, x ROWS BETWEEN 1 PRECEDING AND "
    "CURRENT ROW) AS b, sem(i) OVER () AS c FROM t",
    "SELECT mean(x) AS a, sem(x) AS b FROM t WHERE g > 10",
]


def test_mean_and_sem_match_duckdb(device_name):
    with duckdb_with_tables({"t": T}) as connection:
        session = session_with_tables({"t": T}, split_rows=2, device=device_name, compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, QUERIES, exact_types=True)
