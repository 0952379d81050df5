"""Fused aggregations grouped by plain (not dictionary-encoded) string keys answer as DuckDB does.

A string grouping key is interned (:class:`~gpu_engine.kernels.string_keys.StringKeyTable`: hashed and
compared 8 bytes at a time) into dense ids the generated kernel groups on, in a partial step over scan
batches and in the final step over a local exchange's mapped batches. The query covers NULL keys, empty
strings, strings longer than 16 bytes that differ only past it, many distinct keys, and string and int
keys together, on cpu and cuda-sim (the CUDA twins).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
from duckdb_reference import rows_mismatch

from gpu_engine import Session

LONG = "a-prefix-of-16by"  # 16 bytes: keys built on it differ only past their first 16


def _table(rows: int, distinct: int, seed: int = 5) -> pa.Table:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, distinct, rows)
    labels = [None if p % 17 == 3 else "" if p % 17 == 5 else f"{LONG}{p}" if p % 2 else f"k{p}" for p in picks]
    return pa.table({"s": pa.array(labels, pa.string()),
                     "t": pa.array([None if p % 13 == 1 else f"t{p % 7}" for p in picks], pa.string()),
                     "i": pa.array(rng.integers(0, 4, rows), pa.int64()),
                     "v": pa.array(rng.integers(-50, 50, rows), pa.int64())})


def test_string_keys_group_as_duckdb_does(device_name):
    """NULL and empty keys, long keys apart only past 16 bytes, several batches and drivers, string and int keys
    together: the fused tier (compiled inline in tests) answers as DuckDB."""
    simulated = device_name == "cuda-sim"
    table = _table(120 if simulated else 4000, 40 if simulated else 900)
    session = Session(device=device_name, drivers=2, batch_rows=32 if simulated else 512)
    session.register("x", table, split_rows=max(1, table.num_rows // 4))
    columns = "t, i, s"
    sql = f"SELECT {columns}, sum(v) AS total, count(*) AS n, min(v) AS low FROM x GROUP BY {columns}"
    reference = duckdb.connect()
    reference.register("x", table)
    expected = reference.sql(sql).to_arrow_table()
    actual = session.sql(sql)
    assert rows_mismatch(actual, expected) is None, rows_mismatch(actual, expected)
    stats = session.last_stats().operator_stats_by_node()
    fused = [s for node in stats.values() for s in node if s.operator_type == "FusedAggregation"]
    assert fused and not any(s.runtime.get("lowest_tier_batches") for s in fused)
