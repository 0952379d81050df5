"""A bad numba disk-cache entry or generated module file is a cache miss: the kernel compiles again, never fails.

gpu_engine/codegen/guarded_numba_cache.py, compiled_modules._discard_if_damaged. Each case writes a good
entry for a tiny kernel, damages it as seen or as a full disk / killed process would, and loads again.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from numba.core import caching

import gpu_engine.kernels  # noqa: F401  (installs the guard, as every engine process does)
from gpu_engine.codegen import compiled_modules
from gpu_engine.codegen.guarded_numba_cache import GuardedFunctionCache

KERNEL = """
from numba import njit


@njit(cache=True)
def total(values):
    s = 0
    for v in values:
        s += v
    return s
"""


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba's cache finds the function's globals through it
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def kernel_file(tmp_path, request):
    """A kernel module file, and a loader that imports it afresh under a name of the engine's generated modules."""
    path = tmp_path / "kmod.py"
    path.write_text(KERNEL)
    names = []

    def load(name: str | None = None):
        name = name or f"gpu_engine_generated_guard_{request.node.name.split('[')[0][-24:]}_{len(names)}"
        names.append(name)
        return _import(path, name)

    yield load
    for name in names:
        sys.modules.pop(name, None)


def _cache_files(dispatcher, suffix: str) -> list[Path]:
    folder = Path(dispatcher.stats.cache_path)
    return sorted(path for path in folder.glob(f"kmod.total-*{suffix}"))


def _call(module) -> tuple[int, int, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = module.total(np.arange(10, dtype=np.int64))
    stats = module.total.stats
    return value, sum(stats.cache_hits.values()), sum(stats.cache_misses.values())


def test_the_guard_is_numbas_function_cache_for_engine_functions_only(kernel_file, tmp_path):
    from numba.core import dispatcher

    assert dispatcher.FunctionCache is GuardedFunctionCache
    assert type(kernel_file().total._cache._real()) is GuardedFunctionCache
    assert type(_import(tmp_path / "kmod.py", "leftovers_outside_the_engine").total._cache) is caching.FunctionCache
    sys.modules.pop("leftovers_outside_the_engine")


def test_an_entry_naming_a_module_the_loader_cannot_import_compiles_again(kernel_file, tmp_path):
    # Written by a process that imported the file under another name (as `kernels.group_by` was): unpickling the
    # entry imports that name. Before: ModuleNotFoundError from every later call, in every process.
    # (Another process: this one would find the writer's environment in numba's memo and never import.)
    writer = ("import importlib.util, sys, numpy as np; "
              f"spec = importlib.util.spec_from_file_location('leftovers_alias', {str(tmp_path / 'kmod.py')!r}); "
              "module = importlib.util.module_from_spec(spec); sys.modules['leftovers_alias'] = module; "
              "spec.loader.exec_module(module); print(module.total(np.arange(10, dtype=np.int64)))")
    done = subprocess.run([sys.executable, "-c", writer], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "45", done.stderr[-2000:]
    assert _call(kernel_file()) == (45, 0, 1)  # a miss: compiled again, and the bad entry replaced
    assert _call(kernel_file()) == (45, 1, 0)  # the entry written again loads


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_data_file_compiles_again(kernel_file, damage):
    first = kernel_file()
    assert _call(first) == (45, 0, 1)
    (data,) = _cache_files(first.total, ".nbc")
    content = data.read_bytes()
    data.write_bytes({"truncated": content[: len(content) // 2], "garbage": b"\x80\x05not a pickle" * 7,
                      "empty": b""}[damage])
    assert _call(kernel_file()) == (45, 0, 1)
    assert _call(kernel_file()) == (45, 1, 0)


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_index_compiles_again(kernel_file, damage):
    first = kernel_file()
    assert _call(first) == (45, 0, 1)
    (index,) = _cache_files(first.total, ".nbi")
    content = index.read_bytes()
    index.write_bytes(content[: len(content) - 9] if damage == "truncated" else b"\x00" * 40)
    assert _call(kernel_file()) == (45, 0, 1)
    assert _call(kernel_file()) == (45, 1, 0)  # the save wrote a whole index over the damaged one


def test_a_save_that_fails_leaves_the_kernel_compiled(kernel_file, monkeypatch):
    # A full disk, or a folder being evicted by another process while the compiled kernel is saved.
    def full_disk(self, name, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(caching.IndexDataCacheFile, "_save_data", full_disk)
    assert _call(kernel_file()) == (45, 0, 1)


def test_a_damaged_generated_module_file_is_written_again(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_ENGINE_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setattr(compiled_modules, "_MODULES", {})
    source = "VALUE = 7\n\n\ndef twice(x):\n    return 2 * x\n"
    path = compiled_modules.generated_folder() / f"damaged_{compiled_modules._digest(source)}.py"
    for damaged in ("VALUE = 7\n\n\ndef twice(x):\n    return 2 *", "VALUE = 7\n"):  # cut short: fails / imports
        path.write_text(damaged)
        monkeypatch.setattr(compiled_modules, "_MODULES", {})
        module = compiled_modules.generated_module(source, stem="damaged")
        assert (module.VALUE, module.twice(21)) == (7, 42)
        assert path.read_text() == source
