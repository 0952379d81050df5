"""Check a scalar function call written as SQL against DuckDB: its result type, then its values or its error.

The translator types the call (as PlanBuilder's SQL snippets are typed), the evaluator runs it on a device, and
DuckDB runs the same SQL on the same table. One DuckDB connection per test table is kept for the session and each
check asks DuckDB once (the result's Arrow type and values together): the function tests run hundreds of cases on
two devices, and a connection per query was most of their time.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from duckdb_check import assert_same_values, batch_of
from gpu_engine.columnar import Column
from gpu_engine.columnar.types import normalize_type
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions import evaluate
from gpu_engine.plans.sql_translator import parse_expression

__all__ = ["schema_of", "duckdb_type", "check_sql"]

_CONNECTIONS: dict[int, tuple[pa.Table, duckdb.DuckDBPyConnection]] = {}


def schema_of(table: pa.Table) -> pa.Schema:
    """Return the engine's schema of a test table."""
    return pa.schema([pa.field(f.name, normalize_type(f.type)) for f in table.schema])


def _connection(table: pa.Table) -> duckdb.DuckDBPyConnection:
    entry = _CONNECTIONS.get(id(table))
    if entry is None or entry[0] is not table:  # the table is kept in the entry, so its id is not reused
        connection = duckdb.connect()
        connection.register("t", table)
        entry = _CONNECTIONS[id(table)] = (table, connection)
    return entry[1]


def duckdb_type(sql: str, table: pa.Table) -> pa.DataType:
    """Return the engine type of DuckDB's result type for ``sql`` over ``table`` (no row is evaluated)."""
    result = _connection(table).sql(f"SELECT {sql} AS r FROM t LIMIT 0").to_arrow_table()
    return normalize_type(result.schema.field("r").type)


def check_sql(device, sql: str, table: pa.Table, *, errors: bool = False) -> Column | None:
    """Assert the engine types ``sql`` as DuckDB does and computes DuckDB's values, row for row.

    With ``errors``, where DuckDB raises for the data (an overflow, a division by zero) the engine must raise
    an ExecutionError too; then None is returned instead of the column.
    """
    expr = parse_expression(sql, schema_of(table), "Project[0]")
    assert expr.dtype == duckdb_type(sql, table), f"{sql}: engine types {expr.dtype}"
    try:
        expected = _connection(table).sql(f"SELECT {sql} AS r FROM t ORDER BY rid").to_arrow_table()
    except duckdb.Error:
        if not errors:
            raise
        with pytest.raises(ExecutionError, match="(?i)overflow|out of range|division by zero"):
            evaluate(expr, batch_of(table, device))
        return None
    column = evaluate(expr, batch_of(table, device))
    assert column.dtype == expr.dtype, f"{expr}: result type {column.dtype}, IR says {expr.dtype}"
    assert_same_values(column.to_arrow(device).to_pylist(), expected.column("r").to_pylist(), f"{expr} vs {sql}")
    return column
