"""Read splits as Arrow record batches, in pieces that can be decoded independently (Velox's ``DataSource``).

The data source for a split is chosen by the split's type, so a Task needs no
connector registry: a :class:`~gpu_engine.exec.split.ParquetSplit` names its
file and row groups, an :class:`~gpu_engine.exec.split.ArrowSplit` carries its
table. Only the requested columns are read. Batches come back on the host;
the TableScan moves them to the device.

A split is cut into :class:`SplitPiece` s: runs of whole Parquet row groups
(or slices of an Arrow table) holding at least ``batch_rows`` rows, the last
piece of a split holding what is left. A piece is the unit a scan decodes,
on its driver's thread or ahead of it on a prefetch thread
(:mod:`gpu_engine.connectors.split_prefetcher`), and becomes one device batch
when the scan packs its batches. Each piece opens its own file handle, so
pieces of one file decode on several threads at once; the file's footer is
parsed once per process (:func:`parquet_metadata`), not once per split.

Integer, date, decimal, float and string columns are decoded by the
engine's own page decoder (:mod:`gpu_engine.connectors.parquet_columns`),
faster than pyarrow's on TPC-H; decimals stored as integers come back as Arrow
``decimal64``, strings as ``large_string`` or per-row-group dictionaries. What
it does not decode (other codecs, encodings, types) is read with
``ParquetFile.read_row_groups``, not ``iter_batches``:
measured on the CPU at TPC-H SF1 (Q1's seven lineitem columns), it hands out
one batch per row group (53) where ``iter_batches`` cut them at batch
boundaries too (70 batches of fewer rows), and reusing the parsed footer
saves reopening costs; together the scan's time fell by about a fifth.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gpu_engine.columnar.types import is_string
from gpu_engine.connectors.parquet_columns import (
    check_row_counts, decodable_columns, dictionary_size, read_arrow_columns, read_decoded_columns, take_rows,
)
from gpu_engine.connectors.decode_pool import decode_pool, default_decode_threads
from gpu_engine.connectors.file_versions import file_version
from gpu_engine.connectors.parquet_footer import read_footer
from gpu_engine.errors import DataSourceError
from gpu_engine.exec.split import ArrowSplit, ConnectorSplit, ParquetSplit

__all__ = ["SplitPiece", "split_pieces", "read_split", "parquet_metadata", "is_host_split", "repeats_values"]


def is_host_split(split: ConnectorSplit) -> bool:
    """Return True for splits decoded on the host (Parquet files, Arrow tables), which :func:`split_pieces` reads."""
    return isinstance(split, (ParquetSplit, ArrowSplit))


@dataclass(frozen=True)
class SplitPiece:
    """Rows of one split that are decoded together: a run of row groups, or an Arrow slice.

    ``read`` may run on any thread: it opens its own file handle.
    """

    split: ConnectorSplit
    columns: tuple[str, ...]
    rows: int
    row_groups: tuple[int, ...] = ()
    start: int = 0  # first row of an Arrow slice

    def read(self, use_threads: bool = False, decode_threads: int | None = None,
             kept: np.ndarray | None = None) -> list[pa.RecordBatch]:
        """Return the piece's rows of the requested columns (``use_threads``: pyarrow decodes columns in parallel).

        The engine's page decoder runs the piece's column chunks on the process's decode pool of
        ``decode_threads`` threads (:mod:`gpu_engine.connectors.decode_pool`; None: its default, the
        machine's cores; 0: on this thread). With ``kept`` (increasing ``int32`` rows of a Parquet
        piece), only those rows come back, gathered before they become Arrow arrays
        (:func:`~gpu_engine.connectors.parquet_columns.read_decoded_columns`).
        """
        if not self.columns:  # count(*): only row counts are needed (and checked against the pages)
            if isinstance(self.split, ParquetSplit):
                check_row_counts(self.split.path, parquet_metadata(self.split.path), self.row_groups)
            return [pa.record_batch([pa.nulls(self.rows)], names=["$rows"]).select([])] if self.rows else []
        if isinstance(self.split, ArrowSplit):
            return self.split.table.select(list(self.columns)).slice(self.start, self.rows).to_batches()
        path = self.split.path
        metadata = parquet_metadata(path)
        strings, decodable = _read_plan(path, self.columns)
        pool = decode_pool(default_decode_threads() if decode_threads is None else decode_threads)
        decoded = read_decoded_columns(path, metadata, self.row_groups, decodable, pool, kept=kept)
        rest = [c for c in self.columns if c not in decoded]
        arrays: dict[str, pa.Array | pa.ChunkedArray] = dict(decoded)
        read = read_arrow_columns(path, metadata, self.row_groups, rest, strings, use_threads)
        arrays.update(read if kept is None else {name: take_rows(column, kept) for name, column in read.items()})
        chunked = [arrays[c] if isinstance(arrays[c], pa.ChunkedArray) else pa.chunked_array([arrays[c]])
                   for c in self.columns]
        return pa.Table.from_arrays(chunked, names=list(self.columns)).to_batches()


def split_pieces(split: ConnectorSplit, columns: Sequence[str], batch_rows: int) -> list[SplitPiece]:
    """Return the pieces of ``split``, in row order, each of at least ``batch_rows`` rows but the last."""
    columns = tuple(columns)
    step = max(1, batch_rows)
    if isinstance(split, ArrowSplit):
        rows = split.table.num_rows
        return [SplitPiece(split, columns, min(step, rows - start), start=start) for start in range(0, rows, step)]
    if isinstance(split, ParquetSplit):
        metadata = parquet_metadata(split.path)
        groups = list(split.row_groups) or list(range(metadata.num_row_groups))
        bad = next((group for group in groups if not 0 <= group < metadata.num_row_groups), None)
        if bad is not None:  # a split from a document or a coordinator that read another version of the file
            raise DataSourceError(f"split of {split.path} names row group {bad}; the file has "
                                  f"{metadata.num_row_groups} row group(s)")
        pieces: list[SplitPiece] = []
        run: list[int] = []
        held = 0
        for group in groups:
            rows = metadata.row_group(group).num_rows
            if rows == 0:
                continue
            run.append(group)
            held += rows
            if held >= step:
                pieces.append(SplitPiece(split, columns, held, tuple(run)))
                run, held = [], 0
        if run:
            pieces.append(SplitPiece(split, columns, held, tuple(run)))
        return pieces
    raise TypeError(f"no data source reads {type(split).__name__}")


def read_split(split: ConnectorSplit, columns: Sequence[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Yield record batches of at most ``batch_rows`` rows holding ``columns`` of ``split``, piece by piece."""
    for piece in split_pieces(split, columns, batch_rows):
        for record_batch in piece.read():
            for start in range(0, record_batch.num_rows, max(1, batch_rows)):
                yield record_batch.slice(start, batch_rows)


#: A string column stored without dictionary pages is read as dictionary codes only up to this many distinct values
#: in its first row group. Loaded A/B over 1M plain-encoded rows, CPU (the column as pyarrow's dictionary -> as
#: strings): 1K distinct values 0.84-1.13x (GROUP BY, LIKE, IN), 10K 0.65-0.80x, 100K 0.22-0.47x.
BUILT_DICTIONARY_MAX_VALUES = 4096


def repeats_values(path: str, column: str) -> bool:
    """Return True when a string column of a Parquet file is worth reading as dictionary codes.

    Why: a dictionary makes low-cardinality strings (flags, modes, types)
    4-byte codes that filters, gathers and fused kernels move cheaply, and lets
    per-value work (LIKE, comparisons) run once per distinct value. For
    mostly-distinct text (comments, names, addresses) building the dictionary
    costs more than it saves: TPC-H's ``o_comment`` decodes about twice as
    slowly as a dictionary. The footer does not say how many values are
    distinct; the first row group's dictionary page header does (read once
    per process and column: its page headers only, where decoding the row
    group cost up to 80 ms a column, 0.15-0.3 s of a fresh process's first
    TPC-H pass), and the column counts as repeating when it has at least two
    rows per distinct value. A dictionary the writer stopped using for later
    pages (it outgrew its page: the comments of TPC-H) counts as not
    repeating, as decoding found for each such TPC-H and TPC-DS column; a
    chunk without a dictionary page is decoded to count, as before, and
    repeats only while it has at most :data:`BUILT_DICTIONARY_MAX_VALUES`
    distinct values: the dictionary is then pyarrow's to build, hashing every
    row's bytes into a table that leaves the caches as it grows, where the
    engine's own decoder reads PLAIN pages as strings (~36 ms a million 11-byte
    strings here) and a grouping or join interns them once anyway
    (bench/string_keys_ab.py; bench/results/2026-11-29-strkeys2-s54.md).
    """
    size, modified_ns = file_version(path)
    return _repeats_values(path, size, modified_ns, column)


@lru_cache(maxsize=1024)
def _repeats_values(path: str, size: int, modified_ns: int, column: str) -> bool:
    metadata = parquet_metadata(path)
    if metadata.num_row_groups == 0:
        return True
    dictionary = dictionary_size(path, metadata, 0, column)
    if dictionary is not None:
        distinct, covers_every_page = dictionary
        # A dictionary that outgrew its page (the writer went on in PLAIN pages) holds mostly-distinct text.
        return covers_every_page and distinct * 2 <= max(1, metadata.row_group(0).num_rows)
    sample = read_arrow_columns(path, metadata, [0], [column], [column])[column]
    if not pa.types.is_dictionary(sample.type):  # pages pyarrow makes no dictionary of (delta-encoded strings)
        return False
    distinct = sum(len(chunk.dictionary) for chunk in sample.chunks)
    return distinct * 2 <= max(1, len(sample)) and distinct <= BUILT_DICTIONARY_MAX_VALUES


def _read_plan(path: str, columns: tuple[str, ...]) -> tuple[list[str], dict[str, pa.DataType]]:
    """Return the string columns read as dictionaries and the columns the engine's decoder reads, per file."""
    size, modified_ns = file_version(path)
    return _cached_read_plan(path, size, modified_ns, columns)


@lru_cache(maxsize=1024)
def _cached_read_plan(path: str, size: int, modified_ns: int,
                      columns: tuple[str, ...]) -> tuple[list[str], dict[str, pa.DataType]]:
    metadata = parquet_metadata(path)
    schema = metadata.schema.to_arrow_schema()
    # Keep Parquet's dictionary pages as dictionary arrays: filters and gathers then move 4-byte codes.
    strings = [c for c in columns if is_string(schema.field(c).type) and repeats_values(path, c)]
    return strings, decodable_columns(metadata, columns, strings)


def parquet_metadata(path: str) -> pq.FileMetaData:
    """Return a Parquet file's parsed footer, read once per process while the file is unchanged.

    Why: every split and piece of a file needs it, and parsing a TPC-H
    lineitem footer on each of 18 splits cost ~30 ms of a 200 ms SF1 scan.
    The key holds the file's size and modification time, so a rewritten file
    is read again. The engine's footer reader checks the footer first
    (:func:`~gpu_engine.connectors.parquet_footer.read_footer`): pyarrow
    trusts it, and a footer that contradicts itself or the file's size
    aborted the process or made it allocate terabytes.

    Raises
    ------
    DataSourceError
        For a file that is not Parquet or whose footer is inconsistent, naming the file.
    """
    footer = read_footer(path)
    return _parquet_metadata(footer.path, footer.size, footer.modified_ns)


@lru_cache(maxsize=256)
def _parquet_metadata(path: str, size: int, modified_ns: int) -> pq.FileMetaData:
    try:
        metadata = pq.read_metadata(path)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as exc:  # what the engine's reader leaves to pyarrow: a schema it cannot
        raise DataSourceError(f"cannot read {path} as Parquet: {exc}") from None  # convert, a bad ARROW:schema
    status = os.stat(path)
    if (status.st_size, status.st_mtime_ns) != (size, modified_ns):  # rewritten since its footer was checked
        raise DataSourceError(f"{path} changed while it was being read; run the query again")
    return metadata
