"""A double's key word (hashing, grouping, sort words): its bits, with every NaN one NaN and -0.0 as 0.0.

The CPU path computes the words in one compiled pass over the bits (the array operations made seven passes:
a fifth of db-benchmark q6's time in the median's sort words); both paths must give the same words. The
boundaries are pinned: infinities stay infinities (all exponent bits, no mantissa bit), the largest finite value
and the subnormals stay as they are, every NaN payload and sign becomes the canonical NaN.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from gpu_engine.columnar.column import Column
from gpu_engine.kernels.hash import fixed_width_key_words

BITS = [0x0000000000000000, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FEFFFFFFFFFFFFF,
        0x0000000000000001, 0x8000000000000001, 0x3FF8000000000000, 0xC002000000000000, 0x7FF8000000000000,
        0xFFF8000000000123, 0x7FF0000000000001, 0x7FF4000000000000, 0xFFFFFFFFFFFFFFFF]
EXPECTED = [0x0, 0x0, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FEFFFFFFFFFFFFF, 0x1, 0x8000000000000001,
            0x3FF8000000000000, 0xC002000000000000] + [0x7FF8000000000000] * 5


def test_double_key_words_fold_nans_and_negative_zero(device):
    values = np.array(BITS, dtype=np.uint64).view(np.float64)
    words = device.to_host(fixed_width_key_words(device, Column.from_arrow(pa.array(values), device)))
    assert [int(w) for w in words] == EXPECTED


def test_float_key_words_are_the_doubles_words(device):
    """A float32 column's words are those of the same values as doubles (its NaNs folded the same way)."""
    values = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan], dtype=np.float32)
    narrow = device.to_host(fixed_width_key_words(device, Column.from_arrow(pa.array(values), device)))
    wide = device.to_host(fixed_width_key_words(device, Column.from_arrow(pa.array(values.astype(np.float64)), device)))
    np.testing.assert_array_equal(narrow, wide)


def test_empty_double_column_has_no_words(device):
    words = fixed_width_key_words(device, Column.from_arrow(pa.array([], pa.float64()), device))
    assert words.shape == (0,) and str(words.dtype) == "uint64"
