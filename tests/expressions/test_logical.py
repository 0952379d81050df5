"""Check AND, OR, NOT, IS [NOT] NULL and CASE against DuckDB (three-valued logic, first true branch)."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest

from duckdb_check import (
    TABLE, assert_same_values, batch_of, binary, check, check_predicate, check_raises, col, duckdb_values, lit,
    small_table,
)
from gpu_engine.expressions import evaluate
from gpu_engine.plans.expressions import Case, Cast, UnaryOp

# Bool operands with NULLs in different rows: a NULL column, and comparisons over NULLable columns.
BOOLS = {
    "b": (col("b"), "b"),
    "i32_positive": (binary("gt", col("i32"), lit(0, pa.int32())), "i32 > 0"),
    "s_short": (binary("lt", col("s"), lit("b", pa.string())), "s < 'b'"),
    "true": (lit(True, pa.bool_()), "true"),
    "false": (lit(False, pa.bool_()), "false"),
    "null": (lit(None, pa.bool_()), "NULL::BOOLEAN"),
}


@pytest.mark.parametrize("op", ["and", "or"])
@pytest.mark.parametrize("left", list(BOOLS))
@pytest.mark.parametrize("right", list(BOOLS))
def test_kleene_and_or(device, op, left, right):
    (left_expr, left_sql), (right_expr, right_sql) = BOOLS[left], BOOLS[right]
    check(device, binary(op, left_expr, right_expr), f"({left_sql}) {op.upper()} ({right_sql})")


@pytest.mark.parametrize("operand", list(BOOLS))
def test_not(device, operand):
    expr, sql = BOOLS[operand]
    check(device, UnaryOp("not", expr, pa.bool_()), f"NOT ({sql})")


@pytest.mark.parametrize("name", ["i32", "i64", "f64", "dec", "d", "ts", "s", "ds", "b"])
@pytest.mark.parametrize("op, sql", [("is_null", "IS NULL"), ("is_not_null", "IS NOT NULL")])
def test_null_tests(device, name, op, sql):
    check(device, UnaryOp(op, col(name), pa.bool_()), f"{name} {sql}")


@pytest.mark.parametrize("dtype", [pa.null(), pa.int32(), pa.string()])
def test_null_test_of_null_literal(device, dtype):
    check(device, UnaryOp("is_null", lit(None, dtype), pa.bool_()), "NULL IS NULL")
    check(device, UnaryOp("is_not_null", lit(None, dtype), pa.bool_()), "NULL IS NOT NULL")


def test_null_test_sees_null_dictionary_entries(device):
    values = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, None], pa.int32()), pa.array(["a", None, "c"]))
    table = small_table(v=values)
    check(device, UnaryOp("is_null", col("v", table), pa.bool_()), "v IS NULL", table)
    check(device, binary("eq", col("v", table), lit("c", pa.string())), "v = 'c'", table)


def test_predicate_of_kleene_expression(device):
    expr = binary("or", BOOLS["b"][0], binary("and", BOOLS["i32_positive"][0], BOOLS["s_short"][0]))
    check_predicate(device, expr, "b OR (i32 > 0 AND s < 'b')")


def test_case_first_true_branch_wins(device):
    expr = Case(
        (
            (binary("gt", col("i32"), lit(500, pa.int32())), lit(1, pa.int64())),
            (binary("gt", col("i32"), lit(0, pa.int32())), col("i64")),
            (col("b"), lit(None, pa.int64())),
        ),
        lit(-1, pa.int64()),
        pa.int64(),
    )
    check(device, expr, "CASE WHEN i32 > 500 THEN 1::BIGINT WHEN i32 > 0 THEN i64 WHEN b THEN NULL ELSE -1 END")


def test_case_without_else_is_null(device):
    expr = Case(((binary("lt", col("f64"), lit(0.0, pa.float64())), col("f64")),), None, pa.float64())
    check(device, expr, "CASE WHEN f64 < 0 THEN f64 END")


def test_case_casts_branches_to_its_type(device):
    """The TPC-H shape: CASE WHEN nation = 'BRAZIL' THEN volume ELSE 0 END with a decimal volume."""
    expr = Case(((binary("eq", col("ds"), lit("BRAZIL", pa.string())), col("dec")),), lit(0, pa.int32()),
                pa.decimal128(15, 2))
    check(device, expr, "CASE WHEN ds = 'BRAZIL' THEN dec ELSE 0 END")


# Branches of each fixed-width kind, under conditions that overlap (a later one TRUE on rows an earlier one
# took) and NULL conditions: integers and dates are summed over the branches' disjoint rows, floats (NaN and
# infinities in rows another branch takes), wide decimals and bools are placed by their own paths.
OVERLAPPING = (binary("gt", col("i32"), lit(0, pa.int32())), "i32 > 0"), (col("b"), "b")


@pytest.mark.parametrize(
    "first, second, otherwise, dtype, sql",
    [
        (binary("sub", lit(0, pa.int64()), col("i64")), col("i64"), lit(7, pa.int64()), pa.int64(),
         ("-i64", "i64", "7")),
        (col("d"), lit(datetime.date(2000, 2, 29), pa.date32()), None, pa.date32(), ("d", "DATE '2000-02-29'", None)),
        (col("f64"), binary("mul", col("f64"), lit(-1.0, pa.float64())), lit(float("inf"), pa.float64()),
         pa.float64(), ("f64", "f64 * -1.0", "'inf'::DOUBLE")),
        (Cast(col("dec"), pa.decimal128(38, 2)), lit(decimal.Decimal("-1.25"), pa.decimal128(38, 2)),
         Cast(col("i64"), pa.decimal128(38, 2)), pa.decimal128(38, 2),
         ("dec::DECIMAL(38, 2)", "-1.25::DECIMAL(38, 2)", "i64::DECIMAL(38, 2)")),
        (binary("lt", col("i32"), lit(500, pa.int32())), lit(True, pa.bool_()), col("b"), pa.bool_(),
         ("i32 < 500", "true", "b")),
    ],
    ids=["bigint", "date_no_else", "double", "decimal38", "bool"],
)
def test_case_kinds_over_overlapping_conditions(device, first, second, otherwise, dtype, sql):
    (when1, when1_sql), (when2, when2_sql) = OVERLAPPING
    expr = Case(((when1, first), (when2, second)), otherwise, dtype)
    text = f"CASE WHEN {when1_sql} THEN {sql[0]} WHEN {when2_sql} THEN {sql[1]}"
    check(device, expr, text + (f" ELSE {sql[2]} END" if sql[2] else " END"))


def test_case_with_decimal_literals(device):
    expr = Case(((col("b"), lit(decimal.Decimal("0.05"), pa.decimal128(3, 2))),),
                lit(decimal.Decimal("1.5"), pa.decimal128(2, 1)), pa.decimal128(3, 2))
    check(device, expr, "CASE WHEN b THEN 0.05 ELSE 1.5 END")


@pytest.mark.parametrize(
    "then, otherwise, sql",
    [
        (col("s"), col("ds"), "CASE WHEN b THEN s ELSE ds END"),
        (col("ds"), lit("other", pa.string()), "CASE WHEN b THEN ds ELSE 'other' END"),
        (lit("yes", pa.string()), lit("nö", pa.string()), "CASE WHEN b THEN 'yes' ELSE 'nö' END"),
        (lit("yes", pa.string()), None, "CASE WHEN b THEN 'yes' END"),
        (col("s"), None, "CASE WHEN b THEN s END"),
    ],
)
def test_case_with_strings(device, then, otherwise, sql):
    check(device, Case(((col("b"), then),), otherwise, pa.string()), sql)


def test_case_over_dictionaries_stays_encoded(device):
    expr = Case(((col("b"), col("ds")),), lit("other", pa.string()), pa.string())
    result = evaluate(expr, batch_of(TABLE, device))
    assert result.is_dictionary
    assert len(result.dictionary) == len(TABLE.column("ds").chunk(0).dictionary) + 1


def test_case_condition_must_be_boolean(device):
    from gpu_engine.errors import PlanError

    with pytest.raises(PlanError):
        evaluate(Case(((col("i32"), col("i32")),), None, pa.int32()), batch_of(TABLE, device))


TEXTS = small_table(v=pa.array(["12", "abc", None, "7", "300", "-2"]),
                    i=pa.array([5, 2**31 - 1, None, -3, 100, 99], pa.int32()))


@pytest.mark.parametrize(
    "expr, sql",
    [
        (Case(((binary("eq", col("v", TEXTS), lit("abc", pa.string())), lit(0, pa.int32())),
               (binary("gt", Cast(col("v", TEXTS), pa.int32()), lit(10, pa.int32())), lit(1, pa.int32()))),
              lit(2, pa.int32()), pa.int32()),
         "CASE WHEN v = 'abc' THEN 0 WHEN CAST(v AS INT) > 10 THEN 1 ELSE 2 END"),
        (Case(((binary("eq", col("v", TEXTS), lit("abc", pa.string())), lit("x", pa.string())),),
              Cast(binary("add", Cast(col("v", TEXTS), pa.int32()), lit(1, pa.int32())), pa.string()), pa.string()),
         "CASE WHEN v = 'abc' THEN 'x' ELSE CAST(CAST(v AS INT) + 1 AS VARCHAR) END"),
        (Case(((binary("lt", col("i", TEXTS), lit(100, pa.int32())), Cast(col("i", TEXTS), pa.int8())),),
              lit(0, pa.int8()), pa.int8()),
         "CASE WHEN i < 100 THEN CAST(i AS TINYINT) ELSE 0 END"),
        (Case(((binary("ne", col("v", TEXTS), lit("abc", pa.string())), Cast(col("v", TEXTS), pa.int64())),), None,
              pa.int64()),
         "CASE WHEN v <> 'abc' THEN CAST(v AS BIGINT) END"),
        (Case(((binary("eq", col("v", TEXTS), lit("zzz", pa.string())), lit("none", pa.string())),
               (binary("ne", col("v", TEXTS), lit("abc", pa.string())),
                Cast(Cast(col("v", TEXTS), pa.int64()), pa.string()))),
              col("v", TEXTS), pa.string()),
         "CASE WHEN v = 'zzz' THEN 'none' WHEN v <> 'abc' THEN CAST(CAST(v AS BIGINT) AS VARCHAR) ELSE v END"),
    ],
    ids=["condition", "string_value", "narrowing", "no_else", "branch_without_rows"],
)
def test_case_branch_errors_only_count_on_rows_the_branch_decides(device, expr, sql):
    check(device, expr, sql, TEXTS)


def test_case_error_in_a_chosen_row_still_raises(device):
    expr = Case(((binary("ne", col("v", TEXTS), lit("12", pa.string())), Cast(col("v", TEXTS), pa.int64())),), None,
                pa.int64())
    check_raises(device, expr, "CASE WHEN v <> '12' THEN CAST(v AS BIGINT) END", TEXTS, "abc")


def test_case_branch_by_branch_under_a_gather_map(device):
    indices = [5, 4, 3, 1, 0]
    batch = batch_of(TEXTS, device).with_gather_map(device.asarray(np.array(indices, dtype=np.int32)))
    taken = TEXTS.take(indices).set_column(0, "rid", pa.array(range(len(indices)), pa.int64()))
    expr = Case(((binary("eq", col("v", TEXTS), lit("abc", pa.string())), lit(-1, pa.int64())),),
                Cast(col("v", TEXTS), pa.int64()), pa.int64())
    sql = "CASE WHEN v = 'abc' THEN -1 ELSE CAST(v AS BIGINT) END"
    assert_same_values(evaluate(expr, batch).to_arrow(device).to_pylist(), duckdb_values(sql, taken), sql)


def _random_condition(rng: np.random.Generator, depth: int):
    """Return ``(expr, sql)``: a random tree of AND, OR and NOT over comparisons of NULL-holding columns (several
    on one column, so they share its validity), a nullable bool column and NULL/TRUE literals."""
    if depth == 0 or rng.random() < 0.25:
        kind = rng.integers(0, 6)
        if kind == 0:
            return col("b"), "b"
        if kind == 1:
            value = [None, True, False][rng.integers(0, 3)]
            return lit(value, pa.bool_()), {None: "NULL::BOOLEAN", True: "TRUE", False: "FALSE"}[value]
        name, bound = [("i32", lit(int(rng.integers(-900, 900)), pa.int32())),
                       ("dec", lit(decimal.Decimal(int(rng.integers(-10**9, 10**9))).scaleb(-2), pa.decimal128(15, 2))),
                       ("f64", lit(float(rng.normal(0, 1000)), pa.float64()))][rng.integers(0, 3)]
        op, sql_op = [("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "="), ("ne", "<>")][rng.integers(0, 6)]
        return binary(op, col(name), bound), f"({name} {sql_op} {bound.value!r})".replace("Decimal(", "(")
    if rng.random() < 0.15:
        inner, sql = _random_condition(rng, depth - 1)
        return UnaryOp("not", inner, pa.bool_()), f"(NOT {sql})"
    op = ["and", "or"][rng.integers(0, 2)]
    (left, left_sql), (right, right_sql) = _random_condition(rng, depth - 1), _random_condition(rng, depth - 1)
    return binary(op, left, right), f"({left_sql} {op.upper()} {right_sql})"


@pytest.mark.parametrize("seed", range(12))
def test_predicates_of_and_or_trees_keep_the_true_rows(device, seed):
    """A filter evaluates its ANDs and ORs two-valued (``evaluate._truth``): the rows kept must be the rows
    where DuckDB's three-valued answer is TRUE, with NULLs and NOT (which turns NULL tracking back on) inside."""
    expr, sql = _random_condition(np.random.default_rng(seed), 4)
    check_predicate(device, expr, sql)


@pytest.mark.parametrize("name, dtype", [("i32", pa.int32()), ("dec", pa.decimal128(15, 2)), ("f64", pa.float64()),
                                         ("d", pa.date32()), ("b", pa.bool_())])
@pytest.mark.parametrize("otherwise", [None, "NULL"])
def test_one_branch_case_keeps_its_values_and_nulls_elsewhere(device, name, dtype, otherwise):
    """A conditional aggregate's argument, ``CASE WHEN c THEN x [ELSE NULL] END`` (``logical._one_branch``):
    x's values where c is TRUE and x is not NULL, NULL elsewhere (c FALSE or NULL, x NULL)."""
    condition = binary("or", binary("gt", col("i32"), lit(100, pa.int32())), col("b"))
    default = None if otherwise is None else lit(None, dtype)
    expr = Case(((condition, col(name)),), default, dtype)
    check(device, expr, f"CASE WHEN i32 > 100 OR b THEN {name}{' ELSE NULL' if otherwise else ''} END")
