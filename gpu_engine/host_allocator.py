"""Keep freed host buffers in the process heap instead of returning them to the OS.

Why: a CPU pipeline allocates multi-megabyte NumPy temporaries for every batch
(gathered columns, key words, arithmetic results). glibc serves blocks above
its mmap threshold (128 KiB by default) with ``mmap`` and gives them back with
``munmap`` on free, so the next batch's allocation page-faults through fresh,
kernel-zeroed pages again. Raising the threshold and the trim threshold lets
the heap reuse those pages: TPC-H Q1 at SF1 ran about 30% faster on the CPU
device (see bench/results). This is what engines that ship jemalloc or
mimalloc get for free. Set ``GPU_ENGINE_SYSTEM_MALLOC=1`` to leave malloc as it is.

The price is memory: with a 1 GiB trim threshold each of glibc's arenas (up to
8 per core) may keep a freed gigabyte resident. So once no query has run for a
few seconds, :func:`trim_host_heap` hands the heap's free pages back
(:mod:`gpu_engine.exec.idle_memory`): the reuse stays within a burst of queries,
and an idle process does not sit on what its last query freed.

NumPy also advises the kernel to back every array of 4 MiB or more with transparent huge pages
(``madvise(MADV_HUGEPAGE)``); under the usual ``defrag=madvise`` setting that makes each first touch of such
memory wait for the kernel to compact 2 MiB pages out of a fragmented page cache (sys time). The engine
turns that advice off (:func:`_no_huge_page_advice`) unless ``NUMPY_MADVISE_HUGEPAGE`` says otherwise: in
one process, db-benchmark's q10 at 10M rows took 12.2 s CPU (8.2 s of it sys) with the advice and 8.1 s (2.8
sys) without (bench/results/2026-11-28-dbbench-10m-deferred-growth.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading

__all__ = ["tune_host_allocator", "trim_host_heap"]

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_MAX_MMAP_THRESHOLD = 32 << 20  # glibc's ceiling on 64-bit: HEAP_MAX_SIZE / 2
_lock = threading.Lock()
_tuned: bool | None = None
_malloc_trim = None


def tune_host_allocator() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; return True if it was done."""
    global _tuned
    with _lock:
        if _tuned is not None:
            return _tuned
        _tuned = False
        if os.environ.get("GPU_ENGINE_SYSTEM_MALLOC") == "1" or not sys.platform.startswith("linux"):
            return False
        _no_huge_page_advice()
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
            return False
        _tuned = bool(mallopt(_M_MMAP_THRESHOLD, _MAX_MMAP_THRESHOLD)
                      and mallopt(_M_TRIM_THRESHOLD, 1 << 30)
                      and mallopt(_M_TOP_PAD, 64 << 20))
        if _tuned:
            global _malloc_trim
            _malloc_trim = getattr(libc, "malloc_trim", None)
        return _tuned


def _no_huge_page_advice() -> bool:
    """Stop NumPy advising huge pages for its large arrays (see the module docstring); return True if done.

    Left as it is where the user chose with ``NUMPY_MADVISE_HUGEPAGE`` or where this NumPy has no such switch.
    """
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return False
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:
        return False
    _set_madvise_hugepage(False)
    return True


def trim_host_heap() -> bool:
    """Give the free pages of every glibc arena back to the OS (``malloc_trim(0)``) where the thresholds were raised;
    return True if it was done."""
    trim = _malloc_trim
    if trim is None:
        return False
    trim(0)
    return True
