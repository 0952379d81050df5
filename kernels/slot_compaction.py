"""Read the occupied rows of a slot table out as one contiguous array per column (what a hash aggregation emits).

Why: a fused aggregation's slot table holds each group's key words and states
as a row of int64 words in a table about 2-4 times larger than the group count.
Emitting it with ``nonzero`` plus one fancy-index gather per column read the
table once per column (TPC-H Q18's 1.5M groups: ~0.5 s on the 2-core VM); the
CPU twin here reads it once, sequentially, writing each word to its column's
row. On a GPU the same result is ``nonzero`` and one row gather, which the
device does in a few launches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_kernel_launch

__all__ = ["occupied_columns_twin", "occupied_slot_columns", "precompile_calls"]


@njit(nogil=True, cache=True)
def _occupied_columns_cpu(table, first_occupied_tag, columns):
    count = 0
    for slot in range(table.shape[0]):
        if table[slot, 0] >= first_occupied_tag:
            for c in range(table.shape[1]):
                columns[c, count] = table[slot, c]
            count += 1
    return count


def occupied_columns_twin(table: Any, first_occupied_tag: int) -> tuple[Any, tuple]:
    """Return the CPU twin :func:`occupied_slot_columns` launches on the host ``table``, with arguments of the types it
    gives it (the output is an empty placeholder).

    Why: a fused aggregation's generated tier ends with this static kernel; in the background compile mode
    (:mod:`gpu_engine.codegen.background_compiles`) it is compiled off the drivers, before a batch fills the
    table, so that no driver compiles it at emit on a machine that never ran it.
    """
    return _occupied_columns_cpu, (table, first_occupied_tag, np.empty((table.shape[1], 0), dtype=table.dtype))


def precompile_calls(device: Device) -> list[tuple[Any, tuple]]:
    """Return the CPU twin with arguments of the types a fused aggregation gives it (``cpu`` only; none elsewhere).

    Why: ``gpu-engine precompile`` compiles it at set-up (:mod:`gpu_engine.codegen.static_kernels`), so
    the fused tier's first emit never waits for it, on a driver or in the compile process.
    """
    if device.kernel_flavor != "cpu":
        return []
    return [occupied_columns_twin(np.zeros((1, 2), dtype=np.int64), 2)]


def occupied_slot_columns(device: Device, table: Any, first_occupied_tag: int, num_rows: int,
                          allocate: Any = None) -> Any:
    """Return a ``(width, num_rows)`` int64 array: row ``c`` is column ``c`` of every slot whose tag (column 0) is
    at least ``first_occupied_tag``, in slot order. ``num_rows`` must be the number of such slots.

    ``allocate(xp, shape, dtype)`` makes the CPU twin's output (default ``xp.empty``), e.g. from the buffer recycler.
    """
    xp = device.xp
    if device.kernel_flavor == "cpu":
        shape = (table.shape[1], num_rows)
        columns = allocate(xp, shape, table.dtype) if allocate is not None else xp.empty(shape, dtype=table.dtype)
        count_kernel_launch()
        found = _occupied_columns_cpu(table, first_occupied_tag, columns)
        if found != num_rows:
            raise AssertionError(f"slot table holds {found} occupied rows, expected {num_rows}")
        return columns
    occupied = xp.nonzero(table[:, 0] >= first_occupied_tag)[0]
    return xp.ascontiguousarray(table[occupied].T)
