"""Scalar subqueries inside a window's inputs (its arguments, FILTER, PARTITION BY, ORDER BY), against DuckDB.

``sum((SELECT max(d) FROM u)) OVER (ORDER BY a)`` was refused as "a subquery in this position": the subquery-value
rewrites leave an uncorrelated scalar subquery outside WHERE in place (a one-row build), and the window planner
renamed its inputs as plain SQL trees. Such an input is now typed as a SELECT-list expression is
(``gpu_engine/sql/windows.py`` ``plan_windows`` through ``typed_scalar_subqueries``): a ``ScalarSubquery`` in the
Project computing the window's inputs, which the optimizer's decorrelation rule joins in (an EnforceSingleRow
build). Correlated ones in a window were planned before (joined per key) and are checked beside them. Checked
on cpu unfused over two drivers and small batches; one query fused on cpu and on the simulator.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import ExecutionError

TABLES = {
    "t": pa.table({
        "id": pa.array(range(7), pa.int64()),
        "a": pa.array([3, None, 1, 2, 2, None, 5], pa.int32()),
        "b": pa.array(["x", "y", None, "x", "y", "y", "z"]),
        "d": pa.array([1.5, 2.0, None, -1.0, 4.0, 0.5, 2.5], pa.float64()),
    }),
    # key 2 has two rows: with ``k`` unique, the correlated max per key was a projection (unique_groupings)
    "u": pa.table({"k": pa.array([2, 7, None, 2], pa.int32()), "d": pa.array([0.5, None, 3.0, 1.5], pa.float64())}),
}
TABLES["e"] = TABLES["u"].slice(0, 0)

QUERIES = [
    # An uncorrelated subquery as (part of) a window's argument, FILTER, partition and order key (refused before).
    "SELECT id, sum((SELECT max(d) FROM u)) OVER (ORDER BY id) AS w FROM t",
    "SELECT id, avg(d * (SELECT count(*) FROM u)) OVER (PARTITION BY b ORDER BY id ROWS BETWEEN 1 PRECEDING AND "
    "CURRENT ROW) AS w FROM t",
    "SELECT id, sum(a) FILTER (WHERE a > (SELECT min(k) FROM u)) OVER (PARTITION BY b) AS w FROM t",
    "SELECT id, count(*) OVER (PARTITION BY a > (SELECT avg(k) FROM u)) AS w FROM t",
    "SELECT id, row_number() OVER (ORDER BY abs(a - (SELECT max(k) FROM u)) NULLS LAST, id) AS w FROM t",
    "SELECT id, first_value((SELECT max(k) FROM u)) OVER (ORDER BY id) AS w, "
    "sum((SELECT max(k) FROM u)) OVER () AS v FROM t",
    # No row: NULL; after GROUP BY the window reads the groups.
    "SELECT id, sum((SELECT max(d) FROM e)) OVER (ORDER BY id) AS w FROM t",
    "SELECT b, sum(sum(a) + (SELECT max(k) FROM u)) OVER () AS w FROM t GROUP BY b",
    "SELECT b, rank() OVER (ORDER BY count(*) * (SELECT count(*) FROM u) DESC, b NULLS LAST) AS w FROM t GROUP BY b",
    # A correlated one (joined per key before this change) beside an uncorrelated one.
    "SELECT id, sum((SELECT max(u.d) FROM u WHERE u.k = t.a)) OVER (ORDER BY id) AS w, "
    "max((SELECT min(d) FROM u)) OVER (PARTITION BY b) AS v FROM t",
]


def test_window_argument_subqueries_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_a_window_argument_subquery_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, split_rows=3, device=device_name)
    assert_queries_match_duckdb(session, reference, QUERIES[:1])


def test_a_window_argument_subquery_of_several_rows_fails_as_in_duckdb(reference):
    sql = "SELECT id, sum((SELECT d FROM u)) OVER () AS w FROM t"
    with pytest.raises(Exception, match="More than one row returned by a subquery used as an expression"):
        reference.execute(sql).fetchall()
    with pytest.raises(ExecutionError, match="more than one row"):
        session_with_tables(TABLES, device="cpu", fuse=False).sql(sql)
