"""A fused aggregation grouped by one string key puts each group in the slot its interned id names.

Why: the interned id is a dense number already, so hashing it again spread 100k groups (db-benchmark's
``GROUP BY id3``) over a 16 MB table, a cache and TLB miss a row; in slot ``id`` they fill the table's first
rows (bench/results/2026-11-28-dbstring-id-slots.md). The operator keeps the table above every id its interner
gave out (growing it with the move twins, which place by id too), NULL takes the last slot, and a PARTIAL step
that flushes starts its ids again. The tests read the slots a table held at each emit and check every answer
against DuckDB: NULL and empty keys, long keys, growth over several batches, flushes, dictionary-coded keys.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from duckdb_reference import rows_mismatch

from gpu_engine import Session
from gpu_engine.codegen.fused_aggregation_kernel import TAG_READY
from gpu_engine.operators.fused_aggregation import FusedAggregation


def _table(rows: int, distinct: int, nulls: bool = True) -> pa.Table:
    rng = np.random.default_rng(7)
    picks = rng.integers(0, distinct, rows)
    labels = pa.array([None if nulls and p % 53 == 4 else "" if p == 0 else f"a-key-longer-than-16-bytes-{p}"
                       if p % 2 else f"k{p}" for p in picks], pa.string())
    return pa.table({"s": labels, "d": labels.dictionary_encode(),
                     "v": pa.array(rng.integers(-50, 50, rows), pa.int64())})


@pytest.fixture
def emitted_slots(monkeypatch):
    """Record, at each grouped fused emit, the step, the occupied slots and the table's size."""
    seen: list[tuple[str, np.ndarray, int]] = []
    emit = FusedAggregation._emit

    def recording(self):
        if self.grouped:
            table = np.asarray(self._table)
            seen.append((self.step.name, np.flatnonzero(table[:, 0] >= TAG_READY), int(table.shape[0])))
        return emit(self)

    monkeypatch.setattr(FusedAggregation, "_emit", recording)
    return seen


def _check(session: Session, table: pa.Table, key: str) -> None:
    sql = f"SELECT {key}, sum(v) AS total, count(*) AS n, min(v) AS low FROM x GROUP BY {key}"
    reference = duckdb.connect()
    reference.register("x", table)
    problem = rows_mismatch(session.sql(sql), reference.sql(sql).to_arrow_table())
    assert problem is None, problem
    stats = session.last_stats().operator_stats_by_node()
    fused = [s for node in stats.values() for s in node if s.operator_type == "FusedAggregation"]
    assert fused and not any(s.runtime.get("lowest_tier_batches") or s.runtime.get("pending_runs") for s in fused)


def _assert_slotted_by_id(seen, with_null: bool) -> None:
    """Each PARTIAL step's emitted table held its groups in slots 0, 1, ... (NULL in the last slot)."""
    partials = [(occupied, slots) for step, occupied, slots in seen if step == "PARTIAL"]
    assert partials
    for occupied, slots in partials:
        ids = occupied[occupied < slots - 1] if with_null else occupied
        assert np.array_equal(ids, np.arange(len(ids))), (occupied[:20], slots)
        assert not with_null or occupied[-1] == slots - 1


def test_one_string_key_groups_in_its_ids_slots(device_name, emitted_slots):
    """Plain string keys over several batches and two drivers; on cpu 3,000 keys grow the table past its first
    1,024 slots (the move twin places by id too)."""
    simulated = device_name == "cuda-sim"
    table = _table(300 if simulated else 20_000, 40 if simulated else 3_000)
    session = Session(device=device_name, drivers=2, batch_rows=64 if simulated else 2_048)
    session.register("x", table, split_rows=max(1, table.num_rows // 4))
    _check(session, table, "s")
    _assert_slotted_by_id(emitted_slots, with_null=True)
    if not simulated:
        assert max(slots for step, _, slots in emitted_slots if step == "PARTIAL") > 1024


def test_dictionary_coded_keys_keep_hashed_slots(emitted_slots):
    """A dictionary-coded key interns whole dictionaries (values no row holds too): hashed as before, same answer."""
    table = _table(20_000, 3_000)
    session = Session(device="cpu", drivers=2, batch_rows=2_048)
    session.register("x", table, split_rows=5_000)
    _check(session, table, "d")


def test_flushing_partial_steps_start_their_ids_again(emitted_slots):
    """A PARTIAL step past ``partial_aggregation_max_groups`` flushes and interns anew, so its next table holds
    ids from 0 again rather than growing for the strings of groups it already emitted."""
    rng = np.random.default_rng(3)
    rows = np.arange(12_000)
    keys = [f"k{k}" for k in (rows // 2_000) * 400 + rng.integers(0, 400, len(rows))]  # 400 new strings a split
    table = pa.table({"s": pa.array(keys, pa.string()), "v": pa.array(rng.integers(-50, 50, len(rows)), pa.int64())})
    session = Session(device="cpu", drivers=2, batch_rows=2_000, partial_aggregation_max_groups=300)
    session.register("x", table, split_rows=2_000)
    _check(session, table, "s")
    partials = [(occupied, slots) for step, occupied, slots in emitted_slots if step == "PARTIAL"]
    assert len(partials) > 2
    _assert_slotted_by_id(emitted_slots, with_null=False)
    assert all(slots <= 1024 for _, slots in partials)  # a split's 400 strings, not the 2,400 of all splits


def test_a_final_step_interns_its_partitions_rows_and_groups_in_their_ids_slots(device_name, emitted_slots):
    """A FINAL step's batch is a slice of a PARTIAL driver's emitted groups, whose key's dictionary holds every
    group that driver saw (both partitions'): the FINAL step interns the rows of its own partition (not the
    dictionary whole, which put every partition's strings in each FINAL driver's table and keyed its slots by
    hash), so its groups take their ids as slots, NULL the last, in a table sized for its own groups. cuda-sim: the
    CUDA twins keep the dictionary's lookup table (decoding the rows would read back a batch): the answer only."""
    from gpu_engine.codegen.fused_aggregation_kernel import slots_for_groups
    from gpu_engine.operators.fused_aggregation import _INITIAL_SLOTS

    simulated = device_name == "cuda-sim"
    table = _table(300 if simulated else 20_000, 40 if simulated else 3_000)
    session = Session(device=device_name, drivers=2, batch_rows=64 if simulated else 2_048)
    session.register("x", table, split_rows=max(1, table.num_rows // 4))
    _check(session, table, "s")
    finals = [(occupied, slots) for step, occupied, slots in emitted_slots if step == "FINAL"]
    assert len(finals) == 2
    if simulated:
        return
    for occupied, slots in finals:
        ids = occupied[occupied < slots - 1]
        assert np.array_equal(ids, np.arange(len(ids))), (occupied[:20], slots)
        assert slots <= max(_INITIAL_SLOTS, slots_for_groups(len(occupied) + 1, "cpu")), (len(occupied), slots)
