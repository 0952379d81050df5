"""Compute window functions over rows already sorted by partition and order keys, as segmented scans.

Why: once the Window operator has sorted its rows, a partition (and a peer group, rows of equal order keys) is
a run of consecutive rows. Every function then reads per-row bounds: the first and one-past-last row of the
row's partition, of its peer group and of its frame. The bounds come from the runs' start flags with one
cumulative sum and one scatter kernel; ranking functions are arithmetic on them; aggregates over a frame are a
segmented scan (frames reaching back to the partition's first row, or forward to its last) or a loop over the
frame's rows (frames bounded on both sides by a row count, whose width the plan fixes). A scan's CUDA twin
runs one thread per partition (its rows in order), so many partitions run in parallel; one huge partition runs
on one thread, which is correct but not yet fast (a later step: a decoupled look-back scan per partition).

Values reach the kernels as ``int64`` (integers, narrow decimals, dates, timestamps, bools) or ``float64``;
``int64`` sums are checked for overflow (a status word, read once by the caller). Minimum and maximum follow
DuckDB's float order: NaN is the greatest value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.kernels.launch import launch_twin

__all__ = ["SUM", "MIN", "MAX", "segment_bounds", "segmented_scan", "frame_loop", "range_bound"]

SUM, MIN, MAX = 0, 1, 2


@njit(nogil=True, cache=True)
def _combine(op, accumulated, value):
    """Return ``accumulated`` combined with ``value`` (NaN greatest), and whether an ``int64`` sum overflowed."""
    if op == SUM:
        result = accumulated + value
        # An int64 sum wraps when it overflows; a float sum never moves against its addend's sign.
        return result, (value > 0 and result < accumulated) or (value < 0 and result > accumulated)
    if op == MAX:
        if value > accumulated or (value != value and accumulated == accumulated):
            return value, False
        return accumulated, False
    if value < accumulated or (accumulated != accumulated and value == value):
        return value, False
    return accumulated, False


# The loops below are written once per twin: the simulator cannot hand its arrays to an njit helper.

# ------------------------------------------------------------------- CPU twins
@njit(nogil=True, cache=True)
def _segment_starts_cpu(flags, segment, starts):
    n = flags.shape[0]
    for i in range(n):
        if flags[i]:
            starts[segment[i]] = i
    starts[segment[n - 1] + 1] = n


@njit(nogil=True, cache=True)
def _segmented_scan_cpu(op, values, valid, starts, ends, reverse, out, counts, status):
    for first in range(starts.shape[0]):
        if not starts[first]:
            continue
        stop = ends[first]
        count = 0
        accumulated = values[first]
        for k in range(stop - first):
            i = stop - 1 - k if reverse else first + k
            if valid[i]:
                if count == 0:
                    accumulated = values[i]
                else:
                    accumulated, overflowed = _combine(op, accumulated, values[i])
                    if overflowed:
                        status[0] = 1
                count += 1
            out[i] = accumulated
            counts[i] = count


@njit(nogil=True, cache=True)
def _frame_loop_cpu(op, values, valid, frame_starts, frame_ends, out, counts, status):
    for row in range(frame_starts.shape[0]):
        count = 0
        accumulated = values[row]
        for i in range(frame_starts[row], frame_ends[row]):
            if valid[i]:
                if count == 0:
                    accumulated = values[i]
                else:
                    accumulated, overflowed = _combine(op, accumulated, values[i])
                    if overflowed:
                        status[0] = 1
                count += 1
        out[row] = accumulated
        counts[row] = count


@njit(nogil=True, cache=True)
def _comes_before(value, is_valid, target, descending, inclusive, nulls_first):
    """Return True when a row (``value``, or NULL) sorts before ``target`` (at or before it, ``inclusive``)."""
    if not is_valid:
        return nulls_first
    if descending:
        return value >= target if inclusive else value > target
    return value <= target if inclusive else value < target


@njit(nogil=True, cache=True)
def _range_bounds_cpu(values, valid, part_start, part_end, peer_bound, descending, nulls_first, delta, inclusive,
                      out):
    for row in range(values.shape[0]):
        if not valid[row]:
            out[row] = peer_bound[row]  # a NULL key's offset bound is its peer group's (all NULL keys are peers)
            continue
        target = values[row] - delta if descending else values[row] + delta
        low = part_start[row]
        high = part_end[row]
        while low < high:  # the first row of the partition not sorting before the target
            middle = (low + high) // 2
            if _comes_before(values[middle], valid[middle], target, descending, inclusive, nulls_first):
                low = middle + 1
            else:
                high = middle
        out[row] = low


# ------------------------------------------------------------------ CUDA twins
@cuda.jit
def _segment_starts_cuda(flags, segment, starts):
    n = flags.shape[0]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        if flags[i]:
            starts[segment[i]] = i
        if i == n - 1:
            starts[segment[i] + 1] = n


@cuda.jit
def _segmented_scan_cuda(op, values, valid, starts, ends, reverse, out, counts, status):
    for first in range(cuda.grid(1), starts.shape[0], cuda.gridsize(1)):
        if not starts[first]:
            continue
        stop = ends[first]
        count = 0
        accumulated = values[first]
        for k in range(stop - first):
            i = stop - 1 - k if reverse else first + k
            if valid[i]:
                if count == 0:
                    accumulated = values[i]
                else:
                    accumulated, overflowed = _combine(op, accumulated, values[i])
                    if overflowed:
                        status[0] = 1
                count += 1
            out[i] = accumulated
            counts[i] = count


@cuda.jit
def _frame_loop_cuda(op, values, valid, frame_starts, frame_ends, out, counts, status):
    for row in range(cuda.grid(1), frame_starts.shape[0], cuda.gridsize(1)):
        count = 0
        accumulated = values[row]
        for i in range(frame_starts[row], frame_ends[row]):
            if valid[i]:
                if count == 0:
                    accumulated = values[i]
                else:
                    accumulated, overflowed = _combine(op, accumulated, values[i])
                    if overflowed:
                        status[0] = 1
                count += 1
        out[row] = accumulated
        counts[row] = count


@cuda.jit
def _range_bounds_cuda(values, valid, part_start, part_end, peer_bound, descending, nulls_first, delta, inclusive,
                       out):
    for row in range(cuda.grid(1), values.shape[0], cuda.gridsize(1)):
        if not valid[row]:
            out[row] = peer_bound[row]
            continue
        target = values[row] - delta if descending else values[row] + delta
        low = part_start[row]
        high = part_end[row]
        while low < high:
            middle = (low + high) // 2
            if _comes_before(values[middle], valid[middle], target, descending, inclusive, nulls_first):
                low = middle + 1
            else:
                high = middle
        out[row] = low


# ---------------------------------------------------------------- entry points
def segment_bounds(device: Device, flags: Any) -> tuple[Any, Any, Any]:
    """Return each row's run number and its run's first and one-past-last row (``int64``).

    ``flags`` (``bool``, the first one True) marks the first row of every run; the run count stays on the
    device (the starts array is sized for the most runs there can be), so no host sync is needed.
    """
    xp = device.xp
    n = flags.shape[0]
    segment = xp.cumsum(flags, dtype=xp.int64) - 1
    starts = xp.zeros(n + 1, dtype=xp.int64)
    launch_twin(device, n, _segment_starts_cpu, _segment_starts_cuda, xp.ascontiguousarray(flags), segment, starts)
    return segment, starts[segment], starts[segment + 1]


def segmented_scan(device: Device, op: int, values: Any, valid: Any, partition_flags: Any, partition_ends: Any,
                   reverse: bool, status: Any) -> tuple[Any, Any]:
    """Return the running ``op`` of each partition's valid values and their running count, per row.

    Forward, row ``i`` holds the result over the partition's rows up to ``i``; ``reverse``, over rows from
    ``i`` to the partition's end. A row before any valid value holds count 0 (its value is undefined).
    ``status[0]`` becomes 1 when an ``int64`` sum overflows.
    """
    xp = device.xp
    n = values.shape[0]
    out = xp.empty_like(values)
    counts = xp.empty(n, dtype=xp.int64)
    launch_twin(device, n, _segmented_scan_cpu, _segmented_scan_cuda, op, xp.ascontiguousarray(values),
                xp.ascontiguousarray(valid), xp.ascontiguousarray(partition_flags), partition_ends, reverse,
                out, counts, status)
    return out, counts


def frame_loop(device: Device, op: int, values: Any, valid: Any, frame_starts: Any, frame_ends: Any,
               status: Any) -> tuple[Any, Any]:
    """Return ``op`` over each row's frame ``[frame_starts[i], frame_ends[i])`` and the frame's valid count.

    Why a loop: a frame bounded on both sides by a row count (``ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING``)
    has a width the plan fixes, so reading it whole costs that width per row and is exact for floats.
    """
    xp = device.xp
    n = values.shape[0]
    out = xp.empty_like(values)
    counts = xp.empty(n, dtype=xp.int64)
    launch_twin(device, n, _frame_loop_cpu, _frame_loop_cuda, op, xp.ascontiguousarray(values),
                xp.ascontiguousarray(valid), frame_starts, frame_ends, out, counts, status)
    return out, counts


def range_bound(device: Device, values: Any, valid: Any, part_start: Any, part_end: Any, peer_bound: Any,
                descending: bool, nulls_first: bool, delta: Any, inclusive: bool) -> Any:
    """Return each row's RANGE frame bound: the first row of its partition whose key is not before ``key + delta``.

    Rows are sorted by the key (``descending`` reverses what "before" means, so ``delta`` counts along the
    sort order: ``-n`` for ``n PRECEDING``, ``+n`` for ``n FOLLOWING``); ``inclusive`` finds the first row
    past the target (a frame's end) rather than the first at it (a frame's start). A binary search per row:
    the partition's keys are sorted, NULLs at one end. A row whose key is NULL gets ``peer_bound``.
    """
    xp = device.xp
    out = xp.empty(values.shape[0], dtype=xp.int64)
    launch_twin(device, values.shape[0], _range_bounds_cpu, _range_bounds_cuda, xp.ascontiguousarray(values),
                xp.ascontiguousarray(valid), part_start, part_end, peer_bound, descending, nulls_first, delta,
                inclusive, out)
    return out
