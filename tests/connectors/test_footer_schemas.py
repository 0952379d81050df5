"""A registered table's splits convert each file version's footer schema to Arrow once (registered_table)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.connectors import registered_table
from gpu_engine.connectors.registered_table import register_source
from gpu_engine.errors import DataSourceError


def test_the_schema_of_a_file_version_is_converted_once_and_a_rewrite_is_seen(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}), path)
    table = register_source("t", str(path))
    first = registered_table._file_schema("t", str(path))
    assert table.splits() and registered_table._file_schema("t", str(path)) is first  # kept, not converted again
    assert first.names == ["a", "b"]
    pq.write_table(pa.table({"a": ["now text"], "b": ["w"]}), path)  # a new version: its own footer and schema
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a new mtime even on coarse clocks
    assert registered_table._file_schema("t", str(path)) is not first
    with pytest.raises(DataSourceError, match="'a'"):
        table.splits()
