"""Keep the generated-kernel cache under a size bound by evicting the least recently used modules.

Why: every new query shape writes a generated module (and numba writes its
index and compiled data beside it, the CUDA path a PTX file), and nothing ever
removed them: 775 files, 93 MB after an hour of ad-hoc use. The bound is
``$GPU_ENGINE_CACHE_MAX_MB`` megabytes (default 256; ``0`` turns eviction off).

A module's *group* is everything cached for it, found by its name
``<stem>_<digest>``: the ``.py`` file in the generated folder, numba's
``<stem>_<digest>.<function>-<line>.py<version>.nbi/.nbc`` files (in
``generated/__pycache__``, or under ``$NUMBA_CACHE_DIR`` where that is set)
and the PTX cache's ``gpu_engine_generated_<stem>_<digest>.*.ptx`` files.
Static kernels' PTX and numba files are not generated per query and are
neither counted nor evicted.

When used: a module's last use is the access time of its ``.py`` file, set
explicitly (:func:`record_use`) whenever a process loads the module from disk
— its modification time is left alone, because numba's index is keyed by it.

When evicted: only after a process wrote a *new* module (a compile follows
anyway, so the scan of the folders is never on a repeated query's path; a
module compiled in the background is checked by the compile process after it
wrote numba's files, so the scan is never on a driver either), and
only when the groups' total passes the bound; then the oldest groups go until
the total is under 80 % of the bound, so eviction runs rarely. One process
evicts at a time (an ``flock`` on ``generated/.eviction.lock``; the others
skip). A group goes whole, its ``.py`` first (renamed away, then unlinked),
and every step tolerates files that vanished meanwhile. Processes that share
the folder (pytest-xdist workers, Spark executors) stay correct: a loader
whose module vanishes while it loads writes it again
(:func:`gpu_engine.codegen.compiled_modules.generated_module`), and numba
treats a missing index or data file as a cache miss and compiles.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["BOUND_VARIABLE", "DEFAULT_BOUND_MB", "cache_bound_bytes", "cache_groups", "evict_least_recently_used",
           "numba_cache_folders", "record_use"]

BOUND_VARIABLE = "GPU_ENGINE_CACHE_MAX_MB"
DEFAULT_BOUND_MB = 256.0
_LOW_WATER = 0.8  # evict down to this fraction of the bound, so the next eviction is many modules away
_GROUP = re.compile(r"^(\w+?_[0-9a-f]{32})(?:[.-]|$)")
_PTX_PREFIX = "gpu_engine_generated_"
_STALE_TEMPORARY_SECONDS = 3600.0  # an unfinished write older than this was left by a process that died


def cache_bound_bytes() -> int:
    """Return the size bound in bytes from ``$GPU_ENGINE_CACHE_MAX_MB`` (0: unbounded)."""
    text = os.environ.get(BOUND_VARIABLE, "").strip()
    if not text:
        return int(DEFAULT_BOUND_MB * 1024 * 1024)
    try:
        megabytes = float(text)
        if megabytes < 0 or megabytes != megabytes:
            raise ValueError(text)
    except ValueError:
        warnings.warn(f"{BOUND_VARIABLE}={text!r} is not a number of megabytes >= 0; using {DEFAULT_BOUND_MB:g}",
                      stacklevel=2)
        megabytes = DEFAULT_BOUND_MB
    return int(megabytes * 1024 * 1024)


def record_use(path: Path) -> None:
    """Mark the module file ``path`` as used now: set its access time, keep its modification time."""
    try:
        modified = os.stat(path).st_mtime_ns
        os.utime(path, ns=(time.time_ns(), modified))
    except OSError:
        pass  # evicted meanwhile, or a read-only cache: nothing to record


def numba_cache_folders(folder: Path) -> list[Path]:
    """Return where numba may keep its cache files of modules in ``folder`` (as numba's locators place them)."""
    folders = [folder / "__pycache__"]
    configured = os.environ.get("NUMBA_CACHE_DIR")
    if configured:
        directory = os.path.abspath(str(folder))
        subpath = "_".join([os.path.split(directory)[-1], hashlib.sha1(directory.encode()).hexdigest()])
        folders.append(Path(configured) / subpath)
    return folders


@dataclass
class _Group:
    last_use: float = 0.0
    size: int = 0
    module: Path | None = None
    files: list[Path] = field(default_factory=list)


def _scan(directory: Path, prefix: str, groups: dict[str, _Group], stale_before: float,
          stale: list[Path]) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if name.endswith(".tmp") or ".evicted-" in name:
            try:
                if entry.stat().st_mtime < stale_before:
                    stale.append(Path(entry.path))
            except OSError:
                pass
            continue
        if not name.startswith(prefix):
            continue
        match = _GROUP.match(name[len(prefix):])
        if match is None:
            continue
        try:
            info = entry.stat()
        except OSError:
            continue  # evicted by someone else meanwhile
        if not entry.is_file():
            continue
        group = groups.setdefault(match.group(1), _Group())
        group.size += info.st_size
        if name.endswith(".py") and not prefix:
            group.module = Path(entry.path)
            group.last_use = max(group.last_use, info.st_atime, info.st_mtime)
        else:
            group.files.append(Path(entry.path))
            if group.module is None:  # an orphan (its module already gone): as old as its newest file
                group.last_use = max(group.last_use, info.st_mtime)


def cache_groups(folder: Path, ptx_folder: Path | None) -> dict[str, _Group]:
    """Return every generated module's group of cached files under ``folder`` and ``ptx_folder``."""
    groups: dict[str, _Group] = {}
    stale: list[Path] = []
    stale_before = time.time() - _STALE_TEMPORARY_SECONDS
    _scan(folder, "", groups, stale_before, stale)
    for directory in numba_cache_folders(folder):
        _scan(directory, "", groups, stale_before, stale)
    if ptx_folder is not None:
        _scan(ptx_folder, _PTX_PREFIX, groups, stale_before, stale)
    for path in stale:
        path.unlink(missing_ok=True)
    return groups


def _remove(group: _Group) -> None:
    if group.module is not None:
        hidden = group.module.with_name(f".{group.module.name}.evicted-{os.getpid()}")
        try:
            os.rename(group.module, hidden)  # from here on loaders see a miss and write the module again
        except OSError:
            hidden = None
    else:
        hidden = None
    for path in group.files:
        try:
            path.unlink()
        except OSError:
            pass
    if hidden is not None:
        hidden.unlink(missing_ok=True)


def evict_least_recently_used(folder: Path, ptx_folder: Path | None, bound: int,
                              keep: frozenset[str] = frozenset()) -> list[str]:
    """Evict the least recently used groups when their total passes ``bound``; return the evicted names.

    ``keep`` names groups never evicted this time (the module the caller just wrote). Returns at once when
    another process holds the eviction lock or the bound is 0.
    """
    if bound <= 0:
        return []
    try:
        import fcntl
    except ImportError:  # no flock (Windows): evict without the lock, every step tolerates races
        fcntl = None
    try:
        lock = open(folder / ".eviction.lock", "a")
    except OSError:
        return []
    with lock:
        if fcntl is not None:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return []  # another process is evicting
        groups = cache_groups(folder, ptx_folder)
        total = sum(group.size for group in groups.values())
        if total <= bound:
            return []
        evicted: list[str] = []
        target = bound * _LOW_WATER
        for name, group in sorted(groups.items(), key=lambda item: item[1].last_use):
            if total <= target:
                break
            if name in keep:
                continue
            if group.module is not None:
                try:
                    info = os.stat(group.module)
                    if max(info.st_atime, info.st_mtime) > group.last_use:
                        continue  # used since the scan: keep it
                except OSError:
                    pass
            _remove(group)
            total -= group.size
            evicted.append(name)
        return evicted
