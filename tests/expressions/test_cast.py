"""Check CAST against DuckDB: widths, rounding rules, range errors, text formatting and parsing."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from duckdb_check import TABLE, check, check_raises, col, small_table
from gpu_engine.plans.expressions import Cast

SQL_TYPES = {
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN", pa.string(): "VARCHAR",
    pa.date32(): "DATE", pa.timestamp("us"): "TIMESTAMP",
}


def sql_type(dtype: pa.DataType) -> str:
    if pa.types.is_decimal(dtype):
        return f"DECIMAL({dtype.precision},{dtype.scale})"
    return SQL_TYPES[dtype]


def check_cast(device, name: str, dtype: pa.DataType, table: pa.Table = TABLE):
    return check(device, Cast(col(name, table), dtype), f"CAST({name} AS {sql_type(dtype)})", table)


def raises_cast(device, name: str, dtype: pa.DataType, table: pa.Table, match: str = "") -> None:
    check_raises(device, Cast(col(name, table), dtype), f"CAST({name} AS {sql_type(dtype)})", table, match)


HALVES = small_table(f=pa.array([0.5, 1.5, 2.5, -0.5, -2.5, -3.7, 3.49999, 1e18, -0.0, None]))
TRICKY_FLOATS = small_table(f=pa.array([0.125, -0.125, 1.005, 2.675, 0.145, 1e-3, 123456.785, -99.995, 0.0, None,
                                        1234567890123.455, 5e-3, -4.999999]))


@pytest.mark.parametrize(
    "name, dtype",
    [
        ("i32", pa.int64()), ("i32", pa.float64()), ("i32", pa.float32()), ("i32", pa.decimal128(12, 2)),
        ("i64", pa.float64()), ("i64", pa.decimal128(18, 0)), ("i64", pa.decimal128(16, 3)),
        ("dec", pa.int64()), ("dec", pa.int32()), ("dec", pa.float64()), ("dec", pa.float32()),
        ("dec", pa.decimal128(18, 4)), ("dec", pa.decimal128(14, 1)), ("dec", pa.decimal128(12, 0)),
        ("b", pa.int32()), ("b", pa.float64()), ("i32", pa.bool_()), ("dec", pa.bool_()), ("f64", pa.bool_()),
        ("f64", pa.float32()), ("d", pa.timestamp("us")), ("ts", pa.date32()),
    ],
)
def test_numeric_and_temporal_casts(device, name, dtype):
    check_cast(device, name, dtype)


def test_float_to_integer_rounds_half_to_even(device):
    check_cast(device, "f", pa.int64(), HALVES)
    check_cast(device, "f", pa.int32(), small_table(f=pa.array([0.5, 1.5, 2.5, -2.5, 2147483647.4, None])))


@pytest.mark.parametrize("dtype", [pa.decimal128(18, 2), pa.decimal128(18, 3), pa.decimal128(6, 0)])
def test_float_to_decimal_rounds_half_away_from_zero(device, dtype):
    table = TRICKY_FLOATS if dtype.precision == 18 else small_table(f=pa.array([0.5, -0.5, 1.5, 2.5, 99999.4, None]))
    check_cast(device, "f", dtype, table)


def test_random_floats_to_decimal(device):
    finite = TABLE.filter(pa.compute.is_finite(TABLE.column("f64")))
    check_cast(device, "f64", pa.decimal128(18, 2), finite)
    check_cast(device, "f64", pa.decimal128(18, 5), finite)


@pytest.mark.parametrize(
    "values, arrow_type, dtype",
    [
        ([200], pa.int32(), pa.int8()),
        ([-40000], pa.int32(), pa.int16()),
        ([2**31], pa.int64(), pa.int32()),
        ([float("nan")], pa.float64(), pa.int64()),
        ([float("inf")], pa.float64(), pa.int32()),
        ([1e19], pa.float64(), pa.int64()),
        ([float("nan")], pa.float64(), pa.decimal128(10, 2)),
        ([1e8], pa.float64(), pa.decimal128(10, 2)),
        ([12345], pa.int32(), pa.decimal128(4, 0)),
        ([decimal.Decimal("999.96")], pa.decimal128(5, 2), pa.decimal128(4, 1)),
        ([decimal.Decimal("3000000000.5")], pa.decimal128(12, 1), pa.int32()),
        ([10**17], pa.int64(), pa.decimal128(18, 2)),
    ],
)
def test_out_of_range_raises(device, values, arrow_type, dtype):
    table = small_table(v=pa.array(values + [None], arrow_type))
    raises_cast(device, "v", dtype, table, "out of range|Overflow")


def test_out_of_range_in_null_row_is_ignored(device):
    table = small_table(v=pa.array([200, 5], pa.int32()))
    masked = table.set_column(1, "v", pa.array([None, 5], pa.int32()))
    check_cast(device, "v", pa.int8(), masked)


@pytest.mark.parametrize("name", ["i32", "i64", "dec", "d", "b", "f64"])
def test_to_string(device, name):
    check_cast(device, name, pa.string())


def test_to_string_extremes(device):
    table = small_table(i=pa.array([-(2**63), 2**63 - 1, 0, -1, 10, None], pa.int64()),
                        m=pa.array([decimal.Decimal(v) for v in ["-0.05", "0.50", "-12.30", "0.00", "99999999.99"]]
                                   + [None], pa.decimal128(10, 2)),
                        f=pa.array([1e16, 1e15, 1e-5, 0.1, 1 / 3, -1.5e300], pa.float64()),
                        r=pa.array([0.1, 1.5, 3.4e38, -2.5e-8, 16777217.0, None], pa.float32()))
    for name in ["i", "m", "f", "r"]:
        check_cast(device, name, pa.string(), table)


@pytest.mark.parametrize("dtype", [pa.int64(), pa.int32(), pa.decimal128(10, 2), pa.decimal128(18, 6),
                                   pa.decimal128(12, 0), pa.float64()])
def test_text_to_number(device, dtype):
    check_cast(device, "num_s", dtype)


@pytest.mark.parametrize("dtype", [pa.int64(), pa.decimal128(10, 2), pa.date32()])
def test_dictionary_text_is_parsed_per_value(device, dtype):
    text = "7" if dtype != pa.date32() else "2021-03-04"
    dictionary = pa.array([text, "not a value", text])  # the unused entry must not fail the cast
    values = pa.DictionaryArray.from_arrays(pa.array([0, 0, None, 2], pa.int32()), dictionary)
    check_cast(device, "v", dtype, small_table(v=values))


def test_text_to_date(device):
    check_cast(device, "date_s", pa.date32())


@pytest.mark.parametrize(
    "texts, dtype, match",
    [
        (["12", "abc"], pa.int64(), "abc"),
        (["", "1"], pa.int32(), "Could not convert"),
        (["1e"], pa.int32(), "Could not convert"),
        (["99.995"], pa.decimal128(4, 2), "out of range"),
        (["9223372036854775808"], pa.int64(), "out of range"),
        (["300"], pa.int8(), "out of range"),
        (["2020-02-30"], pa.date32(), "out of range"),
        (["20200105"], pa.date32(), "Could not convert"),
        (["1.5x"], pa.float64(), "Could not convert"),
    ],
)
def test_bad_text_raises(device, texts, dtype, match):
    raises_cast(device, "v", dtype, small_table(v=pa.array(texts + [None])), match)


def test_digit_separators_and_signs(device):
    table = small_table(v=pa.array(["1_000", "+5", "-0", " \t42\n", "1.", ".5", "-.5", "5e-1", None]))
    check_cast(device, "v", pa.int64(), table)
    check_cast(device, "v", pa.decimal128(9, 3), table)


def test_same_type_is_identity(device):
    result = check_cast(device, "dec", pa.decimal128(15, 2))
    assert result.dtype == pa.decimal128(15, 2)
