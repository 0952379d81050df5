"""A number or boolean compared with a string constant: DuckDB casts the constant to the other side's type.

``k = '1'``, ``d > '0.5'``, ``k IN ('1', '2')`` were refused ("cannot compare int32 with string", "IN list value
'1' does not match int32"; the compose fuzz's text comparisons); DuckDB casts the text constant as the column's
type, and fails when the text is no such value (``k = 'abc'``), as the engine now does when the query runs. A
text column compared for equality with a number is cast too (tests/sql/test_text_column_equalities.py). Checked against DuckDB on cpu and cuda-sim.
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

T = pa.table({
    "id": pa.array(range(6), pa.int64()),
    "k": pa.array([1, None, 2, 3, 1, -2], pa.int32()),
    "d": pa.array([decimal.Decimal(v) if v else None for v in ("1.25", "-2.50", None, "0.00", "9.99", "3.10")],
                  pa.decimal128(9, 2)),
    "f": pa.array([0.5, None, 1.0, -2.25, 1e10, 0.0], pa.float64()),
    "b": pa.array([True, None, False, True, False, None]),
    "s": pa.array(["1", None, "2", "", "x", "é"]),
})
TABLES = {"t": T, "e": T.slice(0, 0)}

QUERIES = [
    "SELECT id FROM t WHERE k = '1'",
    "SELECT id FROM t WHERE k >= ' 2'",
    "SELECT id FROM t WHERE '2' < k",
    "SELECT id FROM t WHERE k = '1.5'",
    "SELECT id FROM t WHERE id = '3'",
    "SELECT id FROM t WHERE d = '1.25'",
    "SELECT id FROM t WHERE d <> '2.255'",
    "SELECT id FROM t WHERE f > '0.75'",
    "SELECT id FROM t WHERE b = 'true'",
    "SELECT id FROM t WHERE b <> 'f'",
    "SELECT id FROM t WHERE k IN ('1', '2')",
    "SELECT id FROM t WHERE k NOT IN ('1', 3)",
    "SELECT id FROM t WHERE k BETWEEN '1' AND '2'",
    "SELECT id, CASE WHEN k = '1' THEN 'one' END AS c, d >= '0' AS p FROM t",
    "SELECT count(*) AS n FROM e WHERE k = '1'",
]


def test_text_constants_compare_as_the_other_type_on_cpu(reference):
    session = session_with_tables(TABLES, split_rows=4, device="cpu", drivers=2, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_text_constants_compare_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, split_rows=4, device=device_name, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES[:1] + QUERIES[10:11])


@pytest.mark.parametrize("sql", ["SELECT id FROM t WHERE k = 'abc'", "SELECT id FROM t WHERE k = '3000000000'"])
def test_text_that_is_no_such_value_fails_as_in_duckdb(sql, reference):
    with pytest.raises(Exception, match="(?i)conver"):
        reference.execute(sql).fetchall()
    with pytest.raises(Exception, match="Could not convert|out of range"):  # as rows reach it, as DuckDB
        session_with_tables(TABLES, device="cpu", fuse=False).sql(sql)


def test_a_text_column_equal_to_a_number_is_cast_and_fails_on_text_that_is_none(reference):
    """DuckDB casts the text column (tests/sql/test_text_column_equalities.py); '' and 'x' are no numbers."""
    with pytest.raises(Exception, match="(?i)could not convert"):
        reference.execute("SELECT id FROM t WHERE s = 1").fetchall()
    with pytest.raises(Exception, match="(?i)could not convert"):
        session_with_tables(TABLES, device="cpu", fuse=False).sql("SELECT id FROM t WHERE s = 1")
