"""Decode Parquet column chunks of fixed-width values on the device: the host plans pages, kernels do the rest.

Why: read cold from Parquet, the engine spent its time on the host decoding
pages and packing decoded columns for the copy (issue 32: TPC-H SF10 cold
41 s against DuckDB's 8 s on an H100, the GPU waiting). Here only the
*compressed* column chunk goes to the device; Snappy, definition levels,
dictionary codes and PLAIN values are decoded there, straight into the
engine's device column buffers.

How the work is split:

* the host reads the chunk's page headers (the Thrift parser of
  :mod:`gpu_engine.kernels.parquet_pages`, cheap: a few hundred bytes a page)
  into a page table (:func:`plan_chunk`, one row of :data:`FIELDS` int64 a page:
  where its body lies in the staged chunk bytes, where its uncompressed bytes
  go, its value count, encodings and first row). Everything a header alone
  decides is checked there: sizes inside the chunk, a dictionary page first,
  no more values than rows. A layout the kernels do not take (another
  encoding, levels not RLE) makes the whole column go to the host decoder;
* three kernels then run over all pages of a column's chunks at once, so a
  column of a piece costs a fixed three launches (:func:`decode_pages`):
  ``_expand`` (a block per page: Snappy decompressed by the block's first
  thread, a sequential tag parse per page, as a first version; uncompressed
  pages copied by all its threads), ``_levels`` (a block per page: its first
  lane reads each run header of the definition levels and dictionary codes and
  expands the short runs, all lanes expand the long ones together, each code checked against the
  dictionary's size; the non-null rows numbered by a block scan) and
  ``_values`` (a thread per row: each row's value bytes copied from its page,
  or from its dictionary page by its code; nulls 0);
* each page ends with a status word; the caller reads the page statuses and
  non-null counts of all the columns of a piece back at once (one host sync a
  piece, not a page) and names the first bad page as the host decoder would
  (:func:`first_failure`).

Every count, index and offset the kernels use was checked on the host against
the staged bytes or is checked as it is read (a Snappy copy's offset, a run's
length, a code against the dictionary's size), so no kernel reads or writes
outside its buffers, whatever the bytes say.

The same kernel code runs in numba's CUDA simulator (``cuda-sim``), which is
how CI checks it against pyarrow without a GPU.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, int64, njit
from numba.extending import register_jitable

from gpu_engine.kernels.launch import launch_cuda
# The page table (its columns, and plan_chunk, which fills it) is planned with the host decoder's header parser.
from gpu_engine.kernels.parquet_pages import (
    _AT, _BAD_BIT_WIDTH, _BAD_COMPRESSED, _BAD_COUNTS, _BAD_DICTIONARY, _BAD_INDEX, _BAD_LEVELS, _BAD_SIZES, _BODY,
    _CHUNK, _COMPRESSED, _DATA, _DATA_LEN, _DATA_PAGE, _DATA_PAGE_V2, _DECOMPRESS, _DICT, _DICT_COUNT,
    _DICTIONARY_PAGE, _ENCODING, _EXTRA_VALUES, _INDEX, _KIND, _MISSING_VALUES, _NO_DICTIONARY, _PENDING, _PLAIN,
    _PLAIN_DICTIONARY, _PREFIX, _RLE, _RLE_DICTIONARY, _ROW, _SHORT_VALUES, _SKIP_PAGE, _V2_NULLS, _V2_ROWS, _VALUES,
    CODEC_SNAPPY, CODEC_UNCOMPRESSED, CORRUPT, DECODED, FIELDS, SNAPPY_MAX_RATIO, UNSUPPORTED, _page_header,
    plan_chunk,
)

__all__ = ["plan_chunk", "precompile_calls", "new_page_table", "data_pages_of", "dictionary_encoded", "decode_pages",
           "first_failure", "FIELDS", "LAUNCHES_PER_COLUMN"]

#: Kernel launches :func:`decode_pages` makes for a column of any number of pages and chunks.
LAUNCHES_PER_COLUMN = 3


def new_page_table(capacity: int = 16) -> np.ndarray:
    """Return an empty page table with room for ``capacity`` pages (:func:`plan_chunk` grows it)."""
    return np.zeros((max(1, capacity), FIELDS), np.int64)


# ----------------------------------------------------------------- device functions
#: Inlined into the kernels that call them (as kernels/strings.py's row helpers): compiled with each kernel, so the
#: PTX is made ahead without a GPU, and plain Python in the simulator.
_device_function = register_jitable(_nrt=False)


@_device_function
def _snappy(src, start, end, dst, first, length):
    """Decompress the Snappy block ``src[start:end]`` into ``dst[first:first + length]``; return True when it fills it exactly.

    One thread parses the tags in order (a copy may read bytes the previous one wrote); every
    literal and copy is checked against both ranges before a byte moves.
    """
    pos = start
    declared = 0
    shift = 0
    done = False
    while pos < end and shift < 35:
        byte = np.int64(src[pos])
        pos += 1
        declared |= (byte & 0x7F) << shift
        if byte < 0x80:
            done = True
            break
        shift += 7
    if not done or declared != length:
        return False
    out = 0
    while pos < end:
        tag = np.int64(src[pos])
        pos += 1
        kind = tag & 3
        if kind == 0:
            size = (tag >> 2) + 1
            if size > 60:
                extra = size - 60
                if pos + extra > end:
                    return False
                size = 0
                for k in range(extra):
                    size |= np.int64(src[pos + k]) << (8 * k)
                pos += extra
                size += 1
            if pos + size > end or out + size > length:
                return False
            for k in range(size):
                dst[first + out + k] = src[pos + k]
            pos += size
            out += size
            continue
        if kind == 1:
            if pos >= end:
                return False
            size = ((tag >> 2) & 7) + 4
            offset = ((tag >> 5) << 8) | np.int64(src[pos])
            pos += 1
        elif kind == 2:
            if pos + 2 > end:
                return False
            size = (tag >> 2) + 1
            offset = np.int64(src[pos]) | (np.int64(src[pos + 1]) << 8)
            pos += 2
        else:
            if pos + 4 > end:
                return False
            size = (tag >> 2) + 1
            offset = (np.int64(src[pos]) | (np.int64(src[pos + 1]) << 8) | (np.int64(src[pos + 2]) << 16)
                      | (np.int64(src[pos + 3]) << 24))
            pos += 4
        if offset == 0 or offset > out or out + size > length:
            return False
        for k in range(size):  # byte by byte: an overlapping copy repeats its pattern
            dst[first + out + k] = dst[first + out - offset + k]
        out += size
    return out == length


# ----------------------------------------------------------------- kernels
@cuda.jit
def _expand(staged, table, pages, status):
    """Uncompress (or copy) each page's body into the page buffer: a block per page (grid-stride over pages)."""
    lane = cuda.threadIdx.x
    lanes = cuda.blockDim.x
    for p in range(cuda.blockIdx.x, table.shape[0], cuda.gridDim.x):
        body = table[p, _BODY]
        data = table[p, _DATA]
        if table[p, _DECOMPRESS] == 0:
            for k in range(lane, table[p, _DATA_LEN], lanes):
                pages[data + k] = staged[body + k]
            continue
        prefix = table[p, _PREFIX]
        for k in range(lane, prefix, lanes):
            pages[data + k] = staged[body + k]
        if lane == 0:
            if not _snappy(staged, body + prefix, body + table[p, _COMPRESSED], pages, data + prefix,
                           table[p, _DATA_LEN] - prefix):
                status[p, 0] = _BAD_COMPRESSED


#: Lanes of a block the cooperative kernels take at most, and the size of their shared scan buffer (one more).
_MAX_LANES = 1024
_SCAN_SLOTS = _MAX_LANES + 1


#: Runs of fewer values than this are expanded by lane 0 as it reads them; longer ones by all the block's lanes.
_SHARED_RUN = 32


@_device_function
def _runs_block(buf, pos, end, bit_width, out, base, count, bound, state, lane, lanes):
    """Decode ``count`` values of the RLE/bit-packing hybrid ``buf[pos:end]`` into ``out[base:base + count]``, as a block.

    Every lane of the block calls it (it synchronizes the block). Lane 0 reads the run headers in
    order and expands the short runs itself; a run of :data:`_SHARED_RUN` values or more is handed
    to all the lanes, which expand it together (a repeated value written, or bit-packed values
    unpacked one a lane). Every value is checked against ``bound``. ``state`` is a shared int64
    array of 8. Returns, in every lane, the position after the runs read, -1 when they run past
    ``end`` or are malformed, -2 when a value is ``bound`` or more (as the host decoder's
    ``_rle_hybrid``, without its word loads: a value's bytes are read one by one, never past its run).
    """
    mask = (np.int64(1) << bit_width) - 1
    value_bytes = (bit_width + 7) // 8
    cuda.syncthreads()  # every lane has read the state of the call before
    if lane == 0:
        state[0] = pos  # the cursor, then the result
        state[5] = 0  # values filled
        state[6] = 0  # a lane met a value out of bound
    result = np.int64(-1)
    while True:
        if lane == 0:
            cursor = state[0]
            filled = state[5]
            kind = 2  # 0 or 1: a long run for all lanes; 2: done; 3: failed (cursor holds -1 or -2)
            while True:
                if state[6] != 0:
                    cursor = -2
                    kind = 3
                    break
                if filled >= count:
                    break
                if cursor >= end:
                    cursor = -1
                    kind = 3
                    break
                run = np.int64(0)
                shift = 0
                done = False
                while cursor < end and shift < 64:
                    byte = np.int64(buf[cursor])
                    cursor += 1
                    run |= (byte & 0x7F) << shift
                    if byte < 0x80:
                        done = True
                        break
                    shift += 7
                if not done or run < 0:
                    cursor = -1
                    kind = 3
                    break
                take = count - filled
                if run & 1 == 0:
                    if cursor + value_bytes > end:
                        cursor = -1
                        kind = 3
                        break
                    value = np.int64(0)
                    for k in range(value_bytes):
                        value |= np.int64(buf[cursor + k]) << (8 * k)
                    if value >= bound:
                        cursor = -2
                        kind = 3
                        break
                    cursor += value_bytes
                    if run >> 1 < take:
                        take = run >> 1
                    if take >= _SHARED_RUN:
                        kind = 0
                        state[3] = take
                        state[4] = value
                        break
                    for i in range(take):
                        out[base + filled + i] = value
                    filled += take
                else:
                    groups = run >> 1
                    if bit_width > 0 and groups > (end - cursor) // bit_width:
                        cursor = -1
                        kind = 3
                        break
                    if groups * 8 < take:
                        take = groups * 8
                    if take >= _SHARED_RUN:
                        kind = 1
                        state[2] = cursor
                        state[3] = take
                        cursor += groups * bit_width
                        break
                    for i in range(take):
                        bit = i * bit_width
                        at = cursor + (bit >> 3)
                        word = np.int64(0)
                        for k in range(((bit & 7) + bit_width + 7) >> 3):
                            word |= np.int64(buf[at + k]) << (8 * k)
                        value = (word >> (bit & 7)) & mask
                        if value >= bound:
                            kind = 3
                            break
                        out[base + filled + i] = value
                    if kind == 3:
                        cursor = -2
                        break
                    filled += take
                    cursor += groups * bit_width
            state[0] = cursor
            state[1] = kind
            state[5] = filled
        cuda.syncthreads()
        kind = state[1]
        result = state[0]
        if kind >= 2:
            break
        first = base + state[5]
        take = state[3]
        if kind == 0:
            value = state[4]
            for i in range(lane, take, lanes):
                out[first + i] = value
        else:
            data = state[2]
            for i in range(lane, take, lanes):
                bit = i * bit_width
                at = data + (bit >> 3)
                word = np.int64(0)
                for k in range(((bit & 7) + bit_width + 7) >> 3):
                    word |= np.int64(buf[at + k]) << (8 * k)
                value = (word >> (bit & 7)) & mask
                if value >= bound:
                    state[6] = 1  # (every lane that meets one writes the same)
                else:
                    out[first + i] = value
        cuda.syncthreads()
        if lane == 0:
            state[5] += take
    return result


@_device_function
def _slots_block(valid, slots, row, values, scan, lane, lanes):
    """Number the non-null rows of a page as a block (each row's value among the page's values, -1 for NULL).

    Each lane counts the non-null rows of its own run of ``values / lanes`` rows, lane 0 adds the
    counts up (``scan``, shared), and each lane numbers its run from its start: two barriers a page
    whatever its size. Returns the page's non-null values in every lane.
    """
    span = (values + lanes - 1) // lanes
    first = lane * span
    last = first + span
    if last > values:
        last = values
    count = np.int64(0)
    for i in range(first, last):
        if valid[row + i] != 0:
            count += 1
    scan[lane] = count
    cuda.syncthreads()
    if lane == 0:
        total = np.int64(0)
        for k in range(lanes):
            here = scan[k]
            scan[k] = total
            total += here
        scan[lanes] = total
    cuda.syncthreads()
    slot = scan[lane]
    for i in range(first, last):
        if valid[row + i] != 0:
            slots[row + i] = slot
            slot += 1
        else:
            slots[row + i] = -1
    return scan[lanes]  # (lane 0 writes it again only past the next call's first barrier)


@cuda.jit
def _levels(pages, table, max_definition, width, valid, slots, codes, status):
    """Check each data page and read its levels and dictionary codes: a block per page, its lanes together.

    Writes ``valid`` and ``slots`` (the row's value among the page's non-null values, -1 for NULL)
    of an optional column, ``codes`` (at the page's first row on) of a dictionary page, and per page
    ``status[p, 0]`` (0 or a corruption), ``status[p, 1]`` its non-null values and ``status[p, 2]``
    where its values start. Every lane makes the same checks (so all meet every barrier of
    :func:`_runs_block` and :func:`_slots_block`); lane 0 writes the status.
    """
    lane = cuda.threadIdx.x
    lanes = cuda.blockDim.x
    # Twice, with a barrier between: numba's CUDA simulator allocates a shared array when a thread first reaches its
    # line, without a lock, so lanes starting together may each get one of their own; the second time every lane
    # gets the one that was kept. On a GPU each line is one static allocation.
    for _ in range(2):
        state = cuda.shared.array(8, int64)
        scan = cuda.shared.array(_SCAN_SLOTS, int64)
        cuda.syncthreads()
    for p in range(cuda.blockIdx.x, table.shape[0], cuda.gridDim.x):
        # Every lane makes each decision from the same bytes (the page table and the page buffer, which nothing
        # writes here), so all take the same branches; only lane 0 writes a status. (A lane that reads status[p, 0]
        # after lane 0 wrote a page's pending status skips the page as lane 0 does.)
        kind = table[p, _KIND]
        values = table[p, _VALUES]
        row = table[p, _ROW]
        at = table[p, _DATA]
        stop = at + table[p, _DATA_LEN]
        if status[p, 0] != 0:
            continue
        failed = table[p, _PENDING]
        if failed == 0 and kind == _DICTIONARY_PAGE:
            continue
        size = np.int64(0)
        if failed == 0:
            if max_definition == 0:
                if kind == _DATA_PAGE_V2:
                    if table[p, _V2_NULLS] != 0 or table[p, _V2_ROWS] != values:
                        failed = _BAD_COUNTS
                    at += table[p, _PREFIX]
            else:
                if kind == _DATA_PAGE:
                    if at + 4 > stop:
                        failed = _BAD_LEVELS
                    else:
                        size = (np.int64(pages[at]) | (np.int64(pages[at + 1]) << 8)
                                | (np.int64(pages[at + 2]) << 16) | (np.int64(pages[at + 3]) << 24))
                        at += 4
                else:
                    size = table[p, _PREFIX]
                if failed == 0 and at + size > stop:
                    failed = _BAD_LEVELS
        if failed != 0:
            if lane == 0:
                status[p, 0] = failed
            continue
        present = values
        if max_definition != 0:
            if _runs_block(pages, at, at + size, 1, valid, row, values, 2, state, lane, lanes) < 0:
                if lane == 0:
                    status[p, 0] = _BAD_LEVELS
                continue
            present = _slots_block(valid, slots, row, values, scan, lane, lanes)
            if kind == _DATA_PAGE_V2 and (table[p, _V2_NULLS] != values - present or table[p, _V2_ROWS] != values):
                if lane == 0:
                    status[p, 0] = _BAD_COUNTS
                continue
            at += size
        if table[p, _ENCODING] == _PLAIN:
            if at + present * width > stop:
                if lane == 0:
                    status[p, 0] = _SHORT_VALUES
                continue
        elif present > 0:
            failed = 0
            if table[p, _DICT] < 0:
                failed = _NO_DICTIONARY
            elif at >= stop:
                failed = _SHORT_VALUES
            elif np.int64(pages[at]) > 32:
                failed = _BAD_BIT_WIDTH
            if failed != 0:
                if lane == 0:
                    status[p, 0] = failed
                continue
            done = _runs_block(pages, at + 1, stop, np.int64(pages[at]), codes, row, present, table[p, _DICT_COUNT],
                               state, lane, lanes)
            if done < 0:
                if lane == 0:
                    status[p, 0] = _BAD_INDEX if done == -2 else _SHORT_VALUES
                continue
        if lane == 0:
            status[p, 1] = present
            status[p, 2] = at


@cuda.jit
def _values(pages, table, data_pages, max_definition, width, slots, codes, status, out, rows):
    """Copy each row's value bytes from its page (PLAIN) or its dictionary page (by code): a thread per row.

    Null rows, and rows of a page whose status is not 0, get zero bytes.
    """
    for row in range(cuda.grid(1), rows, cuda.gridsize(1)):
        low = 0
        high = data_pages.shape[0] - 1
        while low < high:  # the last data page starting at or before the row
            middle = (low + high + 1) >> 1
            if table[data_pages[middle], _ROW] <= row:
                low = middle
            else:
                high = middle - 1
        p = data_pages[low]
        source = -1
        slot = row - table[p, _ROW]
        if status[p, 0] == 0 and 0 <= slot < table[p, _VALUES]:  # (rows of a chunk that ended early: no page)
            if max_definition != 0:
                slot = slots[row]
            if slot >= 0:
                if table[p, _ENCODING] == _PLAIN:
                    source = status[p, 2] + slot * width
                else:
                    source = table[table[p, _DICT], _DATA] + np.int64(codes[table[p, _ROW] + slot]) * width
        target = row * width
        if source < 0:
            for k in range(width):
                out[target + k] = 0
        else:
            for k in range(width):
                out[target + k] = pages[source + k]


# ----------------------------------------------------------------- entry point
def precompile_calls(device) -> list[tuple[object, tuple]]:
    """Return :func:`plan_chunk` with arguments of the types the device decoder gives it (``cuda`` and
    ``cuda-sim``, where the decoder runs; none elsewhere).

    Why: it runs on the host and compiles at its first use in a process that never ran it; ``gpu-engine
    precompile`` compiles it at set-up (:mod:`gpu_engine.codegen.static_kernels`) wherever the device
    decoder can run, so a fresh install's first scan does not compile it on a driver. The file's bytes
    are a read-only memory map (numba types read-only arrays apart).
    """
    if device.kernel_flavor != "cuda":
        return []
    file_bytes = np.zeros(1, np.uint8)
    file_bytes.flags.writeable = False
    return [(plan_chunk, (file_bytes, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, new_page_table(1), 0))]


def data_pages_of(table: np.ndarray) -> np.ndarray:
    """Return the rows of a page table that are data pages (int64, in row order): the values kernel searches them."""
    return np.flatnonzero(table[:, _KIND] != _DICTIONARY_PAGE).astype(np.int64)


def dictionary_encoded(table: np.ndarray) -> bool:
    """Return True when a data page of the table holds dictionary codes (the decode then needs a codes buffer)."""
    return bool((table[data_pages_of(table), _ENCODING] != _PLAIN).any())


def decode_pages(device, staged, table, data_pages, status, rows: int, width: int, dtype, max_definition: int,
                 page_bytes: int, with_codes: bool):
    """Queue the three kernels that decode a column's pages; return ``(values, valid)`` on the device.

    Parameters
    ----------
    device
        A device whose kernels are the numba.cuda twins (``cuda``, or ``cuda-sim`` in CI).
    staged, table, data_pages
        On ``device``: the column's chunks' bytes (uint8, where the table's ``_BODY`` fields point), its
        page table (:func:`plan_chunk`, trimmed to its pages) and the table's data pages
        (:func:`data_pages_of`).
    status
        A zeroed int64 ``(pages, 3)`` device array: column 0 gets each page's status (0 or a
        corruption), column 1 its non-null values. The caller reads it back, once for all the columns
        of a piece, and checks it (:func:`first_failure`) before using the values.
    rows, width, dtype
        The column's rows and its physical values' bytes and dtype.
    max_definition
        0 for a required column, 1 for an optional one.
    page_bytes
        The uncompressed bytes of all pages (``data`` after the last :func:`plan_chunk`).
    with_codes
        Whether a data page is dictionary-encoded (:func:`dictionary_encoded`).

    Returns
    -------
    tuple
        ``rows`` values of ``dtype`` and a uint8 validity (1 = not null; empty when required), both on
        ``device``, valid once the status says so. :data:`LAUNCHES_PER_COLUMN` launches at most.
    """
    xp = device.xp
    pages = table.shape[0]
    out = xp.zeros(rows, dtype=dtype) if pages == 0 else xp.empty(rows, dtype=dtype)
    valid = xp.empty(rows if max_definition else 0, dtype=xp.uint8)
    if pages == 0:
        return out, valid
    buffer = xp.empty(max(page_bytes, 1), dtype=xp.uint8)
    slots = xp.empty(rows if max_definition else 1, dtype=xp.int32)
    codes = xp.empty(rows if with_codes else 1, dtype=xp.int32)
    launch_cuda(device, _expand, pages * device.threads_per_block, staged, table, buffer, status, max_blocks=pages)
    launch_cuda(device, _levels, pages * device.threads_per_block, buffer, table, max_definition, width, valid, slots,
                codes, status, max_blocks=pages)
    if data_pages.shape[0] and rows:
        launch_cuda(device, _values, rows, buffer, table, data_pages, max_definition, width, slots, codes, status,
                    out.view(xp.uint8), rows)
    return out, valid


def first_failure(table: np.ndarray, status: np.ndarray, chunk_errors: list[tuple[int, int, int]]):
    """Return ``(chunk, status, page, at)`` of the first corruption in chunk and page order, or None.

    ``chunk_errors`` holds, per chunk, what :func:`plan_chunk` returned for it (``(status, page, at)``):
    a page the kernels flagged comes before its chunk's header corruption, which the host decoder
    meets only after the pages before it, and a chunk before the chunks after it.
    """
    bad = np.flatnonzero(status[:, 0] != 0) if status.shape[0] else np.zeros(0, np.int64)
    first_bad_chunk = int(table[bad[0], _CHUNK]) if bad.shape[0] else len(chunk_errors)
    for chunk, (error, page, at) in enumerate(chunk_errors[:first_bad_chunk]):
        if error != DECODED:
            return chunk, error, page, at
    if bad.shape[0]:
        p = int(bad[0])
        return first_bad_chunk, int(status[p, 0]), int(table[p, _INDEX]), int(table[p, _AT])
    return None
