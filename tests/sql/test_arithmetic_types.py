"""Arithmetic over literals and columns gives DuckDB 2.0.1's values AND types, or fails where DuckDB fails.

Issue 28, item 7: ``1.0 / 4.0`` came back a DECIMAL (sqlglot folded it with
Python numbers; DuckDB: DOUBLE), ``SELECT a, 2.0/3.0 FROM t`` failed inside the
generated kernel, ``int32_col * 2147483647`` widened silently to BIGINT (DuckDB:
an INT32 overflow error) and ``a % 0`` was NULL (DuckDB raises). Every
expression runs through ``Session.sql`` in a projection beside a column, fused
and unfused on ``cpu`` and fused on the second device, and is compared with
DuckDB: result type exactly, values as :func:`assert_same_rows` does.
"""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables

T = pa.table({
    "i8": pa.array([1, -3, None, 5], pa.int8()),
    "i16": pa.array([300, -7, 12, None], pa.int16()),
    "i32": pa.array([7, -7, None, 2_000_000], pa.int32()),
    "i64": pa.array([10**12, -5, 3, None], pa.int64()),
    "u8": pa.array([200, 3, None, 0], pa.uint8()),
    "d": pa.array([Decimal("12.50"), Decimal("-3.25"), None, Decimal("0.01")], pa.decimal128(10, 2)),
    "d4": pa.array([Decimal("2.5"), None, Decimal("-0.3"), Decimal("99.9")], pa.decimal128(4, 1)),
    "f": pa.array([1.5, -0.0, None, 3.0], pa.float64()),
})

VALUES = [
    # '/' is a DOUBLE division for every numeric type, constants included; x / 0 is +-inf
    "1.0 / 4.0", "2.0 / 3.0", "1 / 4", "7 / 2", "i32 / 2", "i32 / 0", "d / 0", "d / d4", "i16 / i8", "1.5 / i32",
    # % keeps the dividend's sign
    "7 % 3", "-7 % 3", "i32 % -3", "-i32 % 4", "d % 0.3", "d4 % 2", "i64 % i8", "f % 0", "3 % 2.0",
    "CAST(i64 AS DECIMAL(38, 0)) % d",  # past 38 digits a remainder is a DOUBLE
    # integers keep the wider type; a literal takes the column's type when it fits
    "i8 + i8", "i8 + 100", "i8 + 1000", "i8 * -10", "i16 * 100", "i16 * 100000", "i16 + i8", "i32 * i64",
    "i32 + 3000000000", "i32 - 2147483000", "u8 + 5", "u8 + i8", "u8 * i32", "1 + 1", "2147483647 + 0", "-i8",
    # decimals: DuckDB's precision and scale rules, products of narrow decimals capped at 18 digits
    "d * d", "d * d4", "d * 1.5", "d + 1", "d - 1.25", "d4 * 10", "i32 * 1.5", "i8 + 1.5", "1 + 2.5", "1.5 * 2.25",
    "0.1 + 0.2", "i64 * d", "d + d4", "i16 * d4",
    # floats
    "f * d", "f + i32", "1e2 / 3", "i32 * 1e0",
]

ERRORS = [
    # overflow of + - * at every width, signed and unsigned
    "i32 * 2147483647", "2147483647 + 1", "2147483647 * 2", "i8 * 100", "i8 + 127", "i8 - 127 - i8",
    "i16 * i16 * i16", "i16 * 300", "i16 - 32767 - i16", "u8 + 100", "u8 - 5", "i64 + 9223372036854775000",
    "i64 * 9223372036854775807", "-2147483647 - i32", "i32 % 0", "i64 % (i8 - i8)", "d % 0", "d4 % 0.0",
    "i8 * -100", "u8 * i16", "CAST(99999999.99 AS DECIMAL(10, 2)) * (d + 99999900)",
]

FUSION = [pytest.param(True, id="fused"), pytest.param(False, id="unfused")]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


def _session(device_name: str, fuse: bool):
    session = session_with_tables({"t": T}, device=device_name, fuse=fuse)
    return session


def _skip_unfused_off_cpu(device_name: str, fuse: bool) -> None:
    if not fuse and device_name != "cpu":
        pytest.skip("unfused runs on cpu only (the operator suite's UNFUSED_CASE)")


@pytest.mark.parametrize("fuse", FUSION)
@pytest.mark.parametrize("expression", VALUES)
def test_arithmetic_matches_duckdb_values_and_types(expression, fuse, device_name, reference):
    _skip_unfused_off_cpu(device_name, fuse)
    sql = f"SELECT i32 AS k, {expression} AS x FROM t"
    expected = duckdb_table(reference, sql)
    result = _session(device_name, fuse).sql(sql)
    assert result.schema.field("x").type == expected.schema.field("x").type, expression
    assert_same_rows(result, expected)


@pytest.mark.parametrize("fuse", FUSION)
@pytest.mark.parametrize("expression", ERRORS)
def test_arithmetic_fails_where_duckdb_fails(expression, fuse, device_name, reference):
    from gpu_engine.errors import GpuEngineError

    _skip_unfused_off_cpu(device_name, fuse)
    sql = f"SELECT i32 AS k, {expression} AS x FROM t"
    with pytest.raises((duckdb.OutOfRangeException, duckdb.InvalidInputException)):
        reference.sql(sql).fetchall()
    with pytest.raises(GpuEngineError, match="(?i)overflow|out of range|division by zero"):
        _session(device_name, fuse).sql(sql)


def test_the_spark_dialect_keeps_a_constant_decimal_quotient_a_decimal():
    """``dialect="spark"`` keeps sqlglot's folding of constants: Spark types 1.0 / 4.0 a DECIMAL (README)."""
    session = _session("cpu", True)
    assert session.sql("SELECT 1.0 / 4.0 AS x FROM t").schema.field("x").type == pa.float64()
    spark = session.sql("SELECT 1.0 / 4.0 AS x FROM t", dialect="spark")
    assert pa.types.is_decimal(spark.schema.field("x").type) and spark.column("x").to_pylist()[0] == Decimal("0.25")


def test_the_spark_dialect_divides_null_safely():
    """Spark reads ``a / b`` as NULL for a zero divisor (sqlglot: ``a / NULLIF(b, 0)``); it failed as 'nullif'."""
    session = _session("cpu", True)
    result = session.sql("SELECT i32 / 2 AS h, i32 / (i8 - i8) AS z FROM t", dialect="spark")
    assert result.column("h").to_pylist() == [3.5, -3.5, None, 1_000_000.0]
    assert result.column("z").to_pylist() == [None, None, None, None]


@pytest.mark.parametrize("expression", ["date_trunc('month', DATE '1995-02-17')", "date_trunc('week', DATE '1995-02-17')",
                                        "date_trunc('year', CAST('1995-02-17' AS DATE))"])
def test_a_constant_date_truncation_is_a_timestamp_as_in_duckdb(expression, reference):
    """sqlglot's simplifier folded date_trunc of a constant DATE to a DATE; DuckDB types it TIMESTAMP (as the
    engine types it over a column). Found by the breadth fuzz's first-hour probes."""
    sql = f"SELECT i32 AS k, {expression} AS x FROM t"
    expected = duckdb_table(reference, sql)
    result = _session("cpu", False).sql(sql)
    assert result.schema.field("x").type == expected.schema.field("x").type, expression
    assert_same_rows(result, expected)
