"""Scalar row functions that generated (fused) kernels call, one source for every device.

Why: a fused kernel (:mod:`gpu_engine.codegen`) evaluates a whole pipeline
stretch per row in registers. Its exact semantics (checked int64 arithmetic,
decimal rounding, DuckDB's float order, calendar fields, key hashing) live here
as numba ``njit`` functions, which the CPU twin calls as functions and numba.cuda
compiles as device functions, so the CPU, the simulator and the GPU share one
definition, and the eager evaluator's rules (:mod:`gpu_engine.expressions`) are
restated once, row-wise.

Under the CUDA simulator an njit call returns a Python int; generated code
wraps results that feed unsigned arithmetic in ``np.uint64(...)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpu_engine.kernels.checked_arithmetic import ADD, MULTIPLY, SUBTRACT, checked_int64_op
from gpu_engine.kernels.hash import fmix64

__all__ = [
    "ADD", "SUBTRACT", "MULTIPLY", "checked_int64_op", "truncated_remainder", "divide_round_half_away",
    "scaled_order", "float_less", "float_equal", "float_remainder", "round_half_even", "round_half_away", "civil_year",
    "civil_month",
    "civil_day", "mix_key_word", "finish_key_hash", "slot_shift", "key_word_bits", "KEY_HASH_SEED",
    "POWERS_OF_TEN_INT64", "floor_divide",
]

KEY_HASH_SEED = np.uint64(0x13198A2E03707344)
POWERS_OF_TEN_INT64 = np.array([10**k for k in range(19)], dtype=np.int64)


@njit(nogil=True, cache=True)
def floor_divide(a, b):
    """Return ``a // b`` rounded toward minus infinity for int64 (``b != 0``)."""
    q = a // b
    return q


@njit(nogil=True, cache=True)
def truncated_remainder(a, b):
    """Return C's ``a % b`` (the dividend's sign) for int64; ``b`` is neither 0 nor -1."""
    r = a % b  # floor remainder: the divisor's sign
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r


@njit(nogil=True, cache=True)
def divide_round_half_away(value, power):
    """Return ``value / power`` rounded half away from zero (``power`` a positive power of ten)."""
    if power == 1:
        return value
    remainder = truncated_remainder(value, power)
    quotient = (value - remainder) // power
    half = power // 2
    if remainder >= half:
        quotient += 1
    elif remainder <= -half:
        quotient -= 1
    return quotient


@njit(nogil=True, cache=True)
def scaled_order(coarse, fine, power):
    """Return ``(coarse < fine, coarse == fine)`` for scaled integers whose scales differ by ``power``.

    ``fine`` has the larger scale; it is split by floor division into a
    quotient and a non-negative remainder instead of rescaling ``coarse``
    upward, which could overflow (the rule of :mod:`gpu_engine.expressions.comparison`).
    """
    quotient = fine // power
    remainder = fine - quotient * power
    at_quotient = coarse == quotient
    return (coarse < quotient) or (at_quotient and remainder > 0), at_quotient and remainder == 0


@njit(nogil=True, cache=True)
def float_less(a, b):
    """Return ``a < b`` in DuckDB's float order: NaN is greater than every number."""
    return (a < b) or (a == a and b != b)


@njit(nogil=True, cache=True)
def float_equal(a, b):
    """Return ``a == b`` in DuckDB's float order: NaN equals NaN."""
    return (a == b) or (a != a and b != b)


@njit(nogil=True, cache=True, error_model="numpy")
def float_remainder(a, b):
    """Return C's ``fmod(a, b)`` (the sign of ``a``), what SQL's ``%`` gives on floats.

    Why not ``np.fmod``: numba-cuda has no CUDA lowering for it, and numba's CPU
    target has no ``math.fmod``; Python's ``%`` (the sign of ``b``) compiles on
    both and is corrected here. ``b == 0`` gives NaN (NumPy's error model).
    """
    if abs(a) < abs(b):  # Python's % would add b to a negative a (and round it away); also a finite a, b = inf
        return a
    r = a % b
    if r != 0.0 and (r < 0.0) != (a < 0.0):
        r -= b
    return r


@njit(nogil=True, cache=True)
def round_half_even(value):
    """Return ``value`` rounded to an integral float, halves to even (C's ``nearbyint``).

    Written without ``np.rint``, which numba-cuda has no CUDA lowering for
    (KeyError: <ufunc 'rint'> on a real GPU); floats of 2**52 or more (and NaN,
    inf) are integral already.
    """
    if not abs(value) < 4503599627370496.0:
        return value
    truncated = np.int64(value)
    whole = np.float64(truncated)
    fraction = value - whole
    odd = truncated % 2 != 0
    if fraction > 0.5 or (fraction == 0.5 and odd):
        whole += 1.0
    elif fraction < -0.5 or (fraction == -0.5 and odd):
        whole -= 1.0
    return whole


@njit(nogil=True, cache=True)
def round_half_away(value):
    """Return ``value`` rounded to an integral float, halves away from zero.

    Truncates through int64 instead of ``np.trunc``, which numba-cuda has no
    CUDA lowering for (KeyError: <ufunc 'trunc'> on a real GPU); floats of
    2**52 or more (and NaN, inf) are integral already.
    """
    if abs(value) < 4503599627370496.0:
        whole = np.float64(np.int64(value))
    else:
        return value
    fraction = value - whole
    if fraction >= 0.5:
        whole += 1.0
    elif fraction <= -0.5:
        whole -= 1.0
    return whole


@njit(nogil=True, cache=True)
def _civil(days):
    z = np.int64(days) + 719468
    era = z // 146097
    day_of_era = z - era * 146097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + 3 if shifted_month < 10 else shifted_month - 9
    year = year_of_era + era * 400 + (1 if month <= 2 else 0)
    return year, month, day


@njit(nogil=True, cache=True)
def civil_year(days):
    """Return the proleptic Gregorian year of a day number (days since 1970-01-01)."""
    return _civil(days)[0]


@njit(nogil=True, cache=True)
def civil_month(days):
    """Return the month (1-12) of a day number."""
    return _civil(days)[1]


@njit(nogil=True, cache=True)
def civil_day(days):
    """Return the day of the month of a day number."""
    return _civil(days)[2]


@njit(nogil=True, cache=True)
def key_word_bits(word):
    """Return an int64 key word as the uint64 the key hash mixes."""
    return np.uint64(np.int64(word))


_KEY_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


@njit(nogil=True, cache=True)
def mix_key_word(h, word):
    """Fold one key word into a running key hash: one xor and one multiply (the finalizer does the mixing)."""
    return (h ^ word) * _KEY_MULTIPLIER


@njit(nogil=True, cache=True)
def finish_key_hash(h, num_words):
    """Return the slot hash of a key's words: murmur3's finalizer, so every bit of every word reaches every bit."""
    return fmix64(h ^ num_words)


@njit(nogil=True, cache=True)
def slot_shift(slots):
    """Return the right shift that takes a key hash to its slot in a table of ``slots`` (a power of two, >= 2).

    Why the top bits of the hash, not the low ones: a table emits its keys in slot order, so the next
    aggregation step (the FINAL after a PARTIAL, a table growing into one twice its size) receives them
    ordered by their top hash bits, and with the same hash its slots are then written in ascending order,
    a sweep through memory instead of a cache miss a key: at any table size, since the slot of a key is a
    prefix of its hash. (TPC-H Q18's FINAL step takes 1.5M keys from its PARTIAL step.)
    """
    shift = np.uint64(64)
    while slots > 1:
        slots >>= 1
        shift -= np.uint64(1)
    return shift
