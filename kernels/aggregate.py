"""Accumulate aggregates per group id into device arrays, skipping null inputs.

Why: hash aggregation maps rows to dense group ids (see
:mod:`gpu_engine.kernels.group_by`) and then updates one accumulator array per
aggregate in place, batch after batch. Integer sums are split into 32-bit halves
so they stay exact and can never wrap; overflow is detected once, at the end.
Float min/max compare an order-preserving integer key of the float's bits (NaN
greatest, as DuckDB), which also lets the CUDA twin update them with an integer
compare-and-swap instead of float atomics that assume no NaN.

The caller sizes (and grows) the accumulator arrays so every group id is a
valid index, and pre-fills min/max outputs with :func:`identity_for_min` /
:func:`identity_for_max` of their dtype.

An accumulator of one slot (an aggregation without grouping keys: every group
id is 0) is summed and counted in registers on the CPU. Why: the scatter loop
adds through memory to the same slot every row, a store-to-load chain of ~3.5 ns
a row against ~0.2 ns; TPC-DS q9's fifteen ungrouped conditional aggregates over
store_sales spent most of their lowest tier's time there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_kernel_launch
from gpu_engine.kernels.launch import launch_twin, read_only

__all__ = [
    "group_count",
    "group_sum_int",
    "combine_split_sum",
    "group_sum_words",
    "split_sum_words",
    "limb_sum_words",
    "sum_results",
    "SUM_BEYOND_128_BITS",
    "SUM_BEYOND_38_DIGITS",
    "SUM_NEEDS_WORDS",
    "group_sum_float",
    "group_min",
    "group_max",
    "identity_for_min",
    "identity_for_max",
    "group_moments",
    "group_product",
    "MOMENT_STATE",
    "MOMENT_BATCH_STATE",
    "PIVOT_SCALE",
    "HUGE_PIVOT",
    "WIDE_DEVIATION",
    "group_bits",
    "group_keep_any",
    "BIT_OPERATIONS",
]

_LOW_MASK = np.int64(0xFFFFFFFF)
_I32 = np.int64(32)
_TOP_LIMIT = np.int64(1 << 31)  # a sum's top 32 bits, signed, fit in 128 bits below this
#: 10**38 as signed (high, low) words, and -10**38: decimal(38)'s first magnitude out of range.
_DIGITS38_HIGH = np.int64(10**38 >> 64)
_DIGITS38_LOW = np.int64(10**38 & (2**64 - 1))
#: :func:`sum_results`' status words: the first group whose sum needs more than 128 bits, the first beyond
#: 38 digits (each the group count when none), and 1 when some sum needs more than 64 bits.
SUM_BEYOND_128_BITS, SUM_BEYOND_38_DIGITS, SUM_NEEDS_WORDS = 0, 1, 2
_CUDA_ATOMIC_INTEGERS = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint32), np.dtype(np.uint64))


# --------------------------------------------------------- shared scalar math
@njit(nogil=True, cache=True)
def _float_order_key(bits, magnitude_mask):
    """Map float bits (int64, sign-extended for float32) to an int64 that sorts like the float."""
    bits = np.int64(bits)
    return bits ^ ((bits >> np.int64(63)) & magnitude_mask)


@njit(nogil=True, cache=True)
def _normalized_float_bits(value, bits, canonical_nan):
    """Return the bits to store for ``value``: one NaN, and ``0.0`` for ``-0.0``."""
    if value != value:
        return np.int64(canonical_nan)
    if value == 0.0:
        return np.int64(0)
    return np.int64(bits)


@njit(nogil=True, cache=True)
def _replaces(candidate_key, current_key, want_max):
    return candidate_key > current_key if want_max else candidate_key < current_key


@njit(nogil=True, cache=True)
def _split_words(high, low):
    """Return the ``(low, high)`` 128-bit words of ``high * 2**32 + low`` (cannot overflow: fewer than 2**31
    values a group)."""
    upper = high + (low >> _I32)
    return (upper << _I32) | (low & _LOW_MASK), upper >> _I32


@njit(nogil=True, cache=True)
def _limb_words(limb0, limb1, limb2, limb3):
    """Carry four 32-bit-limb sums (the top one signed) into 128-bit ``(low, high)`` words; and whether they fit."""
    total = limb0
    digit0 = total & _LOW_MASK
    total = limb1 + (total >> _I32)
    digit1 = total & _LOW_MASK
    total = limb2 + (total >> _I32)
    digit2 = total & _LOW_MASK
    top = limb3 + (total >> _I32)
    fits = -_TOP_LIMIT <= top < _TOP_LIMIT
    return (digit1 << _I32) | digit0, (top << _I32) | digit2, fits


@njit(nogil=True, cache=True)
def _beyond_38_digits(high, low):
    """Return whether the signed 128-bit ``(high, low)`` is at least 10**38 in magnitude (int64 words)."""
    if high >= 0:
        return high > _DIGITS38_HIGH or (high == _DIGITS38_HIGH and (low < 0 or low >= _DIGITS38_LOW))
    below = -_DIGITS38_HIGH - np.int64(1)
    return high < below or (high == below and (low >= 0 or low <= -_DIGITS38_LOW))


@njit(nogil=True, cache=True)
def _sum_result_status(low, high, fits):
    """Return which :func:`sum_results` status word a group's sum sets: -1 none (it fits int64)."""
    if not fits:
        return SUM_BEYOND_128_BITS
    if _beyond_38_digits(high, low):
        return SUM_BEYOND_38_DIGITS
    return -1 if high == (low >> np.int64(63)) else SUM_NEEDS_WORDS


@njit(nogil=True, cache=True)
def _sum_result(limbs, a, b, c, d):
    """Return a group's sum words ``(low, high)`` from its four limbs (or its split ``a``, ``b``) and which
    :func:`sum_results` status word it sets (-1 none)."""
    if limbs:
        low, high, fits = _limb_words(a, b, c, d)
    else:
        low, high = _split_words(a, b)
        fits = True
    return low, high, _sum_result_status(low, high, fits)


# ------------------------------------------------------------------- CPU twins
@njit(nogil=True, cache=True)
def _count_cpu(group_ids, validity, has_validity, counts):
    if counts.shape[0] == 1:  # one group (an aggregation without keys): every id is 0, count in a register
        if not has_validity:
            counts[0] += group_ids.shape[0]
            return
        total = 0
        for i in range(group_ids.shape[0]):
            total += validity[i]
        counts[0] += total
        return
    for i in range(group_ids.shape[0]):
        if not has_validity or validity[i]:
            counts[group_ids[i]] += 1


@njit(nogil=True, cache=True)
def _upper_half(v, unsigned):
    """Return the upper 32 bits of an int64 word: signed, or unsigned for uint64 bits."""
    if unsigned:
        return np.int64(np.uint64(v) >> np.uint64(32))
    return v >> _I32


@njit(nogil=True, cache=True)
def _sum_int_cpu(group_ids, values, validity, has_validity, high, low, has_value, unsigned):
    if low.shape[0] == 1:  # one group: the halves add in registers (the same sums, see _count_cpu)
        low_sum = np.int64(0)
        high_sum = np.int64(0)
        seen = np.int64(0)
        for i in range(group_ids.shape[0]):
            keep = np.int64(validity[i]) if has_validity else np.int64(1)
            v = values[i] * keep  # a null row adds 0: no branch to mispredict on a mixed validity
            low_sum += v & _LOW_MASK
            high_sum += _upper_half(v, unsigned)
            seen |= keep
        low[0] += low_sum
        high[0] += high_sum
        if seen:
            has_value[0] = True
        return
    for i in range(group_ids.shape[0]):
        if not has_validity or validity[i]:
            g = group_ids[i]
            v = values[i]
            low[g] += v & _LOW_MASK
            high[g] += _upper_half(v, unsigned)
            has_value[g] = True


@njit(nogil=True, cache=True)
def _sum_words_cpu(group_ids, words, validity, has_validity, limb0, limb1, limb2, limb3, has_value):
    if limb0.shape[0] == 1:  # one group: the limbs add in registers (see _count_cpu)
        s0 = np.int64(0)
        s1 = np.int64(0)
        s2 = np.int64(0)
        s3 = np.int64(0)
        seen = np.int64(0)
        for i in range(group_ids.shape[0]):
            keep = np.int64(validity[i]) if has_validity else np.int64(1)
            low = words[i, 0] * keep  # a null row adds 0 (see _sum_int_cpu)
            high = words[i, 1] * keep
            s0 += low & _LOW_MASK
            s1 += _upper_half(low, True)
            s2 += high & _LOW_MASK
            s3 += high >> _I32
            seen |= keep
        limb0[0] += s0
        limb1[0] += s1
        limb2[0] += s2
        limb3[0] += s3
        if seen:
            has_value[0] = True
        return
    for i in range(group_ids.shape[0]):
        if not has_validity or validity[i]:
            g = group_ids[i]
            low = words[i, 0]
            high = words[i, 1]
            limb0[g] += low & _LOW_MASK
            limb1[g] += _upper_half(low, True)
            limb2[g] += high & _LOW_MASK
            limb3[g] += high >> _I32
            has_value[g] = True


@njit(nogil=True, cache=True)
def _split_words_cpu(high, low, words):
    for g in range(low.shape[0]):
        words[g, 0], words[g, 1] = _split_words(high[g], low[g])


@njit(nogil=True, cache=True)
def _limb_words_cpu(limb0, limb1, limb2, limb3, words, fits):
    for g in range(limb0.shape[0]):
        words[g, 0], words[g, 1], fits[g] = _limb_words(limb0[g], limb1[g], limb2[g], limb3[g])


@njit(nogil=True, cache=True)
def _sum_results_cpu(limbs, a, b, c, d, values, highs, status):
    for g in range(values.shape[0]):
        values[g], highs[g], kind = _sum_result(limbs, a[g], b[g], c[g], d[g])
        if kind == SUM_NEEDS_WORDS:
            status[SUM_NEEDS_WORDS] = 1
        elif kind >= 0 and g < status[kind]:
            status[kind] = g


@njit(nogil=True, cache=True)
def _sum_float_cpu(group_ids, values, validity, has_validity, sums, has_value):
    if sums.shape[0] == 1:  # one group: added in a register, in row order (the same float sum, see _count_cpu)
        total = sums[0]
        seen = group_ids.shape[0] > 0
        if has_validity:  # a null row adds 0.0 (a select, not a branch; the total is never -0.0: it starts at 0.0)
            seen = False
            for i in range(group_ids.shape[0]):
                keep = validity[i]
                total += values[i] if keep else 0.0
                seen |= keep
        else:
            for i in range(group_ids.shape[0]):
                total += values[i]
        sums[0] = total
        if seen:
            has_value[0] = True
        return
    for i in range(group_ids.shape[0]):
        if not has_validity or validity[i]:
            g = group_ids[i]
            sums[g] += values[i]
            has_value[g] = True


@njit(nogil=True, cache=True)
def _extreme_int_cpu(group_ids, values, validity, has_validity, out, has_value, want_max):
    for i in range(group_ids.shape[0]):
        if not has_validity or validity[i]:
            g = group_ids[i]
            v = values[i]
            if not has_value[g] or (v > out[g] if want_max else v < out[g]):
                out[g] = v
            has_value[g] = True


@njit(nogil=True, cache=True)
def _extreme_float_cpu(group_ids, values, value_bits, validity, has_validity, out_bits, has_value,
                       want_max, magnitude_mask, canonical_nan):
    for i in range(group_ids.shape[0]):
        if not has_validity or validity[i]:
            g = group_ids[i]
            bits = _normalized_float_bits(values[i], value_bits[i], canonical_nan)
            key = _float_order_key(bits, magnitude_mask)
            if not has_value[g] or _replaces(key, _float_order_key(out_bits[g], magnitude_mask), want_max):
                out_bits[g] = bits
            has_value[g] = True


# ------------------------------------------------------------------ CUDA twins
@cuda.jit
def _count_cuda(group_ids, validity, has_validity, counts):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if not has_validity or validity[i]:
            cuda.atomic.add(counts, group_ids[i], 1)


@cuda.jit
def _sum_int_cuda(group_ids, values, validity, has_validity, high, low, has_value, unsigned):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if not has_validity or validity[i]:
            g = group_ids[i]
            v = values[i]
            cuda.atomic.add(low, g, v & _LOW_MASK)
            cuda.atomic.add(high, g, _upper_half(v, unsigned))
            has_value[g] = True


@cuda.jit
def _sum_words_cuda(group_ids, words, validity, has_validity, limb0, limb1, limb2, limb3, has_value):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if not has_validity or validity[i]:
            g = group_ids[i]
            low = words[i, 0]
            high = words[i, 1]
            cuda.atomic.add(limb0, g, low & _LOW_MASK)
            cuda.atomic.add(limb1, g, _upper_half(low, True))
            cuda.atomic.add(limb2, g, high & _LOW_MASK)
            cuda.atomic.add(limb3, g, high >> _I32)
            has_value[g] = True


@cuda.jit
def _sum_results_cuda(limbs, a, b, c, d, values, highs, status):
    for g in range(cuda.grid(1), values.shape[0], cuda.gridsize(1)):
        values[g], highs[g], kind = _sum_result(limbs, a[g], b[g], c[g], d[g])
        if kind == SUM_NEEDS_WORDS:
            status[SUM_NEEDS_WORDS] = 1
        elif kind >= 0:
            cuda.atomic.min(status, kind, g)


@cuda.jit
def _split_words_cuda(high, low, words):
    for g in range(cuda.grid(1), low.shape[0], cuda.gridsize(1)):
        words[g, 0], words[g, 1] = _split_words(high[g], low[g])


@cuda.jit
def _limb_words_cuda(limb0, limb1, limb2, limb3, words, fits):
    for g in range(cuda.grid(1), limb0.shape[0], cuda.gridsize(1)):
        words[g, 0], words[g, 1], fits[g] = _limb_words(limb0[g], limb1[g], limb2[g], limb3[g])


@cuda.jit
def _sum_float_cuda(group_ids, values, validity, has_validity, sums, has_value):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if not has_validity or validity[i]:
            g = group_ids[i]
            cuda.atomic.add(sums, g, values[i])
            has_value[g] = True


@cuda.jit
def _extreme_int_cuda(group_ids, values, validity, has_validity, out, has_value, want_max):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if not has_validity or validity[i]:
            g = group_ids[i]
            if want_max:
                cuda.atomic.max(out, g, values[i])
            else:
                cuda.atomic.min(out, g, values[i])
            has_value[g] = True


@cuda.jit
def _extreme_float_cuda(group_ids, values, value_bits, validity, has_validity, out_bits, has_value,
                        want_max, magnitude_mask, canonical_nan):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if not has_validity or validity[i]:
            g = group_ids[i]
            bits = _normalized_float_bits(values[i], value_bits[i], canonical_nan)
            key = _float_order_key(bits, magnitude_mask)
            current = out_bits[g]
            while _replaces(key, _float_order_key(current, magnitude_mask), want_max):
                seen = cuda.atomic.cas(out_bits, g, current, bits)
                if seen == current:
                    break
                current = seen
            has_value[g] = True


# ---------------------------------------------------------------- entry points
def _validity_argument(device: Device, validity: Any) -> tuple[Any, bool]:
    if validity is None:
        return device.xp.zeros(1, dtype=device.xp.bool_), False
    return device.xp.ascontiguousarray(validity), True


def group_count(device: Device, group_ids: Any, validity: Any | None, counts: Any) -> None:
    """Add 1 to ``counts[group]`` for each row (each valid row when ``validity`` is given).

    Parameters
    ----------
    device
        Where the arrays live; selects the twin.
    group_ids
        ``int32`` group id per row.
    validity
        ``bool`` per row of the counted argument, or ``None`` for ``count(*)``.
    counts
        ``int64`` accumulator, updated in place.
    """
    validity, has_validity = _validity_argument(device, validity)
    launch_twin(device, group_ids.shape[0], _count_cpu, _count_cuda, group_ids, validity, has_validity, counts)


def group_sum_int(device: Device, group_ids: Any, values: Any, validity: Any | None,
                  high: Any, low: Any, has_value: Any) -> None:
    """Add integer values into an exact split accumulator: ``low += v & 0xFFFFFFFF``, ``high += v >> 32``.

    Why: neither half can overflow for fewer than 2**31 rows per group, so the
    sum is exact until :func:`combine_split_sum` checks that it fits 64 bits.

    Parameters
    ----------
    device
        Where the arrays live; selects the twin.
    group_ids
        ``int32`` group id per row.
    values
        Integers of any width (bool, decimals' scaled int64 included); uint64
        values split as unsigned, so every value up to 2**64 - 1 adds exactly.
    validity
        ``bool`` per row or ``None``; null rows are skipped.
    high, low
        ``int64`` accumulators, updated in place.
    has_value
        ``bool`` per group, set where a valid value was seen (a sum of none is NULL).
    """
    xp = device.xp
    unsigned = values.dtype == np.dtype(np.uint64)
    values = xp.ascontiguousarray(values.view(xp.int64) if unsigned else values.astype(xp.int64, copy=False))
    validity, has_validity = _validity_argument(device, validity)
    launch_twin(device, group_ids.shape[0], _sum_int_cpu, _sum_int_cuda,
                group_ids, values, validity, has_validity, high, low, has_value, unsigned)


def group_sum_words(device: Device, group_ids: Any, words: Any, validity: Any | None,
                    limbs: tuple[Any, Any, Any, Any], has_value: Any) -> None:
    """Add 128-bit values (``(n, 2)`` int64 low/high words) into four 32-bit-limb accumulators.

    ``limbs[k]`` (int64 per group) sums bits ``32k .. 32k + 31`` of each value,
    the top limb signed; exact for fewer than 2**31 values per group, combined
    by :func:`limb_sum_words`.
    """
    validity, has_validity = _validity_argument(device, validity)
    launch_twin(device, group_ids.shape[0], _sum_words_cpu, _sum_words_cuda, group_ids,
                device.xp.ascontiguousarray(words), validity, has_validity, *limbs, has_value)


def split_sum_words(device: Device, high: Any, low: Any) -> Any:
    """Return the 128-bit words of split sums ``high * 2**32 + low`` (:func:`group_sum_int`'s state); exact.

    One kernel pass (as :func:`limb_sum_words`): as array expressions it made four temporaries per call.
    """
    xp = device.xp
    words = xp.empty((low.shape[0], 2), dtype=xp.int64)
    launch_twin(device, low.shape[0], _split_words_cpu, _split_words_cuda,
                xp.ascontiguousarray(high), xp.ascontiguousarray(low), words)
    return words


def limb_sum_words(device: Device, limbs: tuple[Any, Any, Any, Any]) -> tuple[Any, Any]:
    """Return ``(words, fits)``: the 128-bit words of :func:`group_sum_words`'s limbs, and where they fit 128 bits.

    One kernel pass: the carries written as a dozen array expressions took ~100 ms for TPC-H Q18's
    1.5M decimal sums at SF1 on the 2-core VM (each expression a pass and a fresh array).
    """
    xp = device.xp
    groups = limbs[0].shape[0]
    words = xp.empty((groups, 2), dtype=xp.int64)
    fits = xp.empty(groups, dtype=xp.bool_)
    launch_twin(device, groups, _limb_words_cpu, _limb_words_cuda,
                *(xp.ascontiguousarray(limb) for limb in limbs), words, fits)
    return words, fits


def sum_results(device: Device, state: tuple[Any, ...]) -> tuple[Any, Any, Any]:
    """Return ``(values, highs, status)``: exact sums from a sum's state, in one kernel pass.

    ``state`` is :func:`group_sum_int`'s ``(high, low)`` or :func:`group_sum_words`'s four limbs.
    ``values`` holds each sum's low word (the sum itself where it fits int64), ``highs`` its high word,
    and the device array ``status`` the :data:`SUM_BEYOND_128_BITS`, :data:`SUM_BEYOND_38_DIGITS` and
    :data:`SUM_NEEDS_WORDS` words (the caller reads them when it must: one sync). Why one pass: a final sum went through the words, a
    128-bit check, a 38-digit check and an int64 check (four passes, three reads, a copy per word) over
    TPC-H Q18's 1.5M groups.
    """
    xp = device.xp
    groups = state[0].shape[0]
    values = xp.empty(groups, dtype=xp.int64)
    highs = xp.empty(groups, dtype=xp.int64)
    status = device.asarray(np.array([groups, groups, 0], dtype=np.int64))
    parts = tuple(xp.ascontiguousarray(part) for part in state)
    limbs = len(parts) == 4
    if not limbs:
        parts = parts + (parts[0], parts[0])
    launch_twin(device, groups, _sum_results_cpu, _sum_results_cuda, limbs, *parts, values, highs, status)
    return values, highs, status


def combine_split_sum(device: Device, high: Any, low: Any) -> Any:
    """Return ``high * 2**32 + low`` as ``int64``, exactly.

    Raises
    ------
    OverflowError
        When any sum does not fit in int64 (it is never wrapped).
    """
    xp = device.xp
    carried_high = high + (low >> 32)
    if carried_high.shape[0] and bool(xp.any((carried_high < -(2**31)) | (carried_high >= 2**31))):
        raise OverflowError("integer sum exceeds 64 bits (int64 range); use a wider type (e.g. decimal) for this sum")
    return carried_high * (2**32) + (low & 0xFFFFFFFF)


def group_sum_float(device: Device, group_ids: Any, values: Any, validity: Any | None,
                    sums: Any, has_value: Any) -> None:
    """Add float values into ``sums[group]`` (float64), marking ``has_value`` for groups that saw one."""
    xp = device.xp
    values = xp.ascontiguousarray(values.astype(xp.float64, copy=False))
    validity, has_validity = _validity_argument(device, validity)
    launch_twin(device, group_ids.shape[0], _sum_float_cpu, _sum_float_cuda,
                group_ids, values, validity, has_validity, sums, has_value)


def identity_for_min(dtype: Any) -> Any:
    """Return the value ``min`` accumulators of ``dtype`` must be pre-filled with.

    The dtype's largest integer; NaN for floats, because NaN sorts greatest
    (DuckDB's order), so a group of only NaNs ends as NaN.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(np.nan)
    if dtype.kind == "b":
        return np.True_
    return np.iinfo(dtype).max


def identity_for_max(dtype: Any) -> Any:
    """Return the value ``max`` accumulators of ``dtype`` must be pre-filled with (-inf, or the smallest integer)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(-np.inf)
    if dtype.kind == "b":
        return np.False_
    return np.iinfo(dtype).min


def _group_extreme(device: Device, group_ids: Any, values: Any, validity: Any | None,
                   out: Any, has_value: Any, want_max: bool) -> None:
    xp = device.xp
    if values.dtype != out.dtype:
        raise TypeError(f"min/max output dtype {out.dtype} differs from the values' dtype {values.dtype}")
    n = group_ids.shape[0]
    group_ids = xp.ascontiguousarray(group_ids)
    values = xp.ascontiguousarray(values)
    validity, has_validity = _validity_argument(device, validity)
    if values.dtype.kind == "f":
        bits_dtype = xp.int64 if values.dtype.itemsize == 8 else xp.int32
        magnitude_mask = np.int64(2 ** (8 * values.dtype.itemsize - 1) - 1)
        canonical_nan = int(np.array(np.nan, dtype=values.dtype).view(bits_dtype))
        launch_twin(device, n, _extreme_float_cpu, _extreme_float_cuda, group_ids, values, values.view(bits_dtype),
                    validity, has_validity, out.view(bits_dtype), has_value, want_max, magnitude_mask,
                    np.int64(canonical_nan))
        return
    if device.kernel_flavor == "cpu" or values.dtype in _CUDA_ATOMIC_INTEGERS:
        launch_twin(device, n, _extreme_int_cpu, _extreme_int_cuda,
                    group_ids, values, validity, has_validity, out, has_value, want_max)
        return
    # CUDA atomics have no 8/16-bit min/max: accumulate in a widened copy.
    wide = xp.int64 if values.dtype.kind == "i" else xp.uint64
    accumulator = out.astype(wide)
    launch_twin(device, n, _extreme_int_cpu, _extreme_int_cuda,
                group_ids, values.astype(wide), validity, has_validity, accumulator, has_value, want_max)
    out[...] = accumulator.astype(out.dtype)


def group_min(device: Device, group_ids: Any, values: Any, validity: Any | None, out: Any, has_value: Any) -> None:
    """Fold ``values`` into ``out[group] = min(out[group], value)``, skipping nulls.

    Parameters
    ----------
    device
        Where the arrays live; selects the twin.
    group_ids
        ``int32`` group id per row.
    values
        Integers or floats; floats order as DuckDB (``-0.0 == 0.0``, NaN greatest).
    validity
        ``bool`` per row or ``None``.
    out
        Accumulator of ``values.dtype``, pre-filled with :func:`identity_for_min`.
    has_value
        ``bool`` per group, set where a valid value was seen.
    """
    _group_extreme(device, group_ids, values, validity, out, has_value, want_max=False)


def group_max(device: Device, group_ids: Any, values: Any, validity: Any | None, out: Any, has_value: Any) -> None:
    """Fold ``values`` into ``out[group] = max(out[group], value)``, skipping nulls.

    Same arguments as :func:`group_min`; ``out`` is pre-filled with :func:`identity_for_max`.
    """
    _group_extreme(device, group_ids, values, validity, out, has_value, want_max=True)


# ------------------------------------------------------- moments (variance, covariance)
# Why three passes per batch rather than one update per row: Welford's update is
# a chain through each group's state, which CUDA threads cannot share without a
# lock; instead a batch's rows are reduced per group by the corrected two-pass
# algorithm (Chan, Golub and LeVeque: their sums give a first mean m', then the
# deviations from m' and their squares are summed, and the sum of deviations
# corrects both), and each group's batch moments join its state by Chan's
# parallel formula. A row may itself stand for a partial group (count, shift,
# mean, sums of squared deviations: a merging step), so one set of kernels
# serves raw and merged input.
#
# Means are kept relative to a per-group shift (the first batch's m'), so a
# large offset never enters the state's arithmetic: with values near 1e9 that
# differ by units, ``x - m'`` and ``m' - shift`` are exact (Sterbenz), and the
# variance is as exact as the deviations themselves (float64 means near 1e9
# would carry only ~1e-7 of each value).
#
# The batch sums live in the state too (``batch_*``, all zero between
# batches): the join pass walks the batch's rows, the first row of each group
# takes the group's batch count (an atomic exchange with 0), joins and zeroes
# its sums, so every pass costs the batch's rows, never the number of groups.
#
# The CPU runs a batch's rows in order, so raw rows there take Welford's update
# one row at a time (:func:`_moment_rows_cpu`, relative to the same shift): one
# pass instead of three (db-benchmark q9's corr at 10M: -10.7% CPU).
#
# The first pass sums values scaled by :data:`_PIVOT_SCALE` (2**-64, exact for
# values above ~1e-289): the plain sum of values near 1e308 overflows to inf, and
# the deviations from an infinite m' made every moment NaN where DuckDB's are
# finite (or inf); m' is only a pivot, so a scaled sum gives the same m' bit for
# bit wherever the plain one was finite.
_PIVOT_SCALE = 2.0 ** -64
#: The sums of deviations from a pivot at least this large are kept scaled by :data:`_PIVOT_SCALE` too: five
#: values 1.7e308 beside two zeros deviate +0.49e308 each from their mean, and their sum (0 once the zeros'
#: deviations join it) overflowed to inf on the way: an infinite mean offset, NaN moments once batches merged
#: (a co-moment inf * 0). A nonzero deviation from such a pivot is at least its ulp (2**460), so the scaling is
#: exact; below it the sums are the plain ones, bit for bit.
_HUGE_PIVOT = 2.0 ** 512
#: A co-deviation whose factor is at least this large is summed times :data:`_PIVOT_SCALE` (``huge_c``): the true
#: co-moment of (1.5e308, 3) x3, (7, 5), (2, 1e-300) is 0.9e308, but its single products from the mean are
#: -1.98e308 and +2.52e308, which rounded to -inf and +inf and summed to NaN on CUDA (DuckDB: -inf, +inf or
#: 1.8e307 by the rows' order). Below it ``count * dx * dy`` stays under 2**959 and the sums are the plain ones.
_WIDE_DEVIATION = 2.0 ** 448
#: The constants as the fused aggregation kernel's moments read them (gpu_engine.aggregation.functions.Moments).
PIVOT_SCALE, HUGE_PIVOT, WIDE_DEVIATION = _PIVOT_SCALE, _HUGE_PIVOT, _WIDE_DEVIATION


@njit(nogil=True, cache=True)
def _scaled_product(a, b):
    """Return ``a * b * 2**-64`` with the larger factor scaled, so a small one does not go subnormal first."""
    return (a * _PIVOT_SCALE) * b if abs(a) >= abs(b) else a * (b * _PIVOT_SCALE)


@njit(nogil=True, cache=True)
def _settle_comoment(plain, huge, correction):
    """Return the co-deviation sum ``plain + huge * 2**64 - correction`` (``huge`` the scaled products of
    :data:`_WIDE_DEVIATION` factors): in units of 2**-64 where ``huge`` holds any, so a sum whose terms passed the
    largest double is finite where it is; a sum already infinite stays as it is (DuckDB's inf)."""
    if abs(plain) == np.inf or abs(huge) == np.inf:
        return plain + huge
    if huge == 0.0:
        return plain - correction
    return ((plain * _PIVOT_SCALE + huge) - correction * _PIVOT_SCALE) / _PIVOT_SCALE


@njit(nogil=True, cache=True)
def _moment_sums_cpu(group_ids, validity, has_validity, raw, counts, kx, rx, ky, ry, paired,
                     batch_n, batch_sx, batch_sy):
    for i in range(group_ids.shape[0]):
        if not has_validity or validity[i]:
            g = group_ids[i]
            n = np.int64(1) if raw else counts[i]
            batch_n[g] += n
            batch_sx[g] += n * ((kx[i] if raw else kx[i] + rx[i]) * _PIVOT_SCALE)
            if paired:
                batch_sy[g] += n * ((ky[i] if raw else ky[i] + ry[i]) * _PIVOT_SCALE)


@njit(nogil=True, cache=True)
def _moment_deviations_cpu(group_ids, validity, has_validity, raw, counts, kx, rx, ky, ry, m2x, m2y, cxy, paired,
                           batch_n, batch_sx, batch_sy, batch_m2x, batch_m2y, batch_c, batch_dx, batch_dy, huge_c):
    for i in range(group_ids.shape[0]):
        if not has_validity or validity[i]:
            g = group_ids[i]
            n = 1.0 if raw else np.float64(counts[i])
            if n == 0.0:
                continue
            pivot_x = batch_sx[g] / batch_n[g] / _PIVOT_SCALE
            dx = kx[i] - pivot_x
            if not raw:
                dx += rx[i]
            batch_dx[g] += n * dx * (_PIVOT_SCALE if abs(pivot_x) >= _HUGE_PIVOT else 1.0)
            batch_m2x[g] += n * dx * dx + (0.0 if raw else m2x[i])
            if paired:
                pivot_y = batch_sy[g] / batch_n[g] / _PIVOT_SCALE
                dy = ky[i] - pivot_y
                if not raw:
                    dy += ry[i]
                batch_dy[g] += n * dy * (_PIVOT_SCALE if abs(pivot_y) >= _HUGE_PIVOT else 1.0)
                batch_m2y[g] += n * dy * dy + (0.0 if raw else m2y[i])
                if abs(dx) >= _WIDE_DEVIATION or abs(dy) >= _WIDE_DEVIATION:
                    batch_c[g] += 0.0 if raw else cxy[i]
                    huge_c[g] += n * _scaled_product(dx, dy)
                else:
                    batch_c[g] += n * dx * dy + (0.0 if raw else cxy[i])


@njit(nogil=True, cache=True)
def _fused_multiply_add(a, b, c):
    """Return ``a * b + c`` as DuckDB's co-moment update computes it, a fused multiply-add: a product of finite
    values that passes the largest double is not inf first, so ``c`` (inf, or finite of the other sign) is not
    lost to ``inf - inf`` (NaN where DuckDB gives -inf); the sum is then taken in units of 2**-64."""
    product = a * b
    if abs(product) != np.inf or abs(a) == np.inf or abs(b) == np.inf:
        return c + product
    if abs(c) == np.inf:
        return c
    return ((a * _PIVOT_SCALE) * b + c * _PIVOT_SCALE) / _PIVOT_SCALE


@njit(nogil=True, cache=True)
def _moment_rows_cpu(group_ids, validity, has_validity, kx, ky, paired, count, shift_x, mean_x, shift_y, mean_y,
                     m2_x, m2_y, c):
    """Fold raw rows into their groups' moments one row at a time (Welford's update, means relative to the shift:
    a group's first value): the CPU runs rows in order, so it needs neither the batch sums nor their join."""
    for i in range(group_ids.shape[0]):
        if has_validity and not validity[i]:
            continue
        g = group_ids[i]
        n = count[g]
        if n == 0:
            count[g] = 1
            shift_x[g] = kx[i]
            mean_x[g] = 0.0
            m2_x[g] = 0.0
            if paired:
                shift_y[g] = ky[i]
                mean_y[g] = 0.0
                m2_y[g] = 0.0
                c[g] = 0.0
            continue
        n += 1
        count[g] = n
        x = kx[i] - shift_x[g]
        dx = x - mean_x[g]
        mean_x[g] += dx / n
        m2_x[g] += dx * (x - mean_x[g])
        if paired:
            y = ky[i] - shift_y[g]
            dy = y - mean_y[g]
            mean_y[g] += dy / n
            m2_y[g] += dy * (y - mean_y[g])
            c[g] = _fused_multiply_add(dy, x - mean_x[g], c[g])  # DuckDB's order: the second argument's first


@njit(nogil=True, cache=True)
def _join_comoment(c, bc, a, b):
    """Return ``c + (bc + a * b)``, Chan's co-moment join (``a * b`` the cross term), in units of 2**-64 where finite
    terms passed the largest double on the way: a cross term of 2.1e308 beside partial co-moments of -1.5e308 was
    inf, and a later join's -inf made the merged co-moment NaN by the drivers' order (covar_pop over three 2-row
    splits of (1.5e308, 3) x3, (7, 5), (2, 1e-300); one thread's DuckDB: -inf, inf or 1.8e307). A co-moment already
    infinite stays so beside finite terms (:func:`_fused_multiply_add`'s rule)."""
    total = c + (bc + a * b)
    if abs(total) < np.inf or abs(bc) == np.inf or abs(a) == np.inf or abs(b) == np.inf:
        return total
    if abs(c) == np.inf:  # an infinite co-moment stays, as DuckDB's fused multiply-add keeps it (not inf - inf)
        return c
    return (c * _PIVOT_SCALE + (bc * _PIVOT_SCALE + _scaled_product(a, b))) / _PIVOT_SCALE


@njit(nogil=True, cache=True)
def _moment_join(nb, sx, sy, bm2x, bm2y, bc, hc, bdx, bdy, count, shift_x, mean_x, shift_y, mean_y, m2_x, m2_y, c,
                 paired):
    """Return a group's state joined with its batch moments (Chan et al.'s pairwise update), as scalars.

    The batch's sums of deviations from its first mean m' (``bdx``, ``bdy``) correct that mean and its
    sums of squares; a group's first batch sets its shift to m'.
    """
    first_x = sx / nb / _PIVOT_SCALE
    first_y = sy / nb / _PIVOT_SCALE
    # the deviation sums as the deviations pass kept them (scaled beside a huge pivot: _HUGE_PIVOT); each batch's
    # mean offset from m' is then finite, and a correction past the largest double only where its sum is inf
    scale_x = _PIVOT_SCALE if abs(first_x) >= _HUGE_PIVOT else 1.0
    scale_y = _PIVOT_SCALE if abs(first_y) >= _HUGE_PIVOT else 1.0
    offset_x = bdx / nb / scale_x
    offset_y = bdy / nb / scale_y
    # the correction never exceeds the sum it corrects, so an overflowed (infinite) sum stays as it is: with values
    # near 1e308 a deviation of one rounding step squares to inf, and inf - inf gave NaN where DuckDB says inf
    if abs(bm2x) != np.inf:
        bm2x -= offset_x * bdx / scale_x
    if paired:
        if abs(bm2y) != np.inf:
            bm2y -= offset_y * bdy / scale_y
        bc = _settle_comoment(bc, hc, offset_x * bdy / scale_y)
    if count == 0:
        return first_x, offset_x, first_y, offset_y, bm2x, bm2y, bc
    na = np.float64(count)
    n = na + nb
    weight = na * nb / n
    dx = (first_x - shift_x) + offset_x - mean_x
    mean_x += dx / n * nb  # not dx * nb / n: 1.7e308 * 2 passed the largest double (an infinite mean)
    m2_x += bm2x + dx * dx * weight
    if paired:
        dy = (first_y - shift_y) + offset_y - mean_y
        mean_y += dy / n * nb
        m2_y += bm2y + dy * dy * weight
        c = _join_comoment(c, bc, dx * weight, dy)
    return shift_x, mean_x, shift_y, mean_y, m2_x, m2_y, c


@njit(nogil=True, cache=True)
def _moment_join_cpu(group_ids, validity, has_validity, paired, batch_n, batch_sx, batch_sy, batch_m2x, batch_m2y,
                     batch_c, batch_dx, batch_dy, huge_c, count, shift_x, mean_x, shift_y, mean_y, m2_x, m2_y, c):
    for i in range(group_ids.shape[0]):
        if not has_validity or validity[i]:
            g = group_ids[i]
            taken = batch_n[g]
            if taken == 0:
                continue
            batch_n[g] = 0
            p = g if paired else 0
            shift_x[g], mean_x[g], shift_y[p], mean_y[p], m2_x[g], m2_y[p], c[p] = _moment_join(
                np.float64(taken), batch_sx[g], batch_sy[p], batch_m2x[g], batch_m2y[p], batch_c[p], huge_c[p],
                batch_dx[g], batch_dy[p], count[g], shift_x[g], mean_x[g], shift_y[p], mean_y[p], m2_x[g], m2_y[p], c[p],
                paired)
            count[g] += taken
            batch_sx[g] = batch_m2x[g] = batch_dx[g] = 0.0
            if paired:
                batch_sy[g] = batch_m2y[g] = batch_c[g] = batch_dy[g] = huge_c[g] = 0.0


@cuda.jit
def _moment_sums_cuda(group_ids, validity, has_validity, raw, counts, kx, rx, ky, ry, paired,
                      batch_n, batch_sx, batch_sy):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if not has_validity or validity[i]:
            g = group_ids[i]
            n = np.int64(1) if raw else counts[i]
            cuda.atomic.add(batch_n, g, n)
            cuda.atomic.add(batch_sx, g, n * ((kx[i] if raw else kx[i] + rx[i]) * _PIVOT_SCALE))
            if paired:
                cuda.atomic.add(batch_sy, g, n * ((ky[i] if raw else ky[i] + ry[i]) * _PIVOT_SCALE))


@cuda.jit
def _moment_deviations_cuda(group_ids, validity, has_validity, raw, counts, kx, rx, ky, ry, m2x, m2y, cxy, paired,
                            batch_n, batch_sx, batch_sy, batch_m2x, batch_m2y, batch_c, batch_dx, batch_dy,
                            huge_c):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if not has_validity or validity[i]:
            g = group_ids[i]
            n = 1.0 if raw else np.float64(counts[i])
            if n != 0.0:
                pivot_x = batch_sx[g] / batch_n[g] / _PIVOT_SCALE
                dx = kx[i] - pivot_x
                if not raw:
                    dx += rx[i]
                cuda.atomic.add(batch_dx, g, n * dx * (_PIVOT_SCALE if abs(pivot_x) >= _HUGE_PIVOT else 1.0))
                cuda.atomic.add(batch_m2x, g, n * dx * dx + (0.0 if raw else m2x[i]))
                if paired:
                    pivot_y = batch_sy[g] / batch_n[g] / _PIVOT_SCALE
                    dy = ky[i] - pivot_y
                    if not raw:
                        dy += ry[i]
                    cuda.atomic.add(batch_dy, g, n * dy * (_PIVOT_SCALE if abs(pivot_y) >= _HUGE_PIVOT else 1.0))
                    cuda.atomic.add(batch_m2y, g, n * dy * dy + (0.0 if raw else m2y[i]))
                    if abs(dx) >= _WIDE_DEVIATION or abs(dy) >= _WIDE_DEVIATION:
                        cuda.atomic.add(batch_c, g, 0.0 if raw else cxy[i])
                        cuda.atomic.add(huge_c, g, n * _scaled_product(dx, dy))
                    else:
                        cuda.atomic.add(batch_c, g, n * dx * dy + (0.0 if raw else cxy[i]))


@cuda.jit
def _moment_join_cuda(group_ids, validity, has_validity, paired, batch_n, batch_sx, batch_sy, batch_m2x, batch_m2y,
                      batch_c, batch_dx, batch_dy, huge_c, count, shift_x, mean_x, shift_y, mean_y, m2_x, m2_y, c):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if not has_validity or validity[i]:
            g = group_ids[i]
            taken = cuda.atomic.exch(batch_n, g, 0)  # one row of the group takes its batch
            if taken != 0:
                p = g if paired else 0
                shift_x[g], mean_x[g], shift_y[p], mean_y[p], m2_x[g], m2_y[p], c[p] = _moment_join(
                    np.float64(taken), batch_sx[g], batch_sy[p], batch_m2x[g], batch_m2y[p], batch_c[p], huge_c[p],
                    batch_dx[g], batch_dy[p], count[g], shift_x[g], mean_x[g], shift_y[p], mean_y[p], m2_x[g],
                    m2_y[p], c[p], paired)
                count[g] += taken
                batch_sx[g] = 0.0
                batch_m2x[g] = 0.0
                batch_dx[g] = 0.0
                if paired:
                    batch_sy[g] = 0.0
                    batch_m2y[g] = 0.0
                    batch_c[g] = 0.0
                    batch_dy[g] = 0.0
                    huge_c[g] = 0.0


#: The per-group arrays of :func:`group_moments`' state (the ``y`` ones only over two variables): the
#: moments, then the batch sums (zero between batches).
MOMENT_STATE = ("count", "shift_x", "mean_x", "shift_y", "mean_y", "m2_x", "m2_y", "c")
MOMENT_BATCH_STATE = ("batch_n", "batch_sx", "batch_sy", "batch_m2x", "batch_m2y", "batch_c", "batch_dx", "batch_dy",
                      "huge_c")


def _fold_rows_in_order(device: Device, group_ids: Any, validity: Any, has_validity: bool, kx: Any, ky: Any,
                        paired: bool, moments: list[Any]) -> bool:
    """Fold raw rows in one pass (:func:`_moment_rows_cpu`) where the device runs them in order, the CPU; return
    whether it did (elsewhere the three passes run)."""
    if device.kernel_flavor != "cpu":
        return False
    count_kernel_launch()  # the values read-only always: one signature, Arrow's buffers or computed (launch.read_only)
    _moment_rows_cpu(group_ids, validity, has_validity, read_only(np, kx), read_only(np, ky), paired, *moments)
    return True


def group_moments(device: Device, group_ids: Any, validity: Any | None, x: Any, y: Any | None,
                  partial: dict[str, Any] | None, state: dict[str, Any]) -> None:
    """Fold rows into per-group moments: count, shifted means of x (and y), sums of squared deviations
    (and of co-deviations).

    Parameters
    ----------
    device
        Where the arrays live; selects the twins.
    group_ids
        ``int32`` group id per row.
    validity
        ``bool`` per row or ``None``; rows where it is False are skipped (a pair with a NULL side included).
    x, y
        ``float64`` per row: the values (raw rows) or the partial groups' shifts; ``y`` None for one variable.
    partial
        None for raw rows, else a merging step's per-row arrays named as in :data:`MOMENT_STATE`
        (``count``, ``mean_x``, ``m2_x``, and over two variables ``mean_y``, ``m2_y``, ``c``).
    state
        The per-group arrays named in :data:`MOMENT_STATE` and :data:`MOMENT_BATCH_STATE` (int64
        counts, float64 rest, zero for a new group; the ``y`` ones absent for one variable), updated in
        place by Chan's formula; the batch sums are zero again on return.
    """
    xp = device.xp
    n = group_ids.shape[0]
    if n == 0:
        return
    paired = y is not None
    dummy = xp.zeros(1, dtype=xp.float64)
    validity, has_validity = _validity_argument(device, validity)
    raw = partial is None

    def rows(name):
        if raw or name not in partial:
            return dummy if name != "count" else xp.zeros(1, dtype=xp.int64)
        return xp.ascontiguousarray(partial[name])

    kx = xp.ascontiguousarray(x, dtype=xp.float64)
    ky = kx if not paired else xp.ascontiguousarray(y, dtype=xp.float64)
    counts, rx, ry, m2x, m2y, cxy = (rows(name) for name in ("count", "mean_x", "mean_y", "m2_x", "m2_y", "c"))
    group_ids = xp.ascontiguousarray(group_ids)
    if raw and _fold_rows_in_order(device, group_ids, validity, has_validity, kx, ky, paired,
                                   [state.get(name, dummy) for name in MOMENT_STATE]):
        return
    batch_n, batch_sx, batch_sy, batch_m2x, batch_m2y, batch_c, batch_dx, batch_dy, huge_c = (
        state.get(name, dummy) for name in MOMENT_BATCH_STATE)
    launch_twin(device, n, _moment_sums_cpu, _moment_sums_cuda, group_ids, validity, has_validity, raw, counts,
                kx, rx, ky, ry, paired, batch_n, batch_sx, batch_sy)
    launch_twin(device, n, _moment_deviations_cpu, _moment_deviations_cuda, group_ids, validity, has_validity, raw,
                counts, kx, rx, ky, ry, m2x, m2y, cxy, paired, batch_n, batch_sx, batch_sy, batch_m2x, batch_m2y,
                batch_c, batch_dx, batch_dy, huge_c)
    launch_twin(device, n, _moment_join_cpu, _moment_join_cuda, group_ids, validity, has_validity, paired,
                batch_n, batch_sx, batch_sy, batch_m2x, batch_m2y, batch_c, batch_dx, batch_dy, huge_c,
                *(state.get(name, dummy) for name in MOMENT_STATE))


# ------------------------------------------------------------- bitwise and any-row folds
_BIT_AND, _BIT_OR, _BIT_XOR = 0, 1, 2
BIT_OPERATIONS = {"bit_and": _BIT_AND, "bit_or": _BIT_OR, "bit_xor": _BIT_XOR}


@njit(nogil=True, cache=True)
def _bits_cpu(group_ids, values, validity, has_validity, out, has_value, operation):
    for i in range(group_ids.shape[0]):
        if not has_validity or validity[i]:
            g = group_ids[i]
            if operation == _BIT_AND:
                out[g] &= values[i]
            elif operation == _BIT_OR:
                out[g] |= values[i]
            else:
                out[g] ^= values[i]
            has_value[g] = True


@cuda.jit
def _bits_cuda(group_ids, values, validity, has_validity, out, has_value, operation):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if not has_validity or validity[i]:
            g = group_ids[i]
            if operation == _BIT_AND:
                cuda.atomic.and_(out, g, values[i])
            elif operation == _BIT_OR:
                cuda.atomic.or_(out, g, values[i])
            else:
                cuda.atomic.xor(out, g, values[i])
            has_value[g] = True


def group_bits(device: Device, group_ids: Any, values: Any, validity: Any | None, out: Any, has_value: Any,
               operation: int) -> None:
    """Fold int64 ``values`` into ``out[group]`` by AND, OR or XOR (:data:`BIT_OPERATIONS`), skipping nulls.

    ``out`` starts at -1 (all bits set) for AND and 0 otherwise; narrower integers widen by sign
    extension, which commutes with the three operations, so the low bits are the narrow result.
    """
    validity, has_validity = _validity_argument(device, validity)
    launch_twin(device, group_ids.shape[0], _bits_cpu, _bits_cuda, device.xp.ascontiguousarray(group_ids),
                device.xp.ascontiguousarray(values), validity, has_validity, out, has_value, np.int64(operation))


@njit(nogil=True, cache=True)
def _keep_any_cpu(group_ids, rows, values, out, has_value):
    for i in range(group_ids.shape[0]):
        if rows[i]:
            g = group_ids[i]
            out[g] = values[i]
            has_value[g] = True


@cuda.jit
def _keep_any_cuda(group_ids, rows, values, out, has_value):
    for i in range(cuda.grid(1), group_ids.shape[0], cuda.gridsize(1)):
        if rows[i]:
            g = group_ids[i]
            out[g] = values[i]  # racing rows of a group each store a whole word: one of them stays
            has_value[g] = True


def group_keep_any(device: Device, group_ids: Any, rows: Any, values: Any, out: Any, has_value: Any) -> None:
    """Store into ``out[group]`` the value of some row of the group where ``rows`` holds (which one is unspecified)."""
    xp = device.xp
    launch_twin(device, group_ids.shape[0], _keep_any_cpu, _keep_any_cuda, xp.ascontiguousarray(group_ids),
                xp.ascontiguousarray(rows), xp.ascontiguousarray(values), out, has_value)


# ------------------------------------------------------------------------ products
# CUDA has no atomic multiply (and a compare-and-swap loop needs the float's bits, which a kernel cannot
# reinterpret portably): a batch's rows are ordered by group, and one thread multiplies each group's rows.
@njit(nogil=True, cache=True)
def _product_cpu(order, ends, values, validity, has_validity, products, has_value):
    for g in range(ends.shape[0]):
        start = ends[g - 1] if g > 0 else 0
        for j in range(start, ends[g]):
            i = order[j]
            if not has_validity or validity[i]:
                products[g] *= values[i]
                has_value[g] = True


@cuda.jit
def _product_cuda(order, ends, values, validity, has_validity, products, has_value):
    for g in range(cuda.grid(1), ends.shape[0], cuda.gridsize(1)):
        start = ends[g - 1] if g > 0 else 0
        for j in range(start, ends[g]):
            i = order[j]
            if not has_validity or validity[i]:
                products[g] *= values[i]
                has_value[g] = True


def group_product(device: Device, group_ids: Any, values: Any, validity: Any | None, products: Any,
                  has_value: Any) -> None:
    """Multiply float64 ``values`` into ``products[group]`` (starting at 1.0), skipping nulls.

    One thread per group walks its rows (ordered by group id), so no atomic multiply is needed.
    """
    xp = device.xp
    if group_ids.shape[0] == 0:
        return
    groups = products.shape[0]
    order = xp.argsort(group_ids, kind="stable").astype(xp.int64)
    ends = xp.cumsum(xp.bincount(group_ids, minlength=groups)).astype(xp.int64)
    validity, has_validity = _validity_argument(device, validity)
    launch_twin(device, groups, _product_cpu, _product_cuda, order, ends, xp.ascontiguousarray(values, dtype=xp.float64),
                validity, has_validity, products, has_value)
