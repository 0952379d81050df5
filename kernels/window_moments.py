"""Compute variance and standard deviation over window frames: a segment tree of moments merged by Chan's formula.

Why moments rather than sums of x and x²: a frame's variance from ``Σx² - (Σx)²/n`` cancels catastrophically
when the values sit far from zero relative to their spread (prices near 10⁹ that differ by cents, a trend
across a partition that a sliding frame sees only a small piece of). Each tree node instead keeps its rows'
count, mean and sum of squared deviations from that mean (``m2``); two nodes merge exactly as the grouped
aggregation merges partial states (:class:`~gpu_engine.aggregation.functions.Moments`): with ``δ`` the
difference of their means, ``mean = mean_a + δ·n_b/n`` and ``m2 = m2_a + m2_b + δ²·n_a·n_b/n``. No square
of a value is ever formed, so the result is as exact as a two-pass variance of the frame.

As :func:`~gpu_engine.kernels.window.frame_tree` does for sums, the levels are built bottom-up (each node from
the two below it) and every row merges the O(log n) nodes that cover its frame ``[start, end)``: running
frames, sliding ROWS frames and RANGE frames alike. NULL rows are leaves of count 0.
"""

from __future__ import annotations

from typing import Any

from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.kernels.launch import launch_twin

__all__ = ["frame_moments", "moments_result"]


@njit(nogil=True, cache=True)
def _merge(count_a, mean_a, m2_a, count_b, mean_b, m2_b):
    """Return the count, mean and m2 of two disjoint sets of rows (Chan et al.'s pairwise update)."""
    if count_b == 0:
        return count_a, mean_a, m2_a
    if count_a == 0:
        return count_b, mean_b, m2_b
    count = count_a + count_b
    share = count_b / count
    delta = mean_b - mean_a
    return count, mean_a + delta * share, m2_a + m2_b + delta * delta * (count_a * share)


# The loops are written once per twin: the simulator cannot hand its arrays to an njit helper.

@njit(nogil=True, cache=True)
def _moment_level_cpu(counts, means, m2s, source, length, target):
    for j in range((length + 1) // 2):
        first = source + 2 * j
        count, mean, m2 = counts[first], means[first], m2s[first]
        if 2 * j + 1 < length:
            count, mean, m2 = _merge(count, mean, m2, counts[first + 1], means[first + 1], m2s[first + 1])
        counts[target + j] = count
        means[target + j] = mean
        m2s[target + j] = m2


@njit(nogil=True, cache=True)
def _moment_query_cpu(counts, means, m2s, leaves, frame_starts, frame_ends, out_counts, out_means, out_m2s):
    for row in range(frame_starts.shape[0]):
        low = frame_starts[row]
        high = frame_ends[row]
        offset = 0
        length = leaves
        count, mean, m2 = 0, 0.0, 0.0
        while low < high:
            if low & 1:
                node = offset + low
                count, mean, m2 = _merge(count, mean, m2, counts[node], means[node], m2s[node])
                low += 1
            if high & 1:
                high -= 1
                node = offset + high
                count, mean, m2 = _merge(count, mean, m2, counts[node], means[node], m2s[node])
            low >>= 1
            high >>= 1
            offset += length
            length = (length + 1) // 2
        out_counts[row] = count
        out_means[row] = mean
        out_m2s[row] = m2


@cuda.jit
def _moment_level_cuda(counts, means, m2s, source, length, target):
    for j in range(cuda.grid(1), (length + 1) // 2, cuda.gridsize(1)):
        first = source + 2 * j
        count, mean, m2 = counts[first], means[first], m2s[first]
        if 2 * j + 1 < length:
            count, mean, m2 = _merge(count, mean, m2, counts[first + 1], means[first + 1], m2s[first + 1])
        counts[target + j] = count
        means[target + j] = mean
        m2s[target + j] = m2


@cuda.jit
def _moment_query_cuda(counts, means, m2s, leaves, frame_starts, frame_ends, out_counts, out_means, out_m2s):
    for row in range(cuda.grid(1), frame_starts.shape[0], cuda.gridsize(1)):
        low = frame_starts[row]
        high = frame_ends[row]
        offset = 0
        length = leaves
        count, mean, m2 = 0, 0.0, 0.0
        while low < high:
            if low & 1:
                node = offset + low
                count, mean, m2 = _merge(count, mean, m2, counts[node], means[node], m2s[node])
                low += 1
            if high & 1:
                high -= 1
                node = offset + high
                count, mean, m2 = _merge(count, mean, m2, counts[node], means[node], m2s[node])
            low >>= 1
            high >>= 1
            offset += length
            length = (length + 1) // 2
        out_counts[row] = count
        out_means[row] = mean
        out_m2s[row] = m2


def frame_moments(device: Device, values: Any, valid: Any, frame_starts: Any, frame_ends: Any
                  ) -> tuple[Any, Any, Any]:
    """Return each row's frame count, mean and m2 over ``float64`` ``values`` (``valid``: non-NULL) in frames
    ``[frame_starts[i], frame_ends[i])`` of the sorted rows."""
    xp = device.xp
    n = int(values.shape[0])
    lengths = [n]
    while lengths[-1] > 1:
        lengths.append((lengths[-1] + 1) // 2)
    size = sum(lengths)
    counts = xp.empty(size, dtype=xp.int64)
    means = xp.empty(size, dtype=xp.float64)
    m2s = xp.zeros(size, dtype=xp.float64)
    counts[:n] = valid
    means[:n] = xp.where(valid, values, 0.0)
    source = 0
    for length in lengths[:-1]:
        launch_twin(device, (length + 1) // 2, _moment_level_cpu, _moment_level_cuda, counts, means, m2s, source,
                    length, source + length)
        source += length
    out_counts = xp.empty(n, dtype=xp.int64)
    out_means = xp.empty(n, dtype=xp.float64)
    out_m2s = xp.empty(n, dtype=xp.float64)
    launch_twin(device, n, _moment_query_cpu, _moment_query_cuda, counts, means, m2s, n,
                xp.ascontiguousarray(frame_starts), xp.ascontiguousarray(frame_ends), out_counts, out_means, out_m2s)
    return out_counts, out_means, out_m2s


def moments_result(device: Device, function: str, counts: Any, m2s: Any) -> tuple[Any, Any]:
    """Return ``function`` (``var_samp``, ``var_pop``, ``stddev_samp``, ``stddev_pop``) of each frame and where it
    is defined, as DuckDB: the sample forms need two rows, the population forms one."""
    xp = device.xp
    sample = function.endswith("_samp")
    valid = counts > (1 if sample else 0)
    divisor = xp.where(valid, counts - (1 if sample else 0), 1).astype(xp.float64)
    values = xp.where(valid, m2s, 0.0) / divisor
    if function.startswith("stddev"):
        values = xp.sqrt(values)
    return values, valid
