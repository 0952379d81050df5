"""Decode Parquet column chunks on a thread pool sized to the machine, shared by every scan of the process.

Why: on a GPU the host decode is what a cold scan waits for (issue 32: the 22
TPC-H queries at SF10 from Parquet were 5× slower than DuckDB on a 16-core
H100 machine while one driver and two prefetch threads used a few cores). A
scan piece on a GPU is one device batch (16M rows on an 80 GB card), so a
table holds only a few pieces and piece-level prefetching alone cannot use
16 cores: :func:`~gpu_engine.connectors.parquet_columns.read_decoded_columns`
splits a piece into one task per column chunk (a column of one row group) and
runs them here. The page decoder releases the interpreter lock, so the tasks
run on all cores.

One pool per process, not per scan or driver: however many drivers and scans
decode at once, at most ``threads`` chunks decode at a time, so drivers never
oversubscribe the cores with decode threads. Tasks never wait on other tasks
(a piece's thread submits its chunks and waits; chunk tasks only decode), so
the pool cannot deadlock. Its threads live for the process, idle when no scan
decodes, like a session's kept driver threads.

The size: ``EngineConfig.scan_decode_threads`` when set, else the
``GPU_ENGINE_DECODE_THREADS`` environment variable, else the cores the process
may run on (:func:`gpu_engine.host_cpus.usable_cpus`) capped at :data:`MAX_DEFAULT_DECODE_THREADS`, less, on a
host device, the query's drivers (they run kernels on cores of their own
while the pool decodes; on a GPU they mostly wait on the device). ``0``
decodes on the scan's own thread, as before this pool.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from gpu_engine.errors import DataSourceError
from gpu_engine.exec.made_once import MadeOnce
from gpu_engine.host_cpus import usable_cpus

__all__ = ["DECODE_THREADS_VARIABLE", "DECODE_THREAD_PREFIX", "MAX_DEFAULT_DECODE_THREADS", "decode_pool",
           "default_decode_threads"]

DECODE_THREADS_VARIABLE = "GPU_ENGINE_DECODE_THREADS"
#: Name prefix of the pool's threads.
DECODE_THREAD_PREFIX = "gpu_engine-decode"
#: The default size's cap: past it, decode of one batch's chunks is limited by memory bandwidth and the
#: copy, and a 100-core host would keep 100 threads for it.
MAX_DEFAULT_DECODE_THREADS = 16

_pools: MadeOnce[int, ThreadPoolExecutor] = MadeOnce(forget_in_forked_child=True)  # a child makes its own


def default_decode_threads(reserved: int = 0) -> int:
    """Return the decode threads when the config sets none: ``$GPU_ENGINE_DECODE_THREADS``, else the cores, capped.

    ``reserved`` cores are left to threads that compute while the pool decodes (a ``cpu`` query's drivers,
    which run kernels on their own threads): so the pool and the drivers never outnumber the cores, and a
    query with a driver on every core decodes on its drivers' threads, as before the pool.

    Raises
    ------
    DataSourceError
        When the environment variable is not an integer of 0 or more, naming it (a ``ValueError`` too,
        as the other settings' errors are): a scan cannot decode with it.
    """
    configured = os.environ.get(DECODE_THREADS_VARIABLE, "").strip()
    if configured:
        try:
            threads = int(configured)
        except ValueError:
            threads = -1
        if threads < 0:
            raise DataSourceError(f"{DECODE_THREADS_VARIABLE} must be an integer of 0 or more, got {configured!r}")
        return threads
    return max(0, min(usable_cpus() - max(0, reserved), MAX_DEFAULT_DECODE_THREADS))


def decode_pool(threads: int) -> ThreadPoolExecutor | None:
    """Return the process's pool of ``threads`` decode threads (made on first use), or None for 0 threads."""
    if threads <= 0:
        return None
    return _pools.get(threads, lambda: ThreadPoolExecutor(max_workers=threads,
                                                          thread_name_prefix=f"{DECODE_THREAD_PREFIX}-{threads}"))
