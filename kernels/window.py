"""Compute window functions over rows already sorted by partition and order keys, as segmented scans.

Why: once the Window operator has sorted its rows, a partition (and a peer group, rows of equal order keys) is
a run of consecutive rows. Every function then reads per-row bounds: the first and one-past-last row of the
row's partition, of its peer group and of its frame. The bounds come from the runs' start flags with one
cumulative sum and one scatter kernel; ranking functions are arithmetic on them; aggregates over a frame are a
segmented scan (frames reaching back to the partition's first row, or forward to its last) or a loop over the
frame's rows (frames bounded on both sides by a row count, whose width the plan fixes). On a GPU the scan runs
in chunks, so one huge partition (a window without PARTITION BY) spreads over every thread too (see
:func:`segmented_scan`); RANGE frames with offsets find their bounds by a binary search per row.

Values reach the kernels as ``int64`` (integers, narrow decimals, dates, timestamps, bools) or ``float64``;
``int64`` sums are checked for overflow (a status word, read once by the caller). Minimum and maximum follow
DuckDB's float order: NaN is the greatest value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.kernels.launch import launch_cuda, launch_twin

__all__ = ["SUM", "MIN", "MAX", "segment_bounds", "segmented_scan", "frame_loop", "frame_tree", "range_bound"]

SUM, MIN, MAX = 0, 1, 2
_CHECKED_SUM = 3  # SUM over int64 values, checked for overflow (the entry points choose it by dtype)
_INT64_MAX = np.int64(2**63 - 1)
_INT64_MIN = np.int64(-2**63)
#: Rows a GPU thread scans in the first phase of :func:`segmented_scan`.
SCAN_CHUNK_ROWS = 1024


@njit(nogil=True, cache=True)
def _combine(op, accumulated, value):
    """Return ``accumulated`` combined with ``value`` (NaN greatest), and whether a checked ``int64`` sum overflowed.

    The check comes before the add: LLVM may assume a signed add never wraps, so a test of the wrapped result
    could be folded away.
    """
    if op == SUM or op == _CHECKED_SUM:
        overflowed = op == _CHECKED_SUM and ((value > 0 and accumulated > _INT64_MAX - value)
                                             or (value < 0 and accumulated < _INT64_MIN - value))
        return accumulated + value, overflowed
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
    """Return True when a row (``value``, or NULL) sorts before ``target`` (at or before it, ``inclusive``).

    NaN sorts greatest and equals NaN, as DuckDB orders doubles: a NaN key's frame is its NaN peers, and a
    NaN in the partition no longer stops the binary search of every other row (plain comparisons with NaN are
    false: a frame came out empty, NULL, fuzz round 9)."""
    if not is_valid:
        return nulls_first
    if descending:
        value, target = target, value
    value_nan, target_nan = value != value, target != target
    if inclusive:  # value <= target
        return target_nan or (not value_nan and value <= target)
    return not value_nan and (target_nan or value < target)  # value < target


@njit(nogil=True, cache=True)
def _range_bounds_cpu(values, valid, part_start, part_end, peer_bound, descending, nulls_first, targets, inclusive,
                      out):
    for row in range(values.shape[0]):
        if not valid[row]:
            out[row] = peer_bound[row]  # a NULL key's offset bound is its peer group's (all NULL keys are peers)
            continue
        target = targets[row]
        low = part_start[row]
        high = part_end[row]
        while low < high:  # the first row of the partition not sorting before the target
            middle = (low + high) // 2
            if _comes_before(values[middle], valid[middle], target, descending, inclusive, nulls_first):
                low = middle + 1
            else:
                high = middle
        out[row] = low


@njit(nogil=True, cache=True)
def _tree_level_cpu(op, values, counts, source, length, target, status):
    for j in range((length + 1) // 2):
        first = source + 2 * j
        value = values[first]
        count = counts[first]
        if 2 * j + 1 < length and counts[first + 1] > 0:
            if count == 0:
                value = values[first + 1]
            else:
                value, overflowed = _combine(op, value, values[first + 1])
                if overflowed:
                    status[0] = 1
            count += counts[first + 1]
        values[target + j] = value
        counts[target + j] = count


@njit(nogil=True, cache=True)
def _tree_query_cpu(op, values, counts, leaves, frame_starts, frame_ends, out, out_counts, status):
    for row in range(frame_starts.shape[0]):
        low = frame_starts[row]
        high = frame_ends[row]
        offset = 0
        length = leaves
        count = 0
        accumulated = values[0]
        while low < high:
            for take in range(2):
                node = -1
                if take == 0 and low & 1:
                    node = offset + low
                    low += 1
                elif take == 1 and high & 1:
                    high -= 1
                    node = offset + high
                if node >= 0 and counts[node] > 0:
                    if count == 0:
                        accumulated = values[node]
                    else:
                        accumulated, overflowed = _combine(op, accumulated, values[node])
                        if overflowed:
                            status[0] = 1
                    count += counts[node]
            low >>= 1
            high >>= 1
            offset += length
            length = (length + 1) // 2
        out[row] = accumulated
        out_counts[row] = count


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
def _scan_chunks_cuda(op, values, valid, starts, reverse, chunk_rows, out, counts, tails, tail_counts, restarts,
                      status):
    """Phase 1: each thread scans one chunk of rows in scan order, restarting at every partition's first row."""
    n = values.shape[0]
    for chunk in range(cuda.grid(1), tails.shape[0], cuda.gridsize(1)):
        low = chunk * chunk_rows
        high = low + chunk_rows if low + chunk_rows < n else n
        count = 0
        accumulated = values[low]
        restarted = False
        for k in range(high - low):
            i = high - 1 - k if reverse else low + k
            if (starts[i + 1] if reverse else starts[i]):  # the row opens a segment in scan order
                count = 0
                restarted = True
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
        tails[chunk] = accumulated
        tail_counts[chunk] = count
        restarts[chunk] = restarted


@cuda.jit
def _chunk_carries_cuda(op, reverse, tails, tail_counts, restarts, carries, carry_counts, status):
    """Phase 2 (one thread): the state each chunk inherits from the chunks before it in scan order."""
    if cuda.grid(1) != 0:
        return
    chunks = tails.shape[0]
    count = 0
    accumulated = tails[0]
    for k in range(chunks):
        chunk = chunks - 1 - k if reverse else k
        carries[chunk] = accumulated
        carry_counts[chunk] = count
        if restarts[chunk] or count == 0:  # the state after the chunk is its own tail's
            accumulated = tails[chunk]
            count = tail_counts[chunk]
        elif tail_counts[chunk] > 0:
            accumulated, overflowed = _combine(op, accumulated, tails[chunk])
            if overflowed:
                status[0] = 1
            count += tail_counts[chunk]


@cuda.jit
def _apply_carries_cuda(op, starts, reverse, chunk_rows, carries, carry_counts, out, counts, status):
    """Phase 3: each chunk's rows before its first segment start take the carried state in."""
    n = out.shape[0]
    for chunk in range(cuda.grid(1), carries.shape[0], cuda.gridsize(1)):
        if carry_counts[chunk] == 0:
            continue
        low = chunk * chunk_rows
        high = low + chunk_rows if low + chunk_rows < n else n
        for k in range(high - low):
            i = high - 1 - k if reverse else low + k
            if (starts[i + 1] if reverse else starts[i]):
                break
            if counts[i] == 0:
                out[i] = carries[chunk]
            else:
                combined, overflowed = _combine(op, carries[chunk], out[i])
                if overflowed:
                    status[0] = 1
                out[i] = combined
            counts[i] += carry_counts[chunk]


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
def _range_bounds_cuda(values, valid, part_start, part_end, peer_bound, descending, nulls_first, targets, inclusive,
                       out):
    for row in range(cuda.grid(1), values.shape[0], cuda.gridsize(1)):
        if not valid[row]:
            out[row] = peer_bound[row]
            continue
        target = targets[row]
        low = part_start[row]
        high = part_end[row]
        while low < high:
            middle = (low + high) // 2
            if _comes_before(values[middle], valid[middle], target, descending, inclusive, nulls_first):
                low = middle + 1
            else:
                high = middle
        out[row] = low


@cuda.jit
def _tree_level_cuda(op, values, counts, source, length, target, status):
    for j in range(cuda.grid(1), (length + 1) // 2, cuda.gridsize(1)):
        first = source + 2 * j
        value = values[first]
        count = counts[first]
        if 2 * j + 1 < length and counts[first + 1] > 0:
            if count == 0:
                value = values[first + 1]
            else:
                value, overflowed = _combine(op, value, values[first + 1])
                if overflowed:
                    status[0] = 1
            count += counts[first + 1]
        values[target + j] = value
        counts[target + j] = count


@cuda.jit
def _tree_query_cuda(op, values, counts, leaves, frame_starts, frame_ends, out, out_counts, status):
    for row in range(cuda.grid(1), frame_starts.shape[0], cuda.gridsize(1)):
        low = frame_starts[row]
        high = frame_ends[row]
        offset = 0
        length = leaves
        count = 0
        accumulated = values[0]
        while low < high:
            for take in range(2):
                node = -1
                if take == 0 and low & 1:
                    node = offset + low
                    low += 1
                elif take == 1 and high & 1:
                    high -= 1
                    node = offset + high
                if node >= 0 and counts[node] > 0:
                    if count == 0:
                        accumulated = values[node]
                    else:
                        accumulated, overflowed = _combine(op, accumulated, values[node])
                        if overflowed:
                            status[0] = 1
                    count += counts[node]
            low >>= 1
            high >>= 1
            offset += length
            length = (length + 1) // 2
        out[row] = accumulated
        out_counts[row] = count


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
                   reverse: bool, status: Any, chunk_rows: int = SCAN_CHUNK_ROWS) -> tuple[Any, Any]:
    """Return the running ``op`` of each partition's valid values and their running count, per row.

    Forward, row ``i`` holds the result over the partition's rows up to ``i``; ``reverse``, over rows from
    ``i`` to the partition's end. A row before any valid value holds count 0 (its value is undefined).
    ``status[0]`` becomes 1 when an ``int64`` sum overflows.

    On the CPU one pass scans every partition in order. On a GPU a partition may hold every row (a window
    without PARTITION BY), so the scan runs in three phases, as a segmented scan does: threads scan chunks
    of ``chunk_rows`` rows, one thread carries each chunk's tail into the next (a chunk count's loop), and
    threads add the carried state to each chunk's rows before its first partition start.
    """
    xp = device.xp
    n = values.shape[0]
    out = xp.empty_like(values)
    counts = xp.empty(n, dtype=xp.int64)
    values, valid = xp.ascontiguousarray(values), xp.ascontiguousarray(valid)
    op = _CHECKED_SUM if op == SUM and values.dtype.kind == "i" else op
    if device.kernel_flavor == "cpu":
        launch_twin(device, n, _segmented_scan_cpu, None, op, values, valid, xp.ascontiguousarray(partition_flags),
                    partition_ends, reverse, out, counts, status)
        return out, counts
    if n == 0:
        return out, counts
    starts = xp.ones(n + 1, dtype=xp.bool_)  # starts[n]: the end, where a reverse scan opens its last segment
    starts[:n] = partition_flags
    chunks = -(-n // chunk_rows)
    tails = xp.empty(chunks, dtype=values.dtype)
    tail_counts = xp.empty(chunks, dtype=xp.int64)
    restarts = xp.empty(chunks, dtype=xp.bool_)
    carries = xp.empty(chunks, dtype=values.dtype)
    carry_counts = xp.empty(chunks, dtype=xp.int64)
    launch_cuda(device, _scan_chunks_cuda, chunks, op, values, valid, starts, reverse, chunk_rows, out, counts,
                tails, tail_counts, restarts, status)
    launch_cuda(device, _chunk_carries_cuda, 1, op, reverse, tails, tail_counts, restarts, carries, carry_counts,
                status)
    launch_cuda(device, _apply_carries_cuda, chunks, op, starts, reverse, chunk_rows, carries, carry_counts, out,
                counts, status)
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
    op = _CHECKED_SUM if op == SUM and values.dtype.kind == "i" else op
    launch_twin(device, n, _frame_loop_cpu, _frame_loop_cuda, op, xp.ascontiguousarray(values),
                xp.ascontiguousarray(valid), frame_starts, frame_ends, out, counts, status)
    return out, counts


def range_bound(device: Device, values: Any, valid: Any, part_start: Any, part_end: Any, peer_bound: Any,
                descending: bool, nulls_first: bool, targets: Any, inclusive: bool) -> Any:
    """Return each row's RANGE frame bound: the first row of its partition whose key is not before its target.

    Rows are sorted by the key (``descending`` reverses what "before" means); a row's target is its key moved
    along the sort order (``key - n`` for ``n PRECEDING`` ascending, ``key + n`` descending; per row because
    ``INTERVAL '1 month'`` moves a key by a month of its own length); ``inclusive`` finds the first row
    past the target (a frame's end) rather than the first at it (a frame's start). A binary search per row:
    the partition's keys are sorted, NULLs at one end. A row whose key is NULL gets ``peer_bound``.
    """
    xp = device.xp
    out = xp.empty(values.shape[0], dtype=xp.int64)
    launch_twin(device, values.shape[0], _range_bounds_cpu, _range_bounds_cuda, xp.ascontiguousarray(values),
                xp.ascontiguousarray(valid), part_start, part_end, peer_bound, descending, nulls_first,
                xp.ascontiguousarray(targets), inclusive, out)
    return out


def frame_tree(device: Device, op: int, values: Any, valid: Any, frame_starts: Any, frame_ends: Any,
               status: Any) -> tuple[Any, Any]:
    """Return what :func:`frame_loop` does, reading each frame as O(log n) nodes of a segment tree.

    Why: a frame bounded on both sides may still be wide (``ROWS BETWEEN 1000 PRECEDING AND 1000 FOLLOWING``,
    a RANGE frame over many equal keys); looping over it per row costs rows times width. The tree's levels
    (each node combining two below, with its count of valid values) are built level by level, then every
    row combines the nodes that cover its frame, as DuckDB's segment tree does.
    """
    xp = device.xp
    n = values.shape[0]
    op = _CHECKED_SUM if op == SUM and values.dtype.kind == "i" else op
    lengths = [n]
    while lengths[-1] > 1:
        lengths.append((lengths[-1] + 1) // 2)
    tree = xp.empty(sum(lengths), dtype=values.dtype)
    counts = xp.empty(sum(lengths), dtype=xp.int64)
    tree[:n] = values
    counts[:n] = valid
    source = 0
    for length in lengths[:-1]:
        launch_twin(device, (length + 1) // 2, _tree_level_cpu, _tree_level_cuda, op, tree, counts, source, length,
                    source + length, status)
        source += length
    out = xp.empty_like(values)
    out_counts = xp.empty(n, dtype=xp.int64)
    launch_twin(device, n, _tree_query_cpu, _tree_query_cuda, op, tree, counts, n, frame_starts, frame_ends, out,
                out_counts, status)
    return out, out_counts
