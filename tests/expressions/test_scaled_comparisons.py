"""Check comparisons of numbers at different decimal scales: exact, and without a division where scaling up is exact."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from duckdb_check import binary, check, col, lit
from gpu_engine.expressions import comparison

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
def test_decimal_column_against_an_integer_bound_compares_at_one_scale(device, compared_scales, op):
    # TPC-DS q28's ss_list_price (DECIMAL(7,2)) BETWEEN 8 AND 18: the INTEGER bound is multiplied up, no remainder.
    check(device, binary(op, col("dec"), lit(250, pa.int32())), f"dec {OPS[op]} 250::INTEGER")
    check(device, binary(op, lit(-5, pa.int32()), col("dec")), f"-5::INTEGER {OPS[op]} dec")
    assert compared_scales == [(2, 2), (2, 2)]


@pytest.mark.parametrize("op", sorted(OPS))
def test_integer_column_against_a_decimal_compares_at_one_scale(device, compared_scales, op):
    bound = lit(decimal.Decimal("-1.5"), pa.decimal128(3, 1))
    check(device, binary(op, col("i32"), bound), f"i32 {OPS[op]} (-1.5)::DECIMAL(3,1)")
    assert compared_scales == [(1, 1)]


@pytest.mark.parametrize("op", sorted(OPS))
def test_a_side_that_could_overflow_when_scaled_up_is_compared_by_division(device, compared_scales, op):
    # A BIGINT times 100 may not fit in int64: the decimal side is divided (with its remainder) instead.
    check(device, binary(op, col("i64"), col("dec")), f"i64 {OPS[op]} dec")
    check(device, binary(op, col("dec"), lit(decimal.Decimal("2.5"), pa.decimal128(18, 1))),
          f"dec {OPS[op]} 2.5::DECIMAL(18,1)")
    assert {(0, 2), (2, 1)} <= set(compared_scales)  # (the finer side first again: a recursive call)
    assert all(left != right for left, right in compared_scales)
