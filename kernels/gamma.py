"""DuckDB's ``gamma(x)`` and ``lgamma(x)`` (C's ``tgamma`` and ``lgamma``: log |Γ(x)|) per row, CPU/CUDA twins.

Why a kernel: neither NumPy nor CuPy's core has the gamma function, and a closed-form approximation in array
arithmetic loses the relative accuracy of ``lgamma`` near its zeros (x = 1 and 2). numba's ``math.gamma`` /
``math.lgamma`` are the C library's on both twins (libdevice on CUDA). Where C answers with infinity or NaN and
Python's ``math`` raises instead (the simulator runs the CUDA twin as Python), :func:`_gamma_value` answers C's
value first: a pole (0 and the negative integers), overflow (past 171.62 or below 5.6e-309 in magnitude for
``gamma``, past 2.5e305 for ``lgamma``), infinities and NaN; those are also DuckDB's answers.
"""

from __future__ import annotations

import math
from typing import Any

from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.kernels.launch import launch_twin

__all__ = ["gamma_values"]

#: Above it Γ(x) passes the largest double.
_GAMMA_OVERFLOW = 171.62437695630274
#: Below it in magnitude Γ(x) (about 1 / x) passes the largest double.
_GAMMA_POLE_OVERFLOW = 5.5626846462680035e-309
#: Above it log Γ(x) passes the largest double.
_LGAMMA_OVERFLOW = 2.5e305


@njit(nogil=True, cache=True)
def _gamma_value(x, log):
    """Return Γ(x), or log |Γ(x)| where ``log``, with C's answers at poles, overflow, infinities and NaN."""
    if x != x:
        return x
    pole = x <= 0.0 and math.floor(x) == x
    if log:
        if pole or math.isinf(x) or x > _LGAMMA_OVERFLOW:
            return math.inf
        return math.lgamma(x)
    if x == 0.0:
        return math.copysign(math.inf, x)
    if pole or x == -math.inf:
        return math.nan
    if x > _GAMMA_OVERFLOW:
        return math.inf
    if abs(x) < _GAMMA_POLE_OVERFLOW:
        return math.copysign(math.inf, x)
    return math.gamma(x)


@njit(nogil=True, cache=True)
def _gamma_cpu(values, log, out):
    for i in range(values.shape[0]):
        out[i] = _gamma_value(values[i], log)


@cuda.jit
def _gamma_cuda(values, log, out):
    for i in range(cuda.grid(1), values.shape[0], cuda.gridsize(1)):
        out[i] = _gamma_value(values[i], log)


def gamma_values(device: Device, values: Any, log: bool) -> Any:
    """Return ``gamma`` (``log``: ``lgamma``) of float64 ``values`` as float64, one pass on the device."""
    xp = device.xp
    values = xp.ascontiguousarray(values, dtype=xp.float64)
    out = xp.empty(values.shape[0], dtype=xp.float64)
    launch_twin(device, values.shape[0], _gamma_cpu, _gamma_cuda, values, bool(log), out)
    return out

