"""The number of CPUs this process may run on, for every pool and depth sized by the host's cores.

Why the affinity mask and not ``os.cpu_count()``: a process pinned to some cores (``taskset``, a container's
cpuset, a batch scheduler's slot on a large host) sees the host's count there, and a pool sized by it put several
threads on each core it had (the decode pool did; the scan prefetch depth compared drivers with the host's count).
One helper, so the decode pool, the scan prefetch and the driver counts agree on what a core is.
"""
from __future__ import annotations

import functools
import os


@functools.lru_cache(maxsize=1)
def usable_cpus() -> int:
    """Return the CPUs this process may run on, read once (``sched_getaffinity`` and ``cpu_count`` read the kernel's
    state on every call: 12-60 us, and every TableScan of every query asked)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # (not on every platform)
        return os.cpu_count() or 1
