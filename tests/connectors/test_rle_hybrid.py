"""The host decoder's RLE/bit-packing hybrid reads every value, or the values at some positions, alike.

One function (kernels/parquet_pages.py ``_rle_hybrid``) serves both: with ``positions`` it writes and checks
only the values there (late materialization's wanted rows), walking the same runs. Runs here are short (one
group of 8 bit-packed values, then a repeated value) and the buffer ends with the last run, so a value's word
near the end is read byte by byte.
"""

from __future__ import annotations

import numpy as np

from gpu_engine.kernels.parquet_pages import _rle_hybrid

BIT_WIDTH = 11


def _varint(value: int) -> list[int]:
    out = []
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return out


def _runs(values: np.ndarray) -> np.ndarray:
    """Encode ``values`` (a multiple of 16) as runs of 8 bit-packed values, each followed by a run of 8 repeats."""
    encoded = []
    for group in range(0, len(values), 16):
        bits = np.zeros(8 * BIT_WIDTH, dtype=np.uint8)
        for k in range(BIT_WIDTH):
            bits[k::BIT_WIDTH] = (values[group:group + 8] >> k) & 1
        encoded += _varint(1 << 1 | 1) + list(np.packbits(bits, bitorder="little"))
        repeated = int(values[group + 8])
        encoded += _varint(8 << 1) + [repeated & 0xFF, repeated >> 8]
    return np.array(encoded, dtype=np.uint8)


def test_values_at_positions_equal_every_value_read():
    rng = np.random.default_rng(4)
    # 87, the last bit-packed value: its word (and 86's) passes the end of the buffer; 95, the last value.
    positions = np.sort(np.append(rng.choice([i for i in range(95) if i != 87], 28, replace=False), [87, 95]))
    values = rng.integers(0, (1 << BIT_WIDTH) - 1, 96)
    unread = next(i for i in range(96) if i % 16 < 8 and i not in positions)
    values[unread] = (1 << BIT_WIDTH) - 1  # the greatest value, bit-packed where no position reads it
    expected = values.copy()
    for group in range(0, 96, 16):
        expected[group + 8:group + 16] = values[group + 8]
    buf = _runs(values)
    dictionary = rng.standard_normal(1 << BIT_WIDTH)
    whole = np.empty(96)
    assert _rle_hybrid(buf, 0, buf.shape[0], BIT_WIDTH, dictionary, whole, 0, 96, 1 << BIT_WIDTH) == buf.shape[0]
    assert (whole == dictionary[expected]).all()
    wanted = np.full(32, -1.0)
    done = _rle_hybrid(buf, 0, buf.shape[0], BIT_WIDTH, dictionary, wanted, 1, 96, 1 << BIT_WIDTH, positions, 0, 30)
    assert done == buf.shape[0]
    assert (wanted[1:31] == whole[positions]).all() and wanted[0] == wanted[31] == -1.0
    # Only the values read are checked: a bound below an unread value passes, below a read one fails.
    bound = (1 << BIT_WIDTH) - 1
    smaller = dictionary[:bound].copy()
    assert _rle_hybrid(buf, 0, buf.shape[0], BIT_WIDTH, smaller, wanted, 1, 96, bound, positions, 0, 30) == buf.shape[0]
    assert _rle_hybrid(buf, 0, buf.shape[0], BIT_WIDTH, smaller, whole, 0, 96, bound) == -2
    assert _rle_hybrid(buf, 0, buf.shape[0], BIT_WIDTH, dictionary, wanted, 1, 96, int(expected[positions[0]]),
                       positions, 0, 30) == -2


def _level_runs(levels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Encode 0/1 ``levels`` (bit width 1) as a random mix of repeated runs and bit-packed runs of 1-3 groups."""
    encoded, at = [], 0
    while at < len(levels):
        if rng.random() < 0.4:
            stop = at + 1
            while stop < len(levels) and levels[stop] == levels[at] and stop - at < 40:
                stop += 1
            encoded += _varint((stop - at) << 1) + [int(levels[at])]
        else:
            groups = int(rng.integers(1, 4))
            stop = min(len(levels), at + 8 * groups)
            bits = np.zeros(8 * groups, dtype=np.uint8)  # the last group's bits past the levels are padding
            bits[:stop - at] = levels[at:stop]
            encoded += _varint(groups << 1 | 1) + list(np.packbits(bits, bitorder="little"))
        at = stop
    return np.array(encoded, dtype=np.uint8)


def test_definition_levels_decode_into_validity_bytes_and_count_the_present():
    """_levels_into (the decoder's definition levels: a byte a row, the 1s counted) equals the levels, at any
    count (not a multiple of 8: the last bit-packed group is cut), and refuses a repeated level over 1 and runs
    past their bytes."""
    from gpu_engine.kernels.parquet_pages import _levels_into

    rng = np.random.default_rng(11)
    for count in (1, 7, 8, 9, 63, 200, 1001):
        levels = (rng.random(count) > 0.1).astype(np.uint8)
        buf = _level_runs(levels, rng)
        valid = np.full(count + 5, 7, dtype=np.uint8)
        done, present = _levels_into(buf, 0, buf.shape[0], count, valid, 3)
        assert done == buf.shape[0] and present == int(levels.sum()), count
        assert (valid[3:3 + count] == levels).all() and (valid[:3] == 7).all() and (valid[3 + count:] == 7).all()
    valid = np.zeros(16, dtype=np.uint8)
    assert _levels_into(np.array([8 << 1, 2], np.uint8), 0, 2, 8, valid, 0)[0] == -1  # a level of 2
    assert _levels_into(np.array([2 << 1 | 1, 0xFF], np.uint8), 0, 2, 16, valid, 0)[0] == -1  # 2 groups, 1 byte
    assert _levels_into(np.array([8 << 1, 1], np.uint8), 0, 2, 16, valid, 0)[0] == -1  # runs end before 16 levels
    assert _levels_into(np.array([8 << 1, 1], np.uint8), 0, 2, 8, valid, 9)[0] == -1  # rows past valid
