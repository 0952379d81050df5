"""The CUDA twins' slot claims give the CPU twins' answers however a block's threads interleave at their atomics.

Each hash table's CUDA twin claims slots with atomics while other threads of the block probe the same slot:
the group-by and string-key tables claim with ``cas`` and elect the smallest row with ``max`` (a slot only
leaves EMPTY once, and ``max`` runs only on a slot seen claimed, so the two kinds never meet inside one
another), the string-key table counts its room with ``add`` alone, the join build claims its packed rows with
``cas`` alone. Here numba's simulator pauses inside and after every atomic (:mod:`simulated_atomics`), so the
block's 8 threads reach a new key's slot together and an operation of one atomic kind can land inside another
kind's read-modify-write: a protocol mixing kinds on one word would lose the write and these tests would hang or
fail (the fused aggregation's case, a wait by ``add(0)`` against an ``exch`` release before bfdb273, is
tests/operators/test_fused_table_sizing.py's). Inputs are runs of equal keys.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from simulated_atomics import interleave_atomics

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.group_by import GroupByHashTable, normalize_keys
from gpu_engine.kernels.hash_join import JoinHashTable
from gpu_engine.kernels.string_keys import StringKeyTable

pytestmark = [
    pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="schedules the CUDA simulator's threads"),
    pytest.mark.timeout(120),
]


@pytest.fixture
def device_name():
    return "cuda-sim"


def _first_appearance_ids(values) -> list[int]:
    known: dict = {}
    return [known.setdefault(value, len(known)) for value in values]


def test_group_by_claims_elect_each_keys_first_row(monkeypatch, device):
    interleave_atomics(monkeypatch)
    values = [int(v) for v in np.arange(40) // 5 % 6]  # runs of 5; keys seen again in later runs
    table = GroupByHashTable(device, (2,), initial_capacity=16)
    keys, _ = normalize_keys(device, [Column.from_arrow(pa.array(values, pa.int64()), device)], table.widths)
    group_ids, _ = table.insert(keys)
    assert device.to_host(group_ids).tolist() == _first_appearance_ids(values)


def test_string_key_claims_refusals_and_growth(monkeypatch, device):
    """A table with room for 2 strings: rows of one new string claim its slot together, the rest are refused,
    the table grows and the batch claims again."""
    interleave_atomics(monkeypatch)
    values = [f"key-{v}" for v in np.arange(40) // 5 % 6]
    table = StringKeyTable(device, initial_capacity=4, serial_rows=0)
    ids = table.intern(Column.from_arrow(pa.array(values), device))
    assert device.to_host(ids).tolist() == _first_appearance_ids(values)
    assert table.values().to_arrow(device).to_pylist() == list(dict.fromkeys(values))


def test_join_build_claims_one_slot_per_key(monkeypatch, device):
    interleave_atomics(monkeypatch)
    # Keys 10^15 apart: too sparse for a direct table, so the build claims hashed slots.
    build = [int(v) * 10**15 for v in np.arange(24) // 4 % 5]
    probe = [0, 4 * 10**15, 7, 2 * 10**15]
    keys, widths = normalize_keys(device, [Column.from_arrow(pa.array(build, pa.int64()), device)])
    table = JoinHashTable(device, keys, widths)
    assert not table.is_direct
    probe_keys, probe_widths = normalize_keys(device, [Column.from_arrow(pa.array(probe, pa.int64()), device)],
                                              table.widths)
    probe_rows, build_rows = (device.to_host(rows) for rows in table.match(probe_keys, probe_widths))
    expected = Counter((i, j) for i, p in enumerate(probe) for j, b in enumerate(build) if b == p)
    assert Counter(zip(probe_rows.tolist(), build_rows.tolist())) == expected
