"""Exact 128-bit decimal arithmetic on two 64-bit words per value, checked at 38 digits.

Why: a decimal(p, s) with p > 18, a HUGEINT sum or a product such as TPC-H
Q11's at SF10 does not fit int64, and DuckDB answers those exactly. A wide value
is kept as Arrow lays out decimal128: two int64 words per row, the low word
(read as unsigned) then the high word (signed), so a column's ``(n, 2)`` array
is Arrow's buffer as is. Every result is checked against ``10**38``, DuckDB's
limit for decimal(38); nothing wraps.

The arithmetic is done in sign and magnitude on uint64 halves (defined
wrapping in both twins); products split into 32-bit limbs, so neither twin
needs a 128-bit machine type. Scaling down divides by at most ``10**9`` at a
time (a 32-bit divisor keeps each limb step inside 64 bits) and rounds half
away from zero, as DuckDB does.

One elementwise kernel (:func:`wide_binary`) does add, subtract, multiply and
compare, each operand first moved up by a power of ten and the result moved
down, so a caller aligns scales and rounds in the same pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.kernels.launch import launch_twin

__all__ = ["ADD", "SUBTRACT", "MULTIPLY", "COMPARE", "RESCALE", "wide_binary", "wide_rescale", "LIMIT_HIGH", "LIMIT_LOW"]

ADD, SUBTRACT, MULTIPLY, COMPARE, RESCALE = 0, 1, 2, 3, 4

#: ``10**38`` as (high, low) words: the first magnitude that does not fit decimal(38).
LIMIT_HIGH = np.uint64(10**38 >> 64)
LIMIT_LOW = np.uint64(10**38 & (2**64 - 1))
_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_TOP = np.uint64(1 << 63)

#: Status codes a kernel writes per row.
OK, OVERFLOW = 0, 1


@njit(nogil=True, cache=True)
def _negate(high, low):
    """Return the two's complement of (high, low), both uint64."""
    low = ~low + _ONE
    high = ~high + (_ONE if low == _ZERO else _ZERO)
    return high, low


@njit(nogil=True, cache=True)
def _magnitude(high, low):
    """Return (negative, magnitude high, magnitude low) of a signed value in uint64 words."""
    if high & _TOP:
        h, l = _negate(high, low)
        return True, h, l
    return False, high, low


@njit(nogil=True, cache=True)
def _mul64(a, b):
    """Return the 128-bit product of two uint64 as (high, low)."""
    a0, a1 = a & _M32, a >> _S32
    b0, b1 = b & _M32, b >> _S32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _S32) + (p01 & _M32) + (p10 & _M32)
    low = (p00 & _M32) | (mid << _S32)
    high = p11 + (p01 >> _S32) + (p10 >> _S32) + (mid >> _S32)
    return high, low


@njit(nogil=True, cache=True)
def _mul_magnitudes(ah, al, bh, bl):
    """Return (overflowed, high, low) of a product of magnitudes; overflow past 2**127."""
    if ah != _ZERO and bh != _ZERO:
        return True, _ZERO, _ZERO
    if ah != _ZERO:
        ah, al, bh, bl = bh, bl, ah, al
    # now ah == 0: (bh * 2**64 + bl) * al
    h1, l1 = _mul64(al, bl)
    h2, l2 = _mul64(al, bh)
    if h2 != _ZERO:
        return True, _ZERO, _ZERO
    high = h1 + l2
    if high < h1 or high & _TOP:
        return True, _ZERO, _ZERO
    return False, high, l1


@njit(nogil=True, cache=True)
def _pow10(k):
    value = np.uint64(1)
    for _ in range(k):
        value *= np.uint64(10)
    return value


@njit(nogil=True, cache=True)
def _scale_up(high, low, k):
    """Return (overflowed, high, low) of a magnitude times ``10**k``."""
    while k > 0:
        step = 18 if k > 18 else k
        bad, high, low = _mul_magnitudes(high, low, _ZERO, _pow10(step))
        if bad:
            return True, _ZERO, _ZERO
        k -= step
    return False, high, low


@njit(nogil=True, cache=True)
def _divide_small(high, low, divisor):
    """Return the magnitude divided by ``divisor`` (< 2**32), truncated, as (high, low)."""
    current = high >> _S32
    q0 = current // divisor
    current = ((current - q0 * divisor) << _S32) | (high & _M32)
    q1 = current // divisor
    current = ((current - q1 * divisor) << _S32) | (low >> _S32)
    q2 = current // divisor
    current = ((current - q2 * divisor) << _S32) | (low & _M32)
    q3 = current // divisor
    return (q0 << _S32) | q1, (q2 << _S32) | q3


@njit(nogil=True, cache=True)
def _scale_down(high, low, k):
    """Return a magnitude divided by ``10**k``, rounded half away from zero (``k >= 1``)."""
    k -= 1
    while k > 0:
        step = 9 if k > 9 else k
        high, low = _divide_small(high, low, _pow10(step))
        k -= step
    low_plus = low + np.uint64(5)
    if low_plus < low:
        high += _ONE
    return _divide_small(high, low_plus, np.uint64(10))


@njit(nogil=True, cache=True)
def _beyond_38_digits(high, low):
    return high > LIMIT_HIGH or (high == LIMIT_HIGH and low >= LIMIT_LOW)


@njit(nogil=True, cache=True)
def _signed(negative, high, low):
    if negative and (high != _ZERO or low != _ZERO):
        return _negate(high, low)
    return high, low


@njit(nogil=True, cache=True)
def _aligned(high, low, up, saturate):
    """Return (overflowed, negative, magnitude high, low) of a signed value times ``10**up``.

    With ``saturate`` an overflow yields the largest magnitude instead, which
    still orders correctly against every in-range value (for comparisons).
    """
    negative, mh, ml = _magnitude(np.uint64(high), np.uint64(low))
    if up > 0:
        bad, mh, ml = _scale_up(mh, ml, up)
        if bad:
            if not saturate:
                return True, negative, _ZERO, _ZERO
            return False, negative, ~_TOP, ~_ZERO
    return False, negative, mh, ml


@njit(nogil=True, cache=True)
def wide_op(op, ah, al, bh, bl, left_up, right_up, down):
    """Return (status, high, low) of one operation on signed 128-bit values given as int64 words.

    ``COMPARE`` returns the sign of ``a - b`` in ``low`` (-1, 0, 1); every other
    op returns the result scaled down by ``10**down`` and checked at 38 digits.
    """
    compare = op == COMPARE
    bad_a, neg_a, ah_, al_ = _aligned(ah, al, left_up, compare)
    bad_b, neg_b, bh_, bl_ = _aligned(bh, bl, right_up, compare)
    if bad_a or bad_b:
        return OVERFLOW, np.int64(0), np.int64(0)
    if compare:
        if neg_a != neg_b:
            return OK, np.int64(0), np.int64(-1 if neg_a else 1)
        if ah_ == bh_ and al_ == bl_:
            return OK, np.int64(0), np.int64(0)
        larger = ah_ > bh_ or (ah_ == bh_ and al_ > bl_)
        return OK, np.int64(0), np.int64(-1 if larger == neg_a else 1)
    if op == MULTIPLY:
        bad, h, l = _mul_magnitudes(ah_, al_, bh_, bl_)
        if bad:
            return OVERFLOW, np.int64(0), np.int64(0)
        negative = neg_a != neg_b
    elif op == RESCALE:
        h, l, negative = ah_, al_, neg_a
    else:
        if op == SUBTRACT:
            neg_b = not neg_b
        if neg_a == neg_b:
            l = al_ + bl_
            h = ah_ + bh_ + (_ONE if l < al_ else _ZERO)
            if h < ah_ or h & _TOP:
                return OVERFLOW, np.int64(0), np.int64(0)
            negative = neg_a
        elif ah_ > bh_ or (ah_ == bh_ and al_ >= bl_):
            l = al_ - bl_
            h = ah_ - bh_ - (_ONE if al_ < bl_ else _ZERO)
            negative = neg_a
        else:
            l = bl_ - al_
            h = bh_ - ah_ - (_ONE if bl_ < al_ else _ZERO)
            negative = neg_b
    if down > 0:
        h, l = _scale_down(h, l, down)
    if _beyond_38_digits(h, l):
        return OVERFLOW, np.int64(0), np.int64(0)
    h, l = _signed(negative, h, l)
    return OK, np.int64(h), np.int64(l)


@njit(nogil=True, cache=True)
def _wide_binary_cpu(op, left, left_scalar, right, right_scalar, left_up, right_up, down, out, status):
    for i in range(out.shape[0]):
        a = 0 if left_scalar else i
        b = 0 if right_scalar else i
        code, h, l = wide_op(op, left[a, 1], left[a, 0], right[b, 1], right[b, 0], left_up, right_up, down)
        out[i, 0] = l
        out[i, 1] = h
        status[i] = code


@cuda.jit
def _wide_binary_cuda(op, left, left_scalar, right, right_scalar, left_up, right_up, down, out, status):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        a = 0 if left_scalar else i
        b = 0 if right_scalar else i
        code, h, l = wide_op(op, left[a, 1], left[a, 0], right[b, 1], right[b, 0], left_up, right_up, down)
        out[i, 0] = l
        out[i, 1] = h
        status[i] = code


def wide_binary(device: Device, op: int, left: Any, right: Any, left_up: int = 0, right_up: int = 0,
                down: int = 0) -> tuple[Any, Any]:
    """Return ``(words, status)`` of ``op`` over two ``(n, 2)`` int64 word arrays (or ``(1, 2)`` broadcast).

    Each operand is first multiplied by ``10**left_up`` / ``10**right_up``; the
    result (not for ``COMPARE``) is divided by ``10**down`` rounding half away
    from zero. ``status`` is ``int8`` per row, :data:`OVERFLOW` where the result
    (or an aligned operand) reaches 38 digits. ``COMPARE`` writes the sign of
    ``left - right`` into the low word; its operands saturate instead of failing.
    """
    xp = device.xp
    left_scalar = left.shape[0] == 1
    right_scalar = right.shape[0] == 1
    n = max(left.shape[0], right.shape[0]) if (left_scalar and right_scalar) else (
        right.shape[0] if left_scalar else left.shape[0])
    out = xp.empty((n, 2), dtype=xp.int64)
    status = xp.empty(n, dtype=xp.int8)
    launch_twin(device, n, _wide_binary_cpu, _wide_binary_cuda, op, xp.ascontiguousarray(left), left_scalar,
                xp.ascontiguousarray(right), right_scalar, left_up, right_up, down, out, status)
    return out, status


def wide_rescale(device: Device, words: Any, up: int, down: int) -> tuple[Any, Any]:
    """Return ``(words * 10**up / 10**down, status)``, rounding half away from zero and checked at 38 digits."""
    xp = device.xp
    zero = xp.zeros((1, 2), dtype=xp.int64)
    return wide_binary(device, RESCALE, words, zero, up, 0, down)
