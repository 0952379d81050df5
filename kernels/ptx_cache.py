"""Compile a numba.cuda kernel to PTX once per machine: a disk cache keyed by what the kernel's code is.

Why: numba compiles CUDA kernels in every new process, which cost the first
run of a TPC-H query up to 20 s on the H100 (``../shared/gpu/h100-baseline.md``).
The driver launch path (:mod:`gpu_engine.kernels.driver_launch`) needs a
kernel's PTX anyway, so it asks this cache, which compiles the kernel's
``py_func`` with ``numba.cuda.compile_ptx`` only when no earlier process did.

What keys an entry (any change recompiles):

* the kernel's module and qualified name;
* a fingerprint of its *code*, not its file: the bytecode, constants and
  names of the function and, recursively, of every Python function or numba
  dispatcher it reaches through its globals, closure cells and module
  attributes (its device functions and ``@njit`` helpers), plus the values
  of the global constants it reads (numba freezes those into the PTX). The
  code objects are what numba compiles, so a file edited after import cannot
  leave a stale entry under the new text, and a generated kernel (no file)
  is cached all the same;
* the argument types (the numba signature), the compute capability, the
  compile options, and the numba, numba-cuda and Python versions.

Entries live in ``$GPU_ENGINE_PTX_CACHE``, else
``$XDG_CACHE_HOME/gpu_engine/ptx``, else ``~/.cache/gpu_engine/ptx``, one
``.ptx`` file each, written atomically (several processes may fill it at
once). An unwritable directory only disables the disk half. The driver
keeps its own cache of the PTX-to-machine-code step (``~/.nv/ComputeCache``).

Every compile or disk load is kept in a per-process record
(:func:`compile_records`) so benchmarks report compile time apart.

An entry can also be compiled in another process (:class:`PtxJob`, what the
background compile process of :mod:`gpu_engine.codegen.background_compiles`
runs for ``cuda``): the engine's process names the entry's path, and the
compiling process writes it there only after finding the same path from the
code it imported (:meth:`PtxCache.write_job`); it needs no GPU, as
``compile_ptx`` takes the compute capability.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import threading
import time
import types as pytypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = [
    "CompileRecord",
    "CompiledPtx",
    "PtxCache",
    "PtxJob",
    "PTX_CACHE_VARIABLE",
    "clear_compile_records",
    "compile_records",
    "add_compile_record",
    "kernel_fingerprint",
    "ptx_cache_directory",
    "ptx_entry_name",
    "ptx_entry_parameters",
]

PTX_CACHE_VARIABLE = "GPU_ENGINE_PTX_CACHE"
_FORMAT_VERSION = "1"  # bump when the key or the file layout changes
_LIBRARY_PREFIXES = ("numba", "numpy", "math", "cmath", "operator", "builtins", "cupy", "llvmlite")
_SIMPLE_CONSTANTS = (bool, int, float, complex, str, bytes, type(None), np.generic, np.dtype)


@dataclass(frozen=True)
class CompileRecord:
    """One kernel specialization made ready in this process.

    ``outcome`` is ``"compiled"`` (numba ran; ``seconds`` is its compile time),
    ``"disk"`` (read from the PTX cache; ``seconds`` is the read) or
    ``"fallback"`` (the driver path cannot launch it; ``reason`` says why and
    numba's dispatcher launches it instead).
    """

    kernel: str
    signature: str
    outcome: str
    seconds: float
    path: str | None
    reason: str | None = None


@dataclass(frozen=True)
class CompiledPtx:
    """A kernel's PTX for one signature, with the name of its ``.entry`` and how it was obtained."""

    ptx: str
    entry: str
    record: CompileRecord


@dataclass(frozen=True)
class PtxJob:
    """What compiling one kernel's PTX entry in another process needs, all picklable (see :meth:`PtxCache.job`).

    ``module`` and ``function`` name the kernel (``module_path`` is the file of a generated module, which
    is not importable by name; None for a package module); ``signature`` is the numba signature the
    launcher derives from the launch's device arrays; ``path`` is the entry the launcher will read, keyed
    by the kernel's code fingerprint, that signature, ``compute_capability``, ``options`` (sorted items)
    and ``toolchain``.
    """

    module: str
    module_path: str | None
    function: str
    signature: tuple
    compute_capability: tuple[int, int]
    options: tuple[tuple[str, Any], ...]
    path: str
    toolchain: str

    def written(self) -> bool:
        """Return whether the entry is on disk (an earlier process, or the compile process, wrote it)."""
        return Path(self.path).is_file()


_RECORDS: list[CompileRecord] = []
_RECORDS_LOCK = threading.Lock()


def compile_records() -> tuple[CompileRecord, ...]:
    """Return every compile and disk load of this process, oldest first."""
    with _RECORDS_LOCK:
        return tuple(_RECORDS)


def clear_compile_records() -> None:
    """Forget the records (a benchmark calls it before the part it reports)."""
    with _RECORDS_LOCK:
        _RECORDS.clear()


def add_compile_record(record: CompileRecord) -> None:
    """Keep ``record`` in this process's list."""
    with _RECORDS_LOCK:
        _RECORDS.append(record)


def ptx_cache_directory() -> Path:
    """Return where PTX files are cached: ``$GPU_ENGINE_PTX_CACHE``, else the user's cache folder."""
    configured = os.environ.get(PTX_CACHE_VARIABLE)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu_engine" / "ptx"


def ptx_entry_name(ptx: str) -> str:
    """Return the name of the one kernel entry in ``ptx`` (numba mangles it from the signature)."""
    marker = ptx.find(".entry")
    if marker < 0:
        raise ValueError("the PTX has no .entry")
    rest = ptx[marker + len(".entry"):].lstrip()
    return rest[: rest.index("(")].strip()


_PTX_PARAMETER = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.([a-z]+)(\d+)\s+[^\s,)\[]+(?:\[(\d+)\])?")


def ptx_entry_parameters(ptx: str) -> list[tuple[int, bool]]:
    """Return ``(bytes, is_float)`` of each ``.param`` of the kernel entry in ``ptx``, in order.

    The driver copies each parameter from where its pointer points, reading
    as many bytes as the PTX declares: this is what a packer must match.
    """
    marker = ptx.find(".entry")
    if marker < 0:
        raise ValueError("the PTX has no .entry")
    opening = ptx.index("(", marker)
    declarations = ptx[opening + 1: ptx.index(")", opening)]
    parameters = []
    for kind, bits, count in _PTX_PARAMETER.findall(declarations):
        parameters.append((int(bits) // 8 * (int(count) if count else 1), kind == "f"))
    return parameters


# ----------------------------------------------------------------- fingerprint
def _is_library(module_name: str | None) -> bool:
    return bool(module_name) and module_name.split(".")[0] in _LIBRARY_PREFIXES


def _constant_text(value: Any) -> str | None:
    """Return a deterministic text for a value numba may freeze into code, or None when it is not one."""
    if isinstance(value, _SIMPLE_CONSTANTS):
        return f"{type(value).__qualname__}:{value!r}"
    if isinstance(value, (tuple, list)):
        parts = [_constant_text(item) for item in value]
        return None if None in parts else f"{type(value).__name__}({','.join(parts)})"  # type: ignore[arg-type]
    if isinstance(value, (frozenset, set)):
        parts = [_constant_text(item) for item in value]
        return None if None in parts else "set(" + ",".join(sorted(parts)) + ")"  # type: ignore[arg-type]
    if isinstance(value, np.ndarray):
        contents = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
        return f"ndarray:{value.dtype.str}:{value.shape}:{contents}"
    return None


def _code_names(code: pytypes.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, pytypes.CodeType):
            names |= _code_names(constant)
    return names


def _feed_code(digest: Any, code: pytypes.CodeType) -> None:
    """Hash what a code object computes, leaving out its file name and line numbers."""
    for part in (code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                 (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)):
        digest.update(repr(part).encode())
    for constant in code.co_consts:
        if isinstance(constant, pytypes.CodeType):
            _feed_code(digest, constant)
        else:
            digest.update((_constant_text(constant) or type(constant).__qualname__).encode())


def _python_function(value: Any) -> pytypes.FunctionType | None:
    """Return the Python function behind a plain function or a numba dispatcher, or None."""
    function = value if isinstance(value, pytypes.FunctionType) else getattr(value, "py_func", None)
    if isinstance(function, pytypes.FunctionType) and not _is_library(function.__module__):
        return function
    return None


def _feed_value(digest: Any, name: str, value: Any, names: set[str], seen: set[int]) -> None:
    function = _python_function(value)
    if function is not None:
        digest.update(f"function {name}".encode())
        _feed_function(digest, function, seen)
        return
    if isinstance(value, pytypes.ModuleType):
        digest.update(f"module {name}={value.__name__}".encode())
        if _is_library(value.__name__):
            return  # their version is in the key
        for attribute in sorted(names):
            if hasattr(value, attribute):
                _feed_value(digest, f"{name}.{attribute}", getattr(value, attribute), set(), seen)
        return
    text = _constant_text(value)
    digest.update(f"value {name}={text if text is not None else type(value).__qualname__}".encode())


def _feed_function(digest: Any, function: pytypes.FunctionType, seen: set[int]) -> None:
    if id(function) in seen:
        digest.update(f"again {function.__module__}.{function.__qualname__}".encode())
        return
    seen.add(id(function))
    digest.update(f"def {function.__module__}.{function.__qualname__}".encode())
    code = function.__code__
    _feed_code(digest, code)
    digest.update(repr(_constant_text(function.__defaults__ or ())).encode())
    names = _code_names(code)
    for name in sorted(names):
        if name in function.__globals__:
            _feed_value(digest, name, function.__globals__[name], names, seen)
    for name, cell in zip(code.co_freevars, function.__closure__ or ()):
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        _feed_value(digest, name, contents, names, seen)


def kernel_fingerprint(function: Any) -> str:
    """Return a hex digest of the code of ``function`` (or a dispatcher's ``py_func``) and all it calls."""
    from gpu_engine.kernels.lazy_cuda import real_cuda

    real_cuda()  # a kernel's globals name numba.cuda itself, not the stand-in a process holds before a CUDA use
    python_function = function if isinstance(function, pytypes.FunctionType) else function.py_func
    digest = hashlib.sha256()
    _feed_function(digest, python_function, set())
    return digest.hexdigest()


def _toolchain() -> str:
    from importlib import metadata

    import numba

    try:
        numba_cuda = metadata.version("numba-cuda")
    except metadata.PackageNotFoundError:
        numba_cuda = "none"
    return f"numba={numba.__version__} numba-cuda={numba_cuda} python={sys.version_info[0]}.{sys.version_info[1]}"


# ---------------------------------------------------------------------- cache
def _numba_compile(py_func: Any, signature: tuple, compute_capability: tuple[int, int], options: dict) -> str:
    from numba import cuda

    ptx, _ = cuda.compile_ptx(py_func, signature, cc=compute_capability, **options)
    return ptx


def _compile_without_gpu(py_func: Any, signature: tuple, compute_capability: tuple[int, int], options: dict) -> str:
    """Compile as :func:`_numba_compile` in a process that must not touch a GPU (the compile process).

    ``compile_ptx`` takes the compute capability, but numba asks the current GPU for it when a kernel
    calls a device function: answer with ``compute_capability`` instead, so the process never makes a
    CUDA context (hundreds of MB of GPU memory) or needs a GPU at all (as ``bench/ptx_ahead.py`` does).
    """
    import types as pytypes

    try:
        import numba.cuda.dispatcher as dispatcher
    except ImportError:
        dispatcher = None
    if dispatcher is not None and hasattr(dispatcher, "get_current_device"):
        dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=compute_capability)
    return _numba_compile(py_func, signature, compute_capability, options)


class PtxCache:
    """Hand out a kernel's PTX per signature: from this process's memory, the disk, or numba.

    Parameters
    ----------
    compute_capability
        The ``(major, minor)`` the PTX is compiled for (the current GPU's).
    directory
        The disk cache; None disables it. Defaults to :func:`ptx_cache_directory`.
    compile
        ``(py_func, signature, compute_capability, options) -> ptx``; numba's
        ``compile_ptx`` unless a test substitutes it.
    """

    def __init__(self, compute_capability: tuple[int, int], directory: Path | str | None | bool = True,
                 compile: Callable[[Any, tuple, tuple[int, int], dict], str] = _numba_compile) -> None:
        self.compute_capability = (int(compute_capability[0]), int(compute_capability[1]))
        self.directory = ptx_cache_directory() if directory is True else (Path(directory) if directory else None)
        self._compile = compile
        self._fingerprints: dict[Any, str] = {}
        self._toolchain = _toolchain()
        self._lock = threading.RLock()

    def fingerprint(self, kernel: Any) -> str:
        """Return (once per process and kernel) the code fingerprint of ``kernel``."""
        with self._lock:
            fingerprint = self._fingerprints.get(kernel)
            if fingerprint is None:
                fingerprint = self._fingerprints[kernel] = kernel_fingerprint(kernel)
            return fingerprint

    def path_for(self, kernel: Any, signature: tuple, options: dict) -> Path | None:
        """Return the cache file of ``kernel`` compiled for ``signature`` with ``options`` (None: no disk cache)."""
        if self.directory is None:
            return None
        py_func = getattr(kernel, "py_func", kernel)  # a numba dispatcher, or its Python function
        key = "\n".join([
            _FORMAT_VERSION, f"{py_func.__module__}.{py_func.__qualname__}", self.fingerprint(kernel),
            ",".join(str(argument_type) for argument_type in signature), f"sm_{self.compute_capability}",
            repr(sorted(options.items())), self._toolchain,
        ])
        name = f"{py_func.__module__}.{py_func.__qualname__}".replace("<", "_").replace(">", "_")
        return self.directory / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:40]}.ptx"

    def job(self, kernel: Any, signature: tuple, options: dict, module_path: str | None = None) -> PtxJob | None:
        """Return the job that compiles ``kernel``'s entry for ``signature`` elsewhere (None without a disk cache).

        ``module_path`` is the file of a generated module (imported from there, as it has no package).
        """
        path = self.path_for(kernel, signature, options)
        if path is None:
            return None
        py_func = getattr(kernel, "py_func", kernel)
        return PtxJob(py_func.__module__, module_path, py_func.__qualname__, tuple(signature), self.compute_capability,
                      tuple(sorted(options.items())), str(path), self._toolchain)

    @classmethod
    def write_job(cls, job: PtxJob, kernel: Any) -> float:
        """Compile ``job``'s entry from ``kernel`` (this process's import of it) and write it; return the seconds.

        Why the path is checked: the engine's process keyed the entry by the code *it* imported; were the
        file edited since, this process would compile other code under that key. So the entry is written
        only when this process's fingerprint, toolchain and all give the same path, else nothing is and the
        job fails (the engine keeps its lowest tier for that kernel).
        """
        cache = cls(job.compute_capability, Path(job.path).parent, compile=_compile_without_gpu)
        options = dict(job.options)
        path = cache.path_for(kernel, job.signature, options)
        if path != Path(job.path):
            raise RuntimeError(f"{job.module}.{job.function} keys to {path} in the compile process but to {job.path} "
                               "in the engine's (its code or toolchain differs: edited since the engine imported it?)")
        start = time.perf_counter()
        ptx = cache._compile(getattr(kernel, "py_func", kernel), tuple(job.signature), cache.compute_capability,
                             options)
        seconds = time.perf_counter() - start
        if ".entry" not in ptx or not cls._write(path, ptx):
            raise OSError(f"could not write the PTX entry {path}")
        return seconds

    def ptx(self, kernel: Any, signature: tuple, options: dict | None = None,
            compile_missing: bool = True) -> CompiledPtx:
        """Return ``kernel``'s PTX for ``signature``: read from disk when cached, else compiled and stored.

        With ``compile_missing=False`` a missing entry raises :class:`FileNotFoundError` instead (a caller that must
        not compile on its thread: the module load after a background compile).
        """
        options = dict(options or {})
        py_func = getattr(kernel, "py_func", kernel)  # a numba dispatcher, or its Python function
        name = f"{py_func.__module__}.{py_func.__qualname__}"
        signature_text = "(" + ", ".join(str(argument_type) for argument_type in signature) + ")"
        path = self.path_for(kernel, signature, options)
        start = time.perf_counter()
        ptx = self._read(path)
        if ptx is not None:
            record = CompileRecord(name, signature_text, "disk", time.perf_counter() - start, str(path))
        elif not compile_missing:
            raise FileNotFoundError(f"no PTX entry of {name}{signature_text} at {path}")
        else:
            start = time.perf_counter()
            ptx = self._compile(py_func, tuple(signature), self.compute_capability, options)
            seconds = time.perf_counter() - start
            stored = self._write(path, ptx)
            record = CompileRecord(name, signature_text, "compiled", seconds, str(path) if stored else None)
        add_compile_record(record)
        return CompiledPtx(ptx, ptx_entry_name(ptx), record)

    @staticmethod
    def _read(path: Path | None) -> str | None:
        if path is None:
            return None
        try:
            ptx = path.read_text()
        except (OSError, UnicodeDecodeError):  # gone, or damaged bytes: compiled again (and written over)
            return None
        return ptx if ".entry" in ptx else None  # a damaged file is compiled again

    @staticmethod
    def _write(path: Path | None, ptx: str) -> bool:
        if path is None:
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        except OSError:
            return False
        try:
            with os.fdopen(handle, "w") as file:
                file.write(ptx)
            os.replace(temporary, path)  # atomic: readers see the whole file or none
            return True
        except OSError:
            Path(temporary).unlink(missing_ok=True)
            return False
