"""An engine kernel's numba disk cache is made at its first use, not when its module is imported (issue 29 item 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = """
import importlib, json, pkgutil, sys
import numpy as np
from numba.core import caching
made = []
eager = caching.FunctionCache.__init__
def counting(self, py_func):
    made.append(py_func.__module__ + "." + py_func.__name__)
    eager(self, py_func)
caching.FunctionCache.__init__ = counting
import gpu_engine.kernels as kernels
from gpu_engine.codegen.lazy_numba_cache import LazyFunctionCache
for info in pkgutil.iter_modules(kernels.__path__):
    importlib.import_module("gpu_engine.kernels." + info.name)
after_import = list(made)
from gpu_engine.kernels import gather
lazy = type(gather._gather_cpu._cache) is LazyFunctionCache
out = np.empty(2, dtype=np.int64)
gather._gather_cpu(np.array([5, 6, 7], dtype=np.int64), np.array([2, 0], dtype=np.int64), out)
print(json.dumps({"after_import": after_import, "after_use": made[len(after_import):], "lazy": lazy,
                  "built": gather._gather_cpu._cache.built, "out": out.tolist(),
                  "index": gather._gather_cpu._cache._cache_file._index_path}))
"""


def test_importing_every_kernel_module_makes_no_disk_cache_until_a_kernel_runs():
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["after_import"] == [], found["after_import"][:10]
    assert found["lazy"]
    assert found["after_use"] == ["gpu_engine.kernels.gather._gather_cpu"]  # made once, for the kernel used
    assert found["built"] and found["out"] == [7, 5]
    assert found["index"].endswith(".nbi")


def test_a_function_outside_the_engine_keeps_numbas_own_cache(tmp_path):
    """numba's error for a function it cannot cache stays where the function is decorated, outside the engine."""
    (tmp_path / "outside_kernels.py").write_text("from numba import njit\n\n@njit(cache=True)\ndef twice(a):\n"
                                                 "    return a * 2\n")
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import gpu_engine.kernels, outside_kernels; "
              "from numba.core.caching import FunctionCache; "
              "print(type(outside_kernels.twice._cache) is FunctionCache, outside_kernels.twice(21))")
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "42"]


def test_the_stand_in_copies_and_pickles_without_making_the_cache():
    """A dispatcher's fields may be copied or shipped (Spark's cloudpickle): the stand-in must not recurse."""
    import copy
    import pickle

    from gpu_engine.codegen.lazy_numba_cache import LazyFunctionCache

    _made.clear()
    lazy = LazyFunctionCache(_twice, _make)
    for twin in (copy.copy(lazy), copy.deepcopy(lazy), pickle.loads(pickle.dumps(lazy))):
        assert isinstance(twin, LazyFunctionCache) and not twin.built
    assert _made == []
    assert lazy.upper() == "CACHE" and lazy.lower() == "cache" and _made == [_twice]  # made once, when asked


_made: list = []


def _make(py_func):
    _made.append(py_func)
    return "cache"


def _twice(a):
    return a * 2


def _engine_module(folder: Path, name: str):
    """Import a module named as the engine's generated ones (so its dispatchers get the stand-in) from ``folder``."""
    import importlib.util

    import gpu_engine.kernels  # noqa: F401  (installs the stand-in)

    path = folder / f"{name}.py"
    path.write_text("from numba import njit\n\n@njit(cache=True)\ndef twice(a):\n    return a * 2\n")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module, path


def test_a_source_edited_after_import_is_neither_loaded_nor_saved(tmp_path):
    """Machine code of the function in memory must not be saved under the edited file's stamp (nor the reverse)."""
    import uuid

    kept, _ = _engine_module(tmp_path, f"gpu_engine_generated_kept_{uuid.uuid4().hex}")
    edited, path = _engine_module(tmp_path, f"gpu_engine_generated_edited_{uuid.uuid4().hex}")
    try:
        path.write_text(path.read_text() + "# edited while a process had it imported\n")
        assert kept.twice(21) == 42 and edited.twice(21) == 42
        # (numba's cache folder: beside the file, or $NUMBA_CACHE_DIR where a test set it)
        assert os.path.exists(kept.twice._cache._cache_file._index_path)
        assert not os.path.exists(edited.twice._cache._cache_file._index_path)  # the edited module saved nothing
        assert not edited.twice._cache._enabled
    finally:
        sys.modules.pop(kept.__name__, None)
        sys.modules.pop(edited.__name__, None)
