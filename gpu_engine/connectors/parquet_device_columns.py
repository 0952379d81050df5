"""Read Parquet's fixed-width columns by decoding their compressed pages on the device.

Why: on a GPU the host decoder (:mod:`gpu_engine.connectors.parquet_columns`)
is the cold path's bottleneck: a few host cores decode and pack while the GPU
waits (issue 32). Here a column's compressed chunks are staged, copied to the
device once (with the piece's other buffers, through the scan's pinned,
asynchronous copier) and decoded there by
:mod:`gpu_engine.kernels.parquet_device` (Snappy, levels, dictionary codes,
PLAIN values) into the engine's device column buffers: three kernel launches
a column, and one host sync a piece for all its columns' page statuses.

What is decoded here: INT32, INT64, FLOAT and DOUBLE columns (and the logical
types the host decoder reads from them: dates, timestamps, decimals stored as
integers, int8/int16), required or optional, PLAIN or dictionary pages, v1 or
v2, Snappy or uncompressed. Strings, other codecs and encodings, and nested
columns are read on the host as before (:class:`DevicePiece` carries them
decoded), as is a column whose layout the kernels do not take in some chunk
(:data:`~gpu_engine.kernels.parquet_pages.UNSUPPORTED`).

The work is split as the scan splits it: :func:`prepare_device_piece` is the
host part (page headers, staging, the host-read columns), thread-safe, run on
the scan's prefetch threads; :meth:`DevicePiece.to_batch` is the device part,
on the driver's thread and stream.

Corruption is an error, never a fall back, as on the host: the first bad page
is named exactly as the host decoder names it (file, column, row group, page
and its byte).

Which scans read through here is the connector's choice
(:func:`~gpu_engine.connectors.cudf_interop.resolve_parquet_reader`:
``parquet_reader="device"``, the default on ``cuda`` without cuDF); operators
do not know which device decodes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.transfers import HostRun, HostToDeviceCopier, array_buffer, prepare_run
from gpu_engine.columnar.types import normalize_type, physical_dtype
from gpu_engine.connectors.parquet_columns import (
    _PHYSICAL, DICTIONARY_STRINGS, STRINGS, _chunk_layout, _corrupt, _file_bytes, file_pages_read,
)
from gpu_engine.connectors.runtime_filters import filter_record_batches, select_rows
from gpu_engine.device import Device
from gpu_engine.exec.dynamic_filters import JoinKeyFilter
from gpu_engine.kernels.parquet_device import (
    data_pages_of, decode_pages, dictionary_encoded, first_failure, new_page_table, plan_chunk,
)
from gpu_engine.kernels.parquet_pages import COUNTS_ONLY, DECODED, UNSUPPORTED

__all__ = ["ColumnPages", "DevicePiece", "plan_device_columns", "decode_device_columns", "read_device_columns",
           "prepare_device_piece"]


@dataclass(frozen=True)
class ColumnPages:
    """One column of a piece, planned for the device: its staged compressed chunks and their page table."""

    path: str
    name: str
    groups: tuple[int, ...]  # the row groups, in the order their chunks are staged
    arrow_type: pa.DataType
    dtype: np.dtype  # the physical values' dtype
    max_definition: int
    rows: int
    staged: np.ndarray  # uint8: the chunks' bytes, back to back
    table: np.ndarray  # int64 (pages, FIELDS)
    page_bytes: int
    chunk_errors: tuple[tuple[int, int, int], ...]  # per chunk, what plan_chunk found in its headers

    @property
    def pages(self) -> int:
        return int(self.table.shape[0])

    def host_arrays(self) -> list[np.ndarray]:
        """Return what the device needs, in the order :func:`decode_device_columns` takes it."""
        return [self.staged, self.table, data_pages_of(self.table)]


def plan_device_columns(path: str, metadata: pq.FileMetaData, row_groups: Sequence[int],
                        columns: dict[str, pa.DataType]) -> dict[str, ColumnPages]:
    """Plan the fixed-width ``columns`` (from :func:`~gpu_engine.connectors.parquet_columns.decodable_columns`) for the device.

    Host work only (thread-safe). A column missing from the result (a string, or a layout the
    kernels do not take in some row group) is the caller's to read on the host.

    Raises
    ------
    DataSourceError
        When a chunk's page headers contradict the footer, as the host decoder raises it first.
    """
    planned: dict[str, ColumnPages] = {}
    fixed = {name: arrow_type for name, arrow_type in columns.items() if arrow_type not in (STRINGS, DICTIONARY_STRINGS)}
    if not fixed:
        return planned
    file_bytes = _file_bytes(path)
    layout = _chunk_layout(path, metadata)
    groups = np.asarray(row_groups, dtype=np.int64)
    try:
        _plan_columns(path, file_bytes, layout, groups, fixed, planned)
    finally:  # the chunks were copied out (or their headers checked): the bounded pool keeps or drops their pages
        file_pages_read(file_bytes, [(int(layout.starts[g, layout.leaves[name]]),
                                      int(layout.lengths[g, layout.leaves[name]]))
                                     for name in fixed for g in groups.tolist()])
    return planned


def _plan_columns(path: str, file_bytes: np.ndarray, layout, groups: np.ndarray, fixed: dict[str, pa.DataType],
                  planned: dict[str, ColumnPages]) -> None:
    counts = layout.rows[groups]
    for name, arrow_type in fixed.items():
        index = layout.leaves[name]
        codecs = layout.codecs[groups, index]
        if (codecs < 0).any():
            continue
        dtype = np.dtype(_PHYSICAL[layout.physical[index]])
        max_definition = layout.max_definition[index]
        starts, lengths = layout.starts[groups, index], layout.lengths[groups, index]
        staged = np.empty(int(lengths.sum()), np.uint8)
        table = new_page_table(4 * len(groups))
        count = stage = row = data = 0
        chunk_errors = []
        planning = True
        # One walk of each chunk's headers: the host decoder's count check (its first error, in row group order)
        # and, until a chunk's layout is one the kernels do not take, the page table.
        for chunk, (group, start, length, codec, rows) in enumerate(zip(groups.tolist(), starts.tolist(),
                                                                        lengths.tolist(), codecs.tolist(),
                                                                        counts.tolist())):
            walked = plan_chunk(file_bytes, start, length, codec if planning else COUNTS_ONLY, max_definition, rows,
                                dtype.itemsize, chunk, stage, row, data, table, count)
            status, page, at, table, count, data, counts_status, counts_page, counts_at = walked
            if layout.flat[index] and counts_status != DECODED:
                raise _corrupt(path, name, group, counts_status, counts_page, counts_at)
            if not planning or status == UNSUPPORTED:
                planning = False
                continue
            staged[stage:stage + length] = file_bytes[start:start + length]
            chunk_errors.append((int(status), int(page), int(at)))
            stage += length
            row += rows
        if planning:
            planned[name] = ColumnPages(path, name, tuple(groups.tolist()), arrow_type, dtype, max_definition, row,
                                        staged, np.ascontiguousarray(table[:count]), int(data), tuple(chunk_errors))


def decode_device_columns(device: Device, planned: Sequence[ColumnPages], arrays: Sequence[Any]) -> list[Column]:
    """Decode planned columns on ``device`` from their arrays (``host_arrays`` of each, on the device, in order).

    Three launches a column; the page statuses of all the columns are read back in one host sync.

    Raises
    ------
    DataSourceError
        Naming the first bad page of the first bad column, as the host decoder would.
    """
    xp = device.xp
    total = sum(column.pages for column in planned)
    status = xp.zeros((total, 3), dtype=xp.int64)
    decoded = []
    first = 0
    for k, column in enumerate(planned):
        staged, table, data_pages = arrays[3 * k:3 * k + 3]
        values, valid = decode_pages(device, staged, table, data_pages, status[first:first + column.pages],
                                     column.rows, column.dtype.itemsize, column.dtype, column.max_definition,
                                     column.page_bytes, dictionary_encoded(column.table))
        decoded.append((values, valid))
        first += column.pages
    statuses = device.to_host(status) if total else np.zeros((0, 3), np.int64)
    columns = []
    first = 0
    for column, (values, valid) in zip(planned, decoded):
        pages = statuses[first:first + column.pages]
        first += column.pages
        failure = first_failure(column.table, pages, list(column.chunk_errors))
        if failure is not None:
            chunk, error, page, at = failure
            raise _corrupt(column.path, column.name, column.groups[chunk], error, page, at)
        logical = normalize_type(column.arrow_type)
        target = physical_dtype(logical)
        if values.dtype != target:  # int8/int16 and decimals stored as INT32
            values = values.astype(target)
        validity = None
        if column.max_definition and int(pages[:, 1].sum()) < column.rows:
            validity = valid.view(xp.bool_)
        columns.append(Column(logical, values, validity))
    return columns


def read_device_columns(path: str, metadata: pq.FileMetaData, row_groups: Sequence[int],
                        columns: dict[str, pa.DataType], device: Device) -> dict[str, Column]:
    """Decode the fixed-width ``columns`` of ``row_groups`` on ``device``; return those decoded (see :func:`plan_device_columns`).

    Raises
    ------
    DataSourceError
        When a chunk's bytes contradict the footer or themselves, naming the column, row group and page.
    """
    planned = plan_device_columns(path, metadata, row_groups, columns)
    arrays = [device.asarray(array) for column in planned.values() for array in column.host_arrays()]
    return dict(zip(planned, decode_device_columns(device, list(planned.values()), arrays)))


@dataclass(frozen=True)
class DevicePiece:
    """A split piece made ready on the host: its device columns planned, its other columns decoded there.

    With join-key filters (:func:`prepare_device_piece`), ``selection`` holds the rows of the piece they kept:
    the host columns are cut to them already, the device columns are decoded whole and read through it.
    """

    names: tuple[str, ...]
    rows: int
    planned: tuple[ColumnPages, ...]
    host: HostRun | None  # the columns read on the host, converted and planned for the copy
    selection: np.ndarray | None = None  # int32 rows the scan's join-key filters kept (None: every row)
    largest_group_rows: int = 0  # rows of the piece's largest row group
    filter_seconds: float = 0.0  # spent testing the rows with the join-key filters (and cutting the host columns)

    @property
    def kept_rows(self) -> int:
        """Return the rows the batch of this piece presents (after its join-key filters)."""
        return self.rows if self.selection is None else int(self.selection.shape[0])

    def to_batch(self, device: Device, copier: HostToDeviceCopier) -> Batch:
        """Copy the piece to ``device`` in one packing (compressed chunks, page tables, host columns and the rows
        kept), decode, check.

        A filtered piece's batch reads its device columns through their own maps (the rows kept): call
        :meth:`~gpu_engine.columnar.batch.Batch.materialize` (or concatenate it) before handing it on.
        """
        buffers = [array_buffer(array) for column in self.planned for array in column.host_arrays()]
        host_buffers = self.host.buffers() if self.host is not None else []
        kept = [array_buffer(self.selection)] if self.selection is not None else []
        arrays = copier.upload_buffers(buffers + host_buffers + kept)
        decoded = decode_device_columns(device, self.planned, arrays[:len(buffers)])
        by_name = {column.name: result for column, result in zip(self.planned, decoded)}
        if self.host is not None:
            host_batch = self.host.build(arrays[len(buffers):len(buffers) + len(host_buffers)], device)
            by_name.update(zip(host_batch.names, host_batch.columns))
        columns = tuple(by_name[name] for name in self.names)
        if self.selection is None:
            return Batch(self.names, columns, device, None, self.rows)
        rows = arrays[-1]
        maps = tuple(rows if any(column.name == name for column in self.planned) else None for name in self.names)
        return Batch(self.names, columns, device, None, self.kept_rows, maps)


def prepare_device_piece(piece: Any, filters: Sequence[JoinKeyFilter] = ()) -> DevicePiece:
    """Plan a Parquet split piece's device columns and read its others on the host (thread-safe: no device work).

    A column one of the join-key ``filters`` tests is read on the host, where the filter tests it (the same
    test as a host-decoded piece's, :func:`~gpu_engine.connectors.runtime_filters.select_rows`): the host
    columns are cut to the rows kept before they are copied, and the piece's ``selection`` says which rows of
    its device-decoded columns to keep. Why: rows no build key can match were decoded, copied and carried up
    to the join on a GPU, where the host path drops them in the scan.

    Raises
    ------
    DataSourceError
        As :meth:`~gpu_engine.connectors.data_source.SplitPiece.read` raises it, for the host's part.
    """
    from gpu_engine.connectors.data_source import _read_plan, parquet_metadata

    path = piece.split.path
    metadata = parquet_metadata(path)
    _, decodable = _read_plan(path, piece.columns)
    tested = {key_filter.column for key_filter in filters}
    planned = plan_device_columns(path, metadata, piece.row_groups,
                                  {name: arrow_type for name, arrow_type in decodable.items() if name not in tested})
    rest = tuple(name for name in piece.columns if name not in planned)
    largest = max((metadata.row_group(group).num_rows for group in piece.row_groups), default=piece.rows)
    host = selection = None
    filtering = 0.0
    if rest:  # (a piece holds rows: split_pieces leaves empty row groups out)
        record_batches = [b for b in type(piece)(piece.split, rest, piece.rows, piece.row_groups).read() if b.num_rows]
        if filters:
            began = time.perf_counter()
            selections = [select_rows(b, filters) for b in record_batches]
            if any(rows is not None for rows in selections):
                starts = np.cumsum([0] + [b.num_rows for b in record_batches[:-1]])
                selection = np.concatenate([np.arange(b.num_rows, dtype=np.int32) + start if rows is None else
                                            rows + np.int32(start)
                                            for b, rows, start in zip(record_batches, selections, starts.tolist())]
                                           ).astype(np.int32, copy=False)
                record_batches = filter_record_batches(record_batches, selections)
            filtering = time.perf_counter() - began
        if record_batches:
            host = prepare_run(record_batches)
    return DevicePiece(tuple(piece.columns), piece.rows, tuple(planned.values()), host, selection, largest, filtering)
