"""Compile the fused kernels' row helpers to PTX with the real numba.cuda compiler (no GPU needed).

The simulator runs kernel bodies as Python, so it accepts code that real
numba.cuda rejects (e.g. builtin ``min`` in a kernel). Where NVVM (libnvvm from
a CUDA toolkit) is installed, this test compiles the row helpers that generated
fused kernels inline for sm_80 in a fresh process without the simulator;
elsewhere it is skipped. The kernels of ``gpu_engine.kernels`` themselves are
compiled (and their launch parameters checked) by ``test_driver_launch_abi.py``,
which fails on any kernel without a case and any compile failure but two known ones.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda

from gpu_engine.kernels import fused_rows as rows

NVVM_MISSING = 77


def _cuda_home() -> str | None:
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            return os.environ[variable]
    candidates = sorted(glob.glob("/usr/local/cuda*/nvvm"), reverse=True)
    return os.path.dirname(candidates[0]) if candidates else None


def test_cuda_twins_compile_to_ptx():
    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    home = _cuda_home()
    if home:
        environment["CUDA_HOME"] = home
    result = subprocess.run([sys.executable, __file__], env=environment, capture_output=True, text=True, timeout=600)
    if result.returncode == NVVM_MISSING:
        pytest.skip(f"no usable NVVM: {result.stdout.strip()[-300:]}")
    assert result.returncode == 0, result.stdout + result.stderr


def _compile_all() -> int:
    """Compile each case for its signature; return the number of failures."""
    import types as pytypes

    try:
        import numba.cuda.dispatcher as dispatcher
        from numba import cuda
        from numba import types as t
        from numba.cuda.cudadrv.nvvm import NVVM

        NVVM()
    except Exception as error:  # no toolkit, or a numba.cuda layout this check does not know
        print(f"NVVM unavailable: {error}")
        return -1
    if not hasattr(dispatcher, "get_current_device"):
        print("numba.cuda.dispatcher.get_current_device is gone; cannot compile device functions without a GPU")
        return -1
    # Device functions ask the current GPU for its compute capability; pretend one exists.
    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(8, 0))

    # Every kernel of gpu_engine.kernels is compiled to PTX (and its parameters checked) by
    # test_driver_launch_abi.py; this file keeps what that one does not reach: the row helpers generated
    # fused kernels call inline.
    i64, f64 = t.int64[::1], t.float64[::1]
    cases = [(_RowHelpers, (f64, i64, f64))]
    failures = 0
    for kernel, signature in cases:
        function = getattr(kernel, "py_func", kernel)
        name = f"{function.__module__}.{function.__name__}{signature}"
        try:
            cuda.compile_ptx(function, signature, cc=(8, 0))
        except Exception as error:
            failures += 1
            print(f"FAILED {name}: {type(error).__name__}: {error}")
    return failures


def _RowHelpers(x, days, out):
    """Call every row helper generated fused kernels inline (numba-cuda lacks some NumPy ufuncs: trunc, rint)."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        total = rows.round_half_even(x[i]) + rows.round_half_away(x[i])
        total += rows.floor_divide(days[i], 7) + rows.truncated_remainder(days[i], 7)
        below, equal = rows.scaled_order(days[i], days[i], 10)
        total += rows.divide_round_half_away(days[i], 100) + below + equal
        total += rows.civil_year(days[i]) + rows.civil_month(days[i]) + rows.civil_day(days[i])
        total += rows.float_less(x[i], 1.0) + rows.float_equal(x[i], 1.0) + rows.float_remainder(x[i], 3.0)
        h = rows.mix_key_word(rows.key_word_bits(days[i]), rows.key_word_bits(days[i]))
        out[i] = total + rows.finish_key_hash(h, 2)


if __name__ == "__main__":
    failures = _compile_all()
    sys.exit(NVVM_MISSING if failures < 0 else min(failures, 1))
