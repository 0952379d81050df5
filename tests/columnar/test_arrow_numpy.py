"""Arrow <-> NumPy through buffers (gpu_engine.columnar.arrow_numpy) gives what pyarrow's conversions give.

Why: the scan and key-filter paths read Arrow buffers directly so that a process does not import pandas
(pyarrow's conversions do); sliced arrays (a nonzero offset, also inside a bitmap byte) and empty ones are where
a buffer read goes wrong.
"""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.columnar.arrow_numpy import (
    arrow_strings, arrow_values, empty_table, has_numpy_layout, numpy_validity, numpy_values,
)

ARRAYS = {
    "int8": pa.array([1, -2, None, 4, 5, -6, 7, 8, 9, 10], pa.int8()),
    "int64": pa.array([2**40, None, -3, 0, 5, 6, None, 8, 9, -(2**62)], pa.int64()),
    "uint32": pa.array([1, 2, 3, None, 5, 6, 7, 8, 9, 2**32 - 1], pa.uint32()),
    "float32": pa.array([1.5, None, -2.25, 0.0, 5, 6, 7, 8, 9, 1e30], pa.float32()),
    "float64": pa.array([1.5, None, float("nan"), 0.0, 5, 6, 7, 8, 9, -1e300], pa.float64()),
    "bool": pa.array([True, False, None, True, True, False, True, None, False, True], pa.bool_()),
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
@pytest.mark.parametrize("offset,length", [(0, 10), (3, 6), (9, 1), (5, 0)])
def test_values_and_validity_match_pyarrow_s_conversion_on_slices(name, offset, length):
    array = ARRAYS[name].slice(offset, length)
    assert has_numpy_layout(array.type)
    expected_valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    np.testing.assert_array_equal(numpy_validity(array), expected_valid)
    filled = array.fill_null(False if name == "bool" else 0)
    got = numpy_values(filled)
    assert got.dtype == filled.to_numpy(zero_copy_only=False).dtype
    np.testing.assert_array_equal(got, filled.to_numpy(zero_copy_only=False))
    np.testing.assert_array_equal(numpy_values(array)[expected_valid], filled.to_numpy(zero_copy_only=False)[expected_valid])


def test_dates_and_timestamps_read_as_their_integers():
    dates = pa.array([datetime.date(1970, 1, 2), datetime.date(1969, 12, 31)], pa.date32()).slice(1)
    np.testing.assert_array_equal(numpy_values(dates), np.array([-1], np.int32))
    stamps = pa.array([0, 1_000_000, None], pa.timestamp("us")).slice(1, 1)
    np.testing.assert_array_equal(numpy_values(stamps), np.array([1_000_000], np.int64))


@pytest.mark.parametrize("values", [np.array([3, -1, 7], np.int64), np.array([1.5, 2.5], np.float32),
                                    np.array([True, False, True, True, False, False, True, True, True]),
                                    np.arange(10, dtype=np.int32)[::3], np.array([], np.uint16),
                                    np.array([5, 6], dtype=">i8")])
def test_numpy_values_become_the_arrow_array_pa_array_makes(values):
    assert arrow_values(values).equals(pa.array(values.astype(values.dtype.newbyteorder("="))))


def test_strings_and_empty_tables_match_pyarrow_s():
    assert arrow_strings(["a", "", "héllo", "z" * 300]).equals(pa.array(["a", "", "héllo", "z" * 300], pa.large_string()))
    assert arrow_strings([]).equals(pa.array([], pa.large_string()))
    schema = pa.schema([("a", pa.int64()), ("s", pa.dictionary(pa.int32(), pa.string())), ("d", pa.decimal128(9, 2))])
    assert empty_table(schema).equals(schema.empty_table())


@pytest.mark.parametrize("dtype,offset", [(np.int64, 0), (np.int32, 1), (np.float64, 2)])
def test_a_values_buffer_that_is_no_whole_number_of_values_reads_as_pyarrow_reads_it(dtype, offset):
    """Arrow asks a buffer to hold the array's values, not to be a multiple of their width (a producer's buffer
    sliced from a larger one, or sized in bytes): pyarrow's to_numpy read it; np.frombuffer without a count refused
    it, so a registered table built that way failed its scan."""
    values = np.arange(5, dtype=dtype)
    array = pa.Array.from_buffers(pa.from_numpy_dtype(np.dtype(dtype)), 5 - offset,
                                  [None, pa.py_buffer(values.tobytes() + b"\x07")], offset=offset)
    np.testing.assert_array_equal(numpy_values(array), array.to_numpy(zero_copy_only=False))
