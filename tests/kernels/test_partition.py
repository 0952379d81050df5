"""Tests for gpu_engine.kernels.partition: every row lands exactly once, in partition ``hash % n``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.hash import hash_columns
from gpu_engine.kernels.partition import partition_gather_maps


def check_partitions(device, hashes, num_partitions):
    indices, offsets = partition_gather_maps(device, device.asarray(hashes), num_partitions)
    indices, offsets = device.to_host(indices), device.to_host(offsets)
    assert indices.dtype == np.int32 and offsets.dtype == np.int64
    assert offsets.shape == (num_partitions + 1,)
    assert offsets[0] == 0 and offsets[-1] == len(hashes) and np.all(np.diff(offsets) >= 0)
    np.testing.assert_array_equal(np.sort(indices), np.arange(len(hashes)))
    expected = hashes % np.uint64(num_partitions)
    for p in range(num_partitions):
        rows = indices[offsets[p]:offsets[p + 1]]
        assert np.all(expected[rows] == p)
        if device.kernel_flavor == "cpu":  # the CPU twin is stable
            assert np.all(np.diff(rows) > 0)
    return indices, offsets


@pytest.mark.parametrize("num_partitions", [1, 2, 3, 7, 16, 1000, 1024, 1025, 2000])
def test_random_hashes(device, num_partitions):
    rng = np.random.default_rng(num_partitions)
    hashes = rng.integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True)
    check_partitions(device, hashes, num_partitions)


@pytest.mark.parametrize("rows", [1, 9, 4099])
def test_rows_split_unevenly_between_blocks(device, rows):
    """The GPU twin gives each block one contiguous chunk; the last chunk is shorter (or empty)."""
    rng = np.random.default_rng(rows)
    check_partitions(device, rng.integers(0, 2**64 - 1, rows, dtype=np.uint64, endpoint=True), 16)


def test_partition_sizes_match_a_histogram(device):
    hashes = np.array([5, 5, 5, 2, 9, 2**64 - 1, 0], dtype=np.uint64)
    _, offsets = check_partitions(device, hashes, 4)
    np.testing.assert_array_equal(np.diff(offsets), np.bincount((hashes % np.uint64(4)).astype(np.int64), minlength=4))


def test_hashes_of_columns(device):
    keys = Column.from_arrow(pa.array(["a", "bb", None, "a", "", "ccc"] * 20), device)
    hashes = device.to_host(hash_columns(device, [keys]))
    indices, offsets = check_partitions(device, hashes, 3)
    # equal keys always go to the same partition
    partition_of_row = np.empty(len(hashes), np.int64)
    for p in range(3):
        partition_of_row[indices[offsets[p]:offsets[p + 1]]] = p
    values = keys.to_arrow(device).to_pylist()
    for value in set(values):
        assert len({partition_of_row[i] for i, v in enumerate(values) if v == value}) == 1


def test_empty_input(device):
    indices, offsets = check_partitions(device, np.zeros(0, np.uint64), 4)
    assert indices.shape == (0,)
    np.testing.assert_array_equal(offsets, np.zeros(5, np.int64))


def test_more_partitions_than_rows(device):
    check_partitions(device, np.array([3, 1], np.uint64), 64)


def test_num_partitions_must_be_positive(device):
    with pytest.raises(ValueError):
        partition_gather_maps(device, device.asarray(np.zeros(3, np.uint64)), 0)
