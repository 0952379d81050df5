"""Check that a constant subtree (arithmetic, negation, casts over literals) is evaluated on one row, not on every row."""

from __future__ import annotations

import decimal
import importlib

import pyarrow as pa
import pytest

from duckdb_check import TABLE, batch_of, binary, check, check_predicate, check_raises, col, lit
from gpu_engine.columnar import Batch
from gpu_engine.expressions import arithmetic, evaluate
from gpu_engine.plans.expressions import Cast, UnaryOp


@pytest.fixture
def arithmetic_rows(monkeypatch) -> list[int]:
    """Record the number of rows each eager arithmetic call computes (constants compared with a column are
    kept once evaluated: the kept ones are dropped first, so each test sees its own constants computed)."""
    importlib.import_module("gpu_engine.expressions.evaluate")._host_constant_of.cache_clear()
    rows: list[int] = []
    real = arithmetic.arithmetic

    def recording(device, op, left, right, dtype):
        rows.append(max(len(left.data), len(right.data)))
        return real(device, op, left, right, dtype)

    monkeypatch.setattr(arithmetic, "arithmetic", recording)
    return rows


def _dec(text: str) -> object:
    value = decimal.Decimal(text)
    return lit(value, pa.decimal128(7, -value.as_tuple().exponent))


def test_range_bound_sum_runs_on_one_row(device, arithmetic_rows):
    # TPC-DS q28's shape: ss_coupon_amt BETWEEN 459 AND 459 + 1000 (decimal column, decimal bounds).
    low, high = _dec("459.00"), binary("add", _dec("459.00"), _dec("1000.00"))
    expr = binary("and", binary("ge", col("dec"), low), binary("le", col("dec"), high))
    check_predicate(device, expr, "dec >= 459.00 AND dec <= 459.00::DECIMAL(7,2) + 1000.00::DECIMAL(7,2)")
    assert arithmetic_rows == [1]


def test_computed_column_over_a_constant_is_exact(device, arithmetic_rows):
    constant = UnaryOp("negate", binary("mul", lit(3, pa.int64()), lit(7, pa.int64())), pa.int64())
    expr = binary("add", col("i64"), constant)
    check(device, expr, "i64 + (-(3::BIGINT * 7::BIGINT))")
    assert sorted(arithmetic_rows) == [1, TABLE.num_rows]  # the constant once, the column's sum on every row


def test_cast_of_a_literal_is_repeated_not_cast_per_row(device):
    expr = binary("gt", col("f64"), Cast(binary("add", lit(1, pa.int32()), lit(2, pa.int32())), pa.float64()))
    check_predicate(device, expr, "f64 > CAST(1 + 2 AS DOUBLE)")
    column = evaluate(Cast(lit(5, pa.int32()), pa.decimal128(38, 2)), batch_of(TABLE, device))
    assert column.to_arrow(device).to_pylist() == [decimal.Decimal("5.00")] * TABLE.num_rows


def test_null_constant_stays_null(device):
    expr = binary("add", lit(None, pa.int64()), lit(1, pa.int64()))
    check(device, expr, "NULL::BIGINT + 1::BIGINT")


def test_overflowing_constant_fails_a_batch_with_rows_but_not_an_empty_one(device):
    expr = binary("add", col("i32"), binary("add", lit(2**31 - 1, pa.int32()), lit(1, pa.int32())))
    check_raises(device, expr, "i32 + (2147483647::INTEGER + 1::INTEGER)", TABLE, "(?i)overflow|out of range")
    empty = Batch.from_arrow(TABLE.slice(0, 0), device)
    assert len(evaluate(expr, empty)) == 0
