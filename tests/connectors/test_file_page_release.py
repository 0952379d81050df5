"""Pages of a Parquet file read through its mapping leave the process's resident set once the read is done.

Counted from ``/proc/self/smaps`` (the mapping's own resident pages), never from the process's total.
"""

import mmap
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.connectors import parquet_columns
from gpu_engine.connectors.parquet_columns import decodable_columns, read_decoded_columns

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(mmap, "MADV_DONTNEED"),
                                reason="counts a mapping's pages in /proc/self/smaps (Linux)")


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
def parquet_file(tmp_path):
    rng = np.random.default_rng(3)
    rows = 120_000
    values = rng.integers(-2**40, 2**40, rows)
    table = pa.table({"a": values, "b": pa.array(rng.standard_normal(rows), mask=values % 7 == 0),
                      "c": pa.array(rng.integers(0, 5, rows).astype(np.int32))})
    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path, row_group_size=30_000, compression="snappy")
    return path, table


def test_the_pages_read_are_not_resident_after_the_read(parquet_file):
    path, table = parquet_file
    metadata = pq.read_metadata(path)
    file_bytes = parquet_columns._file_bytes(path)
    address = file_bytes.__array_interface__["data"][0]
    file_bytes[::mmap.PAGESIZE].sum()  # every page mapped in, as earlier reads of the file leave it
    assert _resident_bytes_of_mapping(address) > 0
    columns = decodable_columns(metadata, ["a", "b", "c"], [])
    decoded = read_decoded_columns(path, metadata, list(range(metadata.num_row_groups)), columns)
    for name in ("a", "b", "c"):
        assert decoded[name].equals(table[name].combine_chunks())
    data_end = max(start + length for start, length in _chunks(metadata, range(metadata.num_row_groups), range(3)))
    # What stays is at most the footer's pages past the column chunks (never read here) and the page the
    # first chunk shares with the magic number.
    assert _resident_bytes_of_mapping(address) <= len(file_bytes) - data_end + 2 * mmap.PAGESIZE


def test_the_pages_of_a_read_that_fails_are_released_too(parquet_file, monkeypatch):
    path, _ = parquet_file
    metadata = pq.read_metadata(path)
    released = []
    monkeypatch.setattr(parquet_columns, "release_file_pages", lambda file_bytes, ranges: released.extend(ranges))
    monkeypatch.setattr(parquet_columns, "_check_page_counts", lambda *args: (_ for _ in ()).throw(OSError("bad")))
    with pytest.raises(OSError):
        read_decoded_columns(path, metadata, [0, 2], decodable_columns(metadata, ["a", "c"], []))
    assert set(released) == _chunks(metadata, (0, 2), (0, 2))


def test_merged_pages_align_merge_and_clip():
    page = mmap.PAGESIZE
    runs = parquet_columns._merged_pages([(page + 10, 20), (3 * page + 5, page), (page + 100, page), (0, 0),
                                          (10 * page, 5), (9 * page, 3 * page)], 9 * page + 7)
    assert runs == [(page, 100 + 2 * page - page), (3 * page, page + 5), (9 * page, 7)]
