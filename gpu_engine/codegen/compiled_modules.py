"""Load generated kernel modules from files in a cache folder, once per process and per source.

Why files: numba caches compiled functions on disk (``cache=True``) only for
functions defined in a real source file, and finds them again by that file's
path and timestamp. Writing each generated module once, to a file named by the
hash of its source, lets a new process reuse the compiled CPU twin (and the
PTX cache of :mod:`gpu_engine.kernels.ptx_cache` the CUDA twin) instead of
compiling again: JIT once per machine. The file is never rewritten, so its
timestamp, and numba's index, stay valid.

The folder is ``$GPU_ENGINE_CACHE_DIR/generated`` (default
``~/.cache/gpu_engine/generated``). Its size is bounded
(``$GPU_ENGINE_CACHE_MAX_MB``): the least recently used modules, with numba's
files and the PTX of them, are evicted (:mod:`gpu_engine.codegen.cache_eviction`),
so "never rewritten" holds while a module stays in the cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType

from gpu_engine.codegen.cache_eviction import cache_bound_bytes, evict_least_recently_used, record_use

__all__ = ["GeneratedFile", "bound_cache_size", "generated_file", "generated_module", "generated_folder"]

_MODULES: dict[str, ModuleType] = {}
_LOCK = threading.Lock()
_LOAD_ATTEMPTS = 4  # a module evicted by another process while this one loads it is written again


_FOLDERS: dict[str, Path] = {}  # by $GPU_ENGINE_CACHE_DIR: made once per process (a mkdir call cost 0.4 ms a batch)
_DIGESTS: dict[str, str] = {}  # by source text: generated sources are shared (generation cache), hashed once
_MAX_DIGESTS = 4096


def generated_folder() -> Path:
    """Return the folder generated modules are written to (created when missing)."""
    root = os.environ.get("GPU_ENGINE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "gpu_engine")
    folder = _FOLDERS.get(root)
    if folder is None:
        folder = Path(root) / "generated"
        folder.mkdir(parents=True, exist_ok=True)
        _FOLDERS[root] = folder
    return folder


def _digest(source: str) -> str:
    digest = _DIGESTS.get(source)
    if digest is None:
        digest = hashlib.sha256(source.encode()).hexdigest()[:32]
        if len(_DIGESTS) >= _MAX_DIGESTS:
            _DIGESTS.clear()
        _DIGESTS[source] = digest
    return digest


def _write_once(path: Path, source: str) -> bool:
    """Write ``source`` to ``path`` unless the file exists; return whether this call wrote it."""
    if path.exists():
        return False
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except FileNotFoundError:  # the folder was removed after this process made it
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:  # as Python reads source files, whatever the locale
        out.write(source)
    try:
        os.link(temporary, path)  # fails if another process wrote it first: keep theirs (same text)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(temporary)


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba's disk cache finds the functions' globals through it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _load(path: Path, source: str, name: str) -> tuple[ModuleType, bool]:
    """Write (when missing) and import the module at ``path``; write it again if it is evicted meanwhile.

    Another process may evict the module between the write and the import, or while numba's decorators
    look for the file (:mod:`gpu_engine.codegen.cache_eviction`): that is a cache miss, not an error; so is a
    file under the source's name that does not hold the source.
    """
    encoded = source.encode()
    for attempt in range(_LOAD_ATTEMPTS):
        wrote = _write_once(path, source)
        identity = None
        try:
            info = os.stat(path)
            identity = (info.st_ino, info.st_mtime_ns)
            if info.st_size != len(encoded) and attempt < _LOAD_ATTEMPTS - 1 and _discard_if_damaged(path, encoded):
                continue  # cut short or overwritten (it may still import): written again
            return _import(name, path), wrote
        except Exception:
            try:
                info = os.stat(path)
                replaced = identity != (info.st_ino, info.st_mtime_ns)
            except OSError:
                replaced = True
            if not replaced and _discard_if_damaged(path, encoded):
                replaced = True  # a file that is not this source (truncated, overwritten): written again
            if not replaced or attempt == _LOAD_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _discard_if_damaged(path: Path, encoded: bytes) -> bool:
    """Remove ``path`` if it does not hold ``encoded`` (its name is that source's hash); return whether it did.

    Modules are written whole (a complete temporary file linked into place), so a file of another text was
    damaged outside this process (a full disk, an edit, a copy cut short): without this, every later load of
    that source would fail the same way in every process sharing the folder.
    """
    try:
        if path.read_bytes() == encoded:
            return False
        path.unlink()
    except FileNotFoundError:
        return True  # gone meanwhile: written again
    except OSError:
        return False
    return True


def generated_module(source: str, stem: str = "fused") -> ModuleType:
    """Return the module defined by ``source``, written to the cache folder and imported once per process."""
    digest = _digest(source)
    module = _MODULES.get(digest)
    if module is not None:
        return module
    with _LOCK:
        module = _MODULES.get(digest)
        if module is None:
            folder = generated_folder()
            path = folder / f"{stem}_{digest}.py"
            module, wrote = _load(path, source, f"gpu_engine_generated_{stem}_{digest}")
            _MODULES[digest] = module
            if wrote:  # a new module (a compile follows anyway): the one time the cache's size is checked
                bound_cache_size(path)
            else:
                record_use(path)
    return module


def bound_cache_size(path: Path) -> None:
    """Evict the least recently used modules (never ``path``'s) if the cache folder has passed its size bound."""
    from gpu_engine.kernels.ptx_cache import ptx_cache_directory

    evict_least_recently_used(path.parent, ptx_cache_directory(), cache_bound_bytes(), keep=frozenset([path.stem]))


class GeneratedFile:
    """A generated module written to the cache folder, imported only when something asks for :attr:`module`.

    Why: importing a generated module compiles its Python source and builds numba dispatchers (tens of
    milliseconds for a fused aggregation), which a batch running on the lowest tier while the kernel
    compiles in another process (:mod:`gpu_engine.codegen.background_compiles`) does not need: that
    process imports the file itself. ``new`` says this process wrote the file, so nothing can have
    compiled it yet.
    """

    def __init__(self, source: str, stem: str, digest: str, path: Path, new: bool):
        self.source, self.stem, self.digest, self.path, self.new = source, stem, digest, path, new
        self.name = f"gpu_engine_generated_{stem}_{digest}"

    @property
    def loaded(self) -> bool:
        """Return whether the module is imported in this process."""
        return self.digest in _MODULES

    @property
    def module(self) -> ModuleType:
        """Return the module, imported on first use (written again if it was evicted meanwhile)."""
        return generated_module(self.source, self.stem)


_FILES: dict[tuple[Path, str], GeneratedFile] = {}  # by (folder, digest): a new cache folder writes anew


def generated_file(source: str, stem: str = "fused", evict: bool = True) -> GeneratedFile:
    """Return ``source`` as a :class:`GeneratedFile` in the cache folder (written once), without importing it.

    ``evict=False``: a new file does not check the cache's size here, because its kernel compiles in the
    compile process, which checks it after writing numba's files
    (:mod:`gpu_engine.codegen.compile_worker`): the scan of the folders stays off the drivers.
    """
    digest = _digest(source)
    folder = generated_folder()
    handle = _FILES.get((folder, digest))
    if handle is not None:
        return handle
    with _LOCK:
        handle = _FILES.get((folder, digest))
        if handle is None:
            path = folder / f"{stem}_{digest}.py"
            new = digest not in _MODULES and _write_once(path, source)
            if new and evict:
                bound_cache_size(path)
            handle = _FILES[(folder, digest)] = GeneratedFile(source, stem, digest, path, new)
    return handle
