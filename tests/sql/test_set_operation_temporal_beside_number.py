"""A DATE, TIMESTAMP, TIME or INTERVAL column beside a number or a boolean in a set operation, as DuckDB.

DuckDB types such a column as the temporal (or interval) type and casts the other branch's rows to it, which
fails only when a row is cast (``CAST(1 AS DATE)`` is not implemented): a branch without rows answers. The
engine refused the query while planning ("no common type"). Checked: the answers and exact types where the
number's branch is empty (by its data, on each side, UNION ALL / UNION / EXCEPT / INTERSECT), and an execution
error where it holds rows.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.errors import ExecutionError

TABLES = {"t": pa.table({
    "d": pa.array([1, 2, None], pa.date32()),
    "i": pa.array([1, 2, 3], pa.int64()),
    "f": pa.array([1.5, None, 2.5], pa.float64()),
    "b": pa.array([True, None, False]),
})}
EMPTY = "i > 100"  # no row: an empty branch by its data (DuckDB prunes a constant-false one while planning)
QUERIES = [
    f"SELECT d AS x FROM t UNION ALL SELECT i FROM t WHERE {EMPTY}",
    f"SELECT i AS x FROM t WHERE {EMPTY} UNION ALL SELECT d FROM t",
    f"SELECT CAST(d AS TIMESTAMP) AS x FROM t UNION SELECT f FROM t WHERE {EMPTY}",
    f"SELECT b AS x FROM t WHERE {EMPTY} UNION ALL SELECT CAST(d AS TIMESTAMPTZ) FROM t",
    f"SELECT TIME '10:11:12' AS x FROM t UNION ALL SELECT 2.5 FROM t WHERE {EMPTY}",
    f"SELECT INTERVAL 2 DAY AS x FROM t UNION SELECT i FROM t WHERE {EMPTY}",
    f"SELECT d AS x, i FROM t UNION ALL SELECT 1, i FROM t WHERE {EMPTY} UNION ALL SELECT DATE '2020-01-01', 7",
]


@pytest.fixture(scope="module")
def reference_tables():
    connection = duckdb_with_tables(TABLES)
    yield connection
    connection.close()


def test_temporal_beside_number_with_an_empty_branch_matches_duckdb_on_cpu(reference_tables):
    # exact types, the zoned ones too: the reference connection's TimeZone is the engine's UTC (not Etc/UTC)
    assert_queries_match_duckdb(session_with_tables(TABLES, device="cpu"), reference_tables, QUERIES,
                                exact_types=True)


def test_temporal_beside_number_matches_duckdb_on_each_device(reference_tables, device_name):
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), reference_tables, QUERIES[:2])


@pytest.mark.parametrize("sql", [
    "SELECT d AS x FROM t UNION ALL SELECT i FROM t",
    "SELECT b AS x FROM t WHERE b INTERSECT SELECT CAST(d AS TIMESTAMP) FROM t",
    f"SELECT d AS x FROM t WHERE {EMPTY} EXCEPT SELECT f FROM t",
])
def test_temporal_beside_number_fails_when_a_row_is_cast(reference_tables, sql):
    with pytest.raises(Exception, match="Unimplemented type for cast"):
        reference_tables.sql(sql).fetchall()
    with pytest.raises(ExecutionError, match="Unimplemented type for cast"):
        session_with_tables(TABLES, device="cpu").sql(sql)


#: A side that can only be empty (constant-false WHERE / HAVING, LIMIT 0) beside the other side's rows that do not
#: cast to the unified type: DuckDB drops the side while planning and answers (empty where the left side or an
#: INTERSECT side is empty; the left, distinct for EXCEPT, where EXCEPT's right side is).
CONSTANT_EMPTY_SIDES = [
    "SELECT d AS x FROM t WHERE false EXCEPT SELECT i FROM t",
    "SELECT d AS x FROM t WHERE 1 = 0 EXCEPT ALL SELECT i FROM t",
    "SELECT i AS x FROM t INTERSECT SELECT d FROM t WHERE false",
    "SELECT d AS x FROM t WHERE false INTERSECT ALL SELECT f FROM t",
    "SELECT i AS x FROM t INTERSECT ALL (SELECT d FROM t LIMIT 0)",
    "SELECT b AS x, count(*) AS n FROM t GROUP BY b HAVING false INTERSECT SELECT d, 1 FROM t",
    "SELECT 1 INTERSECT SELECT DATE '2020-01-01' WHERE 1 > 2",
    "SELECT d AS x FROM t EXCEPT SELECT i FROM t WHERE false",
    "SELECT d AS x FROM t UNION ALL SELECT d FROM t EXCEPT ALL SELECT i FROM t WHERE NULL",
    "SELECT d FROM t WHERE d IN (SELECT d FROM t WHERE false EXCEPT SELECT 2)",
]


def test_a_constant_empty_side_of_except_or_intersect_answers_as_duckdb(reference_tables, device_name):
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference_tables, CONSTANT_EMPTY_SIDES, exact_types=True)


#: A TIME beside a DATE / TIMESTAMP takes the date's type, a DATE / TIME beside an INTERVAL the interval's, as DuckDB
#: (refused while planning: "no common type"); the TIME's rows then fail when cast, so an empty side answers.
TIME_BESIDE = [
    "SELECT d AS x FROM t UNION ALL SELECT TIME '10:11:12' FROM t WHERE false",
    "SELECT TIME '10:11:12' AS x FROM t WHERE false UNION SELECT CAST(d AS TIMESTAMP) FROM t",
    "SELECT INTERVAL 2 DAY AS x FROM t UNION ALL SELECT d FROM t WHERE false",
    "SELECT TIME '10:11:12' AS x FROM t WHERE i > 100 UNION ALL SELECT INTERVAL 3 HOUR FROM t",
]


def test_time_beside_a_date_or_an_interval_answers_as_duckdb(reference_tables, device_name):
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference_tables, TIME_BESIDE, exact_types=True)
    with pytest.raises(ExecutionError, match="Unimplemented type for cast"):
        session.sql("SELECT d AS x FROM t UNION ALL SELECT TIME '10:11:12' FROM t")
