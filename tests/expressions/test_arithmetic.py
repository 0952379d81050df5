"""Check + - * / % and unary minus against DuckDB, including decimal scaling, division by zero and overflow."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from duckdb_check import TABLE, binary, check, check_raises, check_same_outcome, col, lit, small_table
from gpu_engine.plans.expressions import BinaryOp, UnaryOp

OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%"}
NUMERIC_COLUMNS = ["i32", "i64", "f64", "dec"]
# Integer arithmetic keeps the wider type, as DuckDB's does: an INTEGER result raises past INT32 (the data holds
# 2**31 - 1 and zeros, so i32 + i32 overflows and % by a zero column raises, in both).
SQL = {"i32": "i32", "i64": "i64", "f64": "f64", "dec": "dec"}
LITERALS = {
    "int": (lit(7, pa.int32()), "7::INTEGER"),
    "zero": (lit(0, pa.int32()), "0::INTEGER"),
    "negative_decimal": (lit(decimal.Decimal("-0.125"), pa.decimal128(4, 3)), "(-0.125)::DECIMAL(4,3)"),
    "float": (lit(2.5, pa.float64()), "2.5::DOUBLE"),
    "null": (lit(None, pa.int32()), "NULL::INTEGER"),
}


# i64 * i64 and i64 * dec exceed 64 bits on this data; the overflow tests cover them.
PAIRS = [(op, left, right) for op in OPERATORS for left in NUMERIC_COLUMNS for right in NUMERIC_COLUMNS
         if not (op == "mul" and "i64" in (left, right) and {left, right} <= {"i64", "dec"})]


@pytest.mark.parametrize("op, left, right", PAIRS)
def test_column_with_column(device, op, left, right):
    check_same_outcome(device, binary(op, col(left), col(right)), f"{SQL[left]} {OPERATORS[op]} {SQL[right]}")


@pytest.mark.parametrize("op", list(OPERATORS))
@pytest.mark.parametrize("left", NUMERIC_COLUMNS)
@pytest.mark.parametrize("literal", list(LITERALS))
def test_column_with_literal(device, op, left, literal):
    value, sql = LITERALS[literal]
    check_same_outcome(device, binary(op, col(left), value), f"{SQL[left]} {OPERATORS[op]} {sql}")
    check_same_outcome(device, binary(op, value, col(left)), f"{sql} {OPERATORS[op]} {SQL[left]}")


@pytest.mark.parametrize("op", list(OPERATORS))
def test_float32_stays_float32(device, op):
    table = small_table(f=pa.array([0.1, -2.5, 16777217.0, 3.4e38, None, 7.0], pa.float32()),
                        i=pa.array([3, 16777217, 1, 2, 5, None], pa.int32()))
    expr = BinaryOp(op, col("f", table), col("i", table), pa.float32())  # DuckDB: FLOAT, '/' included
    check(device, expr, f"f {OPERATORS[op]} i", table)


def test_decimal_product_keeps_scale_and_value(device):
    expr = binary("mul", col("dec"), lit(decimal.Decimal("1.05"), pa.decimal128(3, 2)))
    assert expr.dtype == pa.decimal128(18, 4)
    check(device, expr, "dec * 1.05::DECIMAL(3,2)")


def test_product_rounds_to_a_smaller_result_scale(device):
    """A declared result scale below s1 + s2 rounds half away from zero (the translator may cap the scale)."""
    expr = BinaryOp("mul", col("dec"), lit(decimal.Decimal("0.5"), pa.decimal128(2, 1)), pa.decimal128(18, 2))
    check(device, expr, "round(dec * 0.5::DECIMAL(2,1), 2)")


def test_nested_expression(device):
    price = col("dec")
    discount = lit(decimal.Decimal("0.06"), pa.decimal128(3, 2))
    one = lit(1, pa.int32())
    expr = binary("mul", price, binary("sub", one, discount))
    check(device, expr, "dec * (1 - 0.06::DECIMAL(3,2))")


@pytest.mark.parametrize("name", NUMERIC_COLUMNS)
def test_negate(device, name):
    check(device, UnaryOp("negate", col(name), col(name).dtype), f"-{SQL[name]}")


def test_division_by_zero_is_ieee(device):
    """DuckDB 2 divides as IEEE doubles: x / 0 is +-inf and 0 / 0 is NaN, for every numeric type."""
    for name in NUMERIC_COLUMNS:
        check(device, binary("div", col(name), lit(0, pa.int32())), f"{name} / 0")


def test_remainder_by_zero_raises_as_in_duckdb(device):
    """Issue 28 item 7: ``a % 0`` was NULL; DuckDB raises (an exact remainder; a float one is NaN)."""
    table = small_table(a=pa.array([5, -5, None, 0], pa.int64()), b=pa.array([0, 3, 0, 0], pa.int64()))
    check_raises(device, binary("mod", col("a", table), col("b", table)), "a % b", table, "Division by zero")
    decimals = small_table(a=pa.array([decimal.Decimal("1.50"), None], pa.decimal128(5, 2)))
    check_raises(device, binary("mod", col("a", decimals), lit(0, pa.int32())), "a % 0", decimals,
                 "Division by zero")
    nulls = small_table(a=pa.array([None, 4], pa.int64()), b=pa.array([0, 3], pa.int64()))
    check(device, binary("mod", col("a", nulls), col("b", nulls)), "a % b", nulls)  # NULL % 0 is NULL, no error
    floats = small_table(a=pa.array([1.5, -2.0], pa.float64()))
    check(device, binary("mod", col("a", floats), lit(0, pa.int32())), "a % 0", floats)  # NaN


def test_remainder_is_exact_beyond_two_to_the_53(device):
    table = small_table(a=pa.array([2**62 + 1, -(2**62) - 3, 2**63 - 1, -(2**63) + 5, None], pa.int64()),
                        b=pa.array([7, 10, -1000000007, 3, 2], pa.int64()))
    check(device, binary("mod", col("a", table), col("b", table)), "a % b", table)
    big = [decimal.Decimal("92233720368547758.05"), decimal.Decimal("-4611686018427387.91")]
    decimals = small_table(a=pa.array(big, pa.decimal128(19, 2)))
    check(device, binary("mod", col("a", decimals), lit(decimal.Decimal("0.07"), pa.decimal128(3, 2))),
          "a % 0.07", decimals)


def test_remainder_by_minus_one(device):
    table = small_table(a=pa.array([2**63 - 1, 7, -8, None], pa.int64()))
    check(device, binary("mod", col("a", table), lit(-1, pa.int32())), "a % -1", table)
    # INT64_MIN % -1 is 0 in DuckDB (2.0): the remainder fits although the quotient would not.
    int64_min = small_table(a=pa.array([-(2**63), 7], pa.int64()))
    check(device, binary("mod", col("a", int64_min), lit(-1, pa.int32())), "a % -1", int64_min)


@pytest.mark.parametrize(
    "op, values, constant",
    [
        ("add", [2**63 - 10, 1], 100),
        ("sub", [-(2**63) + 10, 1], 100),
        ("mul", [2**40, 3], 2**30),
        ("mul", [-(2**62) - 1, 1], 2),
    ],
)
def test_integer_overflow_raises(device, op, values, constant):
    table = small_table(a=pa.array(values, pa.int64()))
    expr = binary(op, col("a", table), lit(constant, pa.int64()))
    check_raises(device, expr, f"a {OPERATORS[op]} {constant}::BIGINT", table, "Overflow")


def test_overflow_in_a_null_row_is_ignored(device):
    table = small_table(a=pa.array([2**62, 5], pa.int64()), b=pa.array([None, 2], pa.int64()))
    expr = binary("mul", binary("mul", col("a", table), col("b", table)), lit(4, pa.int32()))
    check(device, expr, "a * b * 4", table)


def test_product_at_the_int64_boundary(device):
    """The float shadow must not flag exact products right at the edge of int64."""
    table = small_table(a=pa.array([2**62 - 1, -(2**62), 3037000499], pa.int64()))
    check(device, binary("mul", col("a", table), lit(2, pa.int64())), "a * 2::BIGINT", table)
    squares = small_table(a=pa.array([3037000499, -3037000499, 2**31], pa.int64()))  # up to 2**62
    check(device, binary("mul", col("a", squares), col("a", squares)), "a * a", squares)


def test_decimal_overflow_raises(device):
    table = small_table(a=pa.array([decimal.Decimal("99999999999.99")], pa.decimal128(15, 2)),
                        b=pa.array([decimal.Decimal("99999.99")], pa.decimal128(15, 2)))
    check_raises(device, binary("mul", col("a", table), col("b", table)), "a * b", table, "Overflow|out of range")


def test_negating_int64_min_raises(device):
    table = small_table(a=pa.array([-(2**63)], pa.int64()))
    check_raises(device, UnaryOp("negate", col("a", table), pa.int64()), "-a", table, "Overflow")


def test_negating_int32_min_into_int32_raises(device):
    table = small_table(a=pa.array([-(2**31)], pa.int32()))
    check_raises(device, UnaryOp("negate", col("a", table), pa.int32()), "-a", table, "out of range")


def test_arithmetic_on_strings_is_a_plan_error(device):
    from gpu_engine.errors import PlanError
    from duckdb_check import batch_of
    from gpu_engine.expressions import evaluate

    with pytest.raises(PlanError):
        evaluate(BinaryOp("add", col("s"), col("i32"), pa.int64()), batch_of(TABLE, device))
