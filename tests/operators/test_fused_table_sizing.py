"""A fused aggregation sizes its slot table from a sample of its first batch's keys, not from their rate.

The first batch's evenly spaced sample of 512 rows runs alone; the number of distinct keys it holds gives
the number of keys to expect (as equally likely keys would give it), so 2,000 random keys get a table of
a few thousand slots, not one sized by the sample's rate of new keys (~1 a row: tens of thousands of keys). Input in
runs of one key (sorted, as TPC-H's lineitem by l_orderkey) spreads the sample over runs, so its table
is not underestimated and no rows go pending.
"""

from __future__ import annotations

import os

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from duckdb_reference import rows_mismatch
from simulated_atomics import interleave_atomics

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


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="schedules the CUDA simulator's threads")
@pytest.mark.parametrize("device_name", ["cuda-sim"])
@pytest.mark.timeout(120)
def test_rows_of_one_new_key_claim_one_group_however_the_threads_interleave(monkeypatch, device_name):
    """Only the thread whose claim of an empty slot wins counts a group, so rows of one new key that reach its
    slot together leave no row pending in a table with room for the keys.

    Why the sizing above holds on a GPU: a batch's rows run on all of the GPU's threads at once, so the ~33 rows
    of each new key (2,000 keys, 65,536 rows) probe its empty slot together. When every one of them counted a
    group before claiming the slot (and gave it back on losing the claim), the count ran past the table's
    load limit (keys times their rows in flight), rows went pending and the table grew from their number (an
    H100 at 7900260: 3.2 MB, two growths). Here the simulator's threads switch after every atomic operation, so
    each block's 8 threads reach a new key's slot together: 4 keys in runs of 16 rows into a table of 16 slots
    (8 keys before rows go pending). Then 12 keys in runs of 4: claims past the limit give their slot back, and rows that
    waited on it claim it again or go pending (no key claims two slots: the answer equals DuckDB's). The
    simulator also pauses inside each atomic (:mod:`simulated_atomics`), where a release written with another
    kind of atomic than the waiters' reads was lost and the waiters spun for ever (the wait by ``add(0)`` against
    an ``exch`` release before bfdb273: this test hung).
    """
    from gpu_engine.operators import fused_aggregation

    interleave_atomics(monkeypatch)
    monkeypatch.setattr(fused_aggregation, "_INITIAL_SLOTS", 16)
    fused = _fused_stats(device_name, pa.table({"k": pa.array(np.arange(64) // 16, pa.int64())}), 64)
    assert not fused.runtime.get("pending_runs") and not fused.runtime.get("table_growths"), fused.runtime
    fused = _fused_stats(device_name, pa.table({"k": pa.array(np.arange(48) // 4, pa.int64())}), 48)
    assert fused.runtime.get("pending_runs") == 1, fused.runtime
