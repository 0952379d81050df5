"""Pages of a Parquet file read through its mapping stay resident up to the pool's bound, and leave beyond it.

Counted from ``/proc/self/smaps`` (the mapping's own resident pages) and from the pool's own count, never from the
process's total.
"""

import mmap
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.connectors import file_pages, parquet_columns
from gpu_engine.connectors.parquet_columns import decodable_columns, read_decoded_columns
from gpu_engine.exec import idle_memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(mmap, "MADV_DONTNEED"),
                                reason="counts a mapping's pages in /proc/self/smaps (Linux)")

PAGE = mmap.PAGESIZE


def _resident_bytes_of_mapping(address: int) -> int:
    """Return the ``Rss`` of the mapping starting at ``address`` in this process."""
    with open("/proc/self/smaps") as handle:
        inside = False
        for line in handle:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                inside = int(head.split("-")[0], 16) == address
            elif inside and head == "Rss:":
                return int(line.split()[1]) * 1024
    raise AssertionError("mapping not found")


def _chunks(metadata, groups, columns) -> set[tuple[int, int]]:
    """Return the ``(start, length)`` of each column chunk of ``groups`` and ``columns`` (leaf indexes)."""
    out = set()
    for g in groups:
        for i in columns:
            chunk = metadata.row_group(g).column(i)
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            out.add((start, chunk.total_compressed_size))
    return out


@pytest.fixture
def empty_pool():
    """The pool starts empty and is emptied again (other tests' reads leave chunks in it)."""
    file_pages.release_kept_pages(0)
    yield
    file_pages.release_kept_pages(0)


@pytest.fixture
def parquet_file(tmp_path):
    rng = np.random.default_rng(3)
    rows = 120_000
    values = rng.integers(-2**40, 2**40, rows)
    table = pa.table({"a": values, "b": pa.array(rng.standard_normal(rows), mask=values % 7 == 0),
                      "c": pa.array(rng.integers(0, 5, rows).astype(np.int32))})
    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path, row_group_size=30_000, compression="snappy")
    return path, table


def _read_everything(path, table):
    metadata = pq.read_metadata(path)
    file_bytes = parquet_columns._file_bytes(path)
    address = file_bytes.__array_interface__["data"][0]
    file_bytes[::PAGE].sum()  # every page mapped in, as earlier reads of the file leave it
    assert _resident_bytes_of_mapping(address) > 0
    columns = decodable_columns(metadata, ["a", "b", "c"], [])
    decoded = read_decoded_columns(path, metadata, list(range(metadata.num_row_groups)), columns)
    for name in ("a", "b", "c"):
        assert decoded[name].equals(table[name].combine_chunks())
    data_end = max(start + length for start, length in _chunks(metadata, range(metadata.num_row_groups), range(3)))
    return address, len(file_bytes), data_end


def test_pages_beyond_the_bound_are_not_resident_after_the_read(parquet_file, empty_pool, monkeypatch):
    monkeypatch.setattr(file_pages, "KEPT_FILE_PAGE_BYTES", 0)
    address, size, data_end = _read_everything(*parquet_file)
    # What stays is at most the footer's pages past the column chunks (never read here) and the page the
    # first chunk shares with the magic number.
    assert _resident_bytes_of_mapping(address) <= size - data_end + 2 * PAGE
    assert file_pages.kept_page_bytes() == 0


def test_pages_within_the_bound_stay_until_the_process_is_idle(parquet_file, empty_pool):
    address, size, data_end = _read_everything(*parquet_file)
    assert _resident_bytes_of_mapping(address) >= data_end - 2 * PAGE  # kept: the next read maps nothing again
    assert data_end - PAGE <= file_pages.kept_page_bytes() <= data_end + 12 * PAGE
    idle_memory.release_idle_memory()
    assert file_pages.kept_page_bytes() == 0
    assert _resident_bytes_of_mapping(address) <= size - data_end + 2 * PAGE


def test_the_least_recently_read_chunks_leave_first(empty_pool, monkeypatch):
    mapped = mmap.mmap(-1, 16 * PAGE)
    monkeypatch.setattr(file_pages, "KEPT_FILE_PAGE_BYTES", 4 * PAGE)
    file_pages.read_chunks(mapped, [(0, 2 * PAGE), (4 * PAGE, 2 * PAGE)])
    file_pages.read_chunks(mapped, [(0, 2 * PAGE)])  # read again: now the most recent
    file_pages.read_chunks(mapped, [(8 * PAGE + 10, PAGE)])  # widened to two pages; evicts (4p, 2p)
    kept = [(start, length) for _, start, length in file_pages._kept]
    assert kept == [(0, 2 * PAGE), (8 * PAGE, PAGE + 10)]
    assert file_pages.kept_page_bytes() == 3 * PAGE + 10
    file_pages.read_chunks(mapped, [(20 * PAGE, PAGE), (3 * PAGE, 0)])  # outside the mapping, empty: ignored
    assert file_pages.kept_page_bytes() == 3 * PAGE + 10
    mapped.close()
    file_pages.release_kept_pages(0)  # a closed mapping's chunks are forgotten without a call on it
    assert file_pages.kept_page_bytes() == 0


def test_the_pages_of_a_read_that_fails_are_handed_over_too(parquet_file, monkeypatch):
    path, _ = parquet_file
    metadata = pq.read_metadata(path)
    read = []
    monkeypatch.setattr(parquet_columns, "file_pages_read", lambda file_bytes, ranges: read.extend(ranges))
    monkeypatch.setattr(parquet_columns, "_check_page_counts", lambda *args: (_ for _ in ()).throw(OSError("bad")))
    with pytest.raises(OSError):
        read_decoded_columns(path, metadata, [0, 2], decodable_columns(metadata, ["a", "c"], []))
    assert set(read) == _chunks(metadata, (0, 2), (0, 2))
