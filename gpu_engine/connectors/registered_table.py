"""Describe a table registered in a Session and cut it into splits.

A Parquet table is a file or a directory of files; each split is one file and
a run of its row groups. An in-memory ``pyarrow.Table`` is cut into slices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gpu_engine.columnar.types import normalize_type
from gpu_engine.connectors.data_source import parquet_metadata
from gpu_engine.exec.split import ArrowSplit, ConnectorSplit, ParquetSplit

__all__ = ["RegisteredTable", "register_source", "DEFAULT_SPLIT_ROWS"]

#: Rows per split: small enough that a few drivers share even a 0.1-scale
#: lineitem evenly (splits are handed out one at a time, so drivers that finish
#: early take more), large enough that a split's fixed costs stay negligible.
DEFAULT_SPLIT_ROWS = 1 << 18


@dataclass(frozen=True)
class RegisteredTable:
    """A named table: its engine-level schema and how to enumerate its splits."""

    name: str
    schema: pa.Schema
    files: tuple[str, ...] = ()
    table: pa.Table | None = field(default=None, compare=False, repr=False)
    split_rows: int = DEFAULT_SPLIT_ROWS

    def splits(self) -> list[ConnectorSplit]:
        """Return the splits covering the whole table."""
        if self.table is not None:
            rows = self.table.num_rows
            step = max(1, self.split_rows)
            return [ArrowSplit(self.table.slice(start, step)) for start in range(0, rows, step)] or [ArrowSplit(self.table.slice(0, 0))]
        out: list[ConnectorSplit] = []
        for path in self.files:
            metadata = parquet_metadata(path)
            group, rows, first = 0, 0, 0
            for group in range(metadata.num_row_groups):
                rows += metadata.row_group(group).num_rows
                if rows >= self.split_rows:
                    out.append(ParquetSplit(path, tuple(range(first, group + 1))))
                    first, rows = group + 1, 0
            if first < metadata.num_row_groups:
                out.append(ParquetSplit(path, tuple(range(first, metadata.num_row_groups))))
        return out


def _engine_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, normalize_type(f.type)) for f in schema])


def register_source(name: str, source, split_rows: int | None = None) -> RegisteredTable:
    """Describe ``source`` (a Parquet file or directory, or a ``pyarrow.Table``) as a table."""
    if isinstance(source, pa.RecordBatch):
        source = pa.Table.from_batches([source])
    if isinstance(source, pa.Table):
        rows = split_rows or max(1, min(DEFAULT_SPLIT_ROWS, source.num_rows))
        return RegisteredTable(name, _engine_schema(source.schema), (), source, rows)
    path = Path(source)
    if path.is_dir():
        files = tuple(str(p) for p in sorted(path.rglob("*.parquet")))
        if not files:
            raise FileNotFoundError(f"table {name!r}: no .parquet files under {path}")
    elif path.is_file():
        files = (str(path),)
    else:
        raise FileNotFoundError(f"table {name!r}: {path} is neither a Parquet file nor a directory")
    schema = pq.read_schema(files[0])
    return RegisteredTable(name, _engine_schema(schema), files, None, split_rows or DEFAULT_SPLIT_ROWS)
