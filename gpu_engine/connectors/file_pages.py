"""Keep a bounded amount of mapped Parquet pages resident; give back the least recently read beyond it.

Why: Parquet files are read through a memory mapping
(:func:`gpu_engine.connectors.parquet_columns._file_bytes`), and every page a
read touches stays mapped into the process until it is unmapped: over the 22
TPC-H queries at SF10 that was ~2.9 GB of file pages held between queries,
most of the engine's 6.9 GB peak beside DuckDB's 1.2 GB (DuckDB reads with
``pread`` into its own buffer pool, which it bounds). Dropping every chunk's
pages as soon as it was decoded bounded that, but each later read of the same
chunk (the next query, a repeated dashboard query) mapped the pages in again
with one minor fault per 4 KiB page: 3-5% more CPU on scan-bound queries at
SF1, where the files fit in memory many times over.

So this is a buffer pool for mapped pages, in the way DuckDB bounds its
buffer manager: chunks read are remembered in least-recently-read order, and
once more than :data:`KEPT_FILE_PAGE_BYTES` are remembered the oldest chunks'
pages are dropped (``MADV_DONTNEED``: on a read-only file mapping this only
unmaps them; they stay in the kernel's page cache and a later read maps them
again, never wrong data). A chunk read again moves to the recent end, so a
working set under the bound stays resident. When the process goes idle
(:mod:`gpu_engine.exec.idle_memory`) every remembered chunk is dropped.
"""

from __future__ import annotations

import mmap
import threading
import weakref
from collections import OrderedDict
from typing import Sequence

from gpu_engine.exec.idle_memory import release_on_idle

__all__ = ["KEPT_FILE_PAGE_BYTES", "read_chunks", "release_kept_pages", "kept_page_bytes"]

#: Bytes of read file pages kept mapped (least recently read dropped beyond it).
KEPT_FILE_PAGE_BYTES = 512 << 20

_PAGE_BYTES = mmap.PAGESIZE
_lock = threading.Lock()
#: (id of the mapping, page-aligned start, length) -> a weak reference to the mapping, least recently read first.
_kept: OrderedDict[tuple[int, int, int], weakref.ref] = OrderedDict()
_kept_bytes = 0


def read_chunks(mapped: mmap.mmap, ranges: Sequence[tuple[int, int]]) -> None:
    """Remember that ``(start, length)`` byte ranges of ``mapped`` were read; drop the oldest beyond the bound.

    Ranges are clipped to the mapping and widened to whole pages; an empty range is ignored.
    """
    global _kept_bytes
    if not hasattr(mmap, "MADV_DONTNEED"):
        return
    size = len(mapped)
    reference = weakref.ref(mapped)
    dropped: list[tuple[weakref.ref, int, int]] = []
    with _lock:
        for start, length in ranges:
            if length <= 0 or not 0 <= start < size:
                continue
            low = start - start % _PAGE_BYTES
            key = (id(mapped), low, min(start + length, size) - low)
            if key in _kept and _kept[key]() is mapped:
                _kept.move_to_end(key)
                continue
            if key in _kept:  # an id reused by a new mapping: the old one is gone with its pages
                _kept_bytes -= key[2]
                del _kept[key]
            _kept[key] = reference
            _kept_bytes += key[2]
        while _kept_bytes > KEPT_FILE_PAGE_BYTES and _kept:
            (_, low, length), old = _kept.popitem(last=False)
            _kept_bytes -= length
            dropped.append((old, low, length))
    _drop(dropped)


def release_kept_pages(keep_bytes: int = 0) -> None:
    """Drop the least recently read chunks' pages until at most ``keep_bytes`` are remembered."""
    global _kept_bytes
    dropped: list[tuple[weakref.ref, int, int]] = []
    with _lock:
        while _kept_bytes > keep_bytes and _kept:
            (_, low, length), old = _kept.popitem(last=False)
            _kept_bytes -= length
            dropped.append((old, low, length))
    _drop(dropped)


def kept_page_bytes() -> int:
    """Return the bytes of read chunks remembered as mapped (an upper bound of their resident pages)."""
    return _kept_bytes


def _drop(dropped: list[tuple[weakref.ref, int, int]]) -> None:
    """Unmap the pages of each ``(mapping, start, length)`` whose mapping is still open (outside the lock)."""
    for reference, low, length in dropped:
        mapped = reference()
        if mapped is None or mapped.closed:
            continue
        try:
            mapped.madvise(mmap.MADV_DONTNEED, low, length)
        except (OSError, ValueError):  # closed between the check and the call: its pages went with it
            pass


release_on_idle(release_kept_pages)
