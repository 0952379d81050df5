"""Constant predicates (no column, no subquery) filter as DuckDB does wherever they stand.

A constant FALSE or NULL in WHERE, ON or HAVING, above or below a join, in a
subquery or beside column predicates under AND/OR empties what it filters
(aggregates over the empty input: count 0, sum NULL); TRUE keeps everything;
a constant that raises (a failed cast) raises once rows reach it. Issue 28,
item 4: ``orders JOIN customer ... WHERE 1 = 0`` counted every joined row,
because the constant became a hash join filter, which the probe skipped for
naming no column.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables

T = pa.table({
    "a": pa.array([1, 2, 3, None, 5], pa.int32()),
    "b": pa.array([10, 20, None, 40, 50], pa.int64()),
    "s": pa.array(["x", "y", "x", None, "z"]),
})
U = pa.table({
    "k": pa.array([1, 1, 3, None, 7], pa.int32()),
    "v": pa.array([1.5, 2.5, None, 4.0, 0.5], pa.float64()),
})

JOIN = "FROM t JOIN u ON a = k"
CONSTANT_QUERIES = {
    # WHERE above an inner join (the cases)
    "join_where_1_eq_0": f"SELECT count(*) AS n {JOIN} WHERE 1 = 0",
    "join_where_false": f"SELECT count(*) AS n {JOIN} WHERE false",
    "join_where_strings_differ": f"SELECT count(*) AS n {JOIN} WHERE 'a' = 'b'",
    "join_where_null": f"SELECT count(*) AS n, sum(b) AS s, min(v) AS m, avg(b) AS av {JOIN} WHERE NULL",
    "join_where_not_null": f"SELECT count(*) AS n {JOIN} WHERE NOT NULL",
    "join_where_cast_null": f"SELECT count(*) AS n {JOIN} WHERE CAST(NULL AS BOOLEAN)",
    "join_where_true": f"SELECT count(*) AS n, sum(b) AS s {JOIN} WHERE 1 = 1",
    "join_rows_where_false": f"SELECT a, b, v {JOIN} WHERE false",
    "join_group_where_false": f"SELECT s, count(*) AS n {JOIN} WHERE 2 < 1 GROUP BY s",
    "join_false_and_column": f"SELECT count(*) AS n {JOIN} WHERE b > 5 AND 1 = 0",
    "join_false_or_column": f"SELECT a, v {JOIN} WHERE 1 = 0 OR b > 5",
    "join_null_or_column": f"SELECT a, v {JOIN} WHERE NULL OR v > 1",
    "join_null_and_column": f"SELECT count(*) AS n {JOIN} WHERE NULL AND v > 1",
    "join_true_or_column": f"SELECT a, v {JOIN} WHERE true OR v > 1",
    "cross_join_where_null": "SELECT count(*) AS n FROM t, u WHERE NULL",
    "cross_join_where_true": "SELECT count(*) AS n FROM t, u WHERE true",
    "three_way_where_false": "SELECT count(*) AS n FROM t JOIN u ON a = k JOIN t t2 ON t2.a = u.k WHERE 1 > 2",
    # ON conditions
    "on_and_false": "SELECT count(*) AS n FROM t JOIN u ON a = k AND false",
    "on_and_null": "SELECT count(*) AS n FROM t JOIN u ON a = k AND NULL",
    "on_false_only": "SELECT count(*) AS n FROM t JOIN u ON 1 = 0",
    "left_on_false": "SELECT a, k FROM t LEFT JOIN u ON false",
    "left_on_and_null": "SELECT a, k, v FROM t LEFT JOIN u ON a = k AND NULL",
    "right_on_and_false": "SELECT a, k, v FROM t RIGHT JOIN u ON a = k AND 1 = 0",
    "right_on_false_only": "SELECT a, k FROM t RIGHT JOIN u ON 'a' = 'b'",
    "full_on_and_false": "SELECT a, k FROM t FULL JOIN u ON a = k AND false",
    "full_on_false_only": "SELECT count(*) AS n FROM t FULL JOIN u ON NULL",
    # constants sqlglot does not fold: they stay a filter of the hash join (the probe skipped those naming no column)
    "right_on_and_unfolded": "SELECT a, k, v FROM t RIGHT JOIN u ON a = k AND substring('ab', 1, 1) = 'b'",
    "right_on_and_null": "SELECT a, k FROM t RIGHT JOIN u ON a = k AND NULL",
    "full_on_and_unfolded": "SELECT a, k FROM t FULL JOIN u ON a = k AND CAST('1' AS INTEGER) = 2",
    "join_where_unfolded": f"SELECT count(*) AS n, sum(v) AS s {JOIN} WHERE CAST('2' AS INTEGER) < 1",
    "join_where_unfolded_true": f"SELECT a, v {JOIN} WHERE CAST('1' AS INTEGER) = 1",
    # WHERE above outer joins: the whole result goes, not the NULL-extended side
    "left_join_where_false": "SELECT count(*) AS n, sum(b) AS s FROM t LEFT JOIN u ON a = k WHERE false",
    "right_join_where_null": "SELECT count(*) AS n FROM t RIGHT JOIN u ON a = k WHERE NULL",
    "full_join_where_false": "SELECT a, k FROM t FULL JOIN u ON a = k WHERE 1 = 0",
    "left_join_where_true": "SELECT a, k FROM t LEFT JOIN u ON a = k WHERE 1 = 1",
    # HAVING
    "having_false": "SELECT s, count(*) AS n FROM t GROUP BY s HAVING false",
    "having_null_global": "SELECT count(*) AS n, sum(b) AS s FROM t HAVING NULL",
    "having_true": f"SELECT s, count(*) AS n {JOIN} GROUP BY s HAVING 1 = 1",
    # subqueries
    "exists_false": "SELECT a FROM t WHERE EXISTS (SELECT * FROM u WHERE k = a AND 1 = 0)",
    "not_exists_false": "SELECT a FROM t WHERE NOT EXISTS (SELECT * FROM u WHERE k = a AND false)",
    "in_null": "SELECT a FROM t WHERE a IN (SELECT k FROM u WHERE NULL)",
    "not_in_false": "SELECT a FROM t WHERE a NOT IN (SELECT k FROM u WHERE false)",
    "scalar_false": "SELECT a, (SELECT max(v) FROM u WHERE 1 = 0) AS m FROM t",
    "derived_false": "SELECT count(*) AS n FROM (SELECT a FROM t WHERE false) d JOIN u ON d.a = k",
    "derived_join_false": f"SELECT count(*) AS n FROM (SELECT a, v {JOIN} WHERE NULL) d",
    "cte_join_where_false": "WITH j AS (SELECT a, v FROM t JOIN u ON a = k) "
                            "SELECT count(*) AS n FROM j JOIN t t2 ON j.a = t2.a WHERE 'a' = 'b'",
}


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "u": U}) as connection:
        yield connection


@pytest.mark.parametrize("name", list(CONSTANT_QUERIES))
def test_constant_predicates_match_duckdb(name, device_name, reference):
    session = session_with_tables({"t": T, "u": U}, device=device_name)
    sql = CONSTANT_QUERIES[name]
    assert_same_rows(session.sql(sql), duckdb_table(reference, sql))


@pytest.mark.parametrize("sql", [
    f"SELECT count(*) AS n {JOIN} WHERE CAST('x' AS INTEGER) = 1",
    "SELECT count(*) AS n FROM t, u WHERE CAST('x' AS INTEGER) = 1",
    "SELECT a, k FROM t LEFT JOIN u ON a = k WHERE CAST('x' AS INTEGER) = 1",
    "SELECT a, k FROM t RIGHT JOIN u ON a = k AND CAST('x' AS INTEGER) = 1",
])
def test_a_constant_predicate_that_fails_fails_the_query(sql, device_name, reference):
    from gpu_engine.errors import GpuEngineError

    with pytest.raises(duckdb.ConversionException):
        reference.sql(sql).fetchall()
    session = session_with_tables({"t": T, "u": U}, device=device_name)
    with pytest.raises(GpuEngineError, match="(?i)convert"):
        session.sql(sql)
