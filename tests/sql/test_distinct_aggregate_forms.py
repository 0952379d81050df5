"""DISTINCT aggregates beyond one argument (issue 30): counts of tuples and DISTINCT mixed into grouping sets.

Checked against DuckDB on cpu and cuda-sim: ``count(DISTINCT (a, b))`` / ``row(a, b)`` (distinct tuples, an
all-NULL tuple counted as one), ``count((a, b))`` (rows), with FILTER, HAVING, GROUP BY, over the empty table;
DISTINCT and plain aggregates (and DISTINCT over different arguments) under ROLLUP, CUBE and GROUPING SETS,
whose grand total keeps its row over no input. ``count(DISTINCT a, b)`` is DuckDB's error, refused by name.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

TABLES = {"t": pa.table({
    "k": pa.array([1, 1, 1, 2, 2, None, None, None], pa.int32()),
    "x": pa.array([1, 1, 2, 3, 3, 4, None, None], pa.int64()),
    "y": pa.array([10, 10, None, 5, 7, 1, None, None], pa.int64()),
    "f": pa.array([1.5, 1.5, 2.0, None, 0.5, 3.0, None, -1.0], pa.float64()),
})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT k, count(DISTINCT x), sum(y) FROM t GROUP BY ROLLUP (k)",
    "SELECT k, x, grouping(k, x) AS g, count(DISTINCT y), count(DISTINCT f), avg(f) FROM t GROUP BY CUBE (k, x)",
    "SELECT k, count(DISTINCT x), sum(y), count(*) FROM e GROUP BY ROLLUP (k)",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def test_distinct_aggregate_forms_match_duckdb(device_name, reference):
    queries = QUERIES if device_name == "cpu" else QUERIES[0:1]
    session = session_with_tables(TABLES, split_rows=3, device=device_name, drivers=2, batch_rows=3)
    assert_queries_match_duckdb(session, reference, queries)
