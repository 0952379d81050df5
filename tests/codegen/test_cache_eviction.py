"""The generated-kernel cache stays under its size bound, keeps what was used last, and never fails a loader.

Why: the cache grew without bound (775 files, 93 MB after an hour), and it is
shared by processes (pytest-xdist workers, Spark executors) that may load a
module while another evicts it (issue 29 item 4).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpu_engine.codegen import cache_eviction, compiled_modules
from gpu_engine.codegen.cache_eviction import cache_bound_bytes, cache_groups, numba_cache_folders

ROOT = Path(__file__).resolve().parents[2]


#: A module that evicts its own group while being imported (as another process would), before numba's
#: decorator looks for its file.
SELF_EVICTING = """
import os, pathlib
from gpu_engine.codegen.cache_eviction import evict_least_recently_used
_marker = pathlib.Path(os.environ["EVICT_MARKER"])
if not _marker.exists():
    _marker.touch()
    evict_least_recently_used(pathlib.Path(__file__).parent, None, 1)
from numba import njit

@njit(cache=True)
def twice(x):
    return 2 * x
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Point the generated and PTX caches at empty folders, with a fresh in-process module table."""
    monkeypatch.setenv("GPU_ENGINE_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setenv("GPU_ENGINE_PTX_CACHE", str(tmp_path / "ptx"))
    monkeypatch.setattr(compiled_modules, "_MODULES", {})
    return tmp_path


def _source(index: int, padding: int = 4000) -> str:
    return f"VALUE = {index}\n# {'x' * padding}\n"


def _total(folder: Path) -> int:
    return sum(group.size for group in cache_groups(folder, None).values())


def test_the_folder_stays_under_the_bound_after_writing_many_modules(cache, monkeypatch):
    monkeypatch.setenv("GPU_ENGINE_CACHE_MAX_MB", str(40_000 / 2**20))  # about ten modules of 4 kB
    folder = compiled_modules.generated_folder()
    for index in range(60):
        assert compiled_modules.generated_module(_source(index), stem="bound").VALUE == index
        assert _total(folder) <= cache_bound_bytes()
    assert 5 <= len(list(folder.glob("bound_*.py"))) <= 10


def test_the_most_recently_used_modules_survive(cache, monkeypatch):
    monkeypatch.setenv("GPU_ENGINE_CACHE_MAX_MB", str(60_000 / 2**20))
    folder = compiled_modules.generated_folder()
    for index in range(10):
        compiled_modules.generated_module(_source(index), stem="lru")
    past = time.time() - 1000
    for index, path in enumerate(sorted(folder.glob("lru_*.py"), key=lambda p: p.stat().st_mtime)):
        os.utime(path, (past + index, past + index))  # written long ago, in order
    monkeypatch.setattr(compiled_modules, "_MODULES", {})  # a new process: loads from disk
    assert compiled_modules.generated_module(_source(0), stem="lru").VALUE == 0  # the oldest, used again
    compiled_modules.generated_module(_source(1), stem="lru")
    for index in range(10, 16):  # six new modules pass the bound
        compiled_modules.generated_module(_source(index), stem="lru")
    texts = [path.read_text() for path in folder.glob("lru_*.py")]
    present = {int(text.split("\n")[0].split("= ")[1]) for text in texts}
    assert {0, 1, 15} <= present  # used last, and the module just written
    assert not {2, 3, 4} & present  # the least recently used went first
    assert _total(folder) <= cache_bound_bytes()


def test_eviction_removes_numba_and_ptx_files_with_their_module(cache, monkeypatch):
    monkeypatch.setenv("GPU_ENGINE_CACHE_MAX_MB", "0")  # unbounded while the groups are made
    folder = compiled_modules.generated_folder()
    compiled_modules.generated_module(_source(1), stem="grp")
    (module,) = folder.glob("grp_*.py")
    os.utime(module, (time.time() - 1000, module.stat().st_mtime))
    key = module.stem
    numba_files = []
    for numba_folder in numba_cache_folders(folder):
        numba_folder.mkdir(parents=True, exist_ok=True)
        numba_files += [numba_folder / f"{key}.kernel-3.py313.nbi", numba_folder / f"{key}.kernel-3.py313.1.nbc"]
    ptx = cache / "ptx" / f"gpu_engine_generated_{key}.kernel-{'a' * 40}.ptx"
    ptx.parent.mkdir()
    static_ptx = cache / "ptx" / f"gpu_engine.kernels.scan.kernel-{'b' * 40}.ptx"
    for path in [*numba_files, ptx, static_ptx]:
        path.write_bytes(b"." * 3000)
    groups = cache_groups(folder, cache / "ptx")
    assert groups[key].size == module.stat().st_size + 3000 * (len(numba_files) + 1)
    monkeypatch.setenv("GPU_ENGINE_CACHE_MAX_MB", str(8_000 / 2**20))
    compiled_modules.generated_module(_source(2), stem="grp")  # a new module passes the bound
    assert not module.exists() and not ptx.exists() and not any(path.exists() for path in numba_files)
    assert static_ptx.exists()  # static kernels are not the generated cache's
    assert not [path for path in folder.iterdir() if ".evicted-" in path.name]


def test_numba_cache_files_of_a_real_module_are_counted(cache):
    pytest.importorskip("numba")
    source = "from numba import njit\n\n@njit(cache=True)\ndef add_one(x):\n    return x + 1\n"
    module = compiled_modules.generated_module(source, stem="real")
    assert module.add_one(41) == 42
    folder = compiled_modules.generated_folder()
    (group,) = cache_groups(folder, None).values()
    assert any(path.suffix == ".nbi" for path in group.files), group.files  # numba's index belongs to the group


def test_a_loader_whose_module_is_evicted_while_it_loads_writes_it_again(cache):
    # The load must write the module again, not fail.
    code = textwrap.dedent("""
        import os, pathlib, sys
        from gpu_engine.codegen import compiled_modules
        module = compiled_modules.generated_module(sys.argv[1], stem="evicted")
        assert module.twice(21) == 42
        assert pathlib.Path(os.environ["EVICT_MARKER"]).exists()
        print("ok")
    """)
    env = dict(os.environ, EVICT_MARKER=str(cache / "marker"), GPU_ENGINE_CACHE_MAX_MB="0")
    done = subprocess.run([sys.executable, "-c", code, SELF_EVICTING], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]


def test_processes_sharing_a_bounded_folder_never_fail(cache):
    # Two processes write and load the same 40 modules in opposite orders under a bound of a few modules,
    # so each keeps evicting what the other loads.
    code = textwrap.dedent("""
        import sys
        from gpu_engine.codegen import compiled_modules
        order = range(40) if sys.argv[1] == "up" else range(39, -1, -1)
        for index in order:
            compiled_modules._MODULES.clear()
            source = f"VALUE = {index}\\n# {'x' * 4000}\\n"
            assert compiled_modules.generated_module(source, stem="shared").VALUE == index
        print("ok")
    """)
    env = dict(os.environ, GPU_ENGINE_CACHE_MAX_MB=str(20_000 / 2**20))
    workers = [subprocess.Popen([sys.executable, "-c", code, direction], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for direction in ("up", "down")]
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0 and "ok" in out, err[-3000:]
    assert _total(compiled_modules.generated_folder()) <= 20_000


def test_a_bad_bound_warns_and_uses_the_default(monkeypatch):
    monkeypatch.setenv("GPU_ENGINE_CACHE_MAX_MB", "lots")
    with pytest.warns(UserWarning, match="GPU_ENGINE_CACHE_MAX_MB"):
        assert cache_bound_bytes() == int(cache_eviction.DEFAULT_BOUND_MB * 2**20)
    monkeypatch.delenv("GPU_ENGINE_CACHE_MAX_MB")
    assert cache_bound_bytes() == 256 * 2**20
