"""Read Parquet's fixed-width columns by decoding their compressed pages on the device.

Why: on a GPU the host decoder (:mod:`gpu_engine.connectors.parquet_columns`)
is the cold path's bottleneck: a few host cores decode and pack while the GPU
waits (issue 32). Here a column's compressed chunks are staged once, copied to
the device once, and decoded there by :mod:`gpu_engine.kernels.parquet_device`
(Snappy, levels, dictionary codes, PLAIN values) into the engine's device
column buffers: three kernel launches and one host sync a column of a piece.

What is decoded here: INT32, INT64, FLOAT and DOUBLE columns (and the logical
types the host decoder reads from them: dates, timestamps, decimals stored as
integers, int8/int16), required or optional, PLAIN or dictionary pages, v1 or
v2, Snappy or uncompressed. Strings, other codecs and encodings, and nested
columns are left to the caller, which reads them on the host
(:func:`read_device_piece` does so), as is a chunk whose layout the kernels do
not take (:data:`~gpu_engine.kernels.parquet_pages.UNSUPPORTED`).

Corruption is an error, never a fall back, as on the host: the page statuses
are read back once per column and the first bad page is named exactly as the
host decoder names it (file, column, row group, page and its byte).

Which scans read through here is the connector's choice
(:func:`~gpu_engine.connectors.cudf_interop.resolve_parquet_reader`:
``parquet_reader="device"``, the default on ``cuda`` without cuDF); operators
do not know.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.types import normalize_type, physical_dtype
from gpu_engine.connectors.parquet_columns import (
    _PHYSICAL, STRINGS, DICTIONARY_STRINGS, _check_page_counts, _chunk_layout, _corrupt, _file_bytes,
)
from gpu_engine.device import Device
from gpu_engine.kernels.parquet_device import decode_pages, first_failure, new_page_table, plan_chunk
from gpu_engine.kernels.parquet_pages import DECODED, UNSUPPORTED

__all__ = ["read_device_columns", "read_device_piece"]


def read_device_columns(path: str, metadata: pq.FileMetaData, row_groups: Sequence[int],
                        columns: dict[str, pa.DataType], device: Device) -> dict[str, Column]:
    """Decode the fixed-width ``columns`` (from :func:`~gpu_engine.connectors.parquet_columns.decodable_columns`) on ``device``.

    Returns the device columns decoded; a column missing from the result (a string, or a layout the
    kernels do not take in some row group) is the caller's to read on the host.

    Raises
    ------
    DataSourceError
        When a chunk's bytes contradict the footer or themselves, naming the column, row group and page.
    """
    decoded: dict[str, Column] = {}
    fixed = {name: arrow_type for name, arrow_type in columns.items() if arrow_type not in (STRINGS, DICTIONARY_STRINGS)}
    if not fixed:
        return decoded
    file_bytes = _file_bytes(path)
    layout = _chunk_layout(path, metadata)
    groups = np.asarray(row_groups, dtype=np.int64)
    counts = layout.rows[groups]
    rows = int(counts.sum())
    for name, arrow_type in fixed.items():
        index = layout.leaves[name]
        codecs = layout.codecs[groups, index]
        if (codecs < 0).any():
            continue
        _check_page_counts(path, layout, groups, name)  # as the host decoder does first: the same errors, in order
        column = _decode_column(path, name, file_bytes, layout, index, groups, codecs, counts, rows, arrow_type,
                                device)
        if column is not None:
            decoded[name] = column
    return decoded


def _decode_column(path, name, file_bytes, layout, index, groups, codecs, counts, rows, arrow_type, device):
    dtype = np.dtype(_PHYSICAL[layout.physical[index]])
    max_definition = layout.max_definition[index]
    starts, lengths = layout.starts[groups, index], layout.lengths[groups, index]
    # Stage the compressed chunks back to back, plan their pages, and copy the bytes to the device once.
    staged = np.empty(int(lengths.sum()), np.uint8)
    table = new_page_table(4 * len(groups))
    count = stage = row = data = 0
    chunk_errors = []
    for chunk, (start, length, codec, chunk_rows) in enumerate(zip(starts.tolist(), lengths.tolist(),
                                                                  codecs.tolist(), counts.tolist())):
        staged[stage:stage + length] = file_bytes[start:start + length]
        status, page, at, table, count, data = plan_chunk(file_bytes, start, length, codec, max_definition,
                                                          chunk_rows, dtype.itemsize, chunk, stage, row, data,
                                                          table, count)
        if status == UNSUPPORTED:
            return None
        chunk_errors.append((status, page, at))
        stage += length
        row += chunk_rows
    values, valid, status = decode_pages(device, device.asarray(staged), table[:count], rows, dtype.itemsize, dtype,
                                         max_definition, data)
    failure = first_failure(table[:count], status, chunk_errors)
    if failure is not None:
        chunk, error, page, at = failure
        raise _corrupt(path, name, int(groups[chunk]), error, page, at)
    logical = normalize_type(arrow_type)
    target = physical_dtype(logical)
    if values.dtype != target:  # int8/int16 stored as INT32, decimals stored as INT32
        values = values.astype(target)
    validity = None
    if max_definition:
        present = int(status[:, 1].sum()) if status.shape[0] else 0
        if present < rows:
            validity = valid.view(device.xp.bool_)
    return Column(logical, values, validity)


def read_device_piece(piece, device: Device) -> Batch:
    """Return a Parquet split piece's columns as one device batch, fixed-width columns decoded on the device.

    The other columns are read on the host as :meth:`~gpu_engine.connectors.data_source.SplitPiece.read`
    reads them and copied.
    """
    from gpu_engine.connectors.data_source import _read_plan, parquet_metadata

    path = piece.split.path
    metadata = parquet_metadata(path)
    _, decodable = _read_plan(path, piece.columns)
    on_device = read_device_columns(path, metadata, piece.row_groups, decodable, device)
    rest = tuple(c for c in piece.columns if c not in on_device)
    host: dict[str, Column] = {}
    if rest:
        table = pa.Table.from_batches(type(piece)(piece.split, rest, piece.rows, piece.row_groups).read())
        host = {name: Column.from_arrow(table.column(name), device) for name in rest}
    columns = tuple(on_device[c] if c in on_device else host[c] for c in piece.columns)
    return Batch(tuple(piece.columns), columns, device, None, piece.rows)
