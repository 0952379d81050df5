"""Read Parquet columns with the engine's own page decoder; pyarrow reads what it does not decode.

Why: decoding Parquet was ~45% of the engine's CPU time over the 22 TPC-H
queries at SF1, and pyarrow's reader is slow on exactly the columns those
queries read most: a ``DECIMAL(15,2)`` stored as INT64 becomes a 16-byte
``decimal128`` that the engine narrows back to int64, TPC-H's strings arrive
as ``string_view`` that the engine converts, and its Snappy runs at 0.7-1.0
GB/s here. :mod:`gpu_engine.kernels.parquet_pages` decodes INT32, INT64,
FLOAT, DOUBLE and BYTE_ARRAY (string) column chunks (PLAIN or dictionary
pages, v1 or v2, Snappy or uncompressed, required or optional) without the
GIL. Measured on this project's 2-core VM, one core, TPC-H SF1 lineitem
(pyarrow → here): ``l_extendedprice`` 85-137 → 53 ms, ``l_partkey``
64 → 46 ms, ``l_quantity`` 26 → 8 ms.

Decimals stored as INT32 or INT64 come back as Arrow ``decimal64`` (the
narrowest Arrow decimal that holds them, as Arrow's own ``smallest_decimal``
reader option would make them), which the engine's columns take without a
copy. Strings come back as ``large_string`` (offsets and chars, the engine's
layout), or, for the columns the caller names, as int32 codes into each row
group's dictionary. Booleans, nested columns, other codecs and encodings are
read by pyarrow (:func:`read_arrow_columns`), column by column, so a file
mixes both freely; a chunk in a layout the decoder does not read (an encoding
it does not know, a dictionary that overflowed into PLAIN pages when codes
were asked for) sends its column to pyarrow.

Bytes that contradict the footer or themselves are an error, never a fall
back: :class:`~gpu_engine.errors.DataSourceError` names the file, column, row
group and page. Why: pyarrow's dictionary read does not check codes against
the dictionary, and it takes a page's value count on trust, so a corrupt
chunk handed to it gave NULLs, rows shifted against the other columns, or a
segfault in a kernel indexing a dictionary with its codes. Whatever pyarrow
returns is checked too before a kernel sees it: its chunks' page headers
declare the row group's rows, it returns that many rows, and its dictionary
codes lie inside their dictionaries.
"""

from __future__ import annotations

import mmap
import os
import threading
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gpu_engine.columnar.arrow_numpy import arrow_values, numpy_values
from gpu_engine.columnar.types import is_string
from gpu_engine.connectors import file_pages
from gpu_engine.connectors.file_versions import file_version
from gpu_engine.errors import DataSourceError
from gpu_engine.kernels.parquet_pages import (
    CODEC_SNAPPY, CODEC_UNCOMPRESSED, CORRUPT, DECODED, check_page_counts, decode_chunk,
    decode_strings_chunk, describe,
    dictionary_values, first_invalid_utf8, remap_codes,
)

__all__ = ["decodable_columns", "read_decoded_columns", "read_arrow_columns", "check_row_counts", "dictionary_size",
           "take_rows"]

_CODECS = {"UNCOMPRESSED": CODEC_UNCOMPRESSED, "SNAPPY": CODEC_SNAPPY}
_PHYSICAL = {"INT32": np.int32, "INT64": np.int64, "FLOAT": np.float32, "DOUBLE": np.float64}


#: The Arrow types of decoded strings: plain, or codes into each row group's dictionary.
STRINGS = pa.large_string()
DICTIONARY_STRINGS = pa.dictionary(pa.int32(), pa.large_string())


def decodable_columns(metadata: pq.FileMetaData, columns: Sequence[str],
                      dictionary_columns: Sequence[str] = ()) -> dict[str, pa.DataType]:
    """Return the requested top-level columns the page decoder reads, with the Arrow type it gives each.

    String columns named in ``dictionary_columns`` come back as dictionary arrays (one dictionary a
    row group, as Parquet stores them), other strings as ``large_string``.
    """
    schema = metadata.schema
    arrow_schema = schema.to_arrow_schema()
    leaves = {schema.column(i).path: i for i in range(len(schema))}
    decodable: dict[str, pa.DataType] = {}
    for name in columns:
        index = leaves.get(name)
        if index is None or name not in arrow_schema.names:
            continue
        leaf = schema.column(index)
        if leaf.max_repetition_level or leaf.max_definition_level > 1:
            continue
        if leaf.physical_type == "BYTE_ARRAY" and is_string(arrow_schema.field(name).type):
            decodable[name] = DICTIONARY_STRINGS if name in dictionary_columns else STRINGS
            continue
        if leaf.physical_type not in _PHYSICAL:
            continue
        arrow_type = _decoded_type(arrow_schema.field(name).type, leaf.physical_type)
        if arrow_type is not None:
            decodable[name] = arrow_type
    return decodable


def _decoded_type(arrow_type: pa.DataType, physical: str) -> pa.DataType | None:
    """Return the Arrow type a decoded column gets, or None when the decoder leaves it to pyarrow."""
    if pa.types.is_decimal(arrow_type):
        if physical in ("INT32", "INT64") and arrow_type.precision <= 18:
            return pa.decimal64(arrow_type.precision, arrow_type.scale)
        return None
    if physical == "INT32" and arrow_type in (pa.int8(), pa.int16(), pa.int32(), pa.date32()):
        return arrow_type
    if physical == "INT64" and (arrow_type == pa.int64() or pa.types.is_timestamp(arrow_type)):
        return arrow_type
    if (physical, arrow_type) in (("FLOAT", pa.float32()), ("DOUBLE", pa.float64())):
        return arrow_type
    return None


@dataclass(frozen=True)
class _ChunkLayout:
    """Where each column chunk of a file lies, as arrays (read from the footer once per file version).

    Why: reading a piece asked pyarrow's footer objects for every row group and column (``row_group(g)``,
    ``column(i)``, offsets, codec): a dozen calls a column chunk, each building Python objects while holding
    the GIL that the other drivers' Python work waits for. Indexed ``[row_group, leaf]``.
    """

    leaves: dict[str, int]
    max_definition: tuple[int, ...]
    flat: tuple[bool, ...]  # not repeated: one value (or NULL) a row
    physical: tuple[str, ...]
    starts: np.ndarray  # int64: the chunk's dictionary page, else its first data page
    lengths: np.ndarray  # int64: compressed bytes
    uncompressed: np.ndarray  # int64
    codecs: np.ndarray  # int64: CODEC_*, or -1 for a codec the decoder does not read
    rows: np.ndarray  # int64 per row group


def _chunk_layout(path: str, metadata: pq.FileMetaData) -> _ChunkLayout:
    size, modified_ns = file_version(path)
    return _cached_chunk_layout(path, size, modified_ns, metadata)


@lru_cache(maxsize=64)
def _cached_chunk_layout(path: str, size: int, modified_ns: int, metadata: pq.FileMetaData) -> _ChunkLayout:
    schema = metadata.schema
    leaves = len(schema)
    shape = (metadata.num_row_groups, leaves)
    starts, lengths, uncompressed = (np.zeros(shape, np.int64) for _ in range(3))
    codecs = np.full(shape, -1, np.int64)
    rows = np.zeros(metadata.num_row_groups, np.int64)
    for g in range(metadata.num_row_groups):
        row_group = metadata.row_group(g)
        rows[g] = row_group.num_rows
        for i in range(leaves):
            chunk = row_group.column(i)
            starts[g, i] = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            lengths[g, i] = chunk.total_compressed_size
            uncompressed[g, i] = chunk.total_uncompressed_size
            codecs[g, i] = _CODECS.get(chunk.compression, -1)
    columns = [schema.column(i) for i in range(leaves)]
    return _ChunkLayout({c.path: i for i, c in enumerate(columns)}, tuple(c.max_definition_level for c in columns),
                        tuple(c.max_repetition_level == 0 for c in columns), tuple(c.physical_type for c in columns),
                        starts, lengths, uncompressed, codecs, rows)


def _corrupt(path: str, column: str, row_group: int, status: int, page: int, at: int) -> DataSourceError:
    return DataSourceError(f"{path}: column {column!r}, row group {row_group}, page {page} (at byte {at}): "
                           f"{describe(status)}")


#: A piece whose decodable chunks hold fewer compressed bytes than this decodes on the calling thread: handing
#: chunks to the pool costs ~20-50 us each, more than decoding a few kilobytes (tests' and small tables' pieces).
PARALLEL_DECODE_MIN_BYTES = 1 << 20


def read_decoded_columns(path: str, metadata: pq.FileMetaData, row_groups: Sequence[int],
                         columns: dict[str, pa.DataType], pool: Executor | None = None,
                         parallel_min_bytes: int = PARALLEL_DECODE_MIN_BYTES,
                         kept: np.ndarray | None = None) -> dict[str, pa.Array]:
    """Decode ``columns`` (from :func:`decodable_columns`) of ``row_groups``; return those that decoded.

    A column missing from the result has a layout the decoder does not read in some row group: read it
    with :func:`read_arrow_columns`.

    With ``kept`` (increasing rows of the row groups read), only those rows are returned: a fixed-width
    column decodes only them (:func:`~gpu_engine.kernels.parquet_pages.decode_chunk` with ``wanted``: pages without
    one are skipped, values unpacked by position), a string column's chunks are cut to them
    (:func:`take_rows`). Why: when a scan's join-key filters keep few rows, the other columns' decoding
    and conversion then cost per row kept.

    With a ``pool`` (:func:`~gpu_engine.connectors.decode_pool.decode_pool`) and at least
    ``parallel_min_bytes`` of compressed chunks, each fixed-width column chunk (one row group of one
    column) and each string column is a task of its own on the pool, writing its rows in place; the
    outcome is the same as decoding them in order on this thread: chunks are judged in column, then
    row-group order, the first corrupt one raises, and a column stops at its first chunk the decoder
    does not read (it goes to pyarrow).

    Raises
    ------
    DataSourceError
        When a chunk's bytes contradict the footer or themselves, naming the column, row group and page.
    """
    if not columns:
        return {}
    file_bytes = _file_bytes(path)
    layout = _chunk_layout(path, metadata)
    groups = np.asarray(row_groups, dtype=np.int64)
    try:
        return _read_decoded_columns(path, file_bytes, layout, groups, columns, pool, parallel_min_bytes, kept)
    finally:  # the chunks' pages were read (or their headers checked): the bounded pool keeps or drops them
        _chunks_read(path, layout, groups, columns)


def _chunks_read(path: str, layout: _ChunkLayout, groups: np.ndarray, columns: Iterable[str]) -> None:
    """Hand the mapped pages of ``columns``' chunks in ``groups`` to the bounded pool (:func:`file_pages_read`)."""
    file_pages_read(_file_bytes(path), [(int(layout.starts[g, layout.leaves[name]]),
                                            int(layout.lengths[g, layout.leaves[name]]))
                                           for name in columns if name in layout.leaves for g in groups.tolist()])


def _read_decoded_columns(path: str, file_bytes: np.ndarray, layout: _ChunkLayout, groups: np.ndarray,
                          columns: dict[str, pa.DataType], pool: Executor | None, parallel_min_bytes: int,
                          kept: np.ndarray | None) -> dict[str, pa.Array]:
    counts = layout.rows[groups]
    rows = int(counts.sum())
    plans: list[tuple[str, pa.DataType, Any, list[Callable[[], Any]]]] = []  # (name, type, output, tasks)
    total_bytes = 0
    for name, arrow_type in columns.items():
        index = layout.leaves[name]
        max_definition = layout.max_definition[index]
        codecs = layout.codecs[groups, index]
        if (codecs < 0).any():
            continue
        # Before allocating for the footer's row count: a footer may declare 2^40 rows (issue 28 item 3).
        _check_page_counts(path, layout, groups, name)
        starts, lengths = layout.starts[groups, index], layout.lengths[groups, index]
        total_bytes += int(lengths.sum())
        if arrow_type in (STRINGS, DICTIONARY_STRINGS):
            as_codes = arrow_type == DICTIONARY_STRINGS
            task = partial(_read_strings, path, name, groups, file_bytes, starts, lengths,
                           layout.uncompressed[groups, index], codecs, counts, max_definition, as_codes,
                           _canonical_for(path, name) if as_codes else None)
            plans.append((name, arrow_type, None, [task]))
            continue
        size = rows if kept is None else len(kept)
        values = np.empty(size, _PHYSICAL[layout.physical[index]])
        optional = max_definition == 1
        valid = np.empty(size if optional else 0, np.uint8)
        tasks, row = [], 0
        for start, length, codec, count in zip(starts.tolist(), lengths.tolist(), codecs.tolist(), counts.tolist()):
            # The chunk's rows of the output: all of them, or (kept) those kept, with their rows in the chunk.
            low, high = (row, row + count) if kept is None else np.searchsorted(kept, [row, row + count]).tolist()
            wanted = None if kept is None else (kept[low:high] - np.int32(row)).astype(np.int32, copy=False)
            tasks.append(partial(_decode_fixed_chunk, file_bytes, start, length, codec, max_definition, count,
                                 values[low:high], valid[low:high] if optional else valid, wanted))
            row += count
        plans.append((name, arrow_type, (values, valid if optional else None), tasks))
    everything = [task for _, _, _, tasks in plans for task in tasks]
    if pool is not None and len(everything) > 1 and total_bytes >= parallel_min_bytes:
        futures = iter([pool.submit(_outcome, task) for task in everything])
        outcomes = lambda tasks: [next(futures).result() for _ in tasks]  # noqa: E731 - in submission order
    else:
        outcomes = None  # in order on this thread, each chunk only once the ones before it decoded
    decoded: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name, arrow_type, output, tasks in plans:
        results = outcomes(tasks) if outcomes is not None else None
        for position, task in enumerate(tasks):
            result, error = results[position] if results is not None else _outcome(task)
            if error is not None:
                if results is not None:
                    _drain(futures)
                raise error
            if output is None:  # a string column: its chunked array, or None when a layout is not read here
                if result is not None:
                    decoded[name] = result
                break
            status, page, at = result
            if status <= CORRUPT:
                if results is not None:
                    _drain(futures)
                raise _corrupt(path, name, int(groups[position]), status, page, at)
            if status != DECODED:  # this column goes to pyarrow (in parallel, its later chunks decoded in vain)
                break
        else:
            if output is not None:
                decoded[name] = _arrow_array(output[0], output[1], arrow_type)
    if kept is not None:
        decoded = {name: take_rows(array, kept) if isinstance(array, pa.ChunkedArray) else array
                   for name, array in decoded.items()}
    return decoded


def take_rows(column: pa.ChunkedArray, rows: np.ndarray) -> pa.ChunkedArray:
    """Return the increasing ``rows`` of ``column``, chunk by chunk (a string column's chunks keep their own
    dictionaries: no unification across row groups)."""
    chunks = []
    first = 0
    for chunk in column.chunks:
        low, high = np.searchsorted(rows, [first, first + len(chunk)])
        if high > low:
            chunks.append(chunk.take(arrow_values(rows[low:high] - first)))
        first += len(chunk)
    return pa.chunked_array(chunks, column.type)


def _decode_fixed_chunk(file_bytes: np.ndarray, start: int, length: int, codec: int, max_definition: int, count: int,
                        values: np.ndarray, valid: np.ndarray, wanted: np.ndarray | None = None) -> tuple[int, int, int]:
    """Decode one fixed-width column chunk (``wanted``: only those rows of it) into ``values``/``valid`` with this
    thread's page buffers."""
    buffers = _scratch_buffers()
    status, page, at, buffers[0], buffers[1] = decode_chunk(file_bytes, start, length, codec, max_definition, count,
                                                            values, valid, buffers[0], buffers[1], wanted)
    _release_large_scratch(buffers)
    return status, page, at


def _outcome(task: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """Run ``task``; return ``(result, None)`` or ``(None, its exception)`` (raised later, in chunk order)."""
    try:
        return task(), None
    except Exception as error:  # noqa: BLE001 - re-raised by read_decoded_columns in column order
        return None, error


def _drain(futures: Iterator[Future]) -> None:
    """Wait for the tasks not judged yet before raising: none may write into arrays after the read failed."""
    for future in futures:
        future.cancel() or future.result()


def read_arrow_columns(path: str, metadata: pq.FileMetaData, row_groups: Sequence[int], columns: Sequence[str],
                       dictionary_columns: Sequence[str] = (), use_threads: bool = False) -> dict[str, pa.ChunkedArray]:
    """Read ``columns`` of ``row_groups`` with pyarrow (strings in ``dictionary_columns`` as dictionaries), checked.

    Before pyarrow reads a column that is not repeated, its chunks' page headers must declare the
    row groups' rows (:func:`~gpu_engine.kernels.parquet_pages.check_page_counts`: pyarrow stops at
    the footer's count and shifts later rows when a page declares one value too many); after, each
    column must hold the rows asked for and its dictionary codes lie inside their dictionaries
    (pyarrow's dictionary read does not check them, and kernels index dictionaries with them).

    Raises
    ------
    DataSourceError
        When a count or a code is wrong, or pyarrow cannot read the bytes, naming the file and column.
    """
    if not columns:
        return {}
    layout = _chunk_layout(path, metadata)
    groups = np.asarray(row_groups, dtype=np.int64)
    try:
        for name in columns:
            _check_page_counts(path, layout, groups, name)
    finally:  # the page headers were read through the mapping; pyarrow maps the file on its own
        _chunks_read(path, layout, groups, columns)
    rows = int(layout.rows[groups].sum())
    as_dictionaries = [c for c in dictionary_columns if c in columns]
    try:
        try:
            table = pq.ParquetFile(path, metadata=metadata, memory_map=True, read_dictionary=as_dictionaries
                                   ).read_row_groups(list(row_groups), columns=list(columns), use_threads=use_threads)
        except (pa.ArrowException, OSError):
            if not as_dictionaries:
                raise
            # pyarrow makes no dictionary of some encodings (DELTA_LENGTH_BYTE_ARRAY, as DuckDB writes v2 strings;
            # an OSError "Not yet implemented"): read those strings plain (damage fails this read too).
            table = pq.ParquetFile(path, metadata=metadata, memory_map=True
                                   ).read_row_groups(list(row_groups), columns=list(columns), use_threads=use_threads)
    except (pa.ArrowException, OSError) as exc:  # (ArrowInvalid, and OSError for what pyarrow finds damaged)
        raise DataSourceError(f"{path}: cannot read column(s) {', '.join(map(repr, columns))} of row group(s) "
                              f"{', '.join(map(str, row_groups))}: {exc}") from None
    read = dict(zip(columns, table.columns))
    for name, column in read.items():
        if len(column) != rows:
            raise DataSourceError(f"{path}: column {name!r}: pyarrow read {len(column)} rows of row group(s) "
                                  f"{', '.join(map(str, row_groups))}, whose footer declares {rows}")
        if pa.types.is_dictionary(column.type):
            _check_codes(path, name, column, groups, layout.rows[groups])
        _check_utf8(path, name, column)
    return read


def dictionary_size(path: str, metadata: pq.FileMetaData, row_group: int, name: str) -> tuple[int, bool] | None:
    """Return the values the dictionary page of column ``name`` in ``row_group`` declares, reading page headers only,
    and whether that dictionary encodes every data page (False: the writer fell back to PLAIN pages).

    None for a chunk without a dictionary page, a repeated column or a malformed header.
    """
    layout = _chunk_layout(path, metadata)
    index = layout.leaves.get(name)
    if index is None or not layout.flat[index] or not 0 <= row_group < metadata.num_row_groups:
        return None
    values, other = dictionary_values(_file_bytes(path), int(layout.starts[row_group, index]),
                                      int(layout.lengths[row_group, index]))
    return None if values < 0 else (int(values), other == 0)


def check_row_counts(path: str, metadata: pq.FileMetaData, row_groups: Sequence[int]) -> None:
    """Check that the pages of each row group hold its declared rows (for a scan that reads no column, count(*)).

    The page headers of the first column that is not repeated are read (no values): a row group
    whose ``num_rows`` disagrees with its pages is an error here as it is when a column is read.
    """
    layout = _chunk_layout(path, metadata)
    leaf = next((i for i, flat in enumerate(layout.flat) if flat), None)
    if leaf is not None:
        name = next(path_ for path_, index in layout.leaves.items() if index == leaf)
        groups = np.asarray(row_groups, dtype=np.int64)
        try:
            _check_page_counts(path, layout, groups, name)
        finally:
            _chunks_read(path, layout, groups, [name])


def _check_page_counts(path: str, layout: _ChunkLayout, groups: np.ndarray, name: str) -> None:
    index = layout.leaves.get(name)
    if index is None or not layout.flat[index]:  # a struct, or a repeated column: values are not rows
        return
    file_bytes = _file_bytes(path)
    for group in groups.tolist():
        status, page, at = check_page_counts(file_bytes, int(layout.starts[group, index]),
                                             int(layout.lengths[group, index]), int(layout.rows[group]))
        if status != DECODED:
            raise _corrupt(path, name, group, status, page, at)


def _check_utf8(path: str, name: str, column: pa.ChunkedArray) -> None:
    """Raise DataSourceError when a string of a column pyarrow read is not UTF-8 (pyarrow's reader does not check)."""
    strings = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if not is_string(strings):
        return
    for chunk in column.chunks:
        try:
            (chunk.dictionary if pa.types.is_dictionary(column.type) else chunk).validate(full=True)
        except pa.ArrowInvalid as exc:
            raise DataSourceError(f"{path}: column {name!r}: a string is not valid UTF-8 ({exc})") from None


def _check_codes(path: str, name: str, column: pa.ChunkedArray, groups: np.ndarray, counts: np.ndarray) -> None:
    """Raise DataSourceError when a code of a dictionary column lies outside its chunk's dictionary."""
    first = 0
    for chunk in column.chunks:
        size = len(chunk.dictionary)
        bounds = pc.min_max(chunk.indices)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and (low < 0 or high >= size):
            outside = pc.or_(pc.less(chunk.indices, 0), pc.greater_equal(chunk.indices, size))
            row = first + pc.index(outside, True).as_py()
            group = int(groups[np.searchsorted(np.cumsum(counts), row, side="right")])
            raise DataSourceError(f"{path}: column {name!r}, row group {group}: a dictionary code points outside "
                                  f"the column chunk's dictionary ({size} value(s))")
        first += len(chunk)


def _read_strings(path: str, name: str, groups: np.ndarray, file_bytes: np.ndarray, starts: np.ndarray,
                  lengths: np.ndarray, size_hints: np.ndarray, codecs: np.ndarray, counts: np.ndarray,
                  max_definition: int, as_codes: bool,
                  canonical: CanonicalDictionary | None = None) -> pa.ChunkedArray | None:
    """Decode a string column's chunks (one per row group), one Arrow chunk each; None when a layout is not read here.

    With ``canonical``, each chunk's dictionary (as codes) is replaced by the column's canonical one.
    """
    chunks = []
    buffers = _scratch_buffers()
    for group, start, length, size_hint, codec, rows in zip(groups.tolist(), starts.tolist(), lengths.tolist(),
                                                            size_hints.tolist(), codecs.tolist(), counts.tolist()):
        status, page, at, codes, valid, offsets, chars, dict_offsets, dict_chars, buffers[0] = decode_strings_chunk(
            file_bytes, start, length, codec, max_definition, rows, as_codes, size_hint, buffers[0])
        _release_large_scratch(buffers)
        if status <= CORRUPT:
            raise _corrupt(path, name, group, status, page, at)
        if status != DECODED:
            return None
        if as_codes:
            bad = first_invalid_utf8(dict_offsets, dict_chars, len(dict_offsets) - 1)
        else:
            bad = first_invalid_utf8(offsets, chars, rows)
        if bad >= 0:
            raise DataSourceError(f"{path}: column {name!r}, row group {group}: "
                                  f"{'dictionary value' if as_codes else 'row'} {bad} is not valid UTF-8")
        nulls = 0 if max_definition == 0 else rows - int(np.count_nonzero(valid))
        mask = pa.py_buffer(np.packbits(valid.view(np.bool_), bitorder="little")) if nulls else None
        if as_codes:
            dictionary = pa.Array.from_buffers(STRINGS, len(dict_offsets) - 1,
                                               [None, pa.py_buffer(dict_offsets), pa.py_buffer(dict_chars)])
            if canonical is not None:
                dictionary, codes = canonical.recode(dictionary, codes, (dict_offsets.tobytes(), dict_chars.tobytes()))
            indices = pa.Array.from_buffers(pa.int32(), rows, [mask, pa.py_buffer(codes)], null_count=nulls)
            chunks.append(pa.DictionaryArray.from_arrays(indices, dictionary))
        else:
            chunks.append(pa.Array.from_buffers(STRINGS, rows, [mask, pa.py_buffer(offsets), pa.py_buffer(chars)],
                                                null_count=nulls))
    return pa.chunked_array(chunks, DICTIONARY_STRINGS if as_codes else STRINGS)


#: Dictionaries of at most this many values are made canonical per file and column (:class:`CanonicalDictionary`).
CANONICAL_DICTIONARY_MAX_VALUES = 4096


class CanonicalDictionary:
    """One dictionary for all row groups of a file's string column, while it stays small.

    Why: Parquet writers build each row group's dictionary in the order values first appear, so
    TPC-H's ``l_shipmode`` has the same 7 values in a different order in every row group. Every
    consumer that caches work by a dictionary's contents (a predicate's or a CASE's value per
    dictionary entry, a grouping key's interned ids, merged dictionaries at barriers) missed on
    every batch and redid it: Q12's partial aggregation spent ~2 ms a batch re-evaluating two CASE
    expressions over 5 values. Recoded onto one dictionary per column (the first one seen, grown by
    the values later row groups add), batches share a fingerprint.

    Recoding costs one pass over the row group's codes, in place (:func:`remap_codes`), and nothing
    when the row group's dictionary lists the canonical values in their order. Each distinct
    row-group dictionary's positions in the canonical one are kept, keyed by its bytes: the canonical
    dictionary only grows at its end, so a kept mapping stays right. (Stop 53: an ``index_in`` and an
    ``np.take`` per row group, ~165 us each under load, cost more than the consumers' hits saved --
    TPC-H q12 0.90x, q1 0.91x with the recode off.)
    """

    #: Row-group dictionaries whose mappings a column keeps (a file of more row groups, each in its own order,
    #: recodes the ones past this through ``index_in`` every time).
    KEPT_MAPPINGS = 1024

    def __init__(self):
        self._lock = threading.Lock()
        self._values: pa.Array | None = None
        #: A row-group dictionary's (offsets, chars) bytes -> its values' positions in ``_values``, None when they
        #: are ``_values``' first ones in order (no recode).
        self._mappings: dict[tuple[bytes, bytes], np.ndarray | None] = {}

    def recode(self, dictionary: pa.Array, codes: np.ndarray,
               key: tuple[bytes, bytes]) -> tuple[pa.Array, np.ndarray]:
        """Return ``(canonical dictionary, codes into it)`` for ``codes`` into ``dictionary``.

        ``codes`` (each below ``len(dictionary)``) are rewritten in place; ``key`` is ``dictionary``'s bytes.
        """
        if not 0 < len(dictionary) <= CANONICAL_DICTIONARY_MAX_VALUES or dictionary.null_count:
            return dictionary, codes  # (an all-NULL chunk's empty dictionary: its codes index nothing)
        mapping = self._mappings.get(key, False)
        if mapping is False:
            with self._lock:
                mapping = self._mapping(dictionary, key)
            if mapping is False:
                return dictionary, codes
        values = self._values  # read after the mapping: as long as the one it was made for, or grown past it
        if mapping is not None:
            remap_codes(mapping, codes)  # host decoding work, not a device kernel
        return values, codes

    def _mapping(self, dictionary: pa.Array, key: tuple[bytes, bytes]) -> np.ndarray | None | bool:
        """Return (and keep) ``dictionary``'s positions in the canonical values, growing them; False past the cap."""
        if key in self._mappings:
            return self._mappings[key]
        values = self._values
        if values is None:
            self._values = values = dictionary
        positions = pc.index_in(dictionary, value_set=values)
        if positions.null_count:
            grown = pa.concat_arrays([values, dictionary.filter(positions.is_null())])
            if len(grown) > CANONICAL_DICTIONARY_MAX_VALUES:
                return False
            self._values = values = grown
            positions = pc.index_in(dictionary, value_set=values)
        mapping = numpy_values(positions).astype(np.int32)
        if np.array_equal(mapping, np.arange(len(mapping), dtype=np.int32)):
            mapping = None
        if len(self._mappings) < self.KEPT_MAPPINGS:
            self._mappings[key] = mapping
        return mapping


_canonical_lock = threading.Lock()


@lru_cache(maxsize=256)
def _canonical(path: str, size: int, modified_ns: int, column: str) -> CanonicalDictionary:
    return CanonicalDictionary()


def _canonical_for(path: str, column: str) -> CanonicalDictionary:
    """Return the canonical dictionary of ``column`` in the file at ``path`` as it is now."""
    size, modified_ns = file_version(path)
    with _canonical_lock:  # one object per file and column, whichever thread asks first
        return _canonical(path, size, modified_ns, column)


_thread_scratch = threading.local()


#: A page buffer larger than this is not kept past the chunk that grew it (:func:`_release_large_scratch`).
KEPT_SCRATCH_MAX_BYTES = 16 << 20


def _scratch_buffers() -> list[np.ndarray]:
    """Return this thread's two page buffers (see :func:`~gpu_engine.kernels.parquet_pages.decode_chunk`).

    Kept per thread, since scans decode on several threads at once, and for the thread's life: a page
    uncompressed into fresh memory per row group page-faults its way through it every time.
    """
    buffers = getattr(_thread_scratch, "buffers", None)
    if buffers is None:
        buffers = _thread_scratch.buffers = [np.empty(0, np.uint8), np.empty(0, np.uint8)]
    return buffers


def _release_large_scratch(buffers: list[np.ndarray]) -> None:
    """Drop this thread's page buffers over :data:`KEPT_SCRATCH_MAX_BYTES` (the next chunk allocates its own).

    Why: the decode pool has a thread a core (16 on a GPU host) and each keeps its buffers for its life, sized
    to the largest page it uncompressed. Writers' pages are ~1 MB (a dictionary page a few), but one file with a
    512 MB page would have left every thread that read it holding a gigabyte. Kept buffers are bounded by
    threads x 2 x this bound; a larger page costs its allocation again, once a chunk.
    """
    for slot, buffer in enumerate(buffers):
        if buffer.nbytes > KEPT_SCRATCH_MAX_BYTES:
            buffers[slot] = np.empty(0, np.uint8)


def _arrow_array(values: np.ndarray, valid: np.ndarray | None, arrow_type: pa.DataType) -> pa.Array:
    nulls = 0 if valid is None else len(valid) - int(np.count_nonzero(valid))
    mask = pa.py_buffer(np.packbits(valid.view(np.bool_), bitorder="little")) if nulls else None
    if arrow_type in (pa.int8(), pa.int16()):
        values = values.astype(arrow_type.to_pandas_dtype())
    elif pa.types.is_decimal(arrow_type) and values.dtype != np.int64:
        values = values.astype(np.int64)
    return pa.Array.from_buffers(arrow_type, len(values), [mask, pa.py_buffer(values)], null_count=nulls)


def _file_bytes(path: str) -> np.ndarray:
    """Return a file's bytes, memory-mapped once per process while the file is unchanged."""
    size, modified_ns = file_version(path)
    return _mapped(path, size, modified_ns)


def file_pages_read(file_bytes: np.ndarray, ranges: Sequence[tuple[int, int]]) -> None:
    """Hand the ``(start, length)`` byte ranges a read touched in a mapped file (:func:`_file_bytes`) to the
    bounded pool of resident file pages (:mod:`gpu_engine.connectors.file_pages`), which drops the least recently
    read beyond its bound. A no-op where the bytes are not a mapping (an empty file)."""
    mapped = getattr(file_bytes.base, "obj", None)
    if isinstance(mapped, mmap.mmap):
        file_pages.read_chunks(mapped, ranges)


@lru_cache(maxsize=64)
def _mapped(path: str, size: int, modified_ns: int) -> np.ndarray:
    if size == 0:
        return np.zeros(0, np.uint8)
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(mapped, dtype=np.uint8)
