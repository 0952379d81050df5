"""ORDER BY expressions that use the SELECT list's output names read those outputs, as in DuckDB."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from duckdb_reference import rows_mismatch

from gpu_engine import Session

TABLE = pa.table({"a": pa.array([1, 2, 3, 4, None], pa.int64()), "b": pa.array([5, 3, 1, 3, 2], pa.int64()),
                  "s": pa.array(["x", "y", "x", None, "y"])})


@pytest.mark.parametrize("sql", [
    "SELECT a + 10 AS a, b FROM t ORDER BY a * -1 NULLS FIRST, b",  # the output a, not the input column a
    "SELECT b AS x, a FROM t ORDER BY CASE WHEN x > 2 THEN x END NULLS FIRST, a NULLS FIRST",
    "SELECT s, sum(b) AS total FROM t GROUP BY s ORDER BY total * -1, s NULLS FIRST",
    "SELECT s, rank() OVER (ORDER BY b) AS r FROM t ORDER BY CASE WHEN r = 1 THEN 0 ELSE r END, s NULLS LAST",
    "SELECT a, b, a * b AS p FROM t WHERE a IN (SELECT b FROM t) ORDER BY p + 0 NULLS FIRST",
])
def test_order_by_expressions_over_output_names_match_duckdb(sql, device_name):
    session = Session(device=device_name)
    session.register("t", TABLE)
    connection = duckdb.connect()
    connection.register("t", TABLE)
    problem = rows_mismatch(session.sql(sql), connection.sql(sql).to_arrow_table(), ordered=True)
    assert problem is None, problem
