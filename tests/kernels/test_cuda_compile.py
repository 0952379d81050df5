"""Compile every CUDA twin to PTX with the real numba.cuda compiler (no GPU needed).

The simulator runs kernel bodies as Python, so it accepts code that real
numba.cuda rejects (e.g. builtin ``min`` in a kernel). Where NVVM (libnvvm from
a CUDA toolkit) is installed, this test compiles each kernel for sm_80 in a
fresh process without the simulator; elsewhere it is skipped.
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
    """Compile each kernel for a representative signature; return the number of failures."""
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

    import gpu_engine.kernels.aggregate as aggregate
    import gpu_engine.kernels.decimal128 as decimal128
    import gpu_engine.kernels.filter as filter_kernels
    import gpu_engine.kernels.gather as gather
    import gpu_engine.kernels.group_by as group_by
    import gpu_engine.kernels.hash as hash_kernels
    import gpu_engine.kernels.partition as partition
    import gpu_engine.kernels.sort as sort
    import gpu_engine.kernels.strings as strings
    import gpu_engine.kernels.window as window
    import gpu_engine.kernels.window_moments as window_moments

    u64, i64, i32, b1, u8 = t.uint64[::1], t.int64[::1], t.int32[::1], t.boolean[::1], t.uint8[::1]
    f64, f32, matrix, flag, scalar = t.float64[::1], t.float32[::1], t.uint64[:, ::1], t.boolean, t.int64
    cases = [
        (hash_kernels._string_hashes_cuda, (i64, u8, u64)),
        (hash_kernels._combine_column_cuda, (u64, u64, b1, flag, flag)),
        (partition._histogram_cuda, (u64, scalar, i32, i32)),
        (partition._scatter_cuda, (i32, i64, i32)),
        (gather._gather_cuda, (f64, i32, f64)),
        (gather._gather_cuda, (b1, i64, b1)),
        (gather._string_spans_cuda, (i64, i32, i64, i64)),
        (gather._copy_string_chars_cuda, (i64, u8, i64, u8)),
        (filter_kernels._keep_flags_cuda, (b1, b1, flag, i32)),
        (filter_kernels._scatter_kept_cuda, (i32, i32, i32)),
        (aggregate._count_cuda, (i32, b1, flag, i64)),
        (aggregate._sum_int_cuda, (i32, i64, b1, flag, i64, i64, b1, flag)),
        (aggregate._sum_words_cuda, (i32, t.int64[:, ::1], b1, flag, i64, i64, i64, i64, b1)),
        (decimal128._wide_binary_cuda, (scalar, t.int64[:, ::1], flag, t.int64[:, ::1], flag, scalar, scalar, scalar,
                                        t.int64[:, ::1], t.int8[::1])),
        (aggregate._sum_float_cuda, (i32, f64, b1, flag, f64, b1)),
        (aggregate._extreme_int_cuda, (i32, i32, b1, flag, i32, b1, flag)),
        (aggregate._extreme_int_cuda, (i32, u64, b1, flag, u64, b1, flag)),
        (aggregate._extreme_float_cuda, (i32, f64, i64, b1, flag, i64, b1, flag, scalar, scalar)),
        (aggregate._extreme_float_cuda, (i32, f32, i32, b1, flag, i32, b1, flag, scalar, scalar)),
        (group_by._pack_strings_cuda, (i64, u8, b1, flag, matrix, scalar, scalar)),
        (group_by._hash_rows_cuda, (matrix, u64)),
        (group_by._rehash_cuda, (u64, scalar, i32)),
        (group_by._claim_slots_cuda, (matrix, u64, i32, matrix, u64, i64)),
        (group_by._flag_first_rows_cuda, (i32, i64, b1)),
        (group_by._number_new_groups_cuda, (i32, matrix, u64, i64, scalar, i32, matrix, u64)),
        (group_by._read_group_ids_cuda, (i32, i64, i32)),
        (sort._encode_fixed_cuda, (u64, b1, flag, scalar, flag, matrix, scalar)),
        (sort._encode_strings_cuda, (i64, u8, b1, flag, flag, matrix, scalar, scalar)),
        (strings._trim_cuda, (i64, u8, u8, flag, flag, i64, i64)),
        (window._segment_starts_cuda, (b1, i64, i64)),
        (window._scan_chunks_cuda, (scalar, i64, b1, b1, flag, scalar, i64, i64, i64, i64, b1, i64)),
        (window._scan_chunks_cuda, (scalar, f64, b1, b1, flag, scalar, f64, i64, f64, i64, b1, i64)),
        (window._chunk_carries_cuda, (scalar, flag, i64, i64, b1, i64, i64, i64)),
        (window._chunk_carries_cuda, (scalar, flag, f64, i64, b1, f64, i64, i64)),
        (window._apply_carries_cuda, (scalar, b1, flag, scalar, i64, i64, i64, i64, i64)),
        (window._apply_carries_cuda, (scalar, b1, flag, scalar, f64, i64, f64, i64, i64)),
        (window._frame_loop_cuda, (scalar, i64, b1, i64, i64, i64, i64, i64)),
        (window._frame_loop_cuda, (scalar, f64, b1, i64, i64, f64, i64, i64)),
        (window._range_bounds_cuda, (i64, b1, i64, i64, i64, flag, flag, scalar, flag, i64)),
        (window._range_bounds_cuda, (f64, b1, i64, i64, i64, flag, flag, t.float64, flag, i64)),
        (window._tree_level_cuda, (scalar, i64, i64, scalar, scalar, scalar, i64)),
        (window._tree_level_cuda, (scalar, f64, i64, scalar, scalar, scalar, i64)),
        (window._tree_query_cuda, (scalar, i64, i64, scalar, i64, i64, i64, i64, i64)),
        (window._tree_query_cuda, (scalar, f64, i64, scalar, i64, i64, f64, i64, i64)),
        (window_moments._moment_level_cuda, (i64, f64, f64, scalar, scalar, scalar)),
        (window_moments._moment_query_cuda, (i64, f64, f64, scalar, i64, i64, i64, f64, f64)),
        (window_moments._comoment_level_cuda, (i64, f64, f64, f64, f64, f64, scalar, scalar, scalar)),
        (window_moments._comoment_query_cuda, (i64, f64, f64, f64, f64, f64, scalar, i64, i64, i64, f64, f64, f64,
                                                f64, f64)),
    ]
    cases.append((_RowHelpers, (f64, i64, f64)))
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
