"""Load generated kernel modules from files in a cache folder, once per process and per source.

Why files: numba caches compiled functions on disk (``cache=True``) only for
functions defined in a real source file, and finds them again by that file's
path and timestamp. Writing each generated module once, to a file named by the
hash of its source, lets a new process reuse the compiled CPU twin (and the
PTX cache of :mod:`gpu_engine.kernels.ptx_cache` the CUDA twin) instead of
compiling again: JIT once per machine. The file is never rewritten, so its
timestamp, and numba's index, stay valid.

The folder is ``$GPU_ENGINE_CACHE_DIR/generated`` (default
``~/.cache/gpu_engine/generated``).
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

__all__ = ["generated_module", "generated_folder"]

_MODULES: dict[str, ModuleType] = {}
_LOCK = threading.Lock()


def generated_folder() -> Path:
    """Return the folder generated modules are written to (created when missing)."""
    root = os.environ.get("GPU_ENGINE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "gpu_engine")
    folder = Path(root) / "generated"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _write_once(path: Path, source: str) -> None:
    if path.exists():
        return
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(handle, "w") as out:
        out.write(source)
    try:
        os.link(temporary, path)  # fails if another process wrote it first: keep theirs (same text)
    except FileExistsError:
        pass
    finally:
        os.unlink(temporary)


def generated_module(source: str, stem: str = "fused") -> ModuleType:
    """Return the module defined by ``source``, written to the cache folder and imported once per process."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:32]
    module = _MODULES.get(digest)
    if module is not None:
        return module
    with _LOCK:
        module = _MODULES.get(digest)
        if module is None:
            path = generated_folder() / f"{stem}_{digest}.py"
            _write_once(path, source)
            name = f"gpu_engine_generated_{stem}_{digest}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # numba's disk cache finds the functions' globals through it
            spec.loader.exec_module(module)
            _MODULES[digest] = module
    return module
