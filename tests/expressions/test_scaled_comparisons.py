"""Check comparisons of numbers at different decimal scales: exact, and without a division where scaling up is exact."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

from duckdb_check import binary, check, check_many, col, lit
from gpu_engine.expressions import comparison
from gpu_engine.plans.expressions import Cast

OPS = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@pytest.fixture
def compared_scales(monkeypatch) -> list[tuple[int, int]]:
    """Record the (left, right) scales each scaled-integer comparison runs at."""
    scales: list[tuple[int, int]] = []
    real = comparison._scaled_order

    def recording(xp, left, left_scale, right, right_scale):
        scales.append((left_scale, right_scale))
        return real(xp, left, left_scale, right, right_scale)

    monkeypatch.setattr(comparison, "_scaled_order", recording)
    return scales


@pytest.mark.parametrize("op", sorted(OPS))
def test_decimal_column_against_an_integer_column_compares_at_one_scale(device, compared_scales, op):
    # An INTEGER times 100 fits int64: it is multiplied up, no remainder.
    check(device, binary(op, col("dec"), col("i32")), f"dec {OPS[op]} i32")
    check(device, binary(op, col("i32"), col("dec")), f"i32 {OPS[op]} dec")
    assert compared_scales == [(2, 2), (2, 2)]


@pytest.mark.parametrize("op", sorted(OPS))
def test_a_side_that_could_overflow_when_scaled_up_is_compared_by_division(device, compared_scales, op):
    # A BIGINT times 100 may not fit in int64: the decimal side is divided (with its remainder) instead.
    check(device, binary(op, col("i64"), col("dec")), f"i64 {OPS[op]} dec")
    check(device, binary(op, col("dec"), Cast(col("i32"), pa.decimal128(18, 1))), f"dec {OPS[op]} i32::DECIMAL(18,1)")
    assert {(0, 2), (2, 1)} <= set(compared_scales)  # (the finer side first again: a recursive call)
    assert all(left != right for left, right in compared_scales)


# A column against a constant: the constant is brought to the column's terms once, on the host, and each row
# is one comparison (compare_to_constant), never the scaled order of two columns. Constants below the
# column's scale (-1.5 against integers) decide each operator by their floor and remainder.
CONSTANTS = [
    (col("dec"), lit(250, pa.int32()), "dec", "250::INTEGER"),  # TPC-DS q28's prices against integer bounds
    (col("dec"), binary("add", lit(8, pa.int32()), lit(10, pa.int32())), "dec", "(8 + 10)::INTEGER"),
    (col("i32"), lit(decimal.Decimal("-1.5"), pa.decimal128(3, 1)), "i32", "(-1.5)::DECIMAL(3,1)"),
    (col("i32"), lit(decimal.Decimal("2.0"), pa.decimal128(3, 1)), "i32", "2.0::DECIMAL(3,1)"),
    (col("dec"), lit(decimal.Decimal("2.505"), pa.decimal128(18, 3)), "dec", "2.505::DECIMAL(18,3)"),
    (col("i32"), lit(2**40, pa.int64()), "i32", f"{2**40}::BIGINT"),
    (col("f64"), lit(0.5, pa.float64()), "f64", "0.5::DOUBLE"),  # NaN and infinities among the rows
    (col("dec"), lit(2.5, pa.float64()), "dec", "2.5::DOUBLE"),
    (col("d"), lit(datetime.date(2000, 2, 29), pa.date32()), "d", "DATE '2000-02-29'"),
]


def test_column_against_a_constant_is_one_comparison(device, compared_scales):
    cases = []
    for column, constant, column_sql, constant_sql in CONSTANTS:
        for op, symbol in OPS.items():
            cases.append((binary(op, column, constant), f"{column_sql} {symbol} {constant_sql}"))
            cases.append((binary(op, constant, column), f"{constant_sql} {symbol} {column_sql}"))
    check_many(device, cases)
    assert compared_scales == []
