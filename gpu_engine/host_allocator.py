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

A hash table probed at random is the exception (:func:`advise_huge_pages`): with 4 KiB pages each probe of a table
larger than the TLB's reach also misses the TLB, and on a virtual machine the page walk is nested (up to ~24 memory
reads). Such tables come from the buffer recycler and are reused query after query, so their first touch's
compaction is paid once while every probe gains.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading

__all__ = ["tune_host_allocator", "trim_host_heap", "advise_huge_pages", "HUGE_PAGE_MIN_BYTES"]

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_MAX_MMAP_THRESHOLD = 32 << 20  # glibc's ceiling on 64-bit: HEAP_MAX_SIZE / 2
_lock = threading.Lock()
_tuned: bool | None = None
_malloc_trim = None
_madvise = None  # libc's madvise once looked up; False where there is none

#: Arrays at least this large are advised huge pages by :func:`advise_huge_pages`: glibc's mmap ceiling, so each
#: is a mapping of its own (the advice reaches no other memory), and far beyond a 4 KiB-page TLB's reach (a few MiB).
HUGE_PAGE_MIN_BYTES = 32 << 20
_HUGE_PAGE = 2 << 20
_MADV_HUGEPAGE = 14


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


def advise_huge_pages(array) -> bool:
    """Ask Linux to back a large host array that is read and written at random (a hash table) with transparent huge
    pages (``madvise(MADV_HUGEPAGE)`` on its 2 MiB-aligned interior); return True if advised.

    Why: a slot table of millions of groups is probed at random, and with 4 KiB pages nearly every probe also
    misses the TLB; on a virtual machine the page walk is nested. db-benchmark's q10 FINAL kernel (one batch, its
    4M-slot, 384 MB table replayed alone) took 169-216 ns a row on 4 KiB pages and 94-110 ns on huge pages
    (bench/results/2026-11-28-dbbench3-huge-page-tables.md). Unlike NumPy's advice for every array of 4 MiB or
    more (turned off above: first touches of fresh temporaries waited for compaction), only tables that are
    probed at random are advised, and those are kept by the buffer recycler, so a query mostly gets memory
    already backed. Anything but a NumPy array below :data:`HUGE_PAGE_MIN_BYTES` (a device array, a small
    table), a platform without ``madvise``, or a refused call leaves the array as it is; results never change.
    """
    global _madvise
    import numpy as np

    if not isinstance(array, np.ndarray) or int(array.nbytes) < HUGE_PAGE_MIN_BYTES or os.environ.get(
            "GPU_ENGINE_SYSTEM_MALLOC") == "1" or not sys.platform.startswith("linux"):
        return False
    if _madvise is None:
        try:
            function = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").madvise
            function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            function.restype = ctypes.c_int
            _madvise = function
        except (OSError, AttributeError):
            _madvise = False
    if _madvise is False:
        return False
    address = int(array.__array_interface__["data"][0])
    start = -(-address // _HUGE_PAGE) * _HUGE_PAGE
    stop = (address + int(array.nbytes)) // _HUGE_PAGE * _HUGE_PAGE
    return stop > start and _madvise(start, stop - start, _MADV_HUGEPAGE) == 0


def trim_host_heap() -> bool:
    """Give the free pages of every glibc arena back to the OS (``malloc_trim(0)``) where the thresholds were raised;
    return True if it was done."""
    trim = _malloc_trim
    if trim is None:
        return False
    trim(0)
    return True
