"""A kernel the compile process finished is imported and loaded by the thread reading its answers, not a driver.

Issue 29: "compiling never makes a running query slower than its lowest tier
would be alone". The first driver batch that found a compiled job done used to
import the generated module and install its specialization from numba's cache
in the middle of its query (tens of milliseconds a kernel on 2 loaded cores);
now the job counts as done only once that thread has loaded it, so a driver's
switch of tiers finds the specialization there.
"""

from __future__ import annotations

import threading

import numpy as np

_SOURCE = "from numba import njit\n\n@njit(cache=True)\ndef total_cpu(a):\n    return a.sum() * 3\n"


def _fresh_generated_kernels(tmp_path, monkeypatch):
    from gpu_engine.codegen import compiled_modules

    monkeypatch.setenv("GPU_ENGINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiled_modules, "_MODULES", {})
    monkeypatch.setattr(compiled_modules, "_FILES", {})


def test_a_compiled_job_is_loaded_before_it_counts_as_done_and_never_on_the_asking_thread(tmp_path, monkeypatch):
    from numba import typeof

    from gpu_engine.codegen import background_compiles
    from gpu_engine.codegen.background_compiles import READY, BackgroundCompiler, TwinRef, kernel_state
    from gpu_engine.codegen.compiled_modules import generated_file
    from gpu_engine.device import get_device

    _fresh_generated_kernels(tmp_path, monkeypatch)
    loads = []
    load_cached = background_compiles._load_cached
    monkeypatch.setattr(background_compiles, "_load_cached",
                        lambda dispatcher, signature: loads.append(threading.current_thread())
                        or load_cached(dispatcher, signature))
    file = generated_file(_SOURCE, stem="loaded_off_driver", evict=False)
    assert file.new and not file.loaded
    compiler = BackgroundCompiler()  # a worker of its own: it starts with this test's cache folder
    monkeypatch.setattr(background_compiles, "_COMPILER", compiler)
    arguments = (np.arange(5, dtype=np.int64),)
    try:
        signature = (typeof(arguments[0]),)
        assert compiler.state_new(file, "total_cpu", signature) != READY
        assert compiler.wait_idle(timeout=180) and not compiler.failures
        # Done means loaded: the module imported and the specialization installed, by the answers' thread.
        assert file.loaded
        assert signature in file.module.total_cpu.overloads
        assert loads and all(thread is not threading.current_thread() for thread in loads)
        asked = len(loads)
        assert kernel_state(get_device("cpu"), "background", TwinRef(file, "total_cpu"), arguments) == READY
        assert len(loads) == asked  # the asking thread (a driver) loaded nothing
        assert file.module.total_cpu(arguments[0]) == 30
    finally:
        compiler.close()


def test_a_compiled_job_whose_load_fails_leaves_the_lowest_tier_with_a_warning(tmp_path, monkeypatch):
    import pytest
    from numba import typeof

    from gpu_engine.codegen import background_compiles
    from gpu_engine.codegen.background_compiles import FAILED, BackgroundCompiler
    from gpu_engine.codegen.compiled_modules import generated_file

    _fresh_generated_kernels(tmp_path, monkeypatch)

    def failing_load(dispatcher, signature):
        raise OSError("the cache folder went away")

    monkeypatch.setattr(background_compiles, "_load_cached", failing_load)
    file = generated_file(_SOURCE.replace("* 3", "* 5"), stem="load_fails", evict=False)
    compiler = BackgroundCompiler()
    try:
        signature = (typeof(np.arange(3, dtype=np.int64)),)
        compiler.state_new(file, "total_cpu", signature)
        with pytest.warns(RuntimeWarning, match="loading it failed"):
            assert compiler.wait_idle(timeout=180)
        assert compiler.state_new(file, "total_cpu", signature) == FAILED
        assert compiler.pending() == 0
    finally:
        compiler.close()
