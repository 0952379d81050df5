"""Read and check a Parquet file's footer with the engine's own parser, before pyarrow touches the file.

Why: pyarrow trusts the footer. A column chunk whose physical type differs
from the schema's made its statistics read throw a C++ exception that
aborted the process, and a row group declaring 2^40 rows in a few hundred
bytes made the reader allocate until the machine ran out of memory. The
footer (Thrift compact protocol ``FileMetaData``) is small and well
specified, so it is parsed here, every read checked against the bytes left,
nesting and list sizes bounded, and then checked as a whole:

* the schema tree is well formed (children counts add up, every leaf has a
  physical type, repetitions are known values);
* every row group has one chunk per leaf, whose physical type and path are
  the schema's; its pages lie between the header magic and the footer;
* declared counts fit the bytes that hold them: a flat column holds exactly
  one value (or NULL) per row, a repeated one at least one level per row,
  and no chunk declares more values than its pages could encode (a data
  page holds at most 2^31 - 1 values behind a header of at least
  :data:`MIN_PAGE_BYTES` bytes: RLE runs let real files store millions of
  equal values in a few bytes, so this bound is the format's, not a guess);
* the file's row count is the sum of its row groups'; a REQUIRED column
  declares no NULLs.

A file that fails raises :class:`~gpu_engine.errors.DataSourceError` naming
the file, the row group, the column and what is inconsistent. Statistics
(min, max, NULL count) are decoded here too, from the bytes and the
schema's types, so the planner never asks pyarrow for them; malformed
statistics values are treated as absent (they only guide estimates).
"""

from __future__ import annotations

import datetime
import decimal
import math
import os
import struct
from dataclasses import dataclass, field
from functools import lru_cache

from gpu_engine.connectors.file_versions import file_version
from gpu_engine.errors import DataSourceError

__all__ = ["ParquetFooter", "ColumnLeaf", "ColumnChunk", "RowGroup", "ChunkStatistics", "read_footer", "parse_footer",
           "MIN_PAGE_BYTES", "MAX_PAGE_VALUES"]

MAGIC = b"PAR1"
#: The fewest bytes a data page takes: its header's type, two sizes and a data page header holding a value count
#: and three encodings (17 bytes in the compact protocol), so fewer is a safe lower bound.
MIN_PAGE_BYTES = 16
#: A page header's value count is a Thrift i32.
MAX_PAGE_VALUES = 2**31 - 1
#: Thrift nesting deeper than this is refused (FileMetaData nests about 7 deep).
MAX_DEPTH = 32

PHYSICAL_TYPES = ("BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")
REPETITIONS = ("REQUIRED", "OPTIONAL", "REPEATED")
CODECS = ("UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW")
# ConvertedType values the statistics decoder interprets.
_UTF8, _DECIMAL, _DATE, _TIMESTAMP_MILLIS, _TIMESTAMP_MICROS = 0, 5, 6, 9, 10
_UINT_8, _UINT_16, _UINT_32, _UINT_64, _JSON, _ENUM = 11, 12, 13, 14, 19, 4
_UNSIGNED = (_UINT_8, _UINT_16, _UINT_32, _UINT_64)

# Compact protocol type codes.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)


class _Corrupt(Exception):
    """Raised inside the parser; :func:`parse_footer` turns it into a DataSourceError naming the file."""


def _parse(data: bytes) -> dict[int, object]:
    """Return a footer's FileMetaData struct as nested dicts (field id -> value) and lists.

    Every length and list size is checked against the bytes left (each element takes at least one byte,
    so a parse costs O(footer bytes)); nesting is bounded by :data:`MAX_DEPTH`; a read past the end (an
    ``IndexError`` on ``data``) means the footer ends inside a value. Written as free functions with local
    state: a footer of 8,000 column chunks parses several times faster than through reader methods.
    """
    try:
        return _struct(data, 0, 0)[0]
    except IndexError:
        raise _Corrupt("footer ends inside a value") from None


def _varint(data: bytes, position: int) -> tuple[int, int]:
    byte = data[position]
    if byte < 0x80:
        return byte, position + 1
    result, shift = byte & 0x7F, 7
    while True:
        position += 1
        byte = data[position]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position + 1
        shift += 7
        if shift >= 70:
            raise _Corrupt("footer holds a varint longer than 10 bytes")


def _struct(data: bytes, position: int, depth: int) -> tuple[dict[int, object], int]:
    fields: dict[int, object] = {}
    last = 0
    while True:
        header = data[position]
        position += 1
        kind = header & 0x0F
        if kind == _STOP:
            return fields, position
        if header >> 4:
            last += header >> 4
        else:
            raw, position = _varint(data, position)
            last = (raw >> 1) ^ -(raw & 1)
        if _I16 <= kind <= _I64:
            raw, position = _varint(data, position)
            fields[last] = (raw >> 1) ^ -(raw & 1)
        elif kind <= _FALSE:  # a field's boolean lives in its header
            fields[last] = kind == _TRUE
        elif kind == _STRUCT and depth + 1 < MAX_DEPTH:
            fields[last], position = _struct(data, position, depth + 1)
        else:
            fields[last], position = _thrift_value(data, position, kind, depth)


def _thrift_value(data: bytes, position: int, kind: int, depth: int) -> tuple[object, int]:
    if _I16 <= kind <= _I64:
        raw, position = _varint(data, position)
        return (raw >> 1) ^ -(raw & 1), position
    if kind == _BINARY:
        length, position = _varint(data, position)
        if length > len(data) - position:
            raise _Corrupt(f"footer declares a {length}-byte string with {len(data) - position} bytes left")
        return data[position:position + length], position + length
    if kind <= _BYTE:  # a list's booleans take a byte each; a byte is a signed i8
        byte = data[position]
        return (byte == _TRUE if kind != _BYTE else byte - 256 if byte > 127 else byte), position + 1
    if kind == _DOUBLE:
        if len(data) - position < 8:
            raise _Corrupt("footer ends inside a double")
        return struct.unpack_from("<d", data, position)[0], position + 8
    if kind > _STRUCT:
        raise _Corrupt(f"footer holds an unknown Thrift type code {kind}")
    if depth >= MAX_DEPTH:
        raise _Corrupt(f"footer nests values deeper than {MAX_DEPTH} levels")
    if kind == _STRUCT:
        return _struct(data, position, depth + 1)
    if kind == _MAP:
        size, position = _varint(data, position)
        if size > len(data) - position:
            raise _Corrupt(f"footer declares a map of {size} entries with {len(data) - position} bytes left")
        entries = {}
        if size:
            kinds = data[position]
            position += 1
            for _ in range(size):
                key, position = _thrift_value(data, position, kinds >> 4, depth + 1)
                entries[key if not isinstance(key, (dict, list)) else len(entries)], position = \
                    _thrift_value(data, position, kinds & 0x0F, depth + 1)
        return entries, position
    header = data[position]  # a list or a set
    position += 1
    size, element = header >> 4, header & 0x0F
    if size == 15:
        size, position = _varint(data, position)
    if size > len(data) - position:  # every element takes at least one byte
        raise _Corrupt(f"footer declares a list of {size} elements with {len(data) - position} bytes left")
    items = []
    if _I16 <= element <= _I64:  # encodings, histograms: the common lists, read without a call per element
        for _ in range(size):
            raw, position = _varint(data, position)
            items.append((raw >> 1) ^ -(raw & 1))
    elif element == _STRUCT:
        if depth + 1 >= MAX_DEPTH:
            raise _Corrupt(f"footer nests values deeper than {MAX_DEPTH} levels")
        for _ in range(size):
            item, position = _struct(data, position, depth + 2)
            items.append(item)
    else:
        for _ in range(size):
            item, position = _thrift_value(data, position, element, depth + 1)
            items.append(item)
    return items, position


@dataclass(frozen=True)
class ColumnLeaf:
    """A primitive column of the schema: its dotted path, types and the levels its pages carry."""

    path: str
    physical: str
    repetition: str
    max_definition: int
    max_repetition: int
    type_length: int | None = None
    converted_type: int | None = None
    #: (LogicalType field id, its fields as parsed: dicts, so left out of equality and hashing)
    logical: tuple | None = field(default=None, compare=False)
    scale: int = 0

    @property
    def top_level(self) -> bool:
        """Return True for a column directly under the root (the ones a table's schema names)."""
        return "." not in self.path


@dataclass(frozen=True)
class ChunkStatistics:
    """A column chunk's decoded statistics; None where the footer holds none or holds bytes that do not decode."""

    minimum: object = None
    maximum: object = None
    null_count: int | None = None


@dataclass(frozen=True)
class ColumnChunk:
    """Where one column chunk's pages lie and what they declare to hold."""

    physical: str
    codec: str
    num_values: int
    data_page_offset: int
    dictionary_page_offset: int | None
    total_compressed_size: int
    total_uncompressed_size: int
    statistics: ChunkStatistics | None

    @property
    def start(self) -> int:
        """Return the offset of the chunk's first page (its dictionary page when it has one)."""
        return self.data_page_offset if self.dictionary_page_offset is None else self.dictionary_page_offset


@dataclass(frozen=True)
class RowGroup:
    """A row group: its row count and one chunk per schema leaf, in leaf order."""

    num_rows: int
    columns: tuple[ColumnChunk, ...]


@dataclass(frozen=True)
class ParquetFooter:
    """A Parquet file's footer, checked against its schema and the file's size (see the module docstring)."""

    path: str
    size: int
    modified_ns: int
    footer_start: int  # where the footer begins: every column chunk ends before it
    num_rows: int
    leaves: tuple[ColumnLeaf, ...]
    row_groups: tuple[RowGroup, ...]


def read_footer(path: str) -> ParquetFooter:
    """Return the checked footer of the Parquet file at ``path``, parsed once per process and file version.

    Raises
    ------
    FileNotFoundError
        For a missing file.
    DataSourceError
        For a file that is not Parquet or whose footer is truncated or inconsistent, naming the file.
    """
    size, modified_ns = file_version(str(path))  # once per file and running Task (connectors.file_versions)
    return _read_footer(str(path), size, modified_ns)


@lru_cache(maxsize=256)
def _read_footer(path: str, size: int, modified_ns: int) -> ParquetFooter:
    with open(path, "rb") as handle:
        if size < 12:
            raise DataSourceError(f"cannot read {path} as Parquet: it holds {size} bytes, fewer than a Parquet "
                                  "file's two magic numbers and footer length")
        head = handle.read(4)
        handle.seek(size - 8)
        tail = handle.read(8)
        if len(tail) != 8 or head != MAGIC or tail[4:] != MAGIC:
            raise DataSourceError(f"cannot read {path} as Parquet: it does not begin and end with 'PAR1' "
                                  "(not Parquet, truncated, or encrypted)")
        length = int.from_bytes(tail[:4], "little")
        if not 0 < length <= size - 12:
            raise DataSourceError(f"cannot read {path} as Parquet: its footer declares {length} bytes; the file "
                                  f"has {size - 12} bytes between its magic numbers")
        handle.seek(size - 8 - length)
        data = handle.read(length)
    if len(data) != length:
        raise DataSourceError(f"cannot read {path} as Parquet: the file shrank while its footer was read")
    return parse_footer(data, path, size, modified_ns)


def parse_footer(data: bytes, path: str, size: int, modified_ns: int = 0) -> ParquetFooter:
    """Parse and check a footer's bytes (``FileMetaData``) of a file of ``size`` bytes; see :func:`read_footer`."""
    try:
        fields = _parse(data)
    except _Corrupt as exc:
        raise DataSourceError(f"cannot read {path} as Parquet: {exc}") from None
    except RecursionError:  # cannot happen with MAX_DEPTH, but a footer must never take the process down
        raise DataSourceError(f"cannot read {path} as Parquet: its footer nests too deep") from None
    footer_start = size - 8 - len(data)
    check = _Checker(path)
    leaves = _leaves(check, fields.get(2))
    row_groups = fields.get(4, [])
    if not isinstance(row_groups, list):
        check.fail("its row groups are not a list")
    groups = tuple(_row_group(check, number, group, leaves, footer_start) for number, group in enumerate(row_groups))
    num_rows = check.integer(fields.get(3), "the file's row count")
    total = sum(group.num_rows for group in groups)
    if num_rows != total:
        check.fail(f"the footer declares {num_rows} rows but its row groups hold {total}")
    return ParquetFooter(str(path), size, modified_ns, footer_start, num_rows, leaves, groups)


class _Checker:
    """Raise DataSourceError naming the file (and the row group and column when given)."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, what: str, group: int | None = None, column: str | None = None):
        where = []
        if group is not None:
            where.append(f"row group {group}")
        if column is not None:
            where.append(f"column {column!r}")
        place = f" ({', '.join(where)})" if where else ""
        raise DataSourceError(f"cannot read {self.path} as Parquet: inconsistent footer{place}: {what}")

    def integer(self, value, what: str, group: int | None = None, column: str | None = None, minimum: int = 0) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            self.fail(f"{what} is {value!r}" if value is not None else f"{what} is missing", group, column)
        return value


def _leaves(check: _Checker, schema) -> tuple[ColumnLeaf, ...]:
    """Walk the flattened schema (a depth-first list with children counts) without recursion; return its leaves."""
    if not isinstance(schema, list) or not schema or not all(isinstance(e, dict) for e in schema):
        check.fail("its schema is missing or not a list of elements")
    root = schema[0]
    remaining = [check.integer(root.get(5), "the root's number of children")]
    if remaining[0] > len(schema) - 1:
        check.fail(f"the root declares {remaining[0]} children; the schema has {len(schema) - 1} more elements")
    # One entry per open group: (children left, path, definition level, repetition level).
    stack: list[tuple[str, int, int]] = [("", 0, 0)]
    leaves = []
    for index, element in enumerate(schema[1:], 1):
        while remaining and remaining[-1] == 0:
            remaining.pop()
            stack.pop()
        if not remaining:
            check.fail(f"schema element {index} lies outside the tree its groups' children counts describe")
        remaining[-1] -= 1
        name = element.get(4)
        if not isinstance(name, bytes):
            check.fail(f"schema element {index} has no name")
        name = name.decode("utf-8", "replace")
        parent, definition, repetition_level = stack[-1]
        path = f"{parent}.{name}" if parent else name
        repetition = element.get(3)
        if not isinstance(repetition, int) or not 0 <= repetition < len(REPETITIONS):
            check.fail(f"repetition {repetition!r} is not REQUIRED, OPTIONAL or REPEATED", column=path)
        definition += repetition != 0
        repetition_level += repetition == 2
        children = element.get(5)
        physical = element.get(1)
        if children is not None and (children or physical is None):
            count = check.integer(children, "the number of children", column=path)
            if count > len(schema) - 1 - index:
                check.fail(f"the group declares {count} children; the schema has {len(schema) - 1 - index} "
                           "more elements", column=path)
            remaining.append(count)
            stack.append((path, definition, repetition_level))
            continue
        if not isinstance(physical, int) or not 0 <= physical < len(PHYSICAL_TYPES):
            check.fail(f"physical type {physical!r} is not a Parquet type", column=path)
        type_length = element.get(2)
        if physical == 7 and (not isinstance(type_length, int) or type_length < 0):
            check.fail(f"FIXED_LEN_BYTE_ARRAY length {type_length!r}", column=path)
        logical = element.get(10)
        logical = next(iter(logical.items())) if isinstance(logical, dict) and len(logical) == 1 else None
        scale = element.get(7)
        if logical and logical[0] == 5 and isinstance(logical[1], dict):  # DecimalType(scale=1, precision=2)
            scale = logical[1].get(1, scale)
        leaves.append(ColumnLeaf(path, PHYSICAL_TYPES[physical], REPETITIONS[repetition], definition, repetition_level,
                                 type_length if physical == 7 else None, element.get(6), logical,
                                 scale if isinstance(scale, int) else 0))
    if any(remaining):
        check.fail("the schema ends before its groups' children counts say")
    return tuple(leaves)


def _row_group(check: _Checker, number: int, fields, leaves: tuple[ColumnLeaf, ...], footer_start: int) -> RowGroup:
    if not isinstance(fields, dict):
        check.fail("it is not a struct", number)
    num_rows = check.integer(fields.get(3), "the row count", number)
    if num_rows and not leaves:  # no column chunk holds them: nothing bounds the count by the file's bytes
        check.fail(f"it declares {num_rows} rows but the schema has no columns", number)
    chunks = fields.get(1)
    if not isinstance(chunks, list) or len(chunks) != len(leaves):
        check.fail(f"it holds {len(chunks) if isinstance(chunks, list) else 'no list of'} column chunks; the schema "
                   f"has {len(leaves)} columns", number)
    columns = tuple(_column_chunk(check, number, chunk, leaf, num_rows, footer_start)
                    for chunk, leaf in zip(chunks, leaves))
    return RowGroup(num_rows, columns)


def _column_chunk(check: _Checker, group: int, fields, leaf: ColumnLeaf, num_rows: int,
                  footer_start: int) -> ColumnChunk:
    name = leaf.path
    if not isinstance(fields, dict):
        check.fail("the column chunk is not a struct", group, name)
    if fields.get(1) is not None:
        check.fail("the column chunk lies in another file, which the engine does not read", group, name)
    meta = fields.get(3)
    if not isinstance(meta, dict):
        check.fail("the column chunk has no metadata (encrypted columns are not read)", group, name)
    physical = meta.get(1)
    if not isinstance(physical, int) or not 0 <= physical < len(PHYSICAL_TYPES):
        check.fail(f"the chunk's physical type {physical!r} is not a Parquet type", group, name)
    if PHYSICAL_TYPES[physical] != leaf.physical:
        check.fail(f"the chunk's physical type {PHYSICAL_TYPES[physical]} differs from the schema's {leaf.physical}",
                   group, name)
    path = meta.get(3)
    if isinstance(path, list) and all(isinstance(p, bytes) for p in path):
        if b".".join(path).decode("utf-8", "replace") != name:
            check.fail(f"the chunk's path {b'.'.join(path).decode('utf-8', 'replace')!r} differs from the schema's",
                       group, name)
    else:
        check.fail("the chunk's path is missing", group, name)
    codec = meta.get(4)
    if not isinstance(codec, int) or not 0 <= codec < len(CODECS):
        check.fail(f"compression codec {codec!r} is not a Parquet codec", group, name)
    num_values = check.integer(meta.get(5), "the chunk's value count", group, name)
    uncompressed = check.integer(meta.get(6), "the chunk's uncompressed size", group, name)
    compressed = check.integer(meta.get(7), "the chunk's compressed size", group, name)
    data_offset = check.integer(meta.get(9), "the chunk's data page offset", group, name)
    dictionary_offset = meta.get(11)
    if dictionary_offset is not None:
        dictionary_offset = check.integer(dictionary_offset, "the chunk's dictionary page offset", group, name)
        if dictionary_offset == 0:  # some writers write 0 for "no dictionary page"
            dictionary_offset = None
        elif num_values and dictionary_offset > data_offset:  # an empty chunk's offsets are never read:
            check.fail(f"the dictionary page at {dictionary_offset} follows the data pages at {data_offset}",
                       group, name)  # pyarrow writes data page offset 0 after a dictionary page for an empty group
        # (equal offsets: a writer that points both at the dictionary page; pyarrow reads such files)
    start = data_offset if dictionary_offset is None else dictionary_offset
    if num_values and (start < len(MAGIC) or start + compressed > footer_start):
        check.fail(f"its pages at bytes {start}..{start + compressed} lie outside the file's data, bytes "
                   f"{len(MAGIC)}..{footer_start}", group, name)
    most = (compressed // MIN_PAGE_BYTES) * MAX_PAGE_VALUES
    if num_values > most:
        check.fail(f"the chunk declares {num_values} values in {compressed} bytes, more than its pages could hold "
                   f"(at most {most})", group, name)
    if leaf.max_repetition == 0 and num_values != num_rows:
        check.fail(f"the chunk declares {num_values} values for the row group's {num_rows} rows", group, name)
    if leaf.max_repetition and num_values < num_rows:
        check.fail(f"the chunk declares {num_values} levels for the row group's {num_rows} rows", group, name)
    sizes = meta.get(16)  # SizeStatistics: a histogram of each level's values, one entry per level
    for field_id, levels, what in ((2, leaf.max_repetition, "repetition"), (3, leaf.max_definition, "definition")):
        histogram = sizes.get(field_id) if isinstance(sizes, dict) else None
        if isinstance(histogram, list) and histogram and len(histogram) != levels + 1:
            check.fail(f"its {what} level histogram has {len(histogram)} entries where the schema's "
                       f"{leaf.repetition} column has {levels + 1} {what} levels", group, name)
    statistics = _statistics(meta.get(12), leaf)
    if statistics is not None and statistics.null_count:
        if leaf.max_definition == 0:
            check.fail(f"the column is REQUIRED but its statistics count {statistics.null_count} NULLs", group, name)
        if statistics.null_count > num_values:
            check.fail(f"its statistics count {statistics.null_count} NULLs among {num_values} values", group, name)
    return ColumnChunk(leaf.physical, CODECS[codec], num_values, data_offset, dictionary_offset, compressed,
                       uncompressed, statistics)


def _statistics(fields, leaf: ColumnLeaf) -> ChunkStatistics | None:
    """Decode a chunk's Statistics struct; values that do not decode as the leaf's type become None."""
    if not isinstance(fields, dict):
        return None
    null_count = fields.get(3)
    if not isinstance(null_count, int) or isinstance(null_count, bool) or null_count < 0:
        null_count = None
    low, high = fields.get(6), fields.get(5)
    if (low is None or high is None) and _legacy_order_is_signed(leaf):
        low, high = fields.get(2), fields.get(1)
    try:
        low, high = _value(low, leaf), _value(high, leaf)
    except (ArithmeticError, ValueError):  # a scale or value out of Python's ranges: no range known
        low = high = None
    if low is None or high is None:
        low = high = None
    else:
        try:
            if low > high:
                low = high = None
        except TypeError:
            low = high = None
    return ChunkStatistics(low, high, null_count)


def _legacy_order_is_signed(leaf: ColumnLeaf) -> bool:
    """Return True when the deprecated min/max fields hold this leaf's true extremes (signed-order types only)."""
    return leaf.physical in ("BOOLEAN", "INT32", "INT64", "FLOAT", "DOUBLE") and leaf.converted_type not in _UNSIGNED \
        and not (leaf.logical and leaf.logical[0] == 10 and not _flag(leaf.logical[1], 2))


def _flag(fields, field_id: int) -> bool:
    return isinstance(fields, dict) and bool(fields.get(field_id))


_FIXED = {"BOOLEAN": (1, None), "INT32": (4, "<i"), "INT64": (8, "<q"), "FLOAT": (4, "<f"), "DOUBLE": (8, "<d")}
_EPOCH = datetime.date(1970, 1, 1)


def _value(raw, leaf: ColumnLeaf):
    """Return a statistics value as the Python value of the leaf's logical type, or None when it does not decode."""
    if not isinstance(raw, bytes):
        return None
    physical, converted, logical = leaf.physical, leaf.converted_type, leaf.logical
    kind = logical[0] if logical else None
    if physical in _FIXED:
        width, form = _FIXED[physical]
        if len(raw) != width:
            return None
        if physical == "BOOLEAN":
            return bool(raw[0]) if raw[0] in (0, 1) else None
        value = struct.unpack(form, raw)[0]
        if physical in ("FLOAT", "DOUBLE"):
            return None if math.isnan(value) else value
        if converted in _UNSIGNED or (kind == 10 and not _flag(logical[1], 2)):
            value &= (1 << (8 * width)) - 1
        if converted == _DECIMAL or kind == 5:
            return decimal.Decimal(value).scaleb(-leaf.scale)
        if converted == _DATE or kind == 6:
            try:
                return _EPOCH + datetime.timedelta(days=value)
            except OverflowError:
                return None
        if physical == "INT64" and (converted in (_TIMESTAMP_MILLIS, _TIMESTAMP_MICROS) or kind == 8):
            return None  # the planner draws nothing from timestamp ranges; an out-of-range one must not fail
        if converted is None and kind is None or converted in _UNSIGNED or kind == 10 or converted in (15, 16, 17, 18):
            return value
        return None
    if physical in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"):
        if leaf.type_length is not None and len(raw) != leaf.type_length:
            return None
        if converted == _DECIMAL or kind == 5:
            return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-leaf.scale) if raw else None
        if converted in (_UTF8, _JSON, _ENUM) or kind in (1, 4, 12):
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                return None
        return raw if physical == "BYTE_ARRAY" else None
    return None  # INT96
