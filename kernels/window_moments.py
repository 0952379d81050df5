"""Compute variance, covariance and their kin over window frames: segment trees of moments merged by Chan's formula.

Why moments rather than sums of x and x²: a frame's variance from ``Σx² - (Σx)²/n`` cancels catastrophically
when the values sit far from zero relative to their spread (prices near 10⁹ that differ by cents, a trend
across a partition that a sliding frame sees only a small piece of). Each tree node instead keeps its rows'
count, mean and sum of squared deviations from that mean (``m2``); two nodes merge exactly as the grouped
aggregation merges partial states (:class:`~gpu_engine.aggregation.functions.Moments`): with ``δ`` the
difference of their means, ``mean = mean_a + δ·n_b/n`` and ``m2 = m2_a + m2_b + δ²·n_a·n_b/n``. No square
of a value is ever formed, so the result is as exact as a two-pass variance of the frame.

As :func:`~gpu_engine.kernels.window.frame_tree` does for sums, the levels are built bottom-up (each node from
the two below it) and every row merges the O(log n) nodes that cover its frame ``[start, end)``: running
frames, sliding ROWS frames and RANGE frames alike. NULL rows are leaves of count 0. Pairs (``covar_*``, ``corr``,
``regr_*``) keep both variables' means and squared deviations and their co-deviation ``c``, merged the same way
(``c = c_a + c_b + δx·δy·n_a·n_b/n``); a pair with a NULL side is a leaf of count 0.
"""

from __future__ import annotations

from typing import Any

from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.kernels.launch import launch_twin

__all__ = ["frame_moments", "merged_moments", "moments_result", "frame_comoments"]


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


@njit(nogil=True, cache=True)
def _merge_pair(count_a, mean_xa, mean_ya, m2x_a, m2y_a, c_a, count_b, mean_xb, mean_yb, m2x_b, m2y_b, c_b):
    """Return the count, means, squared deviations and co-deviation of two disjoint sets of pairs."""
    if count_b == 0:
        return count_a, mean_xa, mean_ya, m2x_a, m2y_a, c_a
    if count_a == 0:
        return count_b, mean_xb, mean_yb, m2x_b, m2y_b, c_b
    count = count_a + count_b
    share = count_b / count
    weight = count_a * share
    dx = mean_xb - mean_xa
    dy = mean_yb - mean_ya
    return (count, mean_xa + dx * share, mean_ya + dy * share, m2x_a + m2x_b + dx * dx * weight,
            m2y_a + m2y_b + dy * dy * weight, c_a + c_b + dx * dy * weight)


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


@njit(nogil=True, cache=True)
def _comoment_level_cpu(counts, means_x, means_y, m2xs, m2ys, cs, source, length, target):
    for j in range((length + 1) // 2):
        a = source + 2 * j
        state = (counts[a], means_x[a], means_y[a], m2xs[a], m2ys[a], cs[a])
        if 2 * j + 1 < length:
            b = a + 1
            state = _merge_pair(state[0], state[1], state[2], state[3], state[4], state[5],
                                counts[b], means_x[b], means_y[b], m2xs[b], m2ys[b], cs[b])
        t = target + j
        counts[t], means_x[t], means_y[t], m2xs[t], m2ys[t], cs[t] = state


@njit(nogil=True, cache=True)
def _comoment_query_cpu(counts, means_x, means_y, m2xs, m2ys, cs, leaves, frame_starts, frame_ends, out_counts,
                        out_means_x, out_means_y, out_m2xs, out_m2ys, out_cs):
    for row in range(frame_starts.shape[0]):
        low = frame_starts[row]
        high = frame_ends[row]
        offset = 0
        length = leaves
        state = (0, 0.0, 0.0, 0.0, 0.0, 0.0)
        while low < high:
            if low & 1:
                n = offset + low
                state = _merge_pair(state[0], state[1], state[2], state[3], state[4], state[5],
                                    counts[n], means_x[n], means_y[n], m2xs[n], m2ys[n], cs[n])
                low += 1
            if high & 1:
                high -= 1
                n = offset + high
                state = _merge_pair(state[0], state[1], state[2], state[3], state[4], state[5],
                                    counts[n], means_x[n], means_y[n], m2xs[n], m2ys[n], cs[n])
            low >>= 1
            high >>= 1
            offset += length
            length = (length + 1) // 2
        out_counts[row], out_means_x[row], out_means_y[row] = state[0], state[1], state[2]
        out_m2xs[row], out_m2ys[row], out_cs[row] = state[3], state[4], state[5]


@cuda.jit
def _comoment_level_cuda(counts, means_x, means_y, m2xs, m2ys, cs, source, length, target):
    for j in range(cuda.grid(1), (length + 1) // 2, cuda.gridsize(1)):
        a = source + 2 * j
        state = (counts[a], means_x[a], means_y[a], m2xs[a], m2ys[a], cs[a])
        if 2 * j + 1 < length:
            b = a + 1
            state = _merge_pair(state[0], state[1], state[2], state[3], state[4], state[5],
                                counts[b], means_x[b], means_y[b], m2xs[b], m2ys[b], cs[b])
        t = target + j
        counts[t] = state[0]
        means_x[t] = state[1]
        means_y[t] = state[2]
        m2xs[t] = state[3]
        m2ys[t] = state[4]
        cs[t] = state[5]


@cuda.jit
def _comoment_query_cuda(counts, means_x, means_y, m2xs, m2ys, cs, leaves, frame_starts, frame_ends, out_counts,
                         out_means_x, out_means_y, out_m2xs, out_m2ys, out_cs):
    for row in range(cuda.grid(1), frame_starts.shape[0], cuda.gridsize(1)):
        low = frame_starts[row]
        high = frame_ends[row]
        offset = 0
        length = leaves
        state = (0, 0.0, 0.0, 0.0, 0.0, 0.0)
        while low < high:
            if low & 1:
                n = offset + low
                state = _merge_pair(state[0], state[1], state[2], state[3], state[4], state[5],
                                    counts[n], means_x[n], means_y[n], m2xs[n], m2ys[n], cs[n])
                low += 1
            if high & 1:
                high -= 1
                n = offset + high
                state = _merge_pair(state[0], state[1], state[2], state[3], state[4], state[5],
                                    counts[n], means_x[n], means_y[n], m2xs[n], m2ys[n], cs[n])
            low >>= 1
            high >>= 1
            offset += length
            length = (length + 1) // 2
        out_counts[row] = state[0]
        out_means_x[row] = state[1]
        out_means_y[row] = state[2]
        out_m2xs[row] = state[3]
        out_m2ys[row] = state[4]
        out_cs[row] = state[5]


def _levels(n: int) -> list[int]:
    lengths = [n]
    while lengths[-1] > 1:
        lengths.append((lengths[-1] + 1) // 2)
    return lengths


def frame_comoments(device: Device, x: Any, y: Any, valid: Any, frame_starts: Any, frame_ends: Any) -> dict:
    """Return each row's frame moments over the pairs ``(x, y)`` (``valid``: neither side NULL) as the arrays of
    :class:`~gpu_engine.aggregation.functions.Moments`'s state (``count``, ``mean_x``, ``m2_x``, ``mean_y``,
    ``m2_y``, ``c``; shifts 0), so its finalization gives covariance, correlation and ``regr_*`` as DuckDB."""
    xp = device.xp
    n = int(x.shape[0])
    lengths = _levels(n)
    size = sum(lengths)
    counts = xp.empty(size, dtype=xp.int64)
    means_x, means_y = xp.empty(size, dtype=xp.float64), xp.empty(size, dtype=xp.float64)
    m2xs, m2ys, cs = (xp.zeros(size, dtype=xp.float64) for _ in range(3))
    counts[:n] = valid
    means_x[:n] = xp.where(valid, x, 0.0)
    means_y[:n] = xp.where(valid, y, 0.0)
    source = 0
    for length in lengths[:-1]:
        launch_twin(device, (length + 1) // 2, _comoment_level_cpu, _comoment_level_cuda, counts, means_x, means_y,
                    m2xs, m2ys, cs, source, length, source + length)
        source += length
    out = {"count": xp.empty(n, dtype=xp.int64)}
    for name in ("mean_x", "mean_y", "m2_x", "m2_y", "c"):
        out[name] = xp.empty(n, dtype=xp.float64)
    launch_twin(device, n, _comoment_query_cpu, _comoment_query_cuda, counts, means_x, means_y, m2xs, m2ys, cs, n,
                xp.ascontiguousarray(frame_starts), xp.ascontiguousarray(frame_ends), out["count"], out["mean_x"],
                out["mean_y"], out["m2_x"], out["m2_y"], out["c"])
    out["shift_x"] = xp.zeros(n, dtype=xp.float64)
    out["shift_y"] = xp.zeros(n, dtype=xp.float64)
    return out


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


def merged_moments(xp: Any, first: tuple[Any, Any, Any], second: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
    """Return the count, mean and m2 per row of two disjoint row sets (:func:`_merge`, over whole arrays).

    Why: a frame with EXCLUDE is two or three pieces, each one segment-tree query; their moments merge
    row by row as the tree's nodes do.
    """
    count_a, mean_a, m2_a = first
    count_b, mean_b, m2_b = second
    count = count_a + count_b
    share = xp.where(count > 0, count_b / xp.maximum(count, 1), 0.0)
    delta = xp.where((count_a > 0) & (count_b > 0), mean_b - mean_a, 0.0)
    mean = xp.where(count_a > 0, mean_a + delta * share, mean_b)
    m2 = xp.where(count_a > 0, m2_a, 0.0) + xp.where(count_b > 0, m2_b, 0.0)  # an empty piece's words are unset
    return count, mean, m2 + delta * delta * (count_a * share)


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
