"""DuckDB's bit operations against DuckDB (issue 30 item 5): ``&``, ``|``, ``xor``, ``~``, ``<<``, ``>>``,
``bit_count`` (all refused before as "unsupported operator" / "unknown function").

Evaluated as array code on every device (gpu_engine/expressions/bitwise.py), typed as DuckDB types them (the
operands' common integer type; ``bit_count`` a TINYINT), named as DuckDB names the columns (``(n & 1)``,
``(~(n))``). Covered: NULLs, empty input, narrow, wide and unsigned types, negative values, shifts at and past the
width, grouping and filtering on a bit expression; DuckDB's left-shift errors, and refusals of non-integers.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import ExecutionError, PlanError

TABLES = {"t": pa.table({"n": pa.array([3, None, 0, -6, 9223372036854775807, -9223372036854775808], pa.int64()),
                         "i": pa.array([5, 7, None, -1, 12, 2147483647], pa.int32()),
                         "b": pa.array([1, 2, 3, None, 0, 100], pa.int8()),
                         "u": pa.array([250, 1, 0, 7, None, 128], pa.uint8()),
                         "x": pa.array([1.5, None, 0.0, 2.0, 3.0, 4.0])})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT n & 1, n | 8, xor(n, 5), ~n, bit_count(n) FROM t",
    "SELECT i & n AS a, i | b AS o, xor(b, i) AS x, ~i AS ni, ~b AS nb, bit_count(i) AS ci, bit_count(b) AS cb FROM t",
    "SELECT u & 3 AS a, ~u AS nu, bit_count(u) AS c, u | b AS o FROM t",
    "SELECT i >> 1 AS a, n >> 63 AS b, i >> 31 AS c, i >> 32 AS d, n >> -1 AS e, b >> 7 AS f FROM t",
    "SELECT i << 0 AS a, b << 0 AS b FROM t WHERE i >= 0",
    "SELECT n << 2 AS a, i << 1 AS b FROM t WHERE n >= 0 AND n < 1000 AND i >= 0 AND i < 1000",
    "SELECT 1::INT << 30 AS a, 1::BIGINT << 62 AS b, 64::TINYINT << 0 AS c, 5::TINYINT | 3 AS d",
    "SELECT n & NULL AS a, NULL << 1 AS b, bit_count(NULL) AS c FROM t",
    "SELECT n & 6 AS k, count(*) AS c FROM t GROUP BY n & 6",
    "SELECT i FROM t WHERE i & 1 = 1",
    "SELECT e.n & 1 AS a, bit_count(e.i) AS c FROM e",
]


def test_bit_operations_match_duckdb_on_cpu(reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device="cpu"), reference, QUERIES, exact_types=True)


@pytest.mark.cpu_case_in("test_bit_operations_match_duckdb_on_cpu")
def test_bit_operations_match_duckdb_on_each_device(device_name, reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), reference, QUERIES[1:2],
                                exact_types=True)


@pytest.mark.parametrize("sql, message", [
    ("SELECT 1::INT << 31 AS a", "Overflow in left shift"),
    ("SELECT i << 1 AS a FROM t WHERE i > 0", "Overflow in left shift"),
    ("SELECT -1::INT << 1 AS a", "Cannot left-shift negative number"),
    ("SELECT 1 << -1 AS a", "Cannot left-shift by negative number"),
    ("SELECT 1 << 32 AS a", "Left-shift value"),
])
def test_left_shifts_out_of_range_raise_as_duckdb_does(sql, message, reference):
    with pytest.raises(Exception, match=message):
        reference.sql(sql).fetchall()
    with pytest.raises(ExecutionError, match=message):
        session_with_tables(TABLES, device="cpu").sql(sql)


@pytest.mark.parametrize("sql, message, column", [
    ("SELECT x & 1 AS a FROM t", "'&' needs integers, got double as operand 1", 8),
    ("SELECT bit_count(x) FROM t", "bit_count() needs integers, got double", 8),
    ("SELECT ~x FROM t", "'~' needs integers, got double", 9),
])
def test_bit_operations_on_other_types_are_refused_with_their_position(sql, message, column):
    with pytest.raises(PlanError) as info:
        session_with_tables(TABLES, device="cpu").sql(sql)
    assert message in str(info.value) and f"column {column})" in str(info.value), str(info.value)


def test_sparks_bit_operators_are_the_same_operations(reference):
    """Spark's ``&``, ``|``, ``^`` (xor) and ``~`` are DuckDB's; its shifts (Java's, the count taken modulo the
    width) are refused rather than given DuckDB's meaning."""
    from duckdb_reference import rows_mismatch

    session = session_with_tables(TABLES, device="cpu")
    actual = session.sql("SELECT n & 1 AS a, i | b AS o, n ^ 3 AS x, ~i AS ni FROM t", dialect="spark")
    expected = reference.sql("SELECT n & 1 AS a, i | b AS o, xor(n, 3) AS x, ~i AS ni FROM t").to_arrow_table()
    problem = rows_mismatch(actual, expected)
    assert problem is None, problem
    actual = session.sql("SELECT bit_count(n) AS c, bit_count(i) AS ci FROM t", dialect="spark")  # Spark: INT
    expected = reference.sql("SELECT bit_count(n)::INT AS c, bit_count(i)::INT AS ci FROM t").to_arrow_table()
    problem = rows_mismatch(actual, expected)
    assert problem is None and actual.schema.field("c").type == pa.int32(), problem
    for sql in ("SELECT shiftleft(n, 1) AS r FROM t", "SELECT shiftright(n, 70) AS r FROM t"):
        with pytest.raises(PlanError, match="shiftleft / shiftright"):
            session.sql(sql, dialect="spark")
