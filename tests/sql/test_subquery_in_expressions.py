"""A scalar subquery inside arithmetic on one side of a comparison is planned, as DuckDB runs it.

TPC-DS q6 filters ``i.i_current_price > 1.2 * (SELECT avg(j.i_current_price) FROM item j WHERE
j.i_category = i.i_category)``; only a subquery standing alone on one side was planned ("a subquery
inside OR, NOT or an expression"). Arithmetic and casts are NULL for a NULL operand, so a row whose
correlated group is missing (no join partner) fails the comparison either way: replacing the subquery
by the joined aggregate's column keeps the rows DuckDB keeps.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables

T = pa.table({
    "a": pa.array([1, 2, 3, 4, 5, 6, 7], pa.int32()),
    "b": pa.array([10.0, 20.0, None, 40.0, 5.0, 60.0, 1.0], pa.float64()),
    "s": pa.array(["x", "y", "x", None, "x", "y", "z"]),
    "d": pa.array([1, 2, 3, 4, 5, 6, 7], pa.decimal128(7, 2)),
})
U = pa.table({"k": pa.array(["x", "y"]), "w": pa.array([2, 3], pa.int64())})

QUERIES = {
    "uncorrelated_times": "SELECT a FROM t WHERE b > 1.2 * (SELECT avg(b) FROM t)",
    "uncorrelated_plus_left": "SELECT a FROM t WHERE b + 1 >= (SELECT min(w) FROM u) * 2 - 1",
    "uncorrelated_cast": "SELECT a FROM t WHERE d < CAST((SELECT max(w) FROM u) AS DECIMAL(7, 2)) + 1",
    "correlated_times": "SELECT a FROM t t1 WHERE b > 1.2 * (SELECT avg(b) FROM t t2 WHERE t2.s = t1.s)",
    "correlated_negated_side": "SELECT a FROM t t1 WHERE -(SELECT max(b) FROM t t2 WHERE t2.s = t1.s) + 50 < b",
    "correlated_other_table": "SELECT a, s FROM t WHERE d * 2 <= (SELECT max(w) FROM u WHERE u.k = t.s) + 3",
}


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "u": U}) as connection:
        yield connection


@pytest.mark.parametrize("name", list(QUERIES))
def test_scalar_subquery_inside_arithmetic_matches_duckdb(name, device_name, reference):
    session = session_with_tables({"t": T, "u": U}, device=device_name)
    sql = QUERIES[name]
    assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


def test_a_correlated_subquery_under_a_function_matches_duckdb(reference):
    """coalesce(NULL group, 0) is not NULL: the aggregate is LEFT joined, so rows without a group stay."""
    session = session_with_tables({"t": T, "u": U}, device="cpu")
    sql = "SELECT a FROM t WHERE b > coalesce((SELECT max(w) FROM u WHERE u.k = t.s), 0)"
    assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
