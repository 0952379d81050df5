"""Decode Parquet column chunks of fixed-width values on the host, in one compiled pass (CPU only).

Why: pyarrow decodes a TPC-H SF1 ``l_extendedprice`` (INT64 pages, Snappy)
in ~137 ms on one core of this project's VM, against ~52 ms for DuckDB's
reader: its Snappy runs at ~0.8 GB/s and a ``DECIMAL(15,2)`` stored as INT64
is widened to 16-byte ``decimal128`` values that the engine narrows back to
int64. Parquet decode was ~45% of the engine's CPU time over the 22 TPC-H
queries. This module reads the page headers (Thrift compact protocol),
decompresses Snappy pages and decodes PLAIN and dictionary pages straight
into the int64/int32/float output the engine keeps, without the GIL, so two
drivers decode at once.

What is decoded here: columns of physical type INT32, INT64, FLOAT or DOUBLE
(:func:`decode_chunk`) and BYTE_ARRAY strings (:func:`decode_strings_chunk`),
not repeated (no lists), required or optional, in data pages v1 or v2,
encoded PLAIN or PLAIN_DICTIONARY/RLE_DICTIONARY, uncompressed or Snappy.
Anything else (another codec or encoding) makes them return a negative
status, and the caller reads the column with pyarrow instead: the result is
the same either way, only the speed differs.

The format is the one in the Parquet specification (parquet.thrift,
Encodings.md) and Snappy's ``format_description.txt``.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "decode_chunk",
    "decode_strings_chunk",
    "snappy_decompress",
    "CODEC_UNCOMPRESSED",
    "CODEC_SNAPPY",
    "DECODED",
    "UNSUPPORTED",
    "CORRUPT",
    "check_page_counts",
    "plan_chunk",
    "COUNTS_ONLY",
    "FIELDS",
    "dictionary_values",
    "describe",
    "first_invalid_utf8",
    "remap_codes",
]

#: Parquet's CompressionCodec values this module decompresses.
CODEC_UNCOMPRESSED = 0
CODEC_SNAPPY = 1

#: Status codes of :func:`decode_chunk`, :func:`decode_strings_chunk` and :func:`check_page_counts`.
DECODED = 0
UNSUPPORTED = -1  # a codec, encoding or page kind this module does not decode: read the column with pyarrow
#: The bytes contradict the footer or themselves: every status at or below CORRUPT says how (:func:`describe`).
CORRUPT = -2  # the chunk's range lies outside the file
_BAD_HEADER = -3
_BAD_SIZES = -4
_BAD_COMPRESSED = -5
_BAD_LEVELS = -6
_SHORT_VALUES = -7
_BAD_INDEX = -8
_NO_DICTIONARY = -9
_BAD_DICTIONARY = -10
_BAD_BIT_WIDTH = -11
_EXTRA_VALUES = -12
_MISSING_VALUES = -13
_BAD_COUNTS = -14

_CORRUPTIONS = {
    CORRUPT: "the column chunk lies outside the file",
    _BAD_HEADER: "the page header is malformed, lacks a required field or runs past the column chunk",
    _BAD_SIZES: "the page's declared sizes do not fit its column chunk",
    _BAD_COMPRESSED: "the page's compressed bytes do not uncompress to its declared size",
    _BAD_LEVELS: "the page's definition levels are malformed or run past the page",
    _SHORT_VALUES: "the page's values run past the page",
    _BAD_INDEX: "a dictionary code points outside the column chunk's dictionary",
    _NO_DICTIONARY: "a dictionary-encoded page has no dictionary page before it",
    _BAD_DICTIONARY: "the dictionary page is malformed, declares more values than its bytes hold, "
                     "or is not the column chunk's first page",
    _BAD_BIT_WIDTH: "the page's dictionary codes declare a bit width over 32",
    _EXTRA_VALUES: "the pages hold more values than the row group's rows",
    _MISSING_VALUES: "the column chunk ends before its pages hold the row group's rows",
    _BAD_COUNTS: "the page's row or null count disagrees with its values and definition levels",
}


def describe(status: int) -> str:
    """Return what a decoder status at or below :data:`CORRUPT` says is wrong, for an error message."""
    return _CORRUPTIONS.get(status, f"the bytes contradict the footer or themselves (status {status})")

_DATA_PAGE = 0
_DICTIONARY_PAGE = 2
_DATA_PAGE_V2 = 3

_PLAIN = 0
_PLAIN_DICTIONARY = 2
_RLE = 3
_RLE_DICTIONARY = 8

# Thrift compact protocol field types.
_T_STOP = 0
_T_TRUE = 1
_T_FALSE = 2
_T_BYTE = 3
_T_I16 = 4
_T_I32 = 5
_T_I64 = 6
_T_DOUBLE = 7
_T_BINARY = 8
_T_LIST = 9
_T_SET = 10
_T_MAP = 11
_T_STRUCT = 12


#: Bytes a decompression buffer holds past its end, so copies may move 8 bytes at a time.
SLACK = 16

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1

#: The most bytes one byte of a Snappy block can uncompress to (a 3-byte copy makes at most 64): a
#: page header that declares more is refused before its buffer is allocated.
SNAPPY_MAX_RATIO = 22


# ----------------------------------------------------------------- unaligned words
def _byte_pointer(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array)
    offset = context.cast(builder, index, types.int64, types.intp)
    return builder.gep(data.data, [offset])


@intrinsic
def _load_word(typingctx, array, index):
    """Return the 8 bytes of a uint8 array at ``index`` as a little-endian uint64 (no alignment needed)."""
    if not (isinstance(array, types.Array) and array.dtype == types.uint8 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        pointer = _byte_pointer(context, builder, sig.args[0], args[0],
                                context.cast(builder, args[1], sig.args[1], types.int64))
        word = builder.bitcast(pointer, ir.PointerType(ir.IntType(64)))
        loaded = builder.load(word, align=1)
        return loaded

    return types.uint64(array, index), codegen


@intrinsic
def _store_word(typingctx, array, index, value):
    """Write ``value`` as 8 little-endian bytes of a uint8 array at ``index`` (no alignment needed)."""
    if not (isinstance(array, types.Array) and array.dtype == types.uint8 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        pointer = _byte_pointer(context, builder, sig.args[0], args[0],
                                context.cast(builder, args[1], sig.args[1], types.int64))
        word = builder.bitcast(pointer, ir.PointerType(ir.IntType(64)))
        builder.store(context.cast(builder, args[2], sig.args[2], types.uint64), word, align=1)
        return context.get_dummy_value()

    return types.void(array, index, types.uint64), codegen


# ----------------------------------------------------------------- Thrift
@njit(nogil=True, cache=True)
def _varint(buf, pos):
    """Return (unsigned LEB128 value, next position); position -1 when the buffer ends inside it."""
    value = np.int64(0)
    shift = 0
    n = buf.shape[0]
    while pos < n and shift < 64:
        byte = np.int64(buf[pos])
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    return value, -1


@njit(nogil=True, cache=True)
def _zigzag(value):
    return (value >> 1) ^ -(value & 1)


@njit(nogil=True, cache=True)
def _skip_value(buf, pos, kind):
    """Skip one Thrift compact value of type ``kind``; return the next position (-1 when malformed).

    Structs and containers nest: an explicit stack holds, per level, the element kind and how many
    elements are left (-1 for a struct, which ends at its STOP byte), so no recursion is needed.
    """
    kinds = np.empty(32, np.int64)
    left = np.empty(32, np.int64)
    depth = 0
    kinds[0] = kind
    left[0] = 1
    n = buf.shape[0]
    while depth >= 0:
        if pos < 0 or pos > n:
            return -1
        if left[depth] == 0:
            depth -= 1
            continue
        if left[depth] > 0:
            left[depth] -= 1
            element = kinds[depth]
        else:  # inside a struct: the next field header, or STOP
            if pos >= n:
                return -1
            header = np.int64(buf[pos])
            pos += 1
            if header == _T_STOP:
                depth -= 1
                continue
            if header >> 4 == 0:
                _, pos = _varint(buf, pos)
            element = header & 0x0F
        if element == _T_TRUE or element == _T_FALSE:
            pass  # a boolean field carries its value in its header
        elif element == _T_BYTE:
            pos += 1
        elif element == _T_I16 or element == _T_I32 or element == _T_I64:
            _, pos = _varint(buf, pos)
        elif element == _T_DOUBLE:
            pos += 8
        elif element == _T_BINARY:
            length, pos = _varint(buf, pos)
            if pos >= 0:
                pos += length
        elif element == _T_LIST or element == _T_SET:
            if pos >= n:
                return -1
            header = np.int64(buf[pos])
            pos += 1
            size = header >> 4
            if size == 15:
                size, pos = _varint(buf, pos)
            inner = header & 0x0F
            if size > 0:
                depth += 1
                if depth >= 32:
                    return -1
                kinds[depth] = _T_BYTE if inner == _T_TRUE or inner == _T_FALSE else inner
                left[depth] = size
        elif element == _T_MAP:
            size, pos = _varint(buf, pos)
            if size > 0:
                if pos >= n:
                    return -1
                pair = np.int64(buf[pos])
                pos += 1
                if pair >> 4 != pair & 0x0F:  # keys and values of different kinds: not in Parquet's headers
                    return -1
                depth += 1
                if depth >= 32:
                    return -1
                kinds[depth] = pair >> 4
                left[depth] = 2 * size
        elif element == _T_STRUCT:
            depth += 1
            if depth >= 32:
                return -1
            kinds[depth] = _T_STRUCT
            left[depth] = -1
        else:
            return -1
    return pos


@njit(nogil=True, cache=True)
def _next_field(buf, pos, last):
    """Read a struct's next field header after field ``last``: return ``(kind, field id, next position)``.

    The kind is ``_T_STOP`` at the struct's end; the position is -1 when the bytes end first.
    """
    if pos < 0 or pos >= buf.shape[0]:
        return _T_STOP, 0, -1
    byte = np.int64(buf[pos])
    pos += 1
    if byte == _T_STOP:
        return _T_STOP, 0, pos
    delta = byte >> 4
    if delta:
        return byte & 0x0F, last + delta, pos
    raw, pos = _varint(buf, pos)
    return byte & 0x0F, _zigzag(raw), pos


@njit(nogil=True, cache=True)
def _read_int_fields(buf, pos, fields, bool_field):
    """Read a page struct's i32 fields, and its one boolean field ``bool_field`` (-1: none), into ``fields[id]``;
    skip the others and return the next position.

    A field whose Thrift type is not its declared one is skipped, as Thrift's generated readers (pyarrow's) skip
    it: an i32 field written as an i64 (one flipped type bit, the same varint) is then missing, so a required
    one makes the header malformed instead of being read (every integer of the page structs is an i32).
    """
    last = 0
    while True:
        kind, field, pos = _next_field(buf, pos, last)
        if pos < 0 or kind == _T_STOP:
            return pos
        last = field
        if kind == _T_I32 and field != bool_field and 0 <= field < fields.shape[0]:
            raw, pos = _varint(buf, pos)
            value = _zigzag(raw)
            if not _INT32_MIN <= value <= _INT32_MAX:  # every integer of a page header is an i32 (or narrower)
                return -1
            fields[field] = value
        elif (kind == _T_TRUE or kind == _T_FALSE) and field == bool_field and 0 <= field < fields.shape[0]:
            fields[field] = 1 if kind == _T_TRUE else 0
        else:
            pos = _skip_value(buf, pos, kind)


@njit(nogil=True, cache=True)
def _read_page_header(buf, pos, header, page):
    """Parse a PageHeader at ``pos``: its own fields into ``header[id]``, its page-kind struct into ``page[id]``.

    ``page`` is filled from whichever of data_page_header (5), dictionary_page_header (7) or
    data_page_header_v2 (8) is present (a header with two of them is malformed). Returns the position
    after the header, -1 when malformed. Integers outside the i32 range every one of them has are
    malformed too, so sums and products of a few of them never overflow an int64.
    """
    header[:] = -1
    page[:] = -1
    last = 0
    while True:
        kind, field, pos = _next_field(buf, pos, last)
        if pos < 0 or kind == _T_STOP:
            return pos
        last = field
        if kind == _T_STRUCT and (field == 5 or field == 7 or field == 8):
            if header[5] == 1 or header[7] == 1 or header[8] == 1:
                return -1
            header[field] = 1
            # the boolean of each struct: DictionaryPageHeader.is_sorted (3), DataPageHeaderV2.is_compressed (7)
            pos = _read_int_fields(buf, pos, page, 3 if field == 7 else 7 if field == 8 else -1)
        elif kind == _T_I32 and 0 <= field < header.shape[0]:
            raw, pos = _varint(buf, pos)
            value = _zigzag(raw)
            if not _INT32_MIN <= value <= _INT32_MAX:
                return -1
            header[field] = value
        else:
            pos = _skip_value(buf, pos, kind)


# ----------------------------------------------------------------- Snappy
def _snappy_copy_tags() -> np.ndarray:
    """Per tag byte of a Snappy copy: ``length | high offset bits << 8 | offset bytes that follow << 24``."""
    table = np.zeros(256, np.int64)
    for tag in range(256):
        kind = tag & 3
        if kind == 1:  # 1-byte offset: 3 length bits, 3 high offset bits in the tag
            table[tag] = (((tag >> 2) & 7) + 4) | (((tag >> 5) << 8) << 8) | (1 << 24)
        elif kind == 2:
            table[tag] = ((tag >> 2) + 1) | (2 << 24)
        elif kind == 3:
            table[tag] = ((tag >> 2) + 1) | (4 << 24)
    return table


_SNAPPY_COPY_TAGS = _snappy_copy_tags()
_SNAPPY_OFFSET_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], np.uint64)


@njit(nogil=True, cache=True)
def snappy_decompress(src, start, end, dst):
    """Decompress the Snappy block ``src[start:end]`` into ``dst``; return the bytes written, -1 when corrupt.

    Copies move 8 bytes at a time where ``dst`` has room past the copy (give it :data:`SLACK` spare
    bytes): they may write up to 7 bytes beyond, which later copies overwrite.
    """
    end = min(end, src.shape[0])
    length, pos = _varint(src, start)
    if pos < 0 or pos > end or length > dst.shape[0]:
        return -1
    out = 0
    # Past these positions a 16-byte load or store could leave its buffer: use the careful paths.
    src_fast = min(end, src.shape[0]) - 24
    dst_fast = dst.shape[0] - 24
    while pos < end:
        if pos <= src_fast and out <= dst_fast:
            # Fast path: one 8-byte load holds the tag and any offset bytes; literals of up to 60 bytes
            # and copies move whole words (they may write past the copy, into room the buffers have),
            # and a copy's length and offset come from a table by tag, not from a branch per kind.
            word = _load_word(src, pos)
            tag = np.int64(word & np.uint64(0xFF))
            if tag & 3 == 0:
                size = (tag >> 2) + 1
                if size <= 16:
                    if pos + 1 + size > end or out + size > length:
                        return -1
                    _store_word(dst, out, _load_word(src, pos + 1))
                    _store_word(dst, out + 8, _load_word(src, pos + 9))
                    pos += 1 + size
                    out += size
                    continue
                if size <= 60 and pos + 1 + size + 8 <= src.shape[0] and out + size + 8 <= dst.shape[0]:
                    if pos + 1 + size > end or out + size > length:
                        return -1
                    for k in range(0, size, 8):
                        _store_word(dst, out + k, _load_word(src, pos + 1 + k))
                    pos += 1 + size
                    out += size
                    continue
                # longer literals take the careful path below
            else:
                entry = _SNAPPY_COPY_TAGS[tag]
                size = entry & 0xFF
                extra = entry >> 24
                offset = ((entry >> 8) & 0xFFFF) + np.int64((word >> np.uint64(8)) & _SNAPPY_OFFSET_MASKS[extra])
                pos += 1 + extra
                if pos > end or offset == 0 or offset > out or out + size > length:
                    return -1
                source = out - offset
                if offset >= 8:
                    # Each word reads bytes written before it (they are at least 8 back): exact.
                    _store_word(dst, out, _load_word(dst, source))
                    _store_word(dst, out + 8, _load_word(dst, source + 8))
                    if size > 16:
                        if out + size + 8 > dst.shape[0]:
                            for k in range(16, size):
                                dst[out + k] = dst[source + k]
                        else:
                            for k in range(16, size, 8):
                                _store_word(dst, out + k, _load_word(dst, source + k))
                else:  # the copy overlaps what it writes: repeat the pattern byte by byte
                    for k in range(size):
                        dst[out + k] = dst[source + k]
                out += size
                continue
        tag = np.int64(src[pos])
        pos += 1
        kind = tag & 3
        if kind == 0:  # literal
            size = (tag >> 2) + 1
            if size > 60:
                extra = size - 60
                if pos + extra > end:
                    return -1
                size = 0
                for k in range(extra):
                    size |= np.int64(src[pos + k]) << (8 * k)
                pos += extra
                size += 1
            if pos + size > end or out + size > length:
                return -1
            if out + size + 8 <= dst.shape[0] and pos + size + 8 <= src.shape[0]:
                for k in range(0, size, 8):
                    _store_word(dst, out + k, _load_word(src, pos + k))
            else:
                for k in range(size):
                    dst[out + k] = src[pos + k]
            pos += size
            out += size
            continue
        if kind == 1:
            if pos >= end:
                return -1
            size = ((tag >> 2) & 7) + 4
            offset = ((tag >> 5) << 8) | np.int64(src[pos])
            pos += 1
        elif kind == 2:
            if pos + 2 > end:
                return -1
            size = (tag >> 2) + 1
            offset = np.int64(src[pos]) | (np.int64(src[pos + 1]) << 8)
            pos += 2
        else:
            if pos + 4 > end:
                return -1
            size = (tag >> 2) + 1
            offset = (np.int64(src[pos]) | (np.int64(src[pos + 1]) << 8) | (np.int64(src[pos + 2]) << 16)
                      | (np.int64(src[pos + 3]) << 24))
            pos += 4
        if offset == 0 or offset > out or out + size > length:
            return -1
        source = out - offset
        if offset >= 8 and out + size + 8 <= dst.shape[0]:
            for k in range(0, size, 8):
                _store_word(dst, out + k, _load_word(dst, source + k))
        else:  # the copy overlaps what it writes: repeat the pattern byte by byte
            for k in range(size):
                dst[out + k] = dst[source + k]
        out += size
    return out if out == length else -1


# ----------------------------------------------------------------- levels and dictionary indices
#: What :func:`_rle_hybrid` returns when its runs end past their bytes, or a value is out of its bound.
_RUNS_PAST_END = -1
_OUT_OF_BOUND = -2


@njit(nogil=True, cache=True)
def _rle_hybrid(buf, pos, end, bit_width, dictionary, out, row, count, bound, positions=None, first=0, last=0):
    """Decode ``count`` values of the RLE/bit-packing hybrid in ``buf[pos:end]`` into ``out[row:row + count]``.

    With a non-empty ``dictionary`` each value is an index and ``dictionary[index]`` is written;
    otherwise the value itself (definition levels, dictionary codes). Every value must be below
    ``bound`` (a dictionary's size, or the largest definition level + 1), checked as it is read, in
    the same pass. Returns the position after the runs read, :data:`_RUNS_PAST_END` (-1) when they
    run past ``end`` or are malformed, :data:`_OUT_OF_BOUND` (-2) when a value is ``bound`` or more.

    With ``positions`` (increasing, below ``count``) only the values at ``positions[first:last]`` are
    written, to ``out[row + j - first]``, and only they are checked; all ``count`` values' runs are
    walked. Each ``positions is None`` below is decided as numba compiles, so the two decoders share
    their runs' reading and a value's unpacking without a call a run (an array argument costs a
    reference count a call) and each keeps its own loop.
    """
    if pos < 0 or end > buf.shape[0] or bit_width < 0 or bit_width > 32:
        return _RUNS_PAST_END
    mask = np.uint64((np.int64(1) << bit_width) - 1)
    value_bytes = (bit_width + 7) // 8
    size = dictionary.shape[0]
    lookup = size > 0
    if lookup:
        bound = min(bound, size)
    limit = buf.shape[0] - 8  # a word may be loaded at or before this position
    filled = 0
    j = first
    while filled < count:
        if pos >= end:
            return _RUNS_PAST_END
        run, pos = _varint(buf, pos)
        if pos < 0 or run < 0:  # (a varint of 64 bits reads as negative)
            return _RUNS_PAST_END
        if run & 1 == 0:  # a repeated value
            repeat = run >> 1
            if pos + value_bytes > end:
                return _RUNS_PAST_END
            value = np.int64(0)
            for k in range(value_bytes):
                value |= np.int64(buf[pos + k]) << (8 * k)
            pos += value_bytes
            stop = min(count, filled + repeat)
            if positions is None:
                if value >= bound:
                    return _OUT_OF_BOUND
                if lookup:
                    repeated = dictionary[value]
                    for i in range(row + filled, row + stop):
                        out[i] = repeated
                else:
                    for i in range(row + filled, row + stop):
                        out[i] = value
            elif j < last and positions[j] < stop:
                if value >= bound:
                    return _OUT_OF_BOUND
                repeated = dictionary[value] if lookup else value
                while j < last and positions[j] < stop:
                    out[row + j - first] = repeated
                    j += 1
            filled = stop
        else:  # groups of 8 bit-packed values, least significant bit first
            groups = run >> 1
            if bit_width and groups > (end - pos) // bit_width:
                return _RUNS_PAST_END
            take = count - filled
            if groups < (take + 7) // 8:
                take = groups * 8
            if positions is None and pos + groups * bit_width + 8 <= buf.shape[0]:
                # Every word load stays inside buf, and a value out of bound is noted rather than
                # branched on (a lookup reads the last entry, then the run fails): a branch-free loop,
                # ~30% faster a value (TPC-H's 15-17-bit indices: ~2.6-4.0 -> 1.9-2.9 ns).
                # Unsigned indices and values: numba then emits no negative-index wrap-around a read and a write
                # (a dictionary's 11-bit codes: 3.8 -> 2.6 ms over 2.9M values).
                if bound <= 0 and take > 0:
                    return _OUT_OF_BOUND
                dest = out[row + filled:row + filled + take]
                width = np.uint64(bit_width)
                first_byte = np.uint64(pos)
                out_of_bound = False
                if lookup:
                    last_entry = np.uint64(bound - 1)
                    for i in range(np.uint64(take)):
                        bit = i * width
                        value = (_load_word(buf, first_byte + (bit >> np.uint64(3))) >> (bit & np.uint64(7))) & mask
                        out_of_bound |= value > last_entry
                        dest[i] = dictionary[min(value, last_entry)]
                else:
                    limit_value = np.uint64(bound)
                    for i in range(np.uint64(take)):
                        bit = i * width
                        value = (_load_word(buf, first_byte + (bit >> np.uint64(3))) >> (bit & np.uint64(7))) & mask
                        out_of_bound |= value >= limit_value
                        dest[i] = value
                if out_of_bound:
                    return _OUT_OF_BOUND
                pos += groups * bit_width
                filled += take
                continue
            # Value i of the run (every value), or the wanted ones by position: a word load each, or bytes
            # one by one where a word would pass the end of buf.
            i = 0 if positions is None else j
            stop = take if positions is None else last
            while i < stop:
                index = i
                if positions is not None:
                    if positions[i] >= filled + take:
                        break
                    index = positions[i] - filled
                bit = index * bit_width
                at = pos + (bit >> 3)
                if at <= limit:
                    word = _load_word(buf, at)
                else:
                    word = np.uint64(0)
                    for k in range(buf.shape[0] - at):
                        word |= np.uint64(buf[at + k]) << np.uint64(8 * k)
                value = np.int64((word >> np.uint64(bit & 7)) & mask)
                if value >= bound:
                    return _OUT_OF_BOUND
                target = row + filled + i if positions is None else row + i - first
                if lookup:
                    out[target] = dictionary[value]
                else:
                    out[target] = value
                i += 1
            if positions is not None:
                j = i
            pos += groups * bit_width
            filled += take
    return pos


@njit(nogil=True, cache=True)
def _read_le32(buf, pos):
    return (np.int64(buf[pos]) | (np.int64(buf[pos + 1]) << 8) | (np.int64(buf[pos + 2]) << 16)
            | (np.int64(buf[pos + 3]) << 24))


@njit(nogil=True, cache=True)
def _index_status(done):
    """Return the status of a dictionary-code :func:`_rle_hybrid` that returned ``done`` < 0."""
    return _BAD_INDEX if done == _OUT_OF_BOUND else _SHORT_VALUES


# ----------------------------------------------------------------- pages
_SKIP_PAGE = 1  # a page kind without values (an index page): read past it


@njit(nogil=True, cache=True)
def _page_header(buf, pos, end, header, page):
    """Read and check the page header at ``pos``; return ``(status, position after the header)``.

    The status is :data:`DECODED`, ``_SKIP_PAGE`` for a page kind without values, or a corruption:
    a header running past ``end``, a required field missing or negative, a body past ``end``.
    """
    after = _read_page_header(buf, pos, header, page)
    if after < 0 or after > end:
        return _BAD_HEADER, pos
    kind = header[1]
    if kind < 0 or header[2] < 0 or header[3] < 0:
        return _BAD_HEADER, pos
    if after + header[3] > end:
        return _BAD_SIZES, pos
    # The struct of the page's type, with its required fields (parquet.thrift), and no other page struct.
    if kind == _DATA_PAGE:
        if header[5] != 1 or page[1] < 0 or page[2] < 0 or page[3] < 0 or page[4] < 0:
            return _BAD_HEADER, pos
    elif kind == _DICTIONARY_PAGE:
        if header[7] != 1 or page[1] < 0 or page[2] < 0:
            return _BAD_HEADER, pos
    elif kind == _DATA_PAGE_V2:
        if header[8] != 1 or page[1] < 0 or page[2] < 0 or page[3] < 0 or page[4] < 0 or page[5] < 0 or page[6] < 0:
            return _BAD_HEADER, pos
    elif header[5] == 1 or header[7] == 1 or header[8] == 1:  # e.g. a dictionary page's type byte damaged
        return _BAD_HEADER, pos
    else:
        return _SKIP_PAGE, after
    return DECODED, after


@njit(nogil=True, cache=True)
def _next_page(buf, pos, end, codec, header, page, scratch):
    """Read the page at ``pos`` and uncompress its body; return ``(status, pos, kind, data, start, stop, prefix, scratch)``.

    ``status`` is :data:`DECODED`, ``_SKIP_PAGE``, :data:`UNSUPPORTED` or a corruption; ``pos`` is
    where the next page starts; the page's bytes are ``data[start:stop]`` (``data`` is ``buf`` for an
    uncompressed page, else ``scratch``, grown as needed and handed back); ``prefix`` is the length
    of a v2 page's level bytes, which are never compressed. Every size is checked against the chunk
    (``end``) before it is used, and an uncompressed size against what Snappy can make of the
    compressed bytes before a buffer is grown for it.
    """
    status, pos = _page_header(buf, pos, end, header, page)
    if status != DECODED:
        return status, pos, -1, buf, 0, 0, 0, scratch
    kind = header[1]
    uncompressed = header[2]
    compressed = header[3]
    body = pos
    pos += compressed
    prefix = 0
    if kind == _DATA_PAGE_V2:
        if page[6] > 0:  # repetition levels in a column that has none
            return _BAD_SIZES, pos, kind, buf, 0, 0, 0, scratch
        prefix = page[5]
        if prefix > compressed or prefix > uncompressed:
            return _BAD_SIZES, pos, kind, buf, 0, 0, 0, scratch
    if codec == CODEC_SNAPPY and not (kind == _DATA_PAGE_V2 and page[7] == 0):
        if uncompressed - prefix > SNAPPY_MAX_RATIO * (compressed - prefix):
            return _BAD_COMPRESSED, pos, kind, buf, 0, 0, 0, scratch
        if scratch.shape[0] < uncompressed + SLACK:
            scratch = np.empty(uncompressed + SLACK, np.uint8)
        scratch[:prefix] = buf[body:body + prefix]
        if snappy_decompress(buf, body + prefix, body + compressed,
                             scratch[prefix:uncompressed + SLACK]) != uncompressed - prefix:
            return _BAD_COMPRESSED, pos, kind, buf, 0, 0, 0, scratch
        return DECODED, pos, kind, scratch, 0, uncompressed, prefix, scratch
    return DECODED, pos, kind, buf, body, body + compressed, prefix, scratch


def _level_bytes() -> np.ndarray:
    """Per byte of bit-packed definition levels (bit width 1): its 8 levels as 8 bytes of 0 or 1, in one uint64."""
    table = np.zeros(256, np.uint64)
    for byte in range(256):
        for bit in range(8):
            table[byte] |= np.uint64((byte >> bit) & 1) << np.uint64(8 * bit)
    return table


_LEVEL_BYTES = _level_bytes()
#: Multiplying 8 bytes of 0 or 1 by this sums them into the top byte (a popcount of the 8 levels).
_BYTE_SUM = np.uint64(0x0101010101010101)


@njit(nogil=True, cache=True)
def _levels_into(buf, pos, end, count, valid, row):
    """Decode ``count`` definition levels (bit width 1, the RLE/bit-packing hybrid in ``buf[pos:end]``) into
    ``valid[row:row + count]`` as bytes of 0 or 1; return ``(position after the runs or -1, levels that are 1)``.

    Why not :func:`_rle_hybrid`: levels went to an int64 array and were then copied to ``valid`` and summed
    in a second loop, ~2.6 ns a row (TPC-DS's optional columns, ~4% NULL, are mostly short bit-packed runs).
    Here a bit-packed byte becomes its 8 level bytes with one table look-up and one 8-byte store, counted by
    one multiply, and a repeated run is a fill: ~0.3 ns a row. A repeated value other than 0 or 1 is
    malformed (-1), as are runs past ``end``.
    """
    if pos < 0 or end > buf.shape[0] or row < 0 or row + count > valid.shape[0]:
        return -1, 0
    filled = 0
    present = 0
    while filled < count:
        if pos >= end:
            return -1, 0
        run, pos = _varint(buf, pos)
        if pos < 0 or run < 0:
            return -1, 0
        if run & 1 == 0:  # a repeated level
            if pos >= end:
                return -1, 0
            value = np.int64(buf[pos])
            pos += 1
            if value > 1:
                return -1, 0
            stop = min(count, filled + (run >> 1))
            valid[row + filled:row + stop] = value
            present += value * (stop - filled)
            filled = stop
        else:  # groups of 8 bit-packed levels: one byte each
            groups = run >> 1
            if groups > end - pos:
                return -1, 0
            take = min(count - filled, groups * 8)
            whole = take // 8
            at = row + filled
            counted = np.uint64(0)
            for k in range(whole):
                word = _LEVEL_BYTES[buf[pos + k]]
                _store_word(valid, at + 8 * k, word)
                counted += (word * _BYTE_SUM) >> np.uint64(56)
            present += np.int64(counted)
            for i in range(8 * whole, take):  # the last byte's first levels
                level = (buf[pos + (i >> 3)] >> (i & 7)) & 1
                valid[at + i] = level
                present += level
            pos += groups
            filled += take
    return pos, present


@njit(nogil=True, cache=True)
def _definition_levels(data, at, stop, kind, page, prefix, max_definition, values, valid, row):
    """Read a data page's definition levels at ``at``; return ``(status, position after them, present, levels)``.

    For an optional column the levels go to ``valid[row:row + values]`` (1 = not null), which comes
    back as ``levels`` (the page's levels, indexed from its first row), and ``present`` counts the
    non-null rows; a required column has none (``levels`` is then empty and not to be read). Levels
    are checked to be 0 or 1 as they are read, and a v2 page's row and null counts against them.
    """
    if max_definition == 0:
        levels = valid[0:0]
        if kind == _DATA_PAGE_V2:
            if page[2] != 0 or page[3] != values:
                return _BAD_COUNTS, at, 0, levels
            return DECODED, at + prefix, values, levels
        return DECODED, at, values, levels
    levels = valid[row:row + values]
    if kind == _DATA_PAGE:
        if page[3] != _RLE:
            return UNSUPPORTED, at, 0, levels
        if at + 4 > stop:
            return _BAD_LEVELS, at, 0, levels
        size = _read_le32(data, at)
        at += 4
    else:
        size = prefix
    if at + size > stop:
        return _BAD_LEVELS, at, 0, levels
    done, present = _levels_into(data, at, at + size, values, valid, row)
    if done < 0:
        return _BAD_LEVELS, at, 0, levels
    if kind == _DATA_PAGE_V2 and (page[2] != values - present or page[3] != values):
        return _BAD_COUNTS, at, 0, levels
    return DECODED, at + size, present, levels


# ----------------------------------------------------------------- the device decoder's page table
# Columns of a page table row (int64): one row a page of the column chunks a device decode takes
# (:func:`plan_chunk` fills it, :mod:`gpu_engine.kernels.parquet_device`'s kernels read it).
_KIND = 0  # _DATA_PAGE, _DATA_PAGE_V2 or _DICTIONARY_PAGE
_BODY = 1  # the page body's first byte in the staged chunk bytes
_COMPRESSED = 2  # the body's bytes
_DATA = 3  # where the page's uncompressed bytes go in the device page buffer
_DATA_LEN = 4  # how many
_PREFIX = 5  # a v2 page's level bytes (never compressed)
_DECOMPRESS = 6  # 1: Snappy after the prefix; 0: copy the body as it is
_VALUES = 7  # the page's values (with nulls)
_ENCODING = 8
_V2_NULLS = 9
_V2_ROWS = 10
_ROW = 11  # the page's first row in the decoded column
_DICT = 12  # the row of this chunk's dictionary page, -1 when none came before
_DICT_COUNT = 13  # the dictionary's values
_PENDING = 14  # a status the host found in the header, reported once the page's bytes uncompressed
_INDEX = 15  # the page's index in its chunk (as the host decoder counts pages, the dictionary page first)
_AT = 16  # the page header's first byte in the file
_CHUNK = 17  # which chunk of the column (row group order)
FIELDS = 18

#: The codec :func:`plan_chunk` takes to only check the counts (:func:`check_page_counts`): no page is planned.
COUNTS_ONLY = -1


@njit(nogil=True, cache=True)
def plan_chunk(buf, start, length, codec, max_definition, rows, width, chunk, stage, first_row, data, table, count):
    """Walk one column chunk's page headers once: check its value counts and append its pages to a page table.

    Why one walk: the device decoder needs both the host decoder's count check (:func:`check_page_counts`,
    the first error a read reports) and a page table; reading each chunk's headers once per piece serves
    both. Returns ``(status, page, at, table, count, data, counts_status, counts_page, counts_at)``.

    The last three are :func:`check_page_counts`'s answer for ``rows`` rows. The first six plan the
    pages for the device: ``buf`` is the file's bytes and ``buf[start:start + length]`` the chunk, which
    will lie at ``stage`` in the staged bytes; its rows start at ``first_row`` of the column and its
    uncompressed pages at ``data`` of the page buffer. ``table`` holds ``count`` pages so far (grown and
    handed back). ``status`` is :data:`DECODED`, :data:`UNSUPPORTED` (the column goes to the host decoder)
    or a corruption found in the headers that the host decoder would report after the chunk's earlier
    pages (those were appended; ``page`` and ``at`` name the bad one). A corruption the host decoder
    reports only after uncompressing the page is put in the page's ``_PENDING`` field instead, and the
    plan ends there with :data:`DECODED`. ``data`` comes back past the chunk's uncompressed pages. A
    ``codec`` of ``COUNTS_ONLY`` plans nothing (:data:`UNSUPPORTED`) and only checks the counts.
    """
    header = np.empty(16, np.int64)
    page = np.empty(16, np.int64)
    end = start + length
    planning = True
    plan_status, plan_page, plan_at = DECODED, 0, start
    if codec != CODEC_UNCOMPRESSED and codec != CODEC_SNAPPY or max_definition > 1:
        planning = False
        plan_status = UNSUPPORTED
    if start < 0 or length < 0 or end > buf.shape[0]:
        if planning:
            plan_status = CORRUPT
        return plan_status, plan_page, plan_at, table, count, data, CORRUPT, 0, start
    pos = start
    total = 0  # values of the data pages so far (the count check)
    row = 0  # values of the planned data pages
    index = -1
    dictionary = -1
    dictionary_count = 0
    while pos < end:
        index += 1
        at = pos
        status, pos = _page_header(buf, pos, end, header, page)
        if status == _SKIP_PAGE:
            continue
        if status != DECODED:
            if planning:
                plan_status, plan_page, plan_at = status, index, at
            return plan_status, plan_page, plan_at, table, count, data, status, index, at
        kind = header[1]
        uncompressed = header[2]
        compressed = header[3]
        body = pos
        pos += compressed
        if planning:
            planning = False  # until the page is planned to the end
            prefix = 0
            decompress = codec == CODEC_SNAPPY and not (kind == _DATA_PAGE_V2 and page[7] == 0)
            if kind == _DATA_PAGE_V2:
                prefix = page[5]
            if kind == _DATA_PAGE_V2 and (page[6] > 0 or prefix > compressed or prefix > uncompressed):
                plan_status, plan_page, plan_at = _BAD_SIZES, index, at
            elif decompress and uncompressed - prefix > SNAPPY_MAX_RATIO * (compressed - prefix):
                plan_status, plan_page, plan_at = _BAD_COMPRESSED, index, at
            else:
                data_length = uncompressed if decompress else compressed
                if count == table.shape[0]:
                    grown = np.zeros((2 * table.shape[0], table.shape[1]), np.int64)
                    grown[:count] = table[:count]
                    table = grown
                entry = table[count]
                entry[:] = 0
                entry[_KIND] = kind
                entry[_BODY] = stage + body - start
                entry[_COMPRESSED] = compressed
                entry[_DATA] = data
                entry[_DATA_LEN] = data_length
                entry[_PREFIX] = prefix
                entry[_DECOMPRESS] = 1 if decompress else 0
                entry[_ROW] = first_row + row
                entry[_DICT] = dictionary
                entry[_DICT_COUNT] = dictionary_count
                entry[_INDEX] = index
                entry[_AT] = at
                entry[_CHUNK] = chunk
                count += 1
                data += data_length
                values = page[1]
                # What the host decoder checks once the page is uncompressed (decode_chunk, in its order).
                if kind == _DICTIONARY_PAGE:
                    if dictionary >= 0 or row > 0:
                        entry[_PENDING] = _BAD_DICTIONARY
                        plan_status, plan_page, plan_at = DECODED, index, at
                    elif page[2] != _PLAIN and page[2] != _PLAIN_DICTIONARY:
                        plan_status, plan_page, plan_at = UNSUPPORTED, index, at
                    elif values * width > data_length:
                        entry[_PENDING] = _BAD_DICTIONARY
                        plan_status, plan_page, plan_at = DECODED, index, at
                    else:
                        entry[_VALUES] = values
                        entry[_DICT_COUNT] = values
                        dictionary = count - 1
                        dictionary_count = values
                        planning = True
                else:
                    encoding = page[2] if kind == _DATA_PAGE else page[4]
                    entry[_VALUES] = values
                    entry[_ENCODING] = encoding
                    if kind == _DATA_PAGE_V2:
                        entry[_V2_NULLS] = page[2]
                        entry[_V2_ROWS] = page[3]
                    if row + values > rows:
                        entry[_PENDING] = _EXTRA_VALUES
                        plan_status, plan_page, plan_at = DECODED, index, at
                    elif max_definition == 1 and kind == _DATA_PAGE and page[3] != _RLE or (
                            encoding != _PLAIN and encoding != _PLAIN_DICTIONARY and encoding != _RLE_DICTIONARY):
                        plan_status, plan_page, plan_at = UNSUPPORTED, index, at
                    else:
                        row += values
                        planning = True
        if kind != _DICTIONARY_PAGE:
            total += page[1]
            if total > rows:
                return plan_status, plan_page, plan_at, table, count, data, _EXTRA_VALUES, index, at
    counts_status = _MISSING_VALUES if total < rows else DECODED
    if planning:
        plan_status, plan_page, plan_at = counts_status, index + 1, end
    return plan_status, plan_page, plan_at, table, count, data, counts_status, index + 1, end


@njit(nogil=True, cache=True)
def check_page_counts(buf, start, length, rows):
    """Read only a column chunk's page headers: return ``(status, page, at)``, DECODED when its data pages hold ``rows`` values.

    Why: a chunk the decoder leaves to pyarrow is still checked for the counts pyarrow does not
    compare (a page declaring one value too many shifts an optional column's later rows there; a
    row group's ``num_rows`` one short drops rows). For a column that is not repeated, values are rows.
    ``page`` and ``at`` name the page a corruption is about (its index, and its first byte). The walk
    is :func:`plan_chunk`'s, planning no page.
    """
    walked = plan_chunk(buf, start, length, COUNTS_ONLY, 0, rows, 0, 0, 0, 0, 0, np.zeros((1, FIELDS), np.int64), 0)
    return walked[6], walked[7], walked[8]


@njit(nogil=True, cache=True)
def dictionary_values(buf, start, length):
    """Read only a column chunk's page headers: return ``(dictionary values, values of other data pages)``.

    The first is the dictionary page's value count, -1 when the chunk's first page is not a dictionary
    page or a header is malformed (the read of the column reports it); the second counts the values of
    data pages that are not dictionary-encoded (a writer falls back to PLAIN pages when its dictionary
    outgrows its page). Why: how many distinct strings a row group's column holds is in this header,
    so deciding whether the column repeats its values (``gpu_engine.connectors.data_source.repeats_values``)
    need not decode them.
    """
    header = np.empty(16, np.int64)
    page = np.empty(16, np.int64)
    end = start + length
    if start < 0 or length < 0 or end > buf.shape[0]:
        return -1, 0
    pos = start
    values = -1
    other = 0
    while pos < end:
        status, pos = _page_header(buf, pos, end, header, page)
        if status == _SKIP_PAGE:
            continue
        if status != DECODED:
            return -1, 0
        pos += header[3]
        kind = header[1]
        if kind == _DICTIONARY_PAGE:
            if values >= 0 or other > 0:
                return -1, 0
            values = page[1]
            continue
        if values < 0:
            return -1, 0
        encoding = page[2] if kind == _DATA_PAGE else page[4]
        if encoding != _PLAIN_DICTIONARY and encoding != _RLE_DICTIONARY:
            other += page[1]
    return values, other


# ----------------------------------------------------------------- wanted rows only
@njit(nogil=True, cache=True)
def _wanted_values(data, at_values, data_end, encoding, dictionary, has_dictionary, max_definition, levels, values,
                   present, wanted, first, last, row, out, out_bytes, valid, positions):
    """Write the values of one data page's wanted rows ``wanted[first:last]`` (the page's rows start at ``row``) to
    ``out[first:last]`` (nulls 0, and ``valid`` when optional); return ``(status, positions)`` (a buffer kept)."""
    width = out.itemsize
    if positions.shape[0] < last - first:
        positions = np.empty(max(last - first, 2 * positions.shape[0]), np.int64)
    # Each wanted row's position among the page's non-null values (-1: NULL).
    if max_definition == 0:
        for j in range(first, last):
            positions[j - first] = wanted[j] - row
    else:
        seen = 0
        i = 0
        for j in range(first, last):
            target = wanted[j] - row
            while i < target:
                seen += levels[i]
                i += 1
            positions[j - first] = seen if levels[target] else -1
            valid[j] = levels[target]
    if encoding == _PLAIN:
        if at_values + present * width > data_end:
            return _SHORT_VALUES, positions
        for j in range(first, last):
            p = positions[j - first]
            if p < 0:
                out[j] = 0
            else:
                out_bytes[j * width:(j + 1) * width] = data[at_values + p * width:at_values + (p + 1) * width]
        return DECODED, positions
    if encoding != _PLAIN_DICTIONARY and encoding != _RLE_DICTIONARY:
        return UNSUPPORTED, positions
    # Non-null wanted rows, packed to the front in order; nulls written 0 after.
    count = 0
    for j in range(first, last):
        if positions[j - first] >= 0:
            positions[count] = positions[j - first]
            count += 1
    if present:
        if not has_dictionary:
            return _NO_DICTIONARY, positions
        if at_values >= data_end:
            return _SHORT_VALUES, positions
        bit_width = np.int64(data[at_values])
        if bit_width > 32:
            return _BAD_BIT_WIDTH, positions
        gathered = np.empty(count, out.dtype)
        done = _rle_hybrid(data, at_values + 1, data_end, bit_width, dictionary, gathered, 0, present,
                           dictionary.shape[0], positions, 0, count)
        if done < 0:
            return _index_status(done), positions
        k = 0
        for j in range(first, last):
            if max_definition == 0 or valid[j]:
                out[j] = gathered[k]
                k += 1
            else:
                out[j] = 0
    else:
        for j in range(first, last):
            out[j] = 0
    return DECODED, positions


# ----------------------------------------------------------------- column chunks
@njit(nogil=True, cache=True)
def decode_chunk(buf, start, length, codec, max_definition, rows, out, valid, scratch, spare, wanted=None):
    """Decode one column chunk of fixed-width values into ``out[:rows]`` (and ``valid[:rows]`` when optional).

    ``buf`` is the file's bytes, ``start``/``length`` the chunk's range (its dictionary page first, when
    it has one), ``codec`` :data:`CODEC_UNCOMPRESSED` or :data:`CODEC_SNAPPY`, ``max_definition`` 0 for
    a required column and 1 for an optional one, ``out`` an int32/int64/float32/float64 array of the
    column's physical type, and ``valid`` a uint8 array (1 = not null; untouched when required). Null
    slots of ``out`` are 0. ``scratch`` and ``spare`` are uint8 buffers the caller keeps between calls
    (any size, even empty): pages are uncompressed into them, grown as needed. Returns ``(status,
    page, at, scratch, spare)``: the status :data:`DECODED`, :data:`UNSUPPORTED` or a corruption (at
    or below :data:`CORRUPT`, see :func:`describe`), the page it is about (its index in the chunk, the
    dictionary page first) and that page's first byte, and the two buffers to pass to the next call.

    The pages must hold exactly ``rows`` values and fill the chunk's bytes exactly; every size, count,
    offset and dictionary code is checked against the bytes it reads from as it is read.

    Why the caller's buffers: a TPC-H dictionary page holds ~100K values (800 KB); copied into fresh
    memory per row group it page-faulted for more time than its values took to unpack (l_partkey at
    SF1: 99 -> 45 ms of 101 with this). The dictionary page is uncompressed into one buffer and read
    in place while the data pages go to the other.

    With ``wanted`` (increasing ``int32`` rows in ``[0, rows)``), only those rows are decoded, into
    ``out[:len(wanted)]`` (and ``valid``, one byte a wanted row). Why: when a scan's join-key filters keep
    few rows (TPC-DS q7 keeps 0.3% of ``store_sales``), unpacking every value of its other columns cost
    more than the rest of their read. A data page holding no wanted row is neither uncompressed nor
    decoded (its header is read, its values counted); in the others the levels are read whole and only
    the wanted rows' values unpacked, from bit-packed runs by position. Values not read are not checked
    (a dictionary code out of range in a row no one reads is not reported); every header, count and run
    is. Each ``wanted is not None`` below is decided as numba compiles: without ``wanted`` the code is the
    whole-chunk decoder alone.
    """
    if codec != CODEC_UNCOMPRESSED and codec != CODEC_SNAPPY:
        return UNSUPPORTED, 0, start, scratch, spare
    if max_definition > 1:
        return UNSUPPORTED, 0, start, scratch, spare
    width = out.itemsize
    out_bytes = out.view(np.uint8)
    header = np.empty(16, np.int64)
    page = np.empty(16, np.int64)
    dictionary = np.empty(0, out.dtype)
    has_dictionary = False
    levels = valid[0:0]  # (the page's levels: a view of valid, see _definition_levels)
    end = start + length
    if start < 0 or length < 0 or end > buf.shape[0]:
        return CORRUPT, 0, start, scratch, spare
    pos = start
    row = 0
    index = -1
    cursor = 0  # (wanted rows only) the first wanted row not yet decoded
    page_valid = np.empty(0, np.uint8)
    positions = np.empty(0, np.int64)
    while pos < end:
        index += 1
        at = pos
        if wanted is not None:  # a data page holding no wanted row: count its values, skip its bytes
            peek, body = _page_header(buf, pos, end, header, page)
            if peek == DECODED and (header[1] == _DATA_PAGE or header[1] == _DATA_PAGE_V2):
                if row + page[1] > rows:
                    return _EXTRA_VALUES, index, at, scratch, spare
                if cursor >= wanted.shape[0] or wanted[cursor] >= row + page[1]:
                    row += page[1]
                    pos = body + header[3]
                    continue
        status, pos, kind, data, data_start, data_end, prefix, scratch = _next_page(
            buf, pos, end, codec, header, page, scratch)
        if status == _SKIP_PAGE:
            continue
        if status != DECODED:
            return status, index, at, scratch, spare
        if kind == _DICTIONARY_PAGE:
            if has_dictionary or row > 0:
                return _BAD_DICTIONARY, index, at, scratch, spare
            count = page[1]
            if page[2] != _PLAIN and page[2] != _PLAIN_DICTIONARY:
                return UNSUPPORTED, index, at, scratch, spare
            if data_start + count * width > data_end:
                return _BAD_DICTIONARY, index, at, scratch, spare
            if codec == CODEC_SNAPPY:  # _next_page uncompressed it into scratch: keep it there
                scratch, spare = spare, scratch
            else:  # a page of the file itself (no codec): copy its values out, aligned
                if spare.shape[0] < count * width:
                    spare = np.empty(count * width, np.uint8)
                spare[:count * width] = data[data_start:data_start + count * width]
            dictionary = spare[:count * width].view(out.dtype)
            has_dictionary = True
            continue
        values = page[1]
        encoding = page[2] if kind == _DATA_PAGE else page[4]
        if row + values > rows:
            return _EXTRA_VALUES, index, at, scratch, spare
        if wanted is not None:
            if page_valid.shape[0] < values:
                page_valid = np.empty(values, np.uint8)
            status, at_values, present, levels = _definition_levels(data, data_start, data_end, kind, page, prefix,
                                                                    max_definition, values, page_valid, 0)
            if status != DECODED:
                return status, index, at, scratch, spare
            first = cursor
            while cursor < wanted.shape[0] and wanted[cursor] < row + values:
                cursor += 1
            status, positions = _wanted_values(data, at_values, data_end, encoding, dictionary, has_dictionary,
                                               max_definition, levels, values, present, wanted, first, cursor, row,
                                               out, out_bytes, valid, positions)
            if status != DECODED:
                return status, index, at, scratch, spare
            row += values
            continue
        status, at_values, present, levels = _definition_levels(data, data_start, data_end, kind, page, prefix,
                                                                max_definition, values, valid, row)
        if status != DECODED:
            return status, index, at, scratch, spare
        # Values of the non-null rows go to the front of the page's rows; nulls are spread out below.
        if encoding == _PLAIN:
            if at_values + present * width > data_end:
                return _SHORT_VALUES, index, at, scratch, spare
            out_bytes[row * width:(row + present) * width] = data[at_values:at_values + present * width]
        elif encoding == _PLAIN_DICTIONARY or encoding == _RLE_DICTIONARY:
            if present:
                if not has_dictionary:
                    return _NO_DICTIONARY, index, at, scratch, spare
                if at_values >= data_end:
                    return _SHORT_VALUES, index, at, scratch, spare
                bit_width = np.int64(data[at_values])
                if bit_width > 32:
                    return _BAD_BIT_WIDTH, index, at, scratch, spare
                done = _rle_hybrid(data, at_values + 1, data_end, bit_width, dictionary, out, row, present,
                                   dictionary.shape[0])
                if done < 0:
                    return _index_status(done), index, at, scratch, spare
        else:
            return UNSUPPORTED, index, at, scratch, spare
        if present < values:  # spread the values over the rows, from the back, zeroing nulls
            # Unsigned indices into the page's rows: numba then emits no negative-index wrap-around a read and a write
            # (3.8 -> 2.6 ms over 2.9M rows at 4.5% NULLs); no further than the first null: the rows before it are in
            # place. ``source`` never passes 0: ``present`` counts the levels that are 1.
            page_out = out[row:row + values]
            source = np.uint64(present)
            i = np.uint64(values)
            while source < i:
                i -= np.uint64(1)
                if levels[i]:
                    source -= np.uint64(1)
                    page_out[i] = page_out[source]
                else:
                    page_out[i] = 0
        row += values
    if row < rows:
        return _MISSING_VALUES, index + 1, end, scratch, spare
    return DECODED, index + 1, end, scratch, spare


# ----------------------------------------------------------------- strings (BYTE_ARRAY)
@njit(nogil=True, cache=True)
def _reserve(chars, used, extra):
    """Return ``chars`` or a copy with room for ``extra`` more bytes after ``used`` (doubling)."""
    if used + extra <= chars.shape[0]:
        return chars
    grown = np.empty(max(2 * chars.shape[0], used + extra), np.uint8)
    grown[:used] = chars[:used]
    return grown


@njit(nogil=True, cache=True)
def _string_dictionary(data, start, stop, count):
    """Copy a dictionary page's ``count`` PLAIN strings out of ``data[start:stop]``; return ``(status, offsets, chars)``.

    Each string takes at least its 4-byte length, so a count the page cannot hold is refused before
    anything is allocated for it.
    """
    if count * 4 > stop - start:
        return _BAD_DICTIONARY, np.zeros(1, np.int64), np.empty(0, np.uint8)
    dict_offsets = np.zeros(count + 1, np.int64)
    dict_chars = np.empty(stop - start + SLACK, np.uint8)
    at = start
    filled = 0
    for v in range(count):
        if at + 4 > stop:
            return _BAD_DICTIONARY, dict_offsets, dict_chars
        size = _read_le32(data, at)
        at += 4
        if at + size > stop:
            return _BAD_DICTIONARY, dict_offsets, dict_chars
        if at + size + 8 <= data.shape[0] and filled + size + 8 <= dict_chars.shape[0]:
            for k in range(0, size, 8):
                _store_word(dict_chars, filled + k, _load_word(data, at + k))
        else:
            for k in range(size):
                dict_chars[filled + k] = data[at + k]
        filled += size
        at += size
        dict_offsets[v + 1] = filled
    return DECODED, dict_offsets, dict_chars[:filled]


@njit(nogil=True, cache=True)
def _string_values(data, at, stop, encoding, as_codes, has_dictionary, nullable, levels, values, present, row,
                   codes, offsets, chars, used, dict_offsets, dict_chars, indices):
    """Decode a data page's strings (or codes) into rows ``row:row + values``; return ``(status, chars, used, indices)``.

    ``at`` is where the page's values start (after its levels); ``chars`` (``used`` bytes filled) and
    ``indices`` are grown as needed and handed back.
    """
    empty64 = np.empty(0, np.int64)
    if encoding == _PLAIN_DICTIONARY or encoding == _RLE_DICTIONARY:
        size = dict_offsets.shape[0] - 1
        bit_width = 0
        if present:
            if not has_dictionary:
                return _NO_DICTIONARY, chars, used, indices
            if at >= stop:
                return _SHORT_VALUES, chars, used, indices
            bit_width = np.int64(data[at])
            if bit_width > 32:
                return _BAD_BIT_WIDTH, chars, used, indices
        if as_codes and present == values:  # no nulls on this page: the indices are the codes
            if present:
                done = _rle_hybrid(data, at + 1, stop, bit_width, empty64, codes, row, present, size)
                if done < 0:
                    return _index_status(done), chars, used, indices
            return DECODED, chars, used, indices
        if indices.shape[0] < present:
            indices = np.empty(present, np.int64)
        if present:
            done = _rle_hybrid(data, at + 1, stop, bit_width, empty64, indices, 0, present, size)
            if done < 0:
                return _index_status(done), chars, used, indices
        source = 0
        for i in range(values):
            if not nullable or levels[i]:
                index = indices[source]  # below size: _rle_hybrid checked it
                source += 1
                if as_codes:
                    codes[row + i] = index
                else:
                    first = dict_offsets[index]
                    span = dict_offsets[index + 1] - first
                    if used + span + 8 > chars.shape[0]:  # (a call per value would cost reference counting)
                        chars = _reserve(chars, used, span + 8)
                    if first + span + 8 <= dict_chars.shape[0]:
                        for k in range(0, span, 8):
                            _store_word(chars, used + k, _load_word(dict_chars, first + k))
                    else:
                        for k in range(span):
                            chars[used + k] = dict_chars[first + k]
                    used += span
            elif as_codes:
                codes[row + i] = 0
            if not as_codes:
                offsets[row + i + 1] = used
        return DECODED, chars, used, indices
    if encoding == _PLAIN and not as_codes:
        for i in range(values):
            if not nullable or levels[i]:
                if at + 4 > stop:
                    return _SHORT_VALUES, chars, used, indices
                span = _read_le32(data, at)
                at += 4
                if at + span > stop:
                    return _SHORT_VALUES, chars, used, indices
                if used + span + 8 > chars.shape[0]:
                    chars = _reserve(chars, used, span + 8)
                if at + span + 8 <= data.shape[0]:
                    for k in range(0, span, 8):
                        _store_word(chars, used + k, _load_word(data, at + k))
                else:
                    for k in range(span):
                        chars[used + k] = data[at + k]
                used += span
                at += span
            offsets[row + i + 1] = used
        return DECODED, chars, used, indices
    return UNSUPPORTED, chars, used, indices


@njit(nogil=True, cache=True)
def first_invalid_utf8(offsets, chars, count):
    """Return the index of the first of ``count`` strings ``chars[offsets[i]:offsets[i + 1]]`` that is not UTF-8, else -1.

    Why: Parquet's strings are UTF-8, and the engine's string columns (Arrow's) and its operators rely on
    it (grouping interns keys as Python strings); DuckDB refuses such a file too, while pyarrow's reader
    hands the bytes on. ASCII, every TPC-H string, is recognised a word at a time by OR-ing the bytes
    (memory speed: ~2 ms over SF 0.1's 20 MB of ``l_comment``, against ~120 ms to decode it); only
    chunks holding other bytes are checked string by string (a sequence split between two strings
    must not pass).
    """
    start = offsets[0]
    end = offsets[count]
    if start < 0 or end > chars.shape[0] or start > end:
        return 0
    high = np.uint64(0)
    at = start
    while at + 8 <= end:
        high |= _load_word(chars, at)
        at += 8
    while at < end:
        high |= np.uint64(chars[at])
        at += 1
    if high & np.uint64(0x8080808080808080) == 0:
        return -1
    for index in range(count):
        at = offsets[index]
        stop = offsets[index + 1]
        while at < stop:
            lead = np.int64(chars[at])
            if lead < 0x80:
                at += 1
                continue
            low, high_second = 0x80, 0xBF  # the range of the byte after the lead (the others: 0x80-0xBF)
            if 0xC2 <= lead <= 0xDF:
                follow = 1
            elif lead == 0xE0:
                follow, low = 2, 0xA0
            elif 0xE1 <= lead <= 0xEC or 0xEE <= lead <= 0xEF:
                follow = 2
            elif lead == 0xED:  # no surrogates
                follow, high_second = 2, 0x9F
            elif lead == 0xF0:
                follow, low = 3, 0x90
            elif 0xF1 <= lead <= 0xF3:
                follow = 3
            elif lead == 0xF4:  # nothing past U+10FFFF
                follow, high_second = 3, 0x8F
            else:
                return index
            if at + follow >= stop:  # the sequence runs past its string
                return index
            second = np.int64(chars[at + 1])
            if second < low or second > high_second:
                return index
            for k in range(2, follow + 1):
                byte = np.int64(chars[at + k])
                if byte < 0x80 or byte > 0xBF:
                    return index
            at += follow + 1
    return -1


@njit(nogil=True, cache=True)
def remap_codes(mapping, codes):
    """Rewrite each dictionary code as ``mapping[code]``, in place (every code indexes ``mapping``).

    Why: a row group's codes recoded onto a column's canonical dictionary
    (``parquet_columns.CanonicalDictionary``) in one pass and no allocation; ``np.take`` first widened
    the int32 codes to intp and wrote a new array (~95 -> ~50 us over 114K codes, loaded).
    """
    for i in range(len(codes)):
        codes[i] = mapping[codes[i]]


@njit(nogil=True, cache=True)
def decode_strings_chunk(buf, start, length, codec, max_definition, rows, as_codes, size_hint, scratch):
    """Decode one BYTE_ARRAY column chunk; return ``(status, page, at, codes, valid, offsets, chars, dict_offsets, dict_chars, scratch)``.

    ``status``, ``page`` and ``at`` are as :func:`decode_chunk` returns them. With ``as_codes`` every
    data page must be dictionary-encoded: ``codes`` (int32, one a row) index the chunk's dictionary
    ``dict_offsets``/``dict_chars``, and ``offsets``/``chars`` are empty (a PLAIN page, which writers
    fall back to when a dictionary grows too large, gives :data:`UNSUPPORTED`). Otherwise the
    strings themselves come back as int64 ``offsets`` (rows + 1) and ``chars``, dictionary pages
    expanded. ``valid`` (uint8, 1 = not null) is empty for a required column; null rows are empty
    strings and code 0. ``size_hint`` is a first guess of the chars' size (no more than the chunk's
    bytes can uncompress to is taken of it). ``scratch`` is a uint8 buffer the caller keeps between
    calls, as for :func:`decode_chunk`; the tuple returned ends with it (grown as needed) for the next
    call. Codes are checked against the dictionary as they are read.
    """
    codes = np.empty(rows if as_codes else 0, np.int32)  # every row is written: its code, or 0 when null
    valid = np.ones(rows if max_definition == 1 else 0, np.uint8)
    offsets = np.zeros(0 if as_codes else rows + 1, np.int64)
    hint = min(size_hint, SNAPPY_MAX_RATIO * max(length, 0))
    chars = np.empty(0 if as_codes else max(hint, 16), np.uint8)
    dict_offsets = np.zeros(1, np.int64)
    dict_chars = np.empty(0, np.uint8)
    has_dictionary = False
    header = np.empty(16, np.int64)
    page = np.empty(16, np.int64)
    levels = valid[0:0]
    indices = np.empty(0, np.int64)
    nullable = max_definition == 1  # else every row holds a value (levels are not read)
    end = start + length
    status = DECODED
    if (codec != CODEC_UNCOMPRESSED and codec != CODEC_SNAPPY) or max_definition > 1:
        status = UNSUPPORTED
    elif start < 0 or length < 0 or end > buf.shape[0]:
        status = CORRUPT
    pos = start
    at = start
    index = -1
    row = 0
    used = 0
    while status == DECODED and pos < end:
        index += 1
        at = pos
        status, pos, kind, data, data_start, data_end, prefix, scratch = _next_page(
            buf, pos, end, codec, header, page, scratch)
        if status == _SKIP_PAGE:
            status = DECODED
            continue
        if status != DECODED:
            break
        if kind == _DICTIONARY_PAGE:
            if has_dictionary or row > 0:
                status = _BAD_DICTIONARY
            elif page[2] != _PLAIN and page[2] != _PLAIN_DICTIONARY:
                status = UNSUPPORTED
            else:
                status, dict_offsets, dict_chars = _string_dictionary(data, data_start, data_end, page[1])
                has_dictionary = True
            continue
        values = page[1]
        encoding = page[2] if kind == _DATA_PAGE else page[4]
        if row + values > rows:
            status = _EXTRA_VALUES
            break
        status, at_values, present, levels = _definition_levels(data, data_start, data_end, kind, page, prefix,
                                                                max_definition, values, valid, row)
        if status != DECODED:
            break
        status, chars, used, indices = _string_values(
            data, at_values, data_end, encoding, as_codes, has_dictionary, nullable, levels, values, present, row,
            codes, offsets, chars, used, dict_offsets, dict_chars, indices)
        row += values
    if status == DECODED and row < rows:
        status = _MISSING_VALUES
        index += 1
        at = end
    if chars.shape[0] > 2 * used + (1 << 20):  # the buffer grew by doubling: keep only what is used
        return status, index, at, codes, valid, offsets, chars[:used].copy(), dict_offsets, dict_chars, scratch
    return status, index, at, codes, valid, offsets, chars[:used], dict_offsets, dict_chars, scratch
