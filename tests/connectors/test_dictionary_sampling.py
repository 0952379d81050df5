"""Whether a string column repeats its values is read from its dictionary page header, not by decoding it.

``data_source.repeats_values`` decides, once per process and column, whether a Parquet string column is
read as dictionary codes. It decoded the file's first row group to count distinct values (5-11 ms a
column, a fresh process's first TPC-H pass paid 0.15-0.3 s of it); the dictionary page's header holds
that count. Files whose dictionary does not cover every page (the writer fell back to PLAIN) or that
have none are still decoded, and every answer equals the decoded count's.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROWS = 3000
_COLUMNS = {
    "few": [("a", "bb", "ccc", None)[i % 4] for i in range(ROWS)],
    "distinct": [f"value-{i:05d}" for i in range(ROWS)],
    "half": [f"v{i // 2}" for i in range(ROWS)],  # two rows a value: repeats, just
}
_FILES = {  # name -> (writer options, the columns whose dictionary page does not cover row group 0's pages)
    "dictionary": ({}, set()),
    "row groups": ({"row_group_size": 700}, set()),
    # The writer falls back to PLAIN pages once a dictionary passes 256 bytes: not the 3-value column's.
    "plain fallback": ({"dictionary_pagesize_limit": 256, "data_page_size": 512}, {"distinct", "half"}),
    "no dictionary": ({"use_dictionary": False}, set(_COLUMNS)),
}


def _decoded_answer(path: str, column: str) -> bool:
    """Return the answer of decoding row group 0 (the rule: at least two rows per distinct value)."""
    sample = pq.ParquetFile(path, read_dictionary=[column]).read_row_group(0, columns=[column])[column]
    if not pa.types.is_dictionary(sample.type):
        return False
    return sum(len(chunk.dictionary) for chunk in sample.chunks) * 2 <= max(1, len(sample))


@pytest.mark.parametrize("file", list(_FILES))
def test_a_string_column_repeats_as_decoding_says_reading_page_headers_only(tmp_path, monkeypatch, file):
    from gpu_engine.connectors import data_source

    options, decoded = _FILES[file]
    path = str(tmp_path / "strings.parquet")
    pq.write_table(pa.table({name: pa.array(values, pa.string()) for name, values in _COLUMNS.items()}), path,
                   **options)
    reads = []
    read = data_source.read_arrow_columns
    monkeypatch.setattr(data_source, "read_arrow_columns", lambda *a, **k: reads.extend(a[3]) or read(*a, **k))
    for column in _COLUMNS:
        assert data_source.repeats_values(path, column) == _decoded_answer(path, column), column
    # Row group 0 decoded only where its dictionary page does not count the distinct values.
    assert set(reads) == decoded and len(reads) == len(decoded), reads


def test_the_dictionary_page_counts_the_distinct_values_of_its_row_group(tmp_path):
    from gpu_engine.connectors.data_source import parquet_metadata
    from gpu_engine.connectors.parquet_columns import dictionary_size

    path = str(tmp_path / "groups.parquet")
    pq.write_table(pa.table({"s": pa.array(_COLUMNS["few"][:700] + _COLUMNS["half"][:700]),
                             "n": pa.array(range(1400))}), path, row_group_size=700)
    metadata = parquet_metadata(path)
    assert [dictionary_size(path, metadata, group, "s") for group in range(2)] == [3, 350]
    assert dictionary_size(path, metadata, 2, "s") is None and dictionary_size(path, metadata, 0, "absent") is None
