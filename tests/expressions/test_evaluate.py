"""Check the evaluator's contract: types, devices, columns read, literals, plan errors, composite expressions."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest

from duckdb_check import TABLE, assert_same_values, batch_of, binary, check, check_predicate, col, duckdb_values, lit
from gpu_engine.columnar import Batch
from gpu_engine.errors import PlanError
from gpu_engine.expressions import evaluate, evaluate_predicate
from gpu_engine.plans.expressions import Case, Cast, Expr, Extract, InList, Like, Substring, UnaryOp


class RecordingBatch(Batch):
    """A batch that records which columns an evaluation asks for."""

    def column(self, name):
        self.read.append(name)
        return super().column(name)


def recording_batch(device) -> RecordingBatch:
    batch = batch_of(TABLE, device)
    recording = RecordingBatch(batch.names, batch.columns, batch.device, None, batch.base_rows)
    recording.read = []
    return recording


def test_only_referenced_columns_are_read(device):
    batch = recording_batch(device)
    expr = binary("and", binary("gt", col("dec"), lit(0, pa.int32())), Like(col("ds"), "B%"))
    evaluate(expr, batch)
    assert sorted(set(batch.read)) == ["dec", "ds"]


@pytest.mark.parametrize(
    "literal",
    [lit(3, pa.int32()), lit(2.5, pa.float64()), lit(decimal.Decimal("1.25"), pa.decimal128(5, 2)),
     lit(datetime.date(2020, 1, 2), pa.date32()), lit("é", pa.string()), lit(True, pa.bool_()), lit(None, pa.int64()),
     lit(None, pa.string())],
)
def test_literals_broadcast_on_the_device(device, literal):
    column = evaluate(literal, batch_of(TABLE, device))
    assert isinstance(column.data, device.xp.ndarray)
    assert column.dtype == literal.dtype
    values = column.to_arrow(device).to_pylist()
    assert values == [literal.value] * TABLE.num_rows


def test_column_ref_returns_the_column(device):
    batch = batch_of(TABLE, device)
    assert evaluate(col("dec"), batch) is batch.column("dec")


def test_results_live_on_the_device(device):
    column = evaluate(binary("mul", col("dec"), col("i32")), batch_of(TABLE, device))
    assert isinstance(column.data, device.xp.ndarray)
    assert isinstance(column.validity, device.xp.ndarray)


def test_batch_with_a_gather_map(device):
    """Rows come through the batch's gather map; literals broadcast to the mapped row count."""
    indices = list(range(TABLE.num_rows - 1, -1, -3))
    batch = batch_of(TABLE, device).with_gather_map(device.asarray(np.array(indices, dtype=np.int32)))
    taken = TABLE.take(indices).set_column(0, "rid", pa.array(range(len(indices)), pa.int64()))
    expr = Case(((Like(col("ds"), "%A%"), Substring(col("s"), 1, 2)),), Cast(col("dec"), pa.string()), pa.string())
    sql = "CASE WHEN ds LIKE '%A%' THEN substring(s, 1, 2) ELSE CAST(dec AS VARCHAR) END"
    result = evaluate(expr, batch)
    assert len(result) == len(indices)
    assert_same_values(result.to_arrow(device).to_pylist(), duckdb_values(sql, taken), sql)
    assert len(evaluate(lit(1, pa.int32()), batch)) == len(indices)


def test_tpch_q1_style_charge(device):
    one = lit(1, pa.int32())
    discount = lit(decimal.Decimal("0.06"), pa.decimal128(3, 2))
    tax = lit(decimal.Decimal("0.08"), pa.decimal128(3, 2))
    expr = binary("mul", binary("mul", col("dec"), binary("sub", one, discount)), binary("add", one, tax))
    check(device, expr, "dec * (1 - 0.06) * (1 + 0.08)")


def test_tpch_q6_style_predicate(device):
    expr = binary(
        "and",
        binary("and", binary("ge", col("d"), lit(datetime.date(1994, 1, 1), pa.date32())),
               binary("lt", col("d"), lit(datetime.date(1995, 1, 1), pa.date32()))),
        binary("and", binary("ge", col("dec"), lit(decimal.Decimal("-5000000.00"), pa.decimal128(9, 2))),
               binary("lt", col("i32"), lit(24, pa.int32()))),
    )
    check_predicate(device, expr,
                    "d >= DATE '1994-01-01' AND d < DATE '1995-01-01' AND dec >= -5000000.00 AND i32 < 24")


def test_composite_string_and_temporal_expression(device):
    expr = Case(
        (
            (InList(Substring(col("ds"), 1, 2), (lit("BR", pa.string()), lit("FR", pa.string()))),
             Cast(Extract("year", col("d")), pa.string())),
            (UnaryOp("is_null", col("s"), pa.bool_()), Cast(col("dec"), pa.string())),
        ),
        Substring(col("s"), 2, 3),
        pa.string(),
    )
    check(device, expr, "CASE WHEN substring(ds, 1, 2) IN ('BR', 'FR') THEN CAST(extract(year FROM d) AS VARCHAR) "
                        "WHEN s IS NULL THEN CAST(dec AS VARCHAR) ELSE substring(s, 2, 3) END")


def test_unknown_node_is_a_plan_error(device):
    class Mystery(Expr):
        dtype = pa.int64()

        def sql(self):
            return "mystery()"

    with pytest.raises(PlanError, match="Mystery"):
        evaluate(Mystery(), batch_of(TABLE, device))


def test_predicate_must_be_boolean(device):
    with pytest.raises(PlanError, match="boolean"):
        evaluate_predicate(col("i32"), batch_of(TABLE, device))


def test_unsupported_cast_is_a_plan_error(device):
    with pytest.raises(PlanError, match="not supported"):
        evaluate(Cast(col("d"), pa.binary()), batch_of(TABLE, device))  # (DATE -> INTEGER raises per row)


def test_unknown_extract_field_is_a_plan_error(device):
    with pytest.raises(PlanError, match="EXTRACT"):
        evaluate(Extract("century", col("d")), batch_of(TABLE, device))


def test_decimal_scale_beyond_int64_is_a_plan_error(device):
    with pytest.raises(PlanError, match="scale"):
        evaluate(Cast(col("dec"), pa.decimal128(38, 20)), batch_of(TABLE, device))
