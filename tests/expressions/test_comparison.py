"""Check = <> < <= > >= against DuckDB across numeric, temporal, boolean and string operands."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

from duckdb_check import TABLE, batch_of, binary, check, check_predicate, col, lit, small_table
from gpu_engine.expressions import evaluate
from gpu_engine.plans.expressions import BinaryOp

OPERATORS = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
NUMERIC_COLUMNS = ["i32", "i64", "f64", "dec"]
NUMERIC_LITERALS = {
    "int": (lit(5, pa.int32()), "5::INTEGER"),
    "decimal": (lit(decimal.Decimal("2.50"), pa.decimal128(3, 2)), "2.50::DECIMAL(3,2)"),
    "fine_decimal": (lit(decimal.Decimal("-2.505"), pa.decimal128(4, 3)), "(-2.505)::DECIMAL(4,3)"),
    "float": (lit(0.5, pa.float64()), "0.5::DOUBLE"),
    "big": (lit(10**17, pa.int64()), "100000000000000000::BIGINT"),
}


@pytest.mark.parametrize("op", list(OPERATORS))
@pytest.mark.parametrize("left", NUMERIC_COLUMNS)
@pytest.mark.parametrize("right", NUMERIC_COLUMNS)
def test_numeric_columns(device, op, left, right):
    check(device, binary(op, col(left), col(right)), f"{left} {OPERATORS[op]} {right}")


@pytest.mark.parametrize("op", list(OPERATORS))
@pytest.mark.parametrize("left", NUMERIC_COLUMNS)
@pytest.mark.parametrize("literal", list(NUMERIC_LITERALS))
def test_numeric_column_with_literal(device, op, left, literal):
    value, sql = NUMERIC_LITERALS[literal]
    check(device, binary(op, col(left), value), f"{left} {OPERATORS[op]} {sql}")


def test_decimals_of_different_scales_compare_exactly(device):
    """Values that differ only beyond the coarser scale must not compare equal (no rounding)."""
    table = small_table(
        a=pa.array([decimal.Decimal(v) for v in ["1.50", "-1.50", "1.51", "-0.01", "92233720368547758.07"]],
                   pa.decimal128(19, 2)),
        b=pa.array([decimal.Decimal(v) for v in ["1.500", "-1.501", "1.509", "-0.010", "0.001"]], pa.decimal128(5, 3)),
    )
    for op, sql in OPERATORS.items():
        check(device, binary(op, col("a", table), col("b", table)), f"a {sql} b", table)
        check(device, binary(op, col("b", table), col("a", table)), f"b {sql} a", table)


def test_nan_equals_nan_and_sorts_last(device):
    table = small_table(a=pa.array([float("nan"), float("nan"), 1.0, float("inf"), None]),
                        b=pa.array([float("nan"), 1.0, float("nan"), float("nan"), 1.0]))
    for op, sql in OPERATORS.items():
        check(device, binary(op, col("a", table), col("b", table)), f"a {sql} b", table)


@pytest.mark.parametrize("op", list(OPERATORS))
def test_dates(device, op):
    date = lit(datetime.date(1998, 9, 2), pa.date32())
    check(device, binary(op, col("d"), date), f"d {OPERATORS[op]} DATE '1998-09-02'")
    check(device, binary(op, col("d"), col("d")), f"d {OPERATORS[op]} d")


@pytest.mark.parametrize("op", list(OPERATORS))
def test_timestamp_with_date(device, op):
    check(device, binary(op, col("ts"), col("d")), f"ts {OPERATORS[op]} d")


@pytest.mark.parametrize("op", list(OPERATORS))
def test_booleans(device, op):
    check(device, binary(op, col("b"), lit(True, pa.bool_())), f"b {OPERATORS[op]} true")


@pytest.mark.parametrize("op", list(OPERATORS))
@pytest.mark.parametrize("left, right", [("s", "s"), ("s", "ds"), ("ds", "s"), ("ds", "ds")])
def test_string_columns(device, op, left, right):
    other = f"{right}_shifted"
    table = TABLE.append_column(other, TABLE.column(right).take(list(range(1, TABLE.num_rows)) + [0]))
    check(device, binary(op, col(left, table), col(other, table)), f"{left} {OPERATORS[op]} {other}", table)


@pytest.mark.parametrize("op", list(OPERATORS))
@pytest.mark.parametrize("name", ["s", "ds"])
@pytest.mark.parametrize("value", ["hello", "", "héllo", "FRANCE", "日本", "ab", "zzz"])
def test_string_column_with_literal(device, op, name, value):
    check(device, binary(op, col(name), lit(value, pa.string())), f"{name} {OPERATORS[op]} '{value}'")
    check(device, binary(op, lit(value, pa.string()), col(name)), f"'{value}' {OPERATORS[op]} {name}")


def test_string_comparison_is_by_code_point(device):
    table = small_table(a=pa.array(["é", "z", "ab", "", "a\u00ff", "\U0001F389"]),
                        b=pa.array(["z", "é", "abc", "a", "a\u0100", "\uffff"]))
    for op, sql in OPERATORS.items():
        check(device, binary(op, col("a", table), col("b", table)), f"a {sql} b", table)


@pytest.mark.parametrize("name", ["i32", "dec", "s", "d"])
def test_comparison_with_null_literal_is_null(device, name):
    dtype = col(name).dtype
    check(device, binary("eq", col(name), lit(None, dtype)), f"{name} = NULL")


def test_predicate_drops_null_and_false(device):
    check_predicate(device, binary("gt", col("i32"), lit(0, pa.int32())), "i32 > 0")
    check_predicate(device, binary("eq", col("ds"), lit("BRAZIL", pa.string())), "ds = 'BRAZIL'")


def test_dictionary_comparison_is_evaluated_on_the_dictionary(device, monkeypatch):
    """A dictionary column against a literal compares each distinct value once, not each row."""
    from gpu_engine.kernels import strings as kernels

    rows_compared = []
    original = kernels.compare

    def counting(device_, rows, left, right):
        rows_compared.append(rows)
        return original(device_, rows, left, right)

    monkeypatch.setattr(kernels, "compare", counting)
    evaluate(binary("lt", col("ds"), lit("C", pa.string())), batch_of(TABLE, device))
    assert rows_compared == [len(TABLE.column("ds").chunk(0).dictionary)]


def test_comparing_a_string_with_a_number_is_a_plan_error(device):
    from gpu_engine.errors import PlanError

    with pytest.raises(PlanError):
        evaluate(BinaryOp("eq", col("s"), col("i32"), pa.bool_()), batch_of(TABLE, device))
