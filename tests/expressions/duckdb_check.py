"""Build expression IR over a shared test table and check its evaluation against DuckDB.

DuckDB is the reference: every check evaluates the IR on a device and runs the
equivalent SQL on the same pyarrow table, row for row. Integers, decimals,
strings and dates must match exactly, floats within 1e-9 relative, NULLs in the
same rows.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import math
from collections.abc import Iterator
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar import Batch
from gpu_engine.columnar.types import normalize_type
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions import evaluate, evaluate_predicate
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Expr, Literal

ROWS = 200
STRINGS = [
    "", "a", "abc", "ABC", "abd", "hello", "héllo", "naïve café", "日本語テキスト", "🎉 party", "a%b_c", "zz",
    "hello world", " spaced ", "Ωmega", "x" * 30, "é", "ab", "b", "h",
]
DICTIONARY = ["", "BRAZIL", "FRANCE", "ÉIRE", "日本", "GERMANY", "a_b%c", "BRAZILIAN"]
NUMBER_TEXTS = ["12", " 12 ", "-7", "+5", "3.14159", "1e3", "0.005", "-2.5", "2.5", ".5", "1.", "-0.0", "  42",
                "99.995", "1.23e1", "-1E-1", "007"]
DATE_TEXTS = ["2020-01-05", " 1999-12-31 ", "2000-2-29", "1970/01/01", "1900-03-01", "2024-12-31", "0001-01-01",
              "9999-12-31", "1969-12-31", "2100-02-28"]


def _with_nulls(rng: np.random.Generator, values: list, fraction: float = 0.12) -> list:
    mask = rng.random(len(values)) < fraction
    return [None if m else v for v, m in zip(values, mask)]


def build_table(rows: int = ROWS, seed: int = 7) -> pa.Table:
    """Return the shared table: every column has NULLs; extremes and zeros are planted."""
    rng = np.random.default_rng(seed)
    i32 = rng.integers(-1000, 1000, rows).tolist()
    i32[:4] = [0, 1, -1, 2**31 - 1]
    i64 = rng.integers(-(10**12), 10**12, rows).tolist()
    i64[:4] = [0, 3, -3, 7]
    f64 = (rng.normal(0, 1000, rows)).tolist()
    f64[:8] = [0.0, -0.0, 0.5, -2.5, float("nan"), float("inf"), 1e-300, 0.125]
    cents = rng.integers(-(10**9), 10**9, rows).tolist()
    cents[:6] = [0, 5, -5, 250, -250, 99999]
    dec = [decimal.Decimal(c).scaleb(-2) for c in cents]
    days = rng.integers(-25000, 50000, rows).tolist()
    days[:4] = [0, -1, 11016, 10956]  # 1970-01-01, 1969-12-31, 2000-02-29, 2000-01-01
    dates = [datetime.date(1970, 1, 1) + datetime.timedelta(days=d) for d in days]
    micros = rng.integers(-(2 * 10**15), 4 * 10**15, rows).tolist()
    micros[:2] = [-1, 86_400_000_000 - 1]
    strings = [STRINGS[k] for k in rng.integers(0, len(STRINGS), rows)]
    codes = rng.integers(0, len(DICTIONARY), rows).tolist()
    numbers = [NUMBER_TEXTS[k] for k in rng.integers(0, len(NUMBER_TEXTS), rows)]
    date_texts = [DATE_TEXTS[k] for k in rng.integers(0, len(DATE_TEXTS), rows)]
    flags = (rng.random(rows) < 0.5).tolist()
    columns = {
        "rid": pa.array(range(rows), pa.int64()),
        "i32": pa.array(_with_nulls(rng, i32), pa.int32()),
        "i64": pa.array(_with_nulls(rng, i64), pa.int64()),
        "f64": pa.array(_with_nulls(rng, f64), pa.float64()),
        "dec": pa.array(_with_nulls(rng, dec), pa.decimal128(15, 2)),
        "d": pa.array(_with_nulls(rng, dates), pa.date32()),
        "ts": pa.array(_with_nulls(rng, micros), pa.timestamp("us")),
        "s": pa.array(_with_nulls(rng, strings), pa.string()),
        "ds": pa.DictionaryArray.from_arrays(pa.array(_with_nulls(rng, codes), pa.int32()), pa.array(DICTIONARY)),
        "num_s": pa.array(_with_nulls(rng, numbers), pa.string()),
        "date_s": pa.array(_with_nulls(rng, date_texts), pa.string()),
        "b": pa.array(_with_nulls(rng, flags), pa.bool_()),
    }
    return pa.table(columns)


TABLE = build_table()


def col(name: str, table: pa.Table = TABLE) -> ColumnRef:
    """Return a reference to a table column with its engine type."""
    return ColumnRef(name, normalize_type(table.schema.field(name).type))


def lit(value: Any, dtype: pa.DataType) -> Literal:
    """Return a typed literal."""
    return Literal(value, dtype)


def _decimal_parts(dtype: pa.DataType) -> tuple[int, int]:
    """Return (precision, scale), integers counting as the decimal that holds every value of their width."""
    if pa.types.is_decimal(dtype):
        return dtype.precision, dtype.scale
    return {8: 3, 16: 5, 32: 10, 64: 19}[dtype.bit_width], 0


def arithmetic_type(op: str, left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """Return the result type the SQL translator assigns (DuckDB's rules: integers keep the wider type)."""
    if pa.types.is_floating(left) or pa.types.is_floating(right):
        return pa.float64() if pa.float64() in (left, right) else pa.float32()
    if op == "div":
        return pa.float64()
    if not (pa.types.is_decimal(left) or pa.types.is_decimal(right)):
        if pa.types.is_signed_integer(left) != pa.types.is_signed_integer(right):
            signed, unsigned = (left, right) if pa.types.is_signed_integer(left) else (right, left)
            return signed if signed.bit_width > unsigned.bit_width else pa.int64()
        return left if left.bit_width >= right.bit_width else right
    (p1, s1), (p2, s2) = _decimal_parts(left), _decimal_parts(right)
    if op == "mul":
        return pa.decimal128(min(p1 + p2, 18), s1 + s2)
    scale = max(s1, s2)
    return pa.decimal128(max(p1 - s1, p2 - s2) + scale + 1, scale)


def binary(op: str, left: Expr, right: Expr) -> BinaryOp:
    """Return a typed BinaryOp (bool for comparisons and AND/OR, DuckDB's type for arithmetic)."""
    if op in ("eq", "ne", "lt", "le", "gt", "ge", "and", "or"):
        return BinaryOp(op, left, right, pa.bool_())
    return BinaryOp(op, left, right, arithmetic_type(op, left.dtype, right.dtype))


#: The one DuckDB connection of this test process (made at first use). Why shared: ``duckdb.connect()`` costs
#: ~16 ms of CPU, ten times a check's query over :data:`TABLE` (1.9 ms with the table registered on a kept
#: connection), and the expression tests run thousands of checks (tests/expressions/function_check.py keeps its
#: connections too). Only SELECTs run on it, the table registered as ``t`` for each and unregistered after.
_SHARED_CONNECTION: list[duckdb.DuckDBPyConnection] = []


@contextlib.contextmanager
def _connection(table: pa.Table) -> Iterator[duckdb.DuckDBPyConnection]:
    """Yield the shared connection with ``table`` registered as ``t`` (unregistered afterwards)."""
    if not _SHARED_CONNECTION:
        _SHARED_CONNECTION.append(duckdb.connect())
    connection = _SHARED_CONNECTION[0]
    connection.register("t", table)
    try:
        yield connection
    finally:
        connection.unregister("t")


def duckdb_values(sql: str, table: pa.Table = TABLE) -> list:
    """Return DuckDB's values of ``sql`` per row of ``table``, in row order."""
    with _connection(table) as connection:
        return [row[0] for row in connection.sql(f"SELECT {sql} AS r FROM t ORDER BY rid").fetchall()]


def _same(actual: Any, expected: Any) -> bool:
    if actual is None or expected is None:
        return actual is None and expected is None
    if isinstance(expected, float) or isinstance(actual, float):
        actual, expected = float(actual), float(expected)
        if math.isnan(expected) or math.isnan(actual):
            return math.isnan(expected) and math.isnan(actual)
        if math.isinf(expected) or math.isinf(actual):
            return actual == expected
        return math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-300)
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    return actual == expected  # ints, Decimals of any scale, strings, dates

def assert_same_values(actual: list, expected: list, label: str) -> None:
    """Assert two row lists agree (see module docstring), naming the first differing rows."""
    assert len(actual) == len(expected), f"{label}: {len(actual)} rows, DuckDB has {len(expected)}"
    wrong = [(i, a, e) for i, (a, e) in enumerate(zip(actual, expected)) if not _same(a, e)]
    assert not wrong, f"{label}: {len(wrong)} rows differ from DuckDB, first (row, engine, duckdb): {wrong[:5]}"


def batch_of(table: pa.Table, device) -> Batch:
    """Return the table as a batch on ``device``."""
    return Batch.from_arrow(table, device)


def check(device, expr: Expr, sql: str, table: pa.Table = TABLE):
    """Evaluate ``expr`` on ``device`` and assert it matches DuckDB's ``sql``; return the result column."""
    column = evaluate(expr, batch_of(table, device))
    assert column.dtype == expr.dtype, f"{expr}: result type {column.dtype}, IR says {expr.dtype}"
    assert len(column) == table.num_rows
    assert_same_values(column.to_arrow(device).to_pylist(), duckdb_values(sql, table), f"{expr} vs {sql}")
    return column


def check_many(device, cases: list[tuple[Expr, str]], table: pa.Table = TABLE) -> None:
    """Check each ``(expr, sql)`` as :func:`check` does, with DuckDB's values of all of them from one query."""
    with _connection(table) as connection:
        rows = connection.sql(f"SELECT {', '.join(sql for _, sql in cases)} FROM t ORDER BY rid").fetchall()
    batch = batch_of(table, device)
    for k, (expr, sql) in enumerate(cases):
        column = evaluate(expr, batch)
        assert column.dtype == expr.dtype, f"{expr}: result type {column.dtype}, IR says {expr.dtype}"
        assert_same_values(column.to_arrow(device).to_pylist(), [row[k] for row in rows], f"{expr} vs {sql}")


def check_predicate(device, expr: Expr, sql: str, table: pa.Table = TABLE) -> None:
    """Assert ``evaluate_predicate`` keeps exactly the rows where DuckDB's ``sql`` is TRUE."""
    mask = device.to_host(evaluate_predicate(expr, batch_of(table, device)))
    expected = duckdb_values(f"coalesce(({sql}), false)", table)
    assert_same_values([bool(m) for m in mask], expected, f"predicate {expr} vs {sql}")


def check_raises(device, expr: Expr, sql: str, table: pa.Table, match: str) -> None:
    """Assert DuckDB rejects ``sql`` and the engine raises ExecutionError matching ``match``."""
    with pytest.raises(duckdb.Error):
        duckdb_values(sql, table)
    with pytest.raises(ExecutionError, match=match):
        evaluate(expr, batch_of(table, device))


def check_same_outcome(device, expr: Expr, sql: str, table: pa.Table = TABLE) -> None:
    """Assert the engine raises where DuckDB raises (overflow, a remainder by zero), else that the values match."""
    try:
        duckdb_values(sql, table)
    except duckdb.Error:
        with pytest.raises(ExecutionError, match="(?i)overflow|out of range|division by zero"):
            evaluate(expr, batch_of(table, device))
        return
    check(device, expr, sql, table)


def small_table(**columns: pa.Array) -> pa.Table:
    """Return a table of the given columns plus the ``rid`` ordering column."""
    rows = len(next(iter(columns.values())))
    return pa.table({"rid": pa.array(range(rows), pa.int64()), **columns})
