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
