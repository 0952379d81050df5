"""A file's version (its size and modification time) read once per query run, not at every lookup.

Why: the caches of what is immutable per file version (the checked footer, pyarrow's metadata, the chunk layout,
the memory mapping, the read plan, the canonical dictionaries) are keyed by ``(path, size, mtime)`` so that a
file rewritten between runs is read again. Each lookup asked the file system first: a read of one piece of a
file asked ``os.stat`` about eight times, ~1,150 calls for one pass over TPC-H's 22 queries at SF 0.01 (and
as many Python frames around them), for an answer that does not change while a query runs.

A driver thread running a Task (:func:`gpu_engine.exec.cancel_points.current_task`) asks the file system once
per file and Task: the query reads every file as it was when it first looked at it, and the next run, a new
Task, looks again, so a file rewritten between runs is re-read. Outside a Task (planning, registering a
table, a direct call) every lookup asks the file system, as before.
"""

from __future__ import annotations

import os
import threading
import weakref

from gpu_engine.exec.cancel_points import current_task

__all__ = ["file_version"]

#: Task -> {path: (size, modified_ns)}; an entry goes with its Task.
_VERSIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def file_version(path: str) -> tuple[int, int]:
    """Return ``(size, st_mtime_ns)`` of the file at ``path``: once per running Task, else read now.

    Raises
    ------
    OSError
        As ``os.stat`` does (FileNotFoundError for a missing file); a failure is not remembered.
    """
    task = current_task()
    if task is None:
        status = os.stat(path)
        return status.st_size, status.st_mtime_ns
    versions = _VERSIONS.get(task)
    if versions is None:
        with _LOCK:
            versions = _VERSIONS.setdefault(task, {})
    version = versions.get(path)
    if version is None:  # two drivers may both ask the file system; either answer is this run's
        status = os.stat(path)
        version = versions.setdefault(path, (status.st_size, status.st_mtime_ns))
    return version
