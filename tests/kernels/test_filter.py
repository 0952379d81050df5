"""Tests for gpu_engine.kernels.filter: the kept rows are exactly the true and valid ones, in order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_engine.kernels.filter import selection_from_mask


def select(device, mask, validity=None):
    result = selection_from_mask(device, device.asarray(mask), None if validity is None else device.asarray(validity))
    result = device.to_host(result)
    assert result.dtype == np.int32
    return result


@pytest.mark.parametrize("density", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_random_masks(device, density):
    rng = np.random.default_rng(int(density * 10))
    mask = rng.random(700) < density
    np.testing.assert_array_equal(select(device, mask), np.flatnonzero(mask))


def test_validity_drops_null_rows(device):
    rng = np.random.default_rng(3)
    mask = rng.random(300) < 0.5
    validity = rng.random(300) < 0.7
    np.testing.assert_array_equal(select(device, mask, validity), np.flatnonzero(mask & validity))


def test_empty_mask(device):
    assert select(device, np.zeros(0, np.bool_)).shape == (0,)
    assert select(device, np.zeros(0, np.bool_), np.zeros(0, np.bool_)).shape == (0,)


def test_all_true_but_all_null(device):
    assert select(device, np.ones(50, np.bool_), np.zeros(50, np.bool_)).shape == (0,)


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(flags=st.lists(st.tuples(st.booleans(), st.booleans()), max_size=80))
def test_matches_flatnonzero(device, flags):
    mask = np.array([f[0] for f in flags], np.bool_)
    validity = np.array([f[1] for f in flags], np.bool_)
    np.testing.assert_array_equal(select(device, mask, validity), np.flatnonzero(mask & validity))
    np.testing.assert_array_equal(select(device, mask), np.flatnonzero(mask))
