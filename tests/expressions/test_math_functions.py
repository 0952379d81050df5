"""Check the math functions against DuckDB 2.0.1: values (halves away from zero, exact decimals), result
types, NULLs, NaN/inf/-0.0, errors DuckDB raises, through the translator, PlanBuilder and Session.sql."""

from __future__ import annotations

import decimal
import datetime

import duckdb
import pyarrow as pa
import pytest

from duckdb_check import batch_of, check, small_table
from duckdb_reference import assert_same_rows
from function_check import check_sql as _check_sql, schema_of
from gpu_engine import Session
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.expressions import evaluate
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.sql_translator import parse_expression

FLOATS = [0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 2.675, float("nan"), float("inf"), float("-inf"), 1e300, 1e-300, -1e-5,
          123456.789, None, 99.95, -7.0, 0.49999999999999994, 8.0, 0.125]
ROWS = len(FLOATS)
TABLE = small_table(
    f64=pa.array(FLOATS, pa.float64()),
    f32=pa.array([None if v is None else v for v in FLOATS], pa.float32()),
    i32=pa.array([0, 1, -1, 2**31 - 1, -(2**31) + 1, 15, -15, 25, None, 7, -7, 44, 45, -45, 999, 3, -3, 100, 6, -8],
                 pa.int32()),
    i64=pa.array([5, -5, 0, 2, None, 3, 10**15, -(10**15), 7, 1, -1, 4, 9, -9, 12, 8, 0, 33, 5, 2], pa.int64()),
    i8=pa.array([0, 1, -1, 125, -125, None, 14, -15, 55, 64, 5, 6, -6, 7, 8, 9, 10, 11, 12, 13], pa.int8()),
    dec=pa.array([None if k == 4 else decimal.Decimal(v) for k, v in enumerate(
        ["0.00", "1.25", "-1.25", "2.50", "0", "-2.55", "99.99", "-99.99", "12345.67", "0.05", "-0.05", "1.00",
         "-1.01", "7.49", "7.50", "-7.50", "3.14", "100.00", "-0.01", "42.42"])], pa.decimal128(15, 2)),
    d=pa.array([datetime.date(2020, 1, k + 1) if k % 6 else None for k in range(ROWS)], pa.date32()),
    d2=pa.array([datetime.date(2020 - k, 6, 15) for k in range(ROWS)], pa.date32()),
)


def check_sql(device, sql: str, table: pa.Table = TABLE):
    """Check ``sql`` against DuckDB, raising where DuckDB raises for the data."""
    return _check_sql(device, sql, table, errors=True)


CASES = [
    "round(f64)", "round(f64, 2)", "round(f64, 1)", "round(f64, -1)", "round(f64, -3)", "round(f32, 2)",
    "round(f32)", "round(i32, -1)", "round(i32, 2)", "round(i64, -2)", "round(dec, 1)", "round(dec)",
    "round(dec, -1)", "round(dec, 5)", "round(dec, -30)", "round(i32, -20)", "round(f64, NULL)",
    "round(f64, 400)", "round(f64, -400)", "round(f64, -300)", "round(f64, 3)",
    "floor(f64)", "ceil(f64)", "ceiling(f32)", "floor(dec)", "ceil(dec)", "floor(i32)", "ceil(i8)",
    "trunc(f64)", "trunc(f32)", "trunc(dec)", "trunc(i32)", "trunc(i8)",
    "abs(i32)", "abs(f64)", "abs(dec)", "abs(i8)", "abs(-i64)",
    "sign(f64)", "sign(i32)", "sign(dec)", "sign(i8)",
    "sqrt(f64)", "sqrt(i32)", "cbrt(f64)", "ln(f64)", "ln(dec)", "log(f64)", "log10(i64)", "log2(f64)",
    "log(2, f64)", "exp(f64)", "exp(dec)", "power(f64, 2)", "pow(i32, 0.5)", "f64 ** 3", "power(2, i8)",
    "power(dec, f64)",
    "greatest(i32, i64)", "greatest(i32, 0)", "least(f64, 0.5)", "greatest(f64, f32)", "least(dec, i8)",
    "greatest(i8, NULL, i32)", "least(i32, i64, i8)", "greatest(d, d2)", "least(d, DATE '2010-01-01')",
    "greatest(f64, 1)", "least(f64, 1)", "greatest(dec, 1.5)",
    "i32 // 7", "i32 // -2", "i64 // i8", "i8 // 3", "f64 // 2", "dec // 3", "i32 // 2.5", "-7 // 2",
    "i32 // i64", "f64 // i64",
    "nullif(i32, 0)", "nullif(f64, 0.5)", "nullif(dec, i8)",
    "coalesce(i32, i64, 0)", "coalesce(f64, dec)",
    "round(abs(f64) * 2, 1) + floor(dec) - sign(i8)",
    # trigonometry: DOUBLE of any number, NaN outside the domain (asin(2), sin(inf)), cot(0) infinite
    "sin(f64)", "cos(f32)", "tan(i32)", "cot(f64)", "cot(i8)", "asin(f64)", "acos(dec / 100)", "atan(f64)",
    "atan2(f64, i8)", "atan2(i32, f64)", "atan2(dec, NULL)", "degrees(f64)", "radians(dec)", "degrees(i64)",
    "sin(NULL)", "radians(degrees(f64)) - f64",
    # gcd / lcm (BIGINT of magnitudes; lcm's overflow raises as DuckDB's) and even (away from zero to an even integer)
    "gcd(i32, i64)", "gcd(i8, -6)", "gcd(i64, 0)", "lcm(i8, 6)", "lcm(i32, i8)", "lcm(i64, i32)", "gcd(NULL, i8)",
    "even(f64)", "even(dec)", "even(i32)", "even(f32)",
]


@pytest.mark.parametrize("sql", CASES)
def test_math_function(device, sql):
    check_sql(device, sql)


@pytest.mark.parametrize("sql, values, dtype, message", [
    ("abs(x)", [1, -(2**31), None], pa.int32(), "Overflow on abs"),
    ("round(x, -1)", [1, 127, None], pa.int8(), "Overflow in ROUND"),
    ("x // 0", [1, 2, None], pa.int32(), "Division by zero"),
    ("x // -1", [1, -(2**63), None], pa.int64(), "Overflow in division"),
    ("x // 0", [1.5, 2.0, None], pa.float64(), "Division by zero"),
])
def test_errors_as_duckdb(sql, values, dtype, message):
    from gpu_engine.device import get_device

    table = small_table(x=pa.array(values, dtype))
    with pytest.raises(duckdb.Error):
        with duckdb.connect() as connection:
            connection.register("t", table)
            connection.sql(f"SELECT {sql} FROM t").fetchall()
    expr = parse_expression(sql, schema_of(table), "Project[0]")
    with pytest.raises(ExecutionError, match=message):
        evaluate(expr, batch_of(table, get_device("cpu")))


def test_errors_skip_null_rows(device):
    table = small_table(x=pa.array([4, None, -9], pa.int32()), y=pa.array([2, 0, 3], pa.int32()))
    check(device, parse_expression("x // y", schema_of(table), "Project[0]"), "x // y", table)


@pytest.mark.parametrize("sql, message", [
    ("round(f64, i32)", "round()'s number of decimal places (argument 2) must be a constant"),
    ("abs(d)", "abs() needs a number as argument 1, got date32"),
    ("sqrt(f64, 2)", "sqrt(f64, 2)"),
    ("greatest(i32, d)", "greatest() arguments have no common type"),
    ("floor(f64, 2)", "floor: the argument 'decimals' (2) is not supported"),
])
def test_refusals_name_the_function(sql, message):
    with pytest.raises(PlanError) as raised:
        parse_expression(sql, schema_of(TABLE), "Project[7]")
    assert "Project[7]" in str(raised.value) and message in str(raised.value)


def _duckdb(sql: str, table: pa.Table) -> pa.Table:
    with duckdb.connect() as connection:
        connection.register("t", table)
        return connection.sql(sql).to_arrow_table()


def test_plan_builder_and_session(device_name):
    table = TABLE.drop_columns(["rid"])
    projections = ["round(dec, 1) AS r", "i32 // 4 AS q", "greatest(i8, i64) AS g", "sqrt(abs(f64)) AS s"]
    plan = PlanBuilder().values(table).filter("sign(i64) >= 0").project(projections).plan()
    session = Session(device=device_name)
    expected = _duckdb(f"SELECT {', '.join(projections)} FROM t WHERE sign(i64) >= 0", table)
    assert_same_rows(session.execute(plan), expected)
    session.register("t", table)
    query = ("SELECT sign(i32) AS k, sum(round(dec, 1)) AS s, max(ceil(f64)) AS m, min(i64 // 3) AS q, "
             "count(nullif(i8, 0)) AS c FROM t GROUP BY sign(i32) ORDER BY k NULLS LAST")
    assert_same_rows(session.sql(query), _duckdb(query, table), ordered=True)


def test_function_calls_round_trip_through_json_and_validation():
    """A Function node is plain plan data: JSON keeps it, and validation re-types it (a renamed or re-typed call in
    a document is refused, never evaluated)."""
    from gpu_engine.plans.serialization import SerializationError, plan_from_json, plan_to_json

    plan = (PlanBuilder().values(TABLE)
            .filter("round(f64, 1) > 0 AND starts_with(CAST(i32 AS VARCHAR), '1')")
            .project(["greatest(i8, i64) // 2 AS g", "lpad(CAST(dec AS VARCHAR), 9, '0') AS p",
                      "date_trunc('month', d) AS m", "d + 1 AS e"]).plan())
    text = plan_to_json(plan)
    assert plan_from_json(text) == plan
    with pytest.raises(SerializationError, match="unknown function 'lpadd'"):
        plan_from_json(text.replace('"name": "lpad"', '"name": "lpadd"'))
    with pytest.raises(SerializationError, match="is typed"):
        plan_from_json(text.replace('"name": "date_trunc"', '"name": "date_part"'))


def test_generated_kernels_refuse_function_calls_so_the_eager_path_runs():
    """The fused-kernel generator lowers no Function: it raises Unsupported, the fusion pass keeps the unfused
    operators, whose eager evaluator runs the call (the Session tests above go through that path)."""
    from gpu_engine.codegen.row_lowering import RowLowering, Unsupported
    from gpu_engine.codegen.source_writer import SourceWriter

    for sql in ["round(f64, 1)", "upper(CAST(i32 AS VARCHAR))", "date_trunc('month', d)", "i32 // 2"]:
        expr = parse_expression(sql, schema_of(TABLE), "Project[0]")
        with pytest.raises(Unsupported, match="Function is not evaluated in generated kernels"):
            RowLowering(SourceWriter(), lambda e: None, lambda code: [], []).lower(expr)
