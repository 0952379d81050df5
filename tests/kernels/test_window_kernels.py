"""The window kernels against a plain Python reference: segmented scans (the GPU's three-phase chunked form
with chunks of 1 and 3 rows, so partitions cross chunks every way), RANGE frame bounds by binary search."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_engine.kernels.window import MAX, MIN, SUM, range_bound, segment_bounds, segmented_scan


def _reference_scan(op, values, valid, flags, reverse):
    n = len(values)
    starts = [i for i in range(n) if flags[i]] + [n]
    out, counts = [None] * n, [0] * n
    combine = {SUM: lambda a, b: a + b, MIN: min, MAX: max}[op]
    for first, stop in zip(starts, starts[1:]):
        state, count = None, 0
        for i in (range(stop - 1, first - 1, -1) if reverse else range(first, stop)):
            if valid[i]:
                state = values[i] if count == 0 else combine(state, values[i])
                count += 1
            out[i], counts[i] = state, count
    return out, counts


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
@pytest.mark.parametrize("op", [SUM, MIN, MAX], ids=["sum", "min", "max"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("chunk_rows", [1, 3, 1024])
def test_segmented_scan_matches_a_sequential_scan(device, dtype, op, reverse, chunk_rows):
    rng = np.random.default_rng(5)
    n = 40
    values = (rng.integers(-20, 20, n) * (0.25 if dtype is np.float64 else 1)).astype(dtype)
    valid = rng.random(n) > 0.3
    valid[7:12] = False  # a run of NULLs crossing chunks
    flags = rng.random(n) < 0.2
    flags[0] = True
    flags[20:] = False  # one partition of 20 rows: many chunks
    xp = device.xp
    status = xp.zeros(1, dtype=xp.int64)
    _, _, part_end = segment_bounds(device, xp.asarray(flags))
    out, counts = segmented_scan(device, op, xp.asarray(values), xp.asarray(valid), xp.asarray(flags), part_end,
                                 reverse, status, chunk_rows=chunk_rows)
    expected, expected_counts = _reference_scan(op, values.tolist(), valid.tolist(), flags.tolist(), reverse)
    counts = device.to_host(counts).tolist()
    assert counts == expected_counts
    out = device.to_host(out).tolist()
    assert [v for v, c in zip(out, counts) if c] == [v for v, c in zip(expected, counts) if c]
    assert device.to_host(status)[0] == 0


def test_an_int64_sum_past_64_bits_sets_the_status(device):
    xp = device.xp
    values = xp.asarray(np.array([2**62, 2**62, 2**62], dtype=np.int64))
    flags = xp.asarray(np.array([True, False, False]))
    status = xp.zeros(1, dtype=xp.int64)
    segmented_scan(device, SUM, values, xp.ones(3, dtype=xp.bool_), flags, xp.full(3, 3, dtype=xp.int64), False,
                   status, chunk_rows=2)
    assert device.to_host(status)[0] == 1


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("nulls_first", [False, True])
def test_range_bounds_find_the_first_row_at_or_past_the_target(device, descending, nulls_first):
    keys = [1, 1, 2, 4, 4, 4, 7, 9]
    if descending:
        keys = keys[::-1]
    values = np.array(([0, 0] if nulls_first else []) + keys + ([] if nulls_first else [0, 0]), dtype=np.int64)
    valid = np.array(([False, False] if nulls_first else []) + [True] * len(keys)
                     + ([] if nulls_first else [False, False]))
    n = len(values)
    xp = device.xp
    peer = xp.asarray(np.full(n, -1, dtype=np.int64))
    zero, end = xp.zeros(n, dtype=xp.int64), xp.full(n, n, dtype=xp.int64)
    for delta in (-3, -1, 0, 2):
        for inclusive in (False, True):
            targets = values - delta if descending else values + delta
            got = device.to_host(range_bound(device, xp.asarray(values), xp.asarray(valid), zero, end, peer,
                                             descending, nulls_first, xp.asarray(targets), inclusive)).tolist()
            for row in range(n):
                if not valid[row]:
                    assert got[row] == -1
                    continue
                target = values[row] - delta if descending else values[row] + delta

                def before(p):
                    if not valid[p]:
                        return nulls_first
                    if descending:
                        return values[p] >= target if inclusive else values[p] > target
                    return values[p] <= target if inclusive else values[p] < target

                assert got[row] == next((p for p in range(n) if not before(p)), n), (delta, inclusive, row)


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
@pytest.mark.parametrize("op", [SUM, MIN, MAX], ids=["sum", "min", "max"])
def test_frame_tree_matches_a_loop_over_each_frame(device, dtype, op):
    from gpu_engine.kernels.window import frame_loop, frame_tree

    rng = np.random.default_rng(11)
    n = 37  # not a power of two: partial nodes at the end of every level
    values = (rng.integers(-20, 20, n) * (0.25 if dtype is np.float64 else 1)).astype(dtype)
    if dtype is np.float64:
        values[[3, 20]] = [np.nan, np.inf]  # NaN is the greatest value; a sum through them stays NaN only in frame
    valid = rng.random(n) > 0.25
    starts = rng.integers(0, n, n)
    ends = np.minimum(n, starts + rng.integers(0, n, n))
    xp = device.xp
    arguments = (xp.asarray(values), xp.asarray(valid), xp.asarray(starts.astype(np.int64)),
                 xp.asarray(ends.astype(np.int64)))
    status = xp.zeros(1, dtype=xp.int64)
    tree, tree_counts = frame_tree(device, op, *arguments, status)
    loop, loop_counts = frame_loop(device, op, *arguments, status)
    tree_counts, loop_counts = device.to_host(tree_counts), device.to_host(loop_counts)
    assert tree_counts.tolist() == loop_counts.tolist()
    has = loop_counts > 0
    np.testing.assert_array_equal(device.to_host(tree)[has], device.to_host(loop)[has])
