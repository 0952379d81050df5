"""Turn a filter's boolean result into the gather map of the rows it keeps.

Why: a Filter hands on a gather map (not compacted columns), so its only kernel
is stream compaction of row numbers. SQL keeps a row only when the predicate is
true *and* not null, so the predicate's validity is applied in the same pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, njit

from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_host_sync, count_kernel_launch
from gpu_engine.kernels.launch import launch_cuda

__all__ = ["selection_from_mask"]


# ------------------------------------------------------------------- CPU twin
@njit(nogil=True, cache=True)
def _selection_cpu(mask, validity, has_validity):
    # Branch-free: every row is written at the next position, which advances only past kept rows (the
    # last write lands in one spare slot). A branch per row mispredicted on most rows of a filter that
    # keeps a fraction of them in no order (6M rows at 63%: 20 -> 6 ms).
    n = mask.shape[0]
    count = 0
    for i in range(n):
        count += np.int64(mask[i] and (not has_validity or validity[i]))
    out = np.empty(count + 1, dtype=np.int32)
    position = 0
    if has_validity:
        for i in range(n):
            out[position] = i
            position += np.int64(mask[i]) & np.int64(validity[i])
    else:
        for i in range(n):
            out[position] = i
            position += np.int64(mask[i])
    return out[:count]


# ------------------------------------------------------------------ CUDA twin
@cuda.jit
def _keep_flags_cuda(mask, validity, has_validity, flags):
    for i in range(cuda.grid(1), mask.shape[0], cuda.gridsize(1)):
        flags[i] = 1 if mask[i] and (not has_validity or validity[i]) else 0


@cuda.jit
def _scatter_kept_cuda(flags, inclusive_positions, out):
    for i in range(cuda.grid(1), flags.shape[0], cuda.gridsize(1)):
        if flags[i]:
            out[inclusive_positions[i] - 1] = i


def selection_from_mask(device: Device, mask: Any, validity: Any | None = None) -> Any:
    """Return the increasing ``int32`` row numbers where ``mask`` (and ``validity``) is true.

    Parameters
    ----------
    device
        Where the arrays live; selects the twin.
    mask
        ``bool`` per row.
    validity
        Optional ``bool`` per row (True = valid); null rows are dropped.

    Returns
    -------
    array
        ``int32`` indices in increasing order, on ``device``. Sizing it reads
        the kept count back: one host sync, counted on every device.
    """
    xp = device.xp
    n = mask.shape[0]
    if n == 0:
        return xp.empty(0, dtype=xp.int32)
    mask = xp.ascontiguousarray(mask.astype(xp.bool_, copy=False))
    has_validity = validity is not None
    validity = xp.ascontiguousarray(validity) if has_validity else xp.zeros(1, dtype=xp.bool_)
    if device.kernel_flavor == "cpu":
        count_kernel_launch()  # the CPU twin runs in place of the CUDA launches below,
        count_host_sync()  # and returns the count the CUDA path must read back
        return _selection_cpu(mask, validity, has_validity)
    flags = xp.empty(n, dtype=xp.int32)
    launch_cuda(device, _keep_flags_cuda, n, mask, validity, has_validity, flags)
    positions = xp.cumsum(flags, dtype=xp.int32)
    out = xp.empty(int(device.read_scalar(positions, -1)), dtype=xp.int32)
    if out.shape[0]:
        launch_cuda(device, _scatter_kept_cuda, n, flags, positions, out)
    return out
