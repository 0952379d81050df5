"""Find and rewrite the Thrift fields of a Parquet file's page headers and footer, in place (tests, the fuzz bench).

Why: the decoder's checks are only tested by files whose counts, sizes and
offsets contradict each other, and no writer makes those. These functions parse
the Thrift compact protocol (as parquet.thrift lays it out) far enough to say
where each integer field's bytes lie, and rewrite one integer in the same
number of bytes (a varint may be padded with continuation bytes), so every
other offset in the file stays valid and only the one field lies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow.parquet as pq

_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)


@dataclass
class Field:
    """One Thrift field: its id and kind, where its value's bytes lie, and its members when it is a struct or list."""

    id: int
    kind: int
    start: int
    end: int
    members: list = field(default_factory=list)  # a struct's fields, or a list's elements (Field with id = index)

    def get(self, *path: int) -> "Field":
        """Return the member at ``path`` (field ids of structs, indexes of lists)."""
        node = self
        for key in path:
            found = next((m for m in node.members if m.id == key), None)
            if found is None:
                raise KeyError(f"no member {key} in Thrift field {node.id}")
            node = found
        return node

    def has(self, key: int) -> bool:
        return any(m.id == key for m in self.members)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _value(data: bytes, pos: int, kind: int, id_: int) -> Field:
    start = pos
    members: list[Field] = []
    if kind in (_TRUE, _FALSE):
        pass
    elif kind == _BYTE:
        pos += 1
    elif kind in (_I16, _I32, _I64):
        _, pos = _varint(data, pos)
    elif kind == _DOUBLE:
        pos += 8
    elif kind == _BINARY:
        size, pos = _varint(data, pos)
        pos += size
    elif kind in (_LIST, _SET):
        header = data[pos]
        pos += 1
        size = header >> 4
        if size == 15:
            size, pos = _varint(data, pos)
        inner = header & 0x0F
        for index in range(size):
            if inner in (_TRUE, _FALSE):
                member = Field(index, _BYTE, pos, pos + 1)
            else:
                member = _value(data, pos, inner, index)
            members.append(member)
            pos = member.end
    elif kind == _STRUCT:
        last = 0
        while True:
            header = data[pos]
            pos += 1
            if header == _STOP:
                break
            delta = header >> 4
            if delta:
                key = last + delta
            else:
                raw, pos = _varint(data, pos)
                key = (raw >> 1) ^ -(raw & 1)
            last = key
            member = _value(data, pos, header & 0x0F, key)
            members.append(member)
            pos = member.end
    else:
        raise ValueError(f"Thrift kind {kind} is not used by Parquet's headers")
    return Field(id_, kind, start, pos, members)


def parse_struct(data: bytes, pos: int) -> Field:
    """Parse the Thrift struct at ``pos``."""
    return _value(data, pos, _STRUCT, 0)


def int_fields(item: Field):
    """Yield every integer field (i16, i32, i64) under ``item``, depth first."""
    for member in item.members:
        if member.kind in (_I16, _I32, _I64):
            yield member
        yield from int_fields(member)


def read_int(data: bytes, item: Field) -> int:
    raw, _ = _varint(data, item.start)
    return (raw >> 1) ^ -(raw & 1)


def write_int(data: bytearray, item: Field, value: int) -> None:
    """Rewrite the integer field ``item`` as ``value`` in the same bytes (padded varint); ValueError when it does not fit."""
    raw = (value << 1) ^ (value >> 63)
    raw &= (1 << 64) - 1
    size = item.end - item.start
    if raw >= 1 << (7 * size):
        raise ValueError(f"{value} does not fit the field's {size} byte(s)")
    encoded = bytearray()
    for k in range(size):
        byte = (raw >> (7 * k)) & 0x7F
        encoded.append(byte | (0x80 if k < size - 1 else 0))
    data[item.start:item.end] = encoded


def footer(data: bytes) -> Field:
    """Return the file's FileMetaData struct (its positions are those in ``data``)."""
    length = int.from_bytes(data[-8:-4], "little")
    return parse_struct(data, len(data) - 8 - length)


@dataclass
class Page:
    """A page header (a PageHeader struct) and where the page's body lies."""

    header: Field
    body: int
    end: int

    @property
    def body_struct(self) -> Field:
        """The data_page_header (5), dictionary_page_header (7) or data_page_header_v2 (8)."""
        return next(m for m in self.header.members if m.id in (5, 7, 8))


def pages(data: bytes, path: str, row_group: int, column: int) -> list[Page]:
    """Return the pages of one column chunk, dictionary page first, as the footer at ``path`` places them."""
    chunk = pq.read_metadata(path).row_group(row_group).column(column)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    end = start + chunk.total_compressed_size
    found = []
    pos = start
    while pos < end:
        header = parse_struct(data, pos)
        compressed = read_int(data, header.get(3))
        found.append(Page(header, header.end, header.end + compressed))
        pos = header.end + compressed
    return found


def page_kind(data: bytes, page: Page) -> int:
    """Return the page's type: 0 data page, 2 dictionary page, 3 data page v2."""
    return read_int(data, page.header.get(1))
