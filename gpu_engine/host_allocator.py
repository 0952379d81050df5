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


def trim_host_heap() -> bool:
    """Give the free pages of every glibc arena back to the OS (``malloc_trim(0)``) where the thresholds were raised;
    return True if it was done."""
    trim = _malloc_trim
    if trim is None:
        return False
    trim(0)
    return True
