"""An unaliased SELECT expression is named as DuckDB names it (TPC-DS q2, q61, q79, q85 came back otherwise).

DuckDB prints every operator in parentheses and quotes keyword function names:
``((CAST(promotions AS DECIMAL(15, 4)) / CAST(total AS DECIMAL(15, 4))) * 100)``,
``"substring"(s_city, 1, 30)``, ``round((a / b), 2)``. Each case here asks
DuckDB for the name of the same text.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables

T = pa.table({
    "a": pa.array([1, 2], pa.int32()),
    "b": pa.array([1.5, 2.5], pa.float64()),
    "s": pa.array(["ab", "cd"]),
    "p": pa.array([1, 2], pa.decimal128(15, 2)),
    "q": pa.array([3, 4], pa.decimal128(15, 2)),
})

EXPRESSIONS = [
    "substring(s, 1, 2)", "substring(upper(s), 1, 2)", "nullif(a, 1)", "trim(s)", "left(s, 1)", "right(s, 2)",
    "round(b, 2)", "round(b / a, 2)", "upper(s)", "a + 1", "-a", "-1", "-(a + 1)", "NOT (a = 1)", "a IS NULL",
    "a IS NOT NULL", "a BETWEEN 1 AND 2", "s || s", "a IN (1, 2)", "NOT a IN (1, 2)", "count(*)", "sum(a * 2)",
    "avg(a) * 2", "1.2 * b", "b / 2", "a % 2", "abs(a)", "(a + 1) * 2", "((a)) + (b)",
    "a = 1 AND b < 2 OR a > 3", "CAST(p AS DECIMAL(15, 4)) / CAST(q AS DECIMAL(15, 4)) * 100",
    "sum(b) / count(*)", "coalesce(a, 1)", "coalesce(a + 1, 2, 3)", "a <> 1", "a != 1", "greatest(a, 1)",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_unaliased_expression_named_as_duckdb(expression, reference):
    session = session_with_tables({"t": T}, device="cpu")
    sql = f"SELECT {expression} FROM t" + (" GROUP BY ALL" if "(" in expression and any(
        f in expression for f in ("count(", "sum(", "avg(")) else "")
    expected = duckdb_table(reference, sql).column_names
    assert session.sql_plan(sql).output_schema.names == expected


def test_a_named_expression_runs(reference):
    """The quoted, parenthesized name is a column name like any other: the query runs and matches."""
    session = session_with_tables({"t": T}, device="cpu")
    sql = "SELECT substring(s, 1, 1), CAST(p AS DECIMAL(15, 4)) / CAST(q AS DECIMAL(15, 4)) * 100, -a FROM t"
    assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
