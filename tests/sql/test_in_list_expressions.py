"""An IN list may hold any expression, as in DuckDB: ``d_year IN (1999, 1999 + 1, 1999 + 2)``, ``a IN (b, 3)``.

Eight TPC-DS queries (q23, q29, q34, q46, q68, q73, q74, q79) write their years
as ``1999 + 1``; the translator refused every IN value that was not a literal.
``x IN (v1, v2)`` is ``x = v1 OR x = v2`` in SQL's three-valued logic (a NULL
value or operand gives NULL unless some value matches; NOT IN negates that),
so a list with a non-constant value is planned as that disjunction; an all-literal
list stays one InList.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables

T = pa.table({
    "a": pa.array([1, 2, 3, None, 5, 6], pa.int32()),
    "b": pa.array([1, 20, None, 40, 50, 7], pa.int64()),
    "s": pa.array(["x", "y", "x", None, "z", "w"]),
    "d": pa.array([1.5, 2.5, None, 4.0, 0.5, 6.0], pa.float64()),
})

QUERIES = {
    "constant_arithmetic": "SELECT a FROM t WHERE a IN (1, 1 + 1, 2 * 3)",
    "not_in_constant_arithmetic": "SELECT a FROM t WHERE a NOT IN (1 + 1, 5)",
    "column_value": "SELECT a, b FROM t WHERE a IN (b, 3)",
    "not_in_column_value": "SELECT a, b FROM t WHERE a NOT IN (b, 3)",
    "column_values_only": "SELECT a, b FROM t WHERE b IN (a, a * 10)",
    "null_value": "SELECT a FROM t WHERE a NOT IN (b, NULL)",
    "in_select_list": "SELECT a, a IN (b, 2) AS hit, a NOT IN (b + 0, 5) AS miss FROM t",
    "strings": "SELECT s FROM t WHERE s IN ('x', 'w' || '') ",
    "mixed_types": "SELECT a, d FROM t WHERE d IN (a, 2.5, a + 0.5)",
    "in_having": "SELECT s, count(*) AS n FROM t GROUP BY s HAVING count(*) IN (1, 1 + 1)",
}


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


@pytest.mark.parametrize("name", list(QUERIES))
def test_in_lists_with_expressions_match_duckdb(name, device_name, reference):
    session = session_with_tables({"t": T}, device=device_name)
    sql = QUERIES[name]
    assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


def test_an_all_literal_list_stays_one_in_list():
    session = session_with_tables({"t": T}, device="cpu")
    assert " IN (" in session.explain(session.sql_plan("SELECT a FROM t WHERE a IN (1, 2, 3)"))
