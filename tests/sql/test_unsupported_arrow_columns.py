"""A registered Arrow table's column of a type the engine does not read (float16, duration, binary) is refused by
name in a plan that reads it, and the table's other columns answer. A float16 column crashed every
query over its table with Arrow's "Function 'min_max' has no kernel matching input types (halffloat)": the table's
statistics took each float column's range (fuzz round 11's ``arrow`` family, seed 2). (A column of the null type
reads as SQL's NULL type since stop 54: tests/sql/test_null_type_columns.py.)"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from duckdb_reference import session_with_tables

from gpu_engine.errors import GpuEngineError

COLUMNS = {"h": pa.array([1.5, None, -2.0], pa.float16()), "du": pa.array([5, None, -1], pa.duration("us")),
           "b": pa.array([b"a", None, b"\x00"], pa.binary())}


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_an_unsupported_column_is_refused_by_name(name, device_name):
    table = pa.table({"i": pa.array([1, 2, None], pa.int64()), name: COLUMNS[name]})
    session = session_with_tables({"t": table}, device=device_name, compile_mode="lowest")
    assert session.sql("SELECT sum(i) AS s FROM t WHERE i > 1").to_pylist() == [{"s": 2}]
    with pytest.raises(GpuEngineError, match=re.escape(f"unsupported column type {table.schema.field(name).type}")):
        session.sql(f"SELECT i, {name} FROM t")


def test_a_decimal256_past_38_digits_is_refused_by_name(device_name):
    """decimal256 values within 38 digits read as decimal128; one past them is named (Arrow's "Decimal value does
    not fit in precision 38" came through before)."""
    import decimal

    values = [decimal.Decimal(10) ** 45, decimal.Decimal(1), None]
    table = pa.table({"i": pa.array([1, 2, None], pa.int64()), "w": pa.array(values, pa.decimal256(50, 0)),
                      "n": pa.array(values[1:] + [decimal.Decimal("-2.5")], pa.decimal256(40, 1))})
    session = session_with_tables({"t": table}, device=device_name, compile_mode="lowest")
    assert session.sql("SELECT sum(n) AS s FROM t").to_pylist() == [{"s": decimal.Decimal("-1.5")}]
    with pytest.raises(GpuEngineError, match=re.escape("a decimal256(50, 0) value has more than 38 digits")):
        session.sql("SELECT i, w FROM t")
