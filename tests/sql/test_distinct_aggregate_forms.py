"""DISTINCT aggregates beyond one argument (issue 30): counts of tuples and DISTINCT mixed into grouping sets.

Checked against DuckDB on cpu and cuda-sim: ``count(DISTINCT (a, b))`` / ``row(a, b)`` (distinct tuples, an
all-NULL tuple counted as one), ``count((a, b))`` (rows), with FILTER, HAVING, GROUP BY, over the empty table;
DISTINCT and plain aggregates (and DISTINCT over different arguments) under ROLLUP, CUBE and GROUPING SETS,
whose grand total keeps its row over no input. ``count(DISTINCT a, b)`` is DuckDB's error, refused by name.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.sql.errors import SqlError

TABLES = {"t": pa.table({
    "k": pa.array([1, 1, 1, 2, 2, None, None, None], pa.int32()),
    "x": pa.array([1, 1, 2, 3, 3, 4, None, None], pa.int64()),
    "y": pa.array([10, 10, None, 5, 7, 1, None, None], pa.int64()),
    "f": pa.array([1.5, 1.5, 2.0, None, 0.5, 3.0, None, -1.0], pa.float64()),
})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT count(DISTINCT (x, y)), count(DISTINCT row(x, k)), count((x, y)), sum(x) FROM t",
    "SELECT k, count(DISTINCT (x, y)) AS a, count(DISTINCT (y, x)) FILTER (WHERE f > 0) AS b, count((x, y)) AS c "
    "FROM t GROUP BY k HAVING count(DISTINCT (x, y)) > 0",
    "SELECT k, count(DISTINCT x), sum(y) FROM t GROUP BY ROLLUP (k)",
    "SELECT k, x, grouping(k, x) AS g, count(DISTINCT y), count(DISTINCT f), avg(f) FROM t GROUP BY CUBE (k, x)",
    "SELECT k, count(DISTINCT (x, y)) AS a, max(f) AS b FROM t GROUP BY GROUPING SETS ((k), ())",
    "SELECT k, count(DISTINCT x), sum(y), count(*) FROM e GROUP BY ROLLUP (k)",
    "SELECT count(DISTINCT (x, y)) AS a, count(DISTINCT (x + 1, f)) AS b FROM e",
]


def test_distinct_aggregate_forms_match_duckdb(device_name, reference):
    queries = QUERIES if device_name == "cpu" else QUERIES[2:3]
    session = session_with_tables(TABLES, split_rows=3, device=device_name, drivers=2, batch_rows=3,
                                  fuse=False)  # no generated kernels to compile (CI time): SQL, not fusion
    assert_queries_match_duckdb(session, reference, queries)


@pytest.mark.parametrize("sql, message", [
    ("SELECT count(DISTINCT x, y) FROM t", "count(DISTINCT a, b) (count takes one argument"),
    ("SELECT min((x, y)) FROM t", "min of a tuple"),
])
def test_tuple_aggregates_the_engine_does_not_plan_are_refused(sql, message):
    with pytest.raises(SqlError) as raised:
        session_with_tables(TABLES, device="cpu").sql(sql)
    assert message in str(raised.value) and raised.value.line == 1
