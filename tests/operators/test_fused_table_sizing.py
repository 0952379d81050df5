"""A fused aggregation sizes its slot table from a sample of its first batch's keys, not from their rate.

The first batch's evenly spaced sample of 512 rows runs alone; the number of distinct keys it holds gives
the number of keys to expect (as equally likely keys would give it), so 2,000 random keys get a table of
a few thousand slots, not one sized by the sample's rate of new keys (~1 a row: tens of thousands of keys). Input in
runs of one key (sorted, as TPC-H's lineitem by l_orderkey) spreads the sample over runs, so its table
is not underestimated and no rows go pending.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
from duckdb_reference import rows_mismatch

from gpu_engine import Session

SLOT_WORDS = 3  # tag, key, count


def _fused_stats(device_name: str, table: pa.Table, rows: int):
    session = Session(device=device_name, drivers=1, batch_rows=rows)
    session.register("x", table)
    sql = "SELECT k, count(*) AS n FROM x GROUP BY k"
    reference = duckdb.connect()
    reference.register("x", table)
    actual = session.sql(sql)
    problem = rows_mismatch(actual, reference.sql(sql).to_arrow_table())
    assert problem is None, problem
    stats = session.last_stats().operator_stats_by_node()
    (fused,) = [s for node in stats.values() for s in node if s.operator_type == "FusedAggregation"]
    return fused


def test_random_keys_size_the_table_by_their_number(device_name):
    simulated = device_name == "cuda-sim"
    rows, keys = (4096, 300) if simulated else (65536, 2000)
    values = np.random.default_rng(3).integers(0, keys, rows)
    fused = _fused_stats(device_name, pa.table({"k": pa.array(values, pa.int64())}), rows)
    assert fused.peak_memory_bytes <= 8 * keys * SLOT_WORDS * 8, fused.peak_memory_bytes  # 820 KB before on cpu, 200 KB on cuda-sim


def test_keys_in_runs_are_sampled_across_runs_and_go_pending_nowhere(device_name):
    """Sorted keys in runs of 4, in one batch and in 16: each later batch brings a quarter of its rows as new
    keys (TPC-H Q18's partial step): no batch's rows go pending."""
    simulated = device_name == "cuda-sim"
    rows = 4096 if simulated else 65536
    table = pa.table({"k": pa.array(np.arange(rows) // 4, pa.int64())})
    for batch_rows in (rows, rows // 16):
        fused = _fused_stats(device_name, table, batch_rows)
        assert not fused.runtime.get("pending_runs"), (batch_rows, fused.runtime)
