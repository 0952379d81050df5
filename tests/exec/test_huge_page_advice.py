"""The engine turns off NumPy's huge-page advice for large arrays, unless the user chose with NUMPY_MADVISE_HUGEPAGE.

Why: with the advice, the first touch of every large array waits for the kernel to compact huge pages out of a
fragmented page cache (sys time: db-benchmark's q10 at 10M rows 12.2 s CPU with it, 8.1 s without). Process-wide
state, so each case runs in a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Prints the advice as left after the engine tuned the allocator (the switch returns its previous value).
PROBE = ("from gpu_engine.host_allocator import tune_host_allocator; tune_host_allocator(); "
         "from numpy._core.multiarray import _set_madvise_hugepage; print(_set_madvise_hugepage(True))")


def _advice_after_tuning(**environment) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMPY_MADVISE_HUGEPAGE", "GPU_ENGINE_SYSTEM_MALLOC")}
    env.update(environment)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the tuning is glibc/Linux only")
def test_the_engine_turns_numpys_huge_page_advice_off():
    assert _advice_after_tuning() == "False"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the tuning is glibc/Linux only")
def test_a_users_numpy_madvise_hugepage_is_left_as_chosen():
    assert _advice_after_tuning(NUMPY_MADVISE_HUGEPAGE="1") == "True"
    assert _advice_after_tuning(GPU_ENGINE_SYSTEM_MALLOC="1") == "True"


def _mapping_flags(address: int) -> list[str]:
    """Return the VmFlags of this process's mapping holding ``address`` (Linux's /proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                low, high = (int(part, 16) for part in head.split("-"))
                inside = low <= address < high
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


@pytest.mark.skipif(not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"),
                    reason="a Linux kernel with transparent huge pages")
def test_a_large_table_is_advised_huge_pages_and_small_or_device_arrays_are_left_alone():
    # Hash tables probed at random are the exception to the engine's "no huge pages" (see host_allocator): the
    # advice must reach the array's own mapping (VmFlags "hg"), never a small array's (its heap is shared).
    import numpy as np

    from numpy._core.multiarray import _set_madvise_hugepage

    from gpu_engine.host_allocator import HUGE_PAGE_MIN_BYTES, advise_huge_pages

    numpy_advice = _set_madvise_hugepage(False)  # NumPy's own advice for every large array, off as the engine sets it
    try:
        table = np.empty(HUGE_PAGE_MIN_BYTES // 8 + 4096, dtype=np.int64)
    finally:
        _set_madvise_hugepage(numpy_advice)
    middle = table.__array_interface__["data"][0] + table.nbytes // 2
    assert "hg" not in _mapping_flags(middle)
    assert advise_huge_pages(table)
    assert "hg" in _mapping_flags(middle)
    table.fill(7)  # still an ordinary array
    assert int(table[len(table) // 2]) == 7
    small = np.zeros(1024, dtype=np.int64)
    assert not advise_huge_pages(small)
    assert not advise_huge_pages(memoryview(bytearray(HUGE_PAGE_MIN_BYTES)))  # not a NumPy array (as a device array)
