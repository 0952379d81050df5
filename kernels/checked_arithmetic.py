"""Add, subtract and multiply int64 values in one pass, reporting the first row that overflows.

Why: decimal and integer arithmetic must never wrap silently. Checking with
extra array operations (a float shadow, comparisons, reductions) costs several
passes over memory per operator; fusing the check into the arithmetic costs
none. The wrapping arithmetic is done on uint64 (defined behaviour in both
twins) and overflow is read from the sign bits (add, subtract) or, for
multiply, from an exact division taken only when an operand is beyond 2**31.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_kernel_launch
from gpu_engine.kernels.launch import launch_cuda

__all__ = ["checked_arithmetic", "checked_arithmetic_on_device", "checked_int64_op", "ADD", "SUBTRACT", "MULTIPLY"]

ADD, SUBTRACT, MULTIPLY = 0, 1, 2
_SMALL = np.int64(1 << 31)
_INT64_MIN = np.int64(-(2**63))


@njit(nogil=True, cache=True)
def checked_int64_op(op, a, b):
    """Return ``(result, overflowed)`` of one int64 operation, wrapping in uint64."""
    if op == ADD:
        r = np.int64(np.uint64(a) + np.uint64(b))
        return r, ((a ^ r) & (b ^ r)) < 0
    if op == SUBTRACT:
        r = np.int64(np.uint64(a) - np.uint64(b))
        return r, ((a ^ b) & (a ^ r)) < 0
    r = np.int64(np.uint64(a) * np.uint64(b))
    if -_SMALL < a < _SMALL and -_SMALL < b < _SMALL:
        return r, False
    if a == 0:
        return r, False
    if a == -1:
        return r, b == _INT64_MIN
    return r, r // a != b or r % a != 0


@njit(nogil=True, cache=True)
def _checked_cpu(op, left, left_scalar, right, right_scalar, validity, has_validity, out):
    first_bad = -1
    for i in range(out.shape[0]):
        a = left[0] if left_scalar else left[i]
        b = right[0] if right_scalar else right[i]
        r, bad = checked_int64_op(op, a, b)
        out[i] = r
        if bad and first_bad < 0 and (not has_validity or validity[i]):
            first_bad = i
    return first_bad


@cuda.jit
def _checked_cuda(op, left, left_scalar, right, right_scalar, validity, has_validity, out, first_bad):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        a = left[0] if left_scalar else left[i]
        b = right[0] if right_scalar else right[i]
        r, bad = checked_int64_op(op, a, b)
        out[i] = r
        if bad and (not has_validity or validity[i]):
            cuda.atomic.min(first_bad, 0, i)


def checked_arithmetic(device: Device, op: int, left: Any, right: Any, validity: Any | None) -> tuple[Any, int]:
    """Return ``(left op right as int64, first overflowing valid row or -1)``.

    ``left`` and ``right`` are int64 arrays of one length, or Python/NumPy ints
    (broadcast without materializing them). Reads the row back (one host
    sync); :func:`checked_arithmetic_on_device` leaves it on the device.
    """
    out, first_bad = checked_arithmetic_on_device(device, op, left, right, validity)
    row = int(device.read_scalar(first_bad, 0))
    return out, (-1 if row >= out.shape[0] else row)


def checked_arithmetic_on_device(device: Device, op: int, left: Any, right: Any,
                                 validity: Any | None) -> tuple[Any, Any]:
    """Return ``(left op right as int64, first_bad)`` with ``first_bad`` a 1-element device array.

    ``first_bad[0]`` is the first overflowing valid row, or the row count when
    none overflowed. Why on the device: a caller with several checks per batch
    reads them all in one host sync (:mod:`gpu_engine.expressions.deferred_checks`).
    """
    xp = device.xp
    left_scalar = np.isscalar(left) or getattr(left, "ndim", 1) == 0
    right_scalar = np.isscalar(right) or getattr(right, "ndim", 1) == 0
    if left_scalar and right_scalar:
        raise ValueError("checked_arithmetic needs at least one array operand")
    n = int((right if left_scalar else left).shape[0])
    as_array = lambda v, scalar: device.asarray(np.array([int(v)], dtype=np.int64)) if scalar else v.astype(xp.int64, copy=False)
    left_values, right_values = as_array(left, left_scalar), as_array(right, right_scalar)
    has_validity = validity is not None
    validity_array = validity if has_validity else xp.ones(1, dtype=xp.bool_)
    out = xp.empty(n, dtype=xp.int64)
    if device.kernel_flavor == "cpu":
        if n:
            count_kernel_launch()  # the CPU twin runs in place of a launch (launch_twin's count, made by hand)
        first_bad = _checked_cpu(op, left_values, left_scalar, right_values, right_scalar, validity_array, has_validity, out)
        return out, np.array([n if first_bad < 0 else first_bad], dtype=np.int64)
    sentinel = xp.full(1, n, dtype=xp.int64)
    launch_cuda(device, _checked_cuda, n, op, left_values, left_scalar, right_values, right_scalar,
                validity_array, has_validity, out, sentinel)
    return out, sentinel
