"""Keep large arrays an operator is done with, so the next query reuses them (a small buffer manager).

Why: an aggregation's slot table can take hundreds of megabytes. glibc hands
blocks above 32 MiB back to the OS on free (its mmap threshold cannot go
higher), so every query that builds such a table page-faults through fresh,
kernel-zeroed memory; on virtual machines first touches are especially slow
(TPC-H Q18 at SF1 spent more time filling new tables than aggregating).
Engines avoid this with a buffer manager (DuckDB) or arenas (Velox); this is
the smallest version of one: arrays of at least :data:`MIN_BYTES` are kept,
by shape and dtype, up to :data:`MAX_KEPT_BYTES` in all, and handed out again
uninitialized. Only host (NumPy) arrays are kept: device memory is CuPy's
pool's to reuse, and memory held here would be invisible to the per-query
memory cap on a GPU.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import numpy as np

__all__ = ["take_array", "give_array", "MIN_BYTES", "MAX_KEPT_BYTES", "kept_bytes"]

MIN_BYTES = 4 << 20
MAX_KEPT_BYTES = 1 << 30

_lock = threading.Lock()
_kept: dict[tuple, list[Any]] = defaultdict(list)
_kept_bytes = 0


def _key(shape: tuple[int, ...], dtype: Any) -> tuple:
    return (tuple(int(n) for n in shape), str(np.dtype(dtype)))


def take_array(xp: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Return an uninitialized array of ``shape`` and ``dtype``: a kept one when there is one, else a new one.

    Only host arrays are kept (see the module docstring), so other array modules always get a new one.
    """
    if xp is not np:
        return xp.empty(shape, dtype=dtype)
    key = _key(shape, dtype)
    global _kept_bytes
    with _lock:
        arrays = _kept.get(key)
        if arrays:
            array = arrays.pop()
            _kept_bytes -= int(array.nbytes)
            return array
    return xp.empty(shape, dtype=dtype)


def give_array(xp: Any, array: Any) -> None:
    """Keep ``array`` for a later :func:`take_array` of its shape and dtype (small ones are just dropped).

    The caller must not use ``array`` afterwards.
    """
    global _kept_bytes
    nbytes = int(array.nbytes)
    if nbytes < MIN_BYTES or not isinstance(array, np.ndarray):
        return
    with _lock:
        if _kept_bytes + nbytes > MAX_KEPT_BYTES:
            return
        _kept[_key(array.shape, array.dtype)].append(array)
        _kept_bytes += nbytes


def kept_bytes() -> int:
    """Return the bytes held for reuse."""
    return _kept_bytes
