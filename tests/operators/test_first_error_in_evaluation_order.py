"""A generated kernel reports the first error in evaluation order, at its first row, as DuckDB and the eager
evaluator do (row_lowering.error_word: the error code before the row).

DuckDB evaluates one expression over a whole vector before the next, as the engine's eager evaluator does over a
batch: with row 10 overflowing only ``v * 4`` and row 20 both ``v + v`` and ``v * 4``, ``SELECT v + v, v * 4``
fails on the addition (row 20). Generated kernels went row by row and reported the multiplication (row 10); a
split aggregation's slices, each row by row, likewise.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from gpu_engine import ExecutionError, Session
from gpu_engine.codegen import kernel_bounds

VALUES = list(range(300))
VALUES[10] = 2**61 + 5  # v * 4 overflows, v + v does not
VALUES[20] = 2**62  # both overflow
TABLE = pa.table({"g": pa.array([i % 3 for i in range(300)], pa.int64()), "v": pa.array(VALUES, pa.int64())})

QUERIES = {
    "projection": "SELECT g, v + v AS a, v * 4 AS b FROM t",
    "group_by": "SELECT g, sum(v + v) AS a, count(*) AS c, sum(v * 4) AS b FROM t GROUP BY g",
    "global": "SELECT sum(v + v) AS a, count(*) AS c, sum(v * 4) AS b FROM t",
}


def _message(device: str, sql: str, fuse: bool) -> str:
    session = Session(device=device, drivers=1, batch_rows=512, fuse=fuse, compile_mode="inline")
    session.register("t", TABLE, split_rows=300)
    with pytest.raises(ExecutionError) as raised:
        session.sql(sql)
    return str(raised.value).split(" [operator")[0]


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("name", list(QUERIES))
def test_the_generated_kernels_report_the_first_error_in_evaluation_order(device_name, monkeypatch, name, split):
    if device_name != "cpu" and (split or name == "global"):
        pytest.skip("cuda-sim: one shape a kernel kind (the simulator interprets every row)")
    if split:
        if name == "projection":
            pytest.skip("only aggregations split")
        monkeypatch.setattr(kernel_bounds, "MAX_AGGREGATION_SLICE_NODES", 8)  # each sum a slice of its own
    sql = QUERIES[name]
    connection = duckdb.connect()
    connection.register("t", TABLE)
    with pytest.raises(duckdb.Error, match="Overflow in addition"):
        connection.sql(sql).fetchall()
    fused = _message(device_name, sql, True)
    assert "Overflow in addition" in fused and "(first at row 20)" in fused, fused
    assert fused == _message("cpu", sql, False)
