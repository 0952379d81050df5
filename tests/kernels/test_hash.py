"""Tests for gpu_engine.kernels.hash: hashes depend only on logical values, identically on every device."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_engine.columnar.column import Column
from gpu_engine.device import get_device
from gpu_engine.kernels.hash import hash_columns

STRINGS = ["", "a", "b", "ab", "a\x00", "exactly8", "exactly8!", "a much longer string spanning words", "é-ü-日本", None]


def column(values, device, dtype=None):
    return Column.from_arrow(pa.array(values, type=dtype), device)


def hashes_of(device, *arrays):
    return device.to_host(hash_columns(device, [Column.from_arrow(a, device) for a in arrays]))


def assert_hash_equal_iff_value_equal(values, hashes):
    for i, left in enumerate(values):
        for j, right in enumerate(values):
            assert (hashes[i] == hashes[j]) == (left == right), (left, right)


MIXED = [
    pa.array([1, -1, None, 2**62, -(2**63), 0], pa.int64()),
    pa.array([7, None, -7, 0, 2**31 - 1, -(2**31)], pa.int32()),
    pa.array([0.0, -0.0, float("nan"), None, float("inf"), -1.5], pa.float64()),
    pa.array([1.5, None, float("-inf"), -0.0, 2.0, float("nan")], pa.float32()),
    pa.array([True, False, None, True, False, True]),
    pa.array(["", "exactly8", None, "a much longer string spanning words", "é", "a"]),
    pa.array(["x", "y", None, "x", "", "y"]).dictionary_encode(),
    pa.array([datetime.date(2020, 1, 1), None, datetime.date(1969, 12, 31), datetime.date(1970, 1, 1),
              datetime.date(2038, 1, 19), datetime.date(1900, 3, 1)]),
    pa.array([decimal.Decimal("1.25"), decimal.Decimal("-1.25"), None, decimal.Decimal("0.00"),
              decimal.Decimal("99999999.99"), decimal.Decimal("-0.01")], pa.decimal128(10, 2)),
    pa.array([0, None, -1, 10**15, 5, 5], pa.timestamp("us")),
    pa.array([0, 1, 2, 255, None, 7], pa.uint8()),
]


@pytest.mark.parametrize("array", MIXED, ids=[str(a.type) for a in MIXED])
def test_hash_matches_the_cpu_twin(device, array):
    cpu = get_device("cpu")
    np.testing.assert_array_equal(hashes_of(device, array), hashes_of(cpu, array))


def test_multi_column_hash_matches_the_cpu_twin(device):
    cpu = get_device("cpu")
    np.testing.assert_array_equal(hashes_of(device, *MIXED), hashes_of(cpu, *MIXED))


def test_result_is_uint64_per_row(device):
    hashes = hash_columns(device, [column([1, 2, 3], device)])
    assert hashes.dtype == np.uint64 and hashes.shape == (3,)


def test_empty_input_gives_empty_hashes(device):
    for values, dtype in [([], pa.int64()), ([], pa.string()), ([], pa.float64())]:
        hashes = hash_columns(device, [column(values, device, dtype)])
        assert hashes.shape == (0,) and hashes.dtype == np.uint64


def test_no_columns_is_an_error(device):
    with pytest.raises(ValueError):
        hash_columns(device, [])


def test_integers_hash_by_value_whatever_their_width(device):
    values = [0, 1, -1, 127, -128, None]
    widths = [hashes_of(device, pa.array(values, t)) for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64())]
    for other in widths[1:]:
        np.testing.assert_array_equal(widths[0], other)
    assert_hash_equal_iff_value_equal(values, widths[0])


def test_float_zeros_and_nans_are_normalized(device):
    nan_payloads = np.array([0x7FF8000000000000, 0x7FF0000000000001, 0xFFF8000000000000], dtype=np.uint64).view(np.float64)
    values = np.concatenate([[0.0, -0.0, 1.0, -1.0], nan_payloads])
    hashes = hashes_of(device, pa.array(values))
    assert hashes[0] == hashes[1]
    assert hashes[4] == hashes[5] == hashes[6]
    assert len({hashes[0], hashes[2], hashes[3], hashes[4]}) == 4
    float32_bits = np.array([0, 0x80000000, 0x3F800000, 0xBF800000, 0x7FC00000, 0x7F800001, 0xFFC00000], np.uint32)
    float32 = hashes_of(device, pa.array(float32_bits.view(np.float32)))
    np.testing.assert_array_equal(float32, hashes)


def test_nulls_hash_to_one_constant_distinct_from_values(device):
    hashes = hashes_of(device, pa.array([None, 0, None, 1], pa.int64()))
    assert hashes[0] == hashes[2]
    assert hashes[0] != hashes[1] and hashes[0] != hashes[3]
    strings = hashes_of(device, pa.array([None, ""]))
    floats = hashes_of(device, pa.array([None, 0.0]))
    assert strings[0] == floats[0] == hashes[0]
    assert strings[1] != strings[0] and floats[1] != floats[0]


def test_strings_hash_by_bytes(device):
    hashes = hashes_of(device, pa.array(STRINGS))
    assert_hash_equal_iff_value_equal(STRINGS, hashes)
    repeated = hashes_of(device, pa.array(STRINGS[::-1] + STRINGS))
    np.testing.assert_array_equal(repeated[len(STRINGS):], hashes)
    np.testing.assert_array_equal(repeated[: len(STRINGS)], hashes[::-1])


def test_sliced_strings_hash_like_unsliced(device, string_column_slice):
    sliced = string_column_slice(STRINGS * 2, 3)
    expected = hashes_of(device, pa.array((STRINGS * 2)[3:]))
    np.testing.assert_array_equal(device.to_host(hash_columns(device, [sliced])), expected)


def test_dictionary_strings_hash_like_plain_strings(device):
    values = ["b", None, "", "a much longer string spanning words", "b", "é-ü-日本", ""]
    plain = hashes_of(device, pa.array(values))
    dictionary = pa.DictionaryArray.from_arrays(
        pa.array([3, None, 0, 2, 3, 1, 0], pa.int32()),
        pa.array(["", "é-ü-日本", "a much longer string spanning words", "b", "unused"]))
    np.testing.assert_array_equal(hashes_of(device, dictionary), plain)
    np.testing.assert_array_equal(hashes_of(device, pa.array(values).dictionary_encode()), plain)


def test_null_dictionary_values_hash_as_nulls(device):
    dictionary = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["a", None]))
    np.testing.assert_array_equal(hashes_of(device, dictionary), hashes_of(device, pa.array(["a", None, "a"])))


def test_all_null_dictionary_with_no_values(device):
    dictionary = pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int32()), pa.array([], pa.string()))
    np.testing.assert_array_equal(hashes_of(device, dictionary), hashes_of(device, pa.array([None, None], pa.string())))


def test_column_order_matters_and_rows_combine(device):
    left = pa.array([1, 2, 1, 2], pa.int64())
    right = pa.array([2, 1, 2, 1], pa.int64())
    forward = hashes_of(device, left, right)
    backward = hashes_of(device, right, left)
    assert forward[0] == forward[2] and forward[1] == forward[3]
    assert forward[0] != forward[1]
    assert forward[0] == backward[1]
    assert forward[0] != backward[0]


def test_hash_spreads_over_low_bits(device):
    hashes = hashes_of(device, pa.array(np.arange(4096, dtype=np.int64)))
    counts = np.bincount((hashes % np.uint64(16)).astype(np.int64), minlength=16)
    assert counts.min() > 4096 / 16 * 0.7


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(st.one_of(st.none(), st.integers(-3, 3)),
                               st.one_of(st.none(), st.sampled_from(["", "x", "xy", "a longer string of 3 words"]))),
                     max_size=30))
def test_rows_hash_equal_iff_equal(device, rows):
    ints = pa.array([r[0] for r in rows], pa.int32())
    strings = pa.array([r[1] for r in rows], pa.string())
    hashes = hashes_of(device, ints, strings)
    assert_hash_equal_iff_value_equal(rows, hashes)
