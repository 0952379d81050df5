"""Keep large arrays an operator is done with, so the next query reuses them (a small buffer manager).

Why: an aggregation's slot table can take hundreds of megabytes. glibc hands
blocks above 32 MiB back to the OS on free (its mmap threshold cannot go
higher), so every query that builds such a table page-faults through fresh,
kernel-zeroed memory; on virtual machines first touches are especially slow
(TPC-H Q18 at SF1 spent more time filling new tables than aggregating).
Engines avoid this with a buffer manager (DuckDB) or arenas (Velox); this is
the smallest version of one. Memory is kept as flat byte buffers in size
classes (powers of two), so an array of any shape reuses a buffer of its class:
arrays whose shape changes from run to run (an emit's ``(width, groups)``
words, whose group count depends on which splits a driver read) found nothing
when buffers were kept by exact shape, and page-faulted through fresh memory
each time (TPC-H Q18's partial emits: ~70 ms of the ~150 ms they took). A
request of ``n`` bytes takes a buffer of the next power of two and sees only
its first ``n`` bytes (untouched pages of the rest cost no memory). A request larger than every kept buffer
drops the smaller kept ones (what a growth left behind: :func:`_drop_smaller`), and a new buffer that would
leave less than an eighth of the machine's memory available drops kept ones first (:func:`_drop_under_pressure`).
Buffers of
at least :data:`MIN_BYTES` are kept, up to :data:`MAX_KEPT_BYTES` in all (a quarter of memory, a share of it
in one of several worker processes, or ``$GPU_ENGINE_RECYCLER_MAX_MB``: :func:`_kept_bytes_cap`), and
handed out again uninitialized; once no query has run for a few seconds they
are given back (:func:`release_kept`, called by :mod:`gpu_engine.exec.idle_memory`),
so the reuse is within a query and between the queries of a burst. Only host (NumPy) arrays are kept: device
memory is CuPy's pool's to reuse, and memory held here would be invisible to
the per-query memory cap on a GPU.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from typing import Any

import numpy as np

from gpu_engine.exec.memory_pool import _available_host_memory

__all__ = ["take_array", "give_array", "MIN_BYTES", "MAX_KEPT_BYTES", "CAP_VARIABLE", "kept_bytes", "release_kept"]

MIN_BYTES = 4 << 20


#: Megabytes the recycler may keep in this process (``0`` keeps none): overrides the default share below.
CAP_VARIABLE = "GPU_ENGINE_RECYCLER_MAX_MB"


def _total_bytes() -> int:
    """Return the machine's memory in bytes (0 where unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 0


def _kept_bytes_cap() -> int:
    """Return the bytes this process may keep: ``$GPU_ENGINE_RECYCLER_MAX_MB`` megabytes where set, else a quarter
    of the machine's memory (at least 1 GiB; 1 GiB where the size is unknown) shared by the engine processes that
    say they are several workers of one machine.

    Why not a fixed 1 GiB: a query's reusable buffers grow with its groups. db-benchmark's q10 (10M groups
    over 2 drivers) ends with two 1 GiB slot tables and two 512 MiB emit buffers; under a 1 GiB cap at most
    one was kept, so every run page-faulted through ~1.5 GB of fresh memory (~390K faults, 0.85 s of its
    ~6.7 s CPU). Kept buffers are released once the process is idle (:mod:`gpu_engine.exec.idle_memory`),
    so the cap bounds memory held within a burst of queries, as DuckDB's buffer pool (80% of memory) does.

    Why a share: each process keeps its own buffers, so N engine processes on one machine held up to N
    quarters. Two documented settings say a process is one of several: pytest-xdist's
    ``PYTEST_XDIST_WORKER_COUNT`` (each of N workers keeps a quarter / N) and PySpark's
    ``PYSPARK_EXECUTOR_MEMORY_MB``, the memory one Python worker may use (``spark.executor.pyspark.memory``
    divided by the executor's cores; each worker keeps at most a quarter of it). Other ways of running several
    engine processes (Spark without that setting, a process pool) set ``GPU_ENGINE_RECYCLER_MAX_MB``
    (Spark: ``spark.executorEnv.GPU_ENGINE_RECYCLER_MAX_MB``). A value that is no number is ignored.
    """
    explicit = _megabytes(os.environ.get(CAP_VARIABLE))
    if explicit is not None:
        return explicit << 20
    cap = max(1 << 30, _total_bytes() // 4)
    workers = _megabytes(os.environ.get("PYTEST_XDIST_WORKER_COUNT"))  # a count, read the same way
    if workers:
        cap //= workers
    python_worker = _megabytes(os.environ.get("PYSPARK_EXECUTOR_MEMORY_MB"))
    if python_worker:
        cap = min(cap, (python_worker << 20) // 4)
    return cap


def _megabytes(text: str | None) -> int | None:
    """Return a non-negative whole number set in an environment variable, None where unset or not one."""
    try:
        value = int(str(text).strip())
    except ValueError:
        return None
    return value if value >= 0 else None


MAX_KEPT_BYTES = _kept_bytes_cap()

#: A new buffer leaves at least this share of the machine's memory available, dropping kept buffers first
#: (:func:`_drop_under_pressure`).
HEADROOM_FRACTION = 1 / 8
_TOTAL_BYTES = _total_bytes()
_available_memory = _available_host_memory  # the machine's MemAvailable (None where unknown)

_lock = threading.Lock()
#: Free buffers by size class: class ``c`` holds flat uint8 buffers of at least ``2**c`` bytes.
_kept: dict[int, list[np.ndarray]] = defaultdict(list)
_kept_bytes = 0


def _class_holding(nbytes: int) -> int:
    """Return the smallest class whose buffers all hold ``nbytes`` (a request's class)."""
    return max(int(nbytes) - 1, 1).bit_length()


def _class_held_by(capacity: int) -> int:
    """Return the largest class a buffer of ``capacity`` bytes can serve (where it is kept)."""
    return int(capacity).bit_length() - 1


def _flat_buffer(array: np.ndarray) -> np.ndarray | None:
    """Return the flat uint8 buffer owning ``array``'s memory when ``array`` starts it and is contiguous, else None."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.base is not None or not root.flags.c_contiguous or not root.flags.writeable:
        return None  # memory owned by something else (a pyarrow buffer, a file mapping): not ours to reuse
    if not array.flags.c_contiguous or array.__array_interface__["data"][0] != root.__array_interface__["data"][0]:
        return None
    return root.reshape(-1).view(np.uint8)


def take_array(xp: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Return an uninitialized C-contiguous array of ``shape`` and ``dtype``, in a kept buffer when there is one.

    A request larger than every kept buffer drops the smaller ones, up to as many bytes as its new buffer takes
    (:func:`_drop_smaller`). Only host arrays are kept (see the module docstring), so other array modules always
    get a new one.
    """
    dtype = np.dtype(dtype)
    shape = tuple(int(n) for n in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if xp is not np or nbytes < MIN_BYTES:
        return xp.empty(shape, dtype=dtype)
    size_class = _class_holding(nbytes)
    with _lock:
        buffer, dropped = _kept_or_dropped(size_class)
    del dropped  # freed here, outside the lock
    if buffer is None:
        _drop_under_pressure(1 << size_class)
        buffer = np.empty(1 << size_class, dtype=np.uint8)
    return buffer[:nbytes].view(dtype).reshape(shape)


def _drop_under_pressure(nbytes: int) -> None:
    """Drop kept buffers, largest first, until a new buffer of ``nbytes`` leaves :data:`HEADROOM_FRACTION` of the
    machine's memory available (``MemAvailable``), or nothing is kept.

    Why: kept buffers are resident memory no running query uses, and the cap (a quarter of memory) bounds them
    alone, not beside what the running query needs: a query near the machine's memory (issue 31's SF30-size data
    on a 24 GB machine) could take new memory while up to 6 GB of an earlier query's tables sat kept, leaving the
    kernel's out-of-memory killer to end a process that dropping them would let finish (DuckDB's buffer pool
    evicts under its limit). Checked where the largest allocations start (slot tables, join tables and emits take
    their buffers here), only on a request no kept buffer serves, so a query's steady state reads nothing (a
    ``MemAvailable`` read costs ~65 us).
    """
    if _kept_bytes == 0:
        return
    available = _available_memory()
    if available is None or _TOTAL_BYTES <= 0:
        return
    needed = nbytes + int(_TOTAL_BYTES * HEADROOM_FRACTION)
    if available < needed:
        release_kept(max(0, _kept_bytes - (needed - available)))


def _kept_or_dropped(size_class: int) -> tuple[np.ndarray | None, list[np.ndarray]]:
    """Under the lock: take out a kept buffer of ``size_class`` and return it with no others, or, where none is
    kept, return None and the smaller buffers dropped when no kept buffer is larger (see :func:`_drop_smaller`)."""
    global _kept_bytes
    buffers = _kept.get(size_class)
    if buffers:
        buffer = buffers.pop()
        _kept_bytes -= int(buffer.nbytes)
        return buffer, []
    if any(kept > size_class for kept, buffers in _kept.items() if buffers):
        return None, []
    return None, _drop_smaller(size_class, 1 << size_class)


def _drop_smaller(size_class: int, budget: int) -> list[np.ndarray]:
    """Take kept buffers of classes below ``size_class`` out, largest first, until ``budget`` bytes are out; return
    them (the caller frees them outside the lock).

    Why: a request larger than every kept buffer is a query reaching a size this process has not reached in a
    while, and the smaller buffers kept are most often what its own growth left behind: a slot table doubling from
    16 MiB to 1 GiB handed each old table here, and nothing of the query takes them again (its next tables are
    larger). TPC-H Q18 at SF10 kept 1.04 GB of its two drivers' old tables through the rest of the query, a
    quarter of its 4.2 GB peak. Dropping as many bytes as the new buffer takes keeps the process's memory where it
    was, less what the new buffer needs. A request smaller than some kept buffer drops nothing: a query run again
    grows through the sizes its last run reached, so what its growth hands back is kept and its next runs take it
    (lending a larger buffer to a smaller request instead left the largest request of a doubling growth without
    one: TPC-H Q18 at SF1 +33% CPU a run).
    """
    global _kept_bytes
    out: list[np.ndarray] = []
    freed = 0
    for smaller in sorted((c for c in _kept if c < size_class), reverse=True):
        buffers = _kept[smaller]
        while buffers and freed < budget:
            buffer = buffers.pop()
            freed += int(buffer.nbytes)
            out.append(buffer)
        if not buffers:
            del _kept[smaller]
        if freed >= budget:
            break
    _kept_bytes -= freed
    return out


def give_array(xp: Any, array: Any) -> None:
    """Keep the memory of ``array`` for a later :func:`take_array` (small arrays and views into others are dropped).

    The caller must not use ``array``, or any view of its memory, afterwards.
    """
    global _kept_bytes
    if not isinstance(array, np.ndarray) or int(array.nbytes) < MIN_BYTES:
        return
    buffer = _flat_buffer(array)
    if buffer is None or int(buffer.nbytes) < MIN_BYTES:
        return
    with _lock:
        if _kept_bytes + int(buffer.nbytes) > MAX_KEPT_BYTES:
            return
        _kept[_class_held_by(buffer.nbytes)].append(buffer)
        _kept_bytes += int(buffer.nbytes)


def kept_bytes() -> int:
    """Return the bytes held for reuse."""
    return _kept_bytes


def release_kept(keep_bytes: int = 0) -> int:
    """Drop kept buffers, largest first, until at most ``keep_bytes`` are kept; return the bytes dropped.

    Why: kept buffers are resident memory no query uses; kept after the last query ended, they held up to
    :data:`MAX_KEPT_BYTES` of a process that may sit idle for hours beside other programs (1 GB after TPC-H
    SF10's Q18).
    """
    global _kept_bytes
    dropped = []
    with _lock:
        for size_class in sorted(_kept, reverse=True):
            buffers = _kept[size_class]
            while buffers and _kept_bytes > keep_bytes:
                buffer = buffers.pop()
                _kept_bytes -= int(buffer.nbytes)
                dropped.append(buffer)
        for size_class in [c for c, buffers in _kept.items() if not buffers]:
            del _kept[size_class]
    freed = sum(int(buffer.nbytes) for buffer in dropped)
    del dropped  # freed here, outside the lock
    return freed
