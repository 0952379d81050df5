"""Check [NOT] IN lists against DuckDB, with NULLs in the list and in the operand."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

from duckdb_check import TABLE, check, check_predicate, col, lit

CASES = {
    "ints": ("i32", [lit(0, pa.int32()), lit(1, pa.int32()), lit(-1, pa.int32())], "0, 1, -1"),
    "ints_with_null": ("i32", [lit(0, pa.int32()), lit(None, pa.int32())], "0, NULL"),
    "decimal_with_ints": ("dec", [lit(0, pa.int32()), lit(decimal.Decimal("0.05"), pa.decimal128(3, 2)),
                                  lit(decimal.Decimal("2.500"), pa.decimal128(4, 3))], "0, 0.05, 2.500"),
    "float": ("f64", [lit(0.5, pa.float64()), lit(0.0, pa.float64()), lit(float("nan"), pa.float64())],
              "0.5::DOUBLE, 0.0::DOUBLE, 'nan'::DOUBLE"),
    "int64_big": ("i64", [lit(3, pa.int64()), lit(10**15, pa.int64())], "3::BIGINT, 1000000000000000::BIGINT"),
    "dates": ("d", [lit(datetime.date(1970, 1, 1), pa.date32()), lit(datetime.date(2000, 2, 29), pa.date32())],
              "DATE '1970-01-01', DATE '2000-02-29'"),
    "strings": ("s", [lit(v, pa.string()) for v in ["", "héllo", "日本語テキスト", "nope"]],
                "'', 'héllo', '日本語テキスト', 'nope'"),
    "strings_with_null": ("s", [lit("abc", pa.string()), lit(None, pa.string())], "'abc', NULL"),
    "dictionary": ("ds", [lit(v, pa.string()) for v in ["BRAZIL", "ÉIRE", ""]], "'BRAZIL', 'ÉIRE', ''"),
    "dictionary_with_null": ("ds", [lit("FRANCE", pa.string()), lit(None, pa.string())], "'FRANCE', NULL"),
    "only_null": ("i64", [lit(None, pa.int64())], "NULL"),
}


@pytest.mark.parametrize("negated", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_in_list(device, case, negated):
    from gpu_engine.plans.expressions import InList

    name, values, sql = CASES[case]
    expr = InList(col(name), tuple(values), negated)
    check(device, expr, f"{name} {'NOT ' if negated else ''}IN ({sql})")
    check_predicate(device, expr, f"{name} {'NOT ' if negated else ''}IN ({sql})")


def test_table_has_nulls_in_operands():
    for name, *_ in CASES.values():
        assert TABLE.column(name).null_count > 0
