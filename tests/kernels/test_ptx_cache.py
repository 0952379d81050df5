"""The PTX disk cache: what invalidates an entry, what survives a new process, and the per-process compile record.

Why: a stale entry launches old machine code for new source, which no
other test would notice (the simulator never reads the cache); a key that
changes for no reason recompiles every process, which is what the cache is
for. The fingerprint is checked on modules written to a temporary folder and
edited between loads; the cache itself with a stand-in compiler (no NVVM
in the simulator). ``test_driver_launch_abi.py`` runs numba's real compiler.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from gpu_engine.kernels.ptx_cache import (
    PtxCache,
    clear_compile_records,
    compile_records,
    kernel_fingerprint,
    ptx_cache_directory,
    ptx_entry_name,
    ptx_entry_parameters,
)

KERNEL_SOURCE = """\
import numpy as np
from numba import njit

import fingerprint_helpers

SCALE = np.uint64({scale})
NAMES = ("a", "b")


@njit
def helper(x):
    return x * SCALE + {offset}


def kernel(values, out):
    for i in range(out.shape[0]):
        if values[i] in {{"one", "two", "three"}}:
            out[i] = helper(values[i]) + fingerprint_helpers.shift(values[i])
"""
HELPERS_SOURCE = """\
def shift(x):
    return x << {bits}
"""


@pytest.fixture
def load_kernel(tmp_path, monkeypatch):
    """Return ``load(scale=3, offset=1, bits=2, prefix="")``: write both modules, import them anew, give the kernel."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(scale=3, offset=1, bits=2, prefix=""):
        (tmp_path / "fingerprint_helpers.py").write_text(HELPERS_SOURCE.format(bits=bits))
        (tmp_path / "fingerprinted_kernels.py").write_text(prefix + KERNEL_SOURCE.format(scale=scale, offset=offset))
        for name in ("fingerprint_helpers", "fingerprinted_kernels"):
            sys.modules.pop(name, None)
            spec = importlib.util.spec_from_file_location(name, tmp_path / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        sys.modules.pop("fingerprint_helpers")
        return sys.modules.pop("fingerprinted_kernels").kernel

    return load


class CountingCompiler:
    """Stand in for numba's compile_ptx: return PTX naming the signature, and count the calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, py_func, signature, compute_capability, options):
        self.calls += 1
        return (f"// {py_func.__qualname__} {signature} sm_{compute_capability} {sorted(options.items())}\n"
                ".visible .entry _Z6kernel(\n\t.param .u64 _Z6kernel_param_0\n)\n{\n\tret;\n}\n")


# ------------------------------------------------------------- fingerprint
def test_the_same_code_loaded_again_has_the_same_fingerprint(load_kernel):
    assert kernel_fingerprint(load_kernel()) == kernel_fingerprint(load_kernel())


def test_moving_code_down_the_file_keeps_the_fingerprint(load_kernel):
    assert kernel_fingerprint(load_kernel()) == kernel_fingerprint(load_kernel(prefix="# a comment\n\n\n"))


@pytest.mark.parametrize("change", [{"offset": 2}, {"scale": 5}, {"bits": 3}],
                         ids=["njit-helper-body", "global-constant", "function-of-an-imported-module"])
def test_a_change_in_anything_the_kernel_reaches_changes_the_fingerprint(load_kernel, change):
    assert kernel_fingerprint(load_kernel()) != kernel_fingerprint(load_kernel(**change))


def test_closure_values_are_part_of_the_fingerprint():
    def make(limit):
        def kernel(out):
            out[0] = limit
        return kernel

    assert kernel_fingerprint(make(1)) == kernel_fingerprint(make(1))
    assert kernel_fingerprint(make(1)) != kernel_fingerprint(make(2))


def test_processes_with_different_string_hash_seeds_agree(load_kernel, tmp_path):
    load_kernel()  # writes the modules; the kernel compares against a set literal, a frozenset constant
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import fingerprinted_kernels as m; "
              "from gpu_engine.kernels.ptx_cache import kernel_fingerprint; print(kernel_fingerprint(m.kernel))")
    digests = set()
    for seed in ("1", "2", "3"):
        environment = {**os.environ, "PYTHONHASHSEED": seed}
        completed = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=environment,
                                   capture_output=True, text=True, timeout=120)
        assert completed.returncode == 0, completed.stderr
        digests.add(completed.stdout.strip())
    assert len(digests) == 1


# ------------------------------------------------------------------- cache
def test_a_new_cache_on_the_same_directory_reads_instead_of_compiling(load_kernel, tmp_path):
    clear_compile_records()
    kernel, compiler = load_kernel(), CountingCompiler()
    first = PtxCache((9, 0), tmp_path / "ptx", compile=compiler).ptx(kernel, ("int64[::1]",), {"fastmath": False})
    second = PtxCache((9, 0), tmp_path / "ptx", compile=compiler).ptx(kernel, ("int64[::1]",), {"fastmath": False})
    assert compiler.calls == 1 and second.ptx == first.ptx and second.entry == "_Z6kernel"
    records = compile_records()
    assert [record.outcome for record in records] == ["compiled", "disk"]
    assert records[0].kernel == "fingerprinted_kernels.kernel" and records[0].signature == "(int64[::1])"
    assert records[0].path == records[1].path and all(record.seconds >= 0 for record in records)


@pytest.mark.parametrize("change", [
    {"compute_capability": (8, 0)}, {"signature": ("int32[::1]",)}, {"options": {"fastmath": True}},
    {"source": {"offset": 9}},
], ids=["compute-capability", "signature", "options", "source"])
def test_each_part_of_the_key_compiles_again(load_kernel, tmp_path, change):
    compiler = CountingCompiler()
    PtxCache((9, 0), tmp_path, compile=compiler).ptx(load_kernel(), ("int64[::1]",), {"fastmath": False})
    kernel = load_kernel(**change.get("source", {}))
    PtxCache(change.get("compute_capability", (9, 0)), tmp_path, compile=compiler).ptx(
        kernel, change.get("signature", ("int64[::1]",)), change.get("options", {"fastmath": False}))
    assert compiler.calls == 2


@pytest.mark.parametrize("damaged", [b"truncated", b".entry \xff\xfe not UTF-8"], ids=["truncated", "bytes"])
def test_a_damaged_file_is_compiled_and_written_again(load_kernel, tmp_path, damaged):
    kernel, compiler = load_kernel(), CountingCompiler()
    cache = PtxCache((9, 0), tmp_path, compile=compiler)
    path = cache.path_for(kernel, ("int64[::1]",), {})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(damaged)  # bytes that are not UTF-8: UnicodeDecodeError failed the query before
    assert cache.ptx(kernel, ("int64[::1]",), {}).record.outcome == "compiled"
    assert ".entry" in path.read_text() and compiler.calls == 1


def test_an_unwritable_directory_only_turns_the_disk_half_off(load_kernel, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    compiler = CountingCompiler()
    for _ in range(2):
        result = PtxCache((9, 0), blocker / "ptx", compile=compiler).ptx(load_kernel(), ("int64[::1]",), {})
        assert result.record.outcome == "compiled" and result.record.path is None
    assert compiler.calls == 2


def test_the_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GPU_ENGINE_PTX_CACHE", str(tmp_path / "mine"))
    assert ptx_cache_directory() == tmp_path / "mine"
    monkeypatch.delenv("GPU_ENGINE_PTX_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ptx_cache_directory() == tmp_path / "xdg" / "gpu_engine" / "ptx"


# --------------------------------------------------------------------- PTX
def test_entry_name_and_parameters_are_read_from_the_ptx():
    ptx = textwrap.dedent("""\
        .version 8.4
        .target sm_90
        .extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0);
        .visible .entry _ZN6cudapy4kern(
        \t.param .u64 _ZN6cudapy4kern_param_0,
        \t.param .u8 _ZN6cudapy4kern_param_1,
        \t.param .f32 _ZN6cudapy4kern_param_2,
        \t.param .align 8 .b8 _ZN6cudapy4kern_param_3[16],
        \t.param .f64 _ZN6cudapy4kern_param_4
        )
        {
        \tret;
        }
        """)
    assert ptx_entry_name(ptx) == "_ZN6cudapy4kern"
    assert ptx_entry_parameters(ptx) == [(8, False), (1, False), (4, True), (16, False), (8, True)]
