"""Whether a string column repeats its values is read from its dictionary page header, not by decoding it.

``data_source.repeats_values`` decides, once per process and column, whether a Parquet string column is
read as dictionary codes. It decoded the file's first row group to count distinct values (up to 80 ms a
column, a fresh process's first TPC-H pass paid 0.15-0.3 s of it); the dictionary page's header holds
that count. A dictionary the writer stopped using (it outgrew its page: PLAIN pages follow) counts as
not repeating without decoding; a chunk without a dictionary page is still decoded. Elsewhere every
answer equals the decoded count's (and on all 522 string columns of TPC-H and TPC-DS at SF 0.01, 0.1
and 1 the answers are the decoded ones).
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
_FILES = {  # name -> (writer options, the columns whose dictionary outgrew its page, those with no dictionary)
    "dictionary": ({}, set(), set()),
    "row groups": ({"row_group_size": 700}, set(), set()),
    # The writer falls back to PLAIN pages once a dictionary passes 256 bytes: not the 3-value column's.
    "plain fallback": ({"dictionary_pagesize_limit": 256, "data_page_size": 512}, {"distinct", "half"}, set()),
    "no dictionary": ({"use_dictionary": False}, set(), set(_COLUMNS)),
}


def _decoded_answer(path: str, column: str) -> bool:
    """Return the answer of decoding row group 0 (the rule: at least two rows per distinct value)."""
    sample = pq.ParquetFile(path, read_dictionary=[column]).read_row_group(0, columns=[column])[column]
    if not pa.types.is_dictionary(sample.type):
        return False
    distinct = sum(len(chunk.dictionary) for chunk in sample.chunks)
    return distinct * 2 <= max(1, len(sample)) and distinct <= 4096


@pytest.mark.parametrize("file", list(_FILES))
def test_a_string_column_repeats_as_decoding_says_reading_page_headers_only(tmp_path, monkeypatch, file):
    from gpu_engine.connectors import data_source

    options, outgrown, decoded = _FILES[file]
    path = str(tmp_path / "strings.parquet")
    pq.write_table(pa.table({name: pa.array(values, pa.string()) for name, values in _COLUMNS.items()}), path,
                   **options)
    reads = []
    read = data_source.read_arrow_columns
    counted = lambda *a, **k: reads.extend(a[3]) or read(*a, **k)  # noqa: E731
    monkeypatch.setattr(data_source, "read_arrow_columns", counted)
    for column in _COLUMNS:
        expected = False if column in outgrown else _decoded_answer(path, column)
        assert data_source.repeats_values(path, column) == expected, column
    # Row group 0 decoded only where its dictionary page does not count the distinct values.
    assert set(reads) == decoded and len(reads) == len(decoded), reads  # reads only where no dictionary page is


def test_the_dictionary_page_counts_the_distinct_values_of_its_row_group(tmp_path):
    from gpu_engine.connectors.data_source import parquet_metadata
    from gpu_engine.connectors.parquet_columns import dictionary_size

    path = str(tmp_path / "groups.parquet")
    pq.write_table(pa.table({"s": pa.array(_COLUMNS["few"][:700] + _COLUMNS["half"][:700]),
                             "n": pa.array(range(1400))}), path, row_group_size=700)
    metadata = parquet_metadata(path)
    assert [dictionary_size(path, metadata, group, "s") for group in range(2)] == [(3, True), (350, True)]
    assert dictionary_size(path, metadata, 2, "s") is None and dictionary_size(path, metadata, 0, "absent") is None
    outgrown = str(tmp_path / "outgrown.parquet")
    pq.write_table(pa.table({"s": pa.array(_COLUMNS["distinct"])}), outgrown, dictionary_pagesize_limit=256)
    values, covers_every_page = dictionary_size(outgrown, parquet_metadata(outgrown), 0, "s")
    assert 0 < values < ROWS and not covers_every_page


def test_a_plain_stored_column_of_many_repeating_values_is_read_as_strings(tmp_path):
    """Without dictionary pages, 5,000 values 4 rows each are read as strings, not as a dictionary pyarrow builds
    (hashing every row: 0.22-0.47x CPU at 100K values a million rows, bench/string_keys_ab.py); answers as DuckDB's,
    NULLs, empty and non-ASCII strings among the keys. Fails before: the column counted as repeating."""
    import duckdb

    from gpu_engine import Session
    from gpu_engine.connectors import data_source

    keys = [None, "", "ünï-ß", "日本"] + [f"key-{i % 4996:05d}" for i in range(19996)]
    path = str(tmp_path / "plain.parquet")
    pq.write_table(pa.table({"k": pa.array(keys, pa.string()), "v": pa.array(range(len(keys)), pa.int64())}), path,
                   use_dictionary=False)
    assert data_source.BUILT_DICTIONARY_MAX_VALUES < 5000 < len(keys) // 2
    assert not data_source.repeats_values(path, "k")
    assert data_source._read_plan(path, ("k", "v"))[1]["k"] == pa.large_string()
    session = Session(device="cpu", drivers=2, compile_mode="lowest")
    session.register("t", path)
    sql = "SELECT k, count(*) AS c, sum(v) AS s FROM t GROUP BY k"
    got = sorted(session.sql(sql).to_pylist(), key=lambda r: (r["k"] is None, r["k"] or ""))
    expected = duckdb.sql(sql.replace("FROM t", f"FROM read_parquet('{path}')")).fetchall()
    assert [tuple(r.values()) for r in got] == sorted(expected, key=lambda r: (r[0] is None, r[0] or ""))
