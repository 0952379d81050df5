"""Tests for kernels.slot_compaction (a slot table's occupied rows as columns) and kernels.prefetch (hints only)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from gpu_engine.kernels.prefetch import prefetch_row, prefetch_row_end
from gpu_engine.kernels.slot_compaction import occupied_slot_columns


def test_occupied_slot_columns_in_slot_order(device):
    rng = np.random.default_rng(5)
    table = rng.integers(-50, 50, size=(64, 4)).astype(np.int64)
    table[:, 0] = rng.choice([0, 1, 2, 6, 10], 64)  # 0 empty, 1 being written, >= 2 ready (with null bits)
    occupied = table[:, 0] >= 2
    columns = occupied_slot_columns(device, device.asarray(table), 2, int(occupied.sum()))
    np.testing.assert_array_equal(device.to_host(columns), table[occupied].T)


def test_occupied_slot_columns_of_an_empty_table(device):
    table = np.zeros((16, 3), dtype=np.int64)
    assert device.to_host(occupied_slot_columns(device, device.asarray(table), 2, 0)).shape == (3, 0)


@njit(nogil=True)
def _sum_with_prefetch(values, table, rows):
    total = 0
    for i in range(rows.shape[0]):
        if i + 2 < rows.shape[0]:
            prefetch_row(table, rows[i + 2])
            prefetch_row_end(table, rows[i + 2])
            prefetch_row(values, rows[i + 2])
            prefetch_row_end(values, rows[i + 2])
        total += table[rows[i], 1] + values[rows[i]]
    return total


@pytest.mark.parametrize("count", [0, 1, 1000])
def test_prefetch_is_only_a_hint(count):
    """Prefetching (a row's start or end) compiles for 1-D and 2-D arrays, also past the loop's last row, and leaves
    results unchanged."""
    rng = np.random.default_rng(count)
    values = rng.integers(0, 100, 4096)
    table = rng.integers(0, 100, (4096, 3))
    rows = rng.integers(0, 4096, count)
    assert _sum_with_prefetch(values, table, rows) == int(table[rows, 1].sum() + values[rows].sum())
