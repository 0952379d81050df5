"""The buffer recycler keeps large arrays for reuse and drops small ones or those beyond its budget."""

import numpy as np

from gpu_engine.exec import buffer_recycler


def test_a_given_array_is_taken_again_and_small_ones_are_not_kept():
    big = buffer_recycler.take_array(np, (buffer_recycler.MIN_BYTES // 8, 2), np.int64)
    before = buffer_recycler.kept_bytes()
    buffer_recycler.give_array(np, big)
    assert buffer_recycler.kept_bytes() == before + big.nbytes
    again = buffer_recycler.take_array(np, big.shape, np.int64)
    assert again is big and buffer_recycler.kept_bytes() == before
    small = np.empty(16, np.int64)
    buffer_recycler.give_array(np, small)
    assert buffer_recycler.kept_bytes() == before
    assert buffer_recycler.take_array(np, (16,), np.int64) is not small


def test_the_budget_bounds_what_is_kept(monkeypatch):
    monkeypatch.setattr(buffer_recycler, "MAX_KEPT_BYTES", buffer_recycler.kept_bytes() + buffer_recycler.MIN_BYTES)
    first = np.empty(buffer_recycler.MIN_BYTES // 8, np.int64)
    second = np.empty(buffer_recycler.MIN_BYTES // 8, np.int64)
    buffer_recycler.give_array(np, first)
    buffer_recycler.give_array(np, second)  # over the budget: dropped
    assert buffer_recycler.take_array(np, first.shape, np.int64) is first
    assert buffer_recycler.take_array(np, first.shape, np.int64) is not second


def test_device_arrays_are_left_to_their_own_pool():
    class DeviceArray:  # stands in for a CuPy array
        nbytes = buffer_recycler.MIN_BYTES
        shape = (buffer_recycler.MIN_BYTES // 8,)
        dtype = np.dtype(np.int64)

    before = buffer_recycler.kept_bytes()
    buffer_recycler.give_array(np, DeviceArray())
    assert buffer_recycler.kept_bytes() == before
