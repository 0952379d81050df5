"""Tests for kernels.sort.packed_key_words / stable_order: key words packed into one word where their ranges fit
64 bits sort, tie and change between neighbours exactly as the unpacked words do under ``lexsort``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.sort import (dense_ranks, key_changes, packed_key_words, sort_indices, sort_key_words,
                                     stable_order)


def _words(device, arrays, ascending, nulls_first):
    columns = [Column.from_arrow(a, device) for a in arrays]
    return sort_key_words(device, columns, ascending, nulls_first)


def _narrow_keys(rng, n):
    """An item-like key with NULLs, a date-like key and a dictionary string (its words are ranks: narrow)."""
    item = pa.array([None if v == 0 else int(v) for v in rng.integers(0, 40, n)], pa.int32())
    day = pa.array((rng.integers(0, 30, n) + 2_450_000).astype(np.int64))
    label = pa.array(rng.choice(["a", "bb", None, "ccc"], n).tolist()).dictionary_encode()
    return [item, day, label]


@pytest.mark.parametrize("seed", [0, 1])
def test_packed_words_sort_and_tie_as_the_words_do_on_cpu(seed):
    from gpu_engine.device import get_device

    device = get_device("cpu")
    rng = np.random.default_rng(seed)
    arrays = _narrow_keys(rng, 2_000)
    ascending, nulls_first = [True, False, True], [False, True, True]
    words = _words(device, arrays, ascending, nulls_first)
    packed = packed_key_words(device, words)
    assert words.shape[0] > 1 and packed.shape == (1, words.shape[1])  # narrow ranges: one word
    order = stable_order(device, words)
    np.testing.assert_array_equal(order, np.lexsort(words))
    np.testing.assert_array_equal(key_changes(device, packed, order), key_changes(device, words, order))
    np.testing.assert_array_equal(sort_indices(device, [Column.from_arrow(a, device) for a in arrays], ascending,
                                               nulls_first), np.lexsort(words))
    ranks, _, _ = dense_ranks(device, [Column.from_arrow(a, device) for a in arrays], ascending, nulls_first)
    expected = np.unique(words.T[:, ::-1], axis=0, return_inverse=True)[1].reshape(-1)  # lexicographic ranks
    np.testing.assert_array_equal(ranks, expected)


@pytest.mark.parametrize("wide", [pa.array([-(2**63), 2**63 - 1, 0, 5, None], pa.int64()),
                                  pa.array(["\x01abcdefgh", "zyxwvutsrq", "Mq\x7f3$&*(!x", None, "y"])])
def test_words_wider_than_64_bits_together_stay_as_they_are(wide):
    from gpu_engine.device import get_device

    device = get_device("cpu")
    words = _words(device, [wide, pa.array([1, 2, 1, 2, 1], pa.int32())], [True, False], [True, True])
    assert packed_key_words(device, words) is words
    np.testing.assert_array_equal(stable_order(device, words), np.lexsort(words))


def test_equal_rows_and_one_row_pack_to_zero_width():
    from gpu_engine.device import get_device

    device = get_device("cpu")
    for n in (1, 5):
        arrays = [pa.array([7] * n, pa.int32()), pa.array(["s"] * n)]
        words = _words(device, arrays, [True, True], [False, False])
        packed = packed_key_words(device, words)
        assert packed.shape == (1, n) and not packed.any()
        np.testing.assert_array_equal(stable_order(device, words), np.arange(n))


def test_other_devices_keep_the_words_and_sort_as_before(device):
    """Off cpu nothing is packed (reading the ranges back would be a host sync); the order is unchanged."""
    rng = np.random.default_rng(3)
    arrays = _narrow_keys(rng, 24)[:2]
    words = _words(device, arrays, [True, False], [False, True])
    if device.kernel_flavor != "cpu":
        assert packed_key_words(device, words) is words
    order = device.to_host(sort_indices(device, [Column.from_arrow(a, device) for a in arrays], [True, False],
                                        [False, True]))
    np.testing.assert_array_equal(order, np.lexsort(device.to_host(words)))
