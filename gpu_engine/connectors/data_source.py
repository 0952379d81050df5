"""Read one split at a time as Arrow record batches (Velox's ``DataSource``).

The data source for a split is chosen by the split's type, so a Task needs no
connector registry: a :class:`~gpu_engine.exec.split.ParquetSplit` names its
file and row groups, an :class:`~gpu_engine.exec.split.ArrowSplit` carries its
table. Only the requested columns are read. Batches come back on the host;
the TableScan moves them to the device.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from gpu_engine.columnar.types import is_string
from gpu_engine.exec.split import ArrowSplit, ConnectorSplit, ParquetSplit

__all__ = ["read_split"]


def read_split(split: ConnectorSplit, columns: Sequence[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Yield record batches of at most ``batch_rows`` rows holding ``columns`` of ``split``."""
    if isinstance(split, ParquetSplit):
        yield from _read_parquet(split, columns, batch_rows)
    elif isinstance(split, ArrowSplit):
        table = split.table.select(list(columns))
        yield from table.to_batches(max_chunksize=batch_rows)
    else:
        raise TypeError(f"no data source reads {type(split).__name__}")


def _read_parquet(split: ParquetSplit, columns: Sequence[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
    schema = pq.read_schema(split.path)
    strings = [c for c in columns if is_string(schema.field(c).type)]
    # Keep Parquet's dictionary pages as dictionary arrays: filters and gathers then move 4-byte codes.
    parquet_file = pq.ParquetFile(split.path, read_dictionary=strings, memory_map=True)
    row_groups = list(split.row_groups) or list(range(parquet_file.num_row_groups))
    if not columns:
        for group in row_groups:
            rows = parquet_file.metadata.row_group(group).num_rows
            for start in range(0, rows, batch_rows):
                count = min(batch_rows, rows - start)
                yield pa.record_batch([pa.nulls(count)], names=["$rows"]).select([])
        return
    yield from parquet_file.iter_batches(batch_size=batch_rows, row_groups=row_groups, columns=list(columns), use_threads=False)
