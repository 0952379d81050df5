"""Tests for gpu_engine.kernels.gather: gathers agree with NumPy's take and Arrow's take."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.gather import gather, gather_column

INDEX_DTYPES = [np.int32, np.int64]


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint64, np.float32, np.float64, np.bool_])
def test_gather_array(device, dtype, index_dtype):
    rng = np.random.default_rng(1)
    values = (rng.integers(-100, 100, 300)).astype(dtype)
    indices = rng.integers(0, 300, 500).astype(index_dtype)
    result = gather(device, device.asarray(values), device.asarray(indices))
    assert result.dtype == values.dtype
    np.testing.assert_array_equal(device.to_host(result), values[indices])


def test_gather_nothing(device):
    result = gather(device, device.asarray(np.arange(5)), device.asarray(np.zeros(0, np.int32)))
    assert result.shape == (0,)


def comparable(array):
    """Return the values as a list in which NaN equals NaN."""
    return [("NaN" if isinstance(v, float) and v != v else v) for v in array.to_pylist()]


def take(device, array, indices, index_dtype=np.int32):
    column = Column.from_arrow(array, device)
    result = gather_column(device, column, device.asarray(np.asarray(indices, dtype=index_dtype)))
    expected = array.take(pa.array(indices, pa.int64()))
    assert result.dtype == column.dtype
    assert comparable(result.to_arrow(device)) == comparable(expected)
    return column, result


ARRAYS = [
    pa.array([1, None, -3, 4, None, 6], pa.int32()),
    pa.array([1.5, -0.0, float("nan"), None, 2.5, -1.0]),
    pa.array([True, None, False, True, False, None]),
    pa.array([datetime.date(2000, 1, 1), None, datetime.date(1960, 5, 5)] * 2),
    pa.array([decimal.Decimal("1.10"), None, decimal.Decimal("-2.25")] * 2, pa.decimal128(12, 2)),
    pa.array(["", None, "é-ü-日本", "exactly8", "a much longer string spanning words", "x"]),
]


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("array", ARRAYS, ids=[str(a.type) for a in ARRAYS])
def test_gather_column(device, array, index_dtype):
    take(device, array, [5, 0, 0, 3, 2, 1, 4, 5], index_dtype)
    take(device, array, [], index_dtype)


def test_validity_stays_none_without_nulls(device):
    _, result = take(device, pa.array([1, 2, 3], pa.int64()), [2, 1])
    assert result.validity is None
    _, result = take(device, pa.array(["a", "bc"]), [1, 1, 0])
    assert result.validity is None


def test_strings_with_offsets_not_starting_at_zero(device, string_column_slice):
    values = ["skip", "me", "", "kept one", None, "and a longer one here"]
    column = string_column_slice(values, 2)
    indices = [3, 0, 1, 2, 1]
    result = gather_column(device, column, device.asarray(np.array(indices, np.int32)))
    assert result.to_arrow(device).to_pylist() == [values[2:][i] for i in indices]
    offsets = device.to_host(result.offsets)
    assert offsets.dtype == np.int64 and offsets[0] == 0 and offsets[-1] == device.to_host(result.data).shape[0]


def test_all_empty_strings(device):
    take(device, pa.array(["", "", None]), [2, 1, 0])


def test_dictionary_column_gathers_codes_and_shares_the_dictionary(device):
    array = pa.array(["b", None, "a", "b", "ccc"]).dictionary_encode()
    column, result = take(device, array.cast(pa.dictionary(pa.int32(), pa.string())), [4, 1, 0, 3])
    assert result.dictionary is column.dictionary
    np.testing.assert_array_equal(device.to_host(result.data), device.to_host(column.data)[[4, 1, 0, 3]])


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(values=st.lists(st.one_of(st.none(), st.text(max_size=20)), min_size=1, max_size=30), data=st.data())
def test_strings_match_arrow_take(device, values, data):
    indices = data.draw(st.lists(st.integers(0, len(values) - 1), max_size=40))
    take(device, pa.array(values, pa.string()), indices)
