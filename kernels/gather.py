"""Gather rows of arrays and columns by an index array (a gather map).

Why: gather maps are how this engine selects, reorders and partitions rows
without copying; every consumer that needs flat buffers ends in one of these
gathers. Strings get fresh offsets (an exclusive scan of the gathered lengths)
and a char-copy kernel; dictionary columns move only their 4-byte codes.
"""

from __future__ import annotations

from typing import Any

from numba import cuda, njit

from gpu_engine.columnar.column import Column
from gpu_engine.device import Device
from gpu_engine.kernels.launch import launch_twin, read_only

__all__ = ["gather", "gather_column", "dictionary_row_validity", "decoded_column", "rows_or_dictionary"]


# ------------------------------------------------------------------- CPU twins
@njit(nogil=True, cache=True)
def _gather_cpu(array, indices, out):
    # NumPy's take casts int32 indices to a fresh intp array and checks every bound on each call:
    # 1.2-2x this loop's time for the 10K-1M-row gathers of joins and filters (up to 6x where the
    # cast array page-faults). Indices here are the engine's own gather maps, in range by construction.
    for i in range(indices.shape[0]):
        out[i] = array[indices[i]]


@njit(nogil=True, cache=True)
def _string_spans_cpu(offsets, indices, starts, lengths):
    for i in range(indices.shape[0]):
        row = indices[i]
        starts[i] = offsets[row]
        lengths[i] = offsets[row + 1] - offsets[row]


@njit(nogil=True, cache=True)
def _copy_string_chars_cpu(starts, chars, new_offsets, new_chars):
    for i in range(starts.shape[0]):
        source = starts[i]
        target = new_offsets[i]
        for k in range(new_offsets[i + 1] - target):
            new_chars[target + k] = chars[source + k]


# ------------------------------------------------------------------ CUDA twins
@cuda.jit
def _gather_cuda(array, indices, out):
    for i in range(cuda.grid(1), indices.shape[0], cuda.gridsize(1)):
        out[i] = array[indices[i]]


@cuda.jit
def _string_spans_cuda(offsets, indices, starts, lengths):
    for i in range(cuda.grid(1), indices.shape[0], cuda.gridsize(1)):
        row = indices[i]
        starts[i] = offsets[row]
        lengths[i] = offsets[row + 1] - offsets[row]


@cuda.jit
def _copy_string_chars_cuda(starts, chars, new_offsets, new_chars):
    for i in range(cuda.grid(1), starts.shape[0], cuda.gridsize(1)):
        source = starts[i]
        target = new_offsets[i]
        for k in range(new_offsets[i + 1] - target):
            new_chars[target + k] = chars[source + k]


# ---------------------------------------------------------------- entry points
def gather(device: Device, array: Any, indices: Any) -> Any:
    """Return ``array[indices]`` for a fixed-width 1-D array (or rows of a 2-D one: wide decimals' words).

    Parameters
    ----------
    device
        Where both arrays live; selects the twin (numba on the CPU, numba.cuda otherwise).
    array
        Values to gather from (any fixed-width dtype, bool included).
    indices
        ``int32`` or ``int64`` row indices, each in ``[0, len(array))``.

    Returns
    -------
    array
        ``len(indices)`` values of ``array.dtype`` on ``device``.
    """
    xp = device.xp
    if array.ndim == 2:  # a wide decimal's (low, high) words: gather each word (take would flatten)
        out = xp.empty((indices.shape[0], array.shape[1]), dtype=array.dtype)
        for k in range(array.shape[1]):
            out[:, k] = gather(device, xp.ascontiguousarray(array[:, k]), indices)
        return out
    out = xp.empty(indices.shape[0], dtype=array.dtype)
    launch_twin(device, indices.shape[0], _gather_cpu, _gather_cuda, read_only(xp, array),  # one signature a type
                xp.ascontiguousarray(indices), out)
    return out


def _gather_strings(device: Device, offsets: Any, chars: Any, indices: Any) -> tuple[Any, Any]:
    xp = device.xp
    count = indices.shape[0]
    offsets = xp.ascontiguousarray(offsets.astype(xp.int64, copy=False))
    indices = xp.ascontiguousarray(indices)
    new_offsets = xp.zeros(count + 1, dtype=xp.int64)
    if count == 0:
        return new_offsets, xp.empty(0, dtype=xp.uint8)
    # Reading each row's span once (the random access) leaves the char copy a sequential pass over starts.
    starts = xp.empty(count, dtype=xp.int64)
    lengths = xp.empty(count, dtype=xp.int64)
    launch_twin(device, count, _string_spans_cpu, _string_spans_cuda, offsets, indices, starts, lengths)
    new_offsets[1:] = xp.cumsum(lengths)
    new_chars = xp.empty(int(device.read_scalar(new_offsets, -1)), dtype=xp.uint8)
    if new_chars.shape[0]:
        launch_twin(device, count, _copy_string_chars_cpu, _copy_string_chars_cuda,
                    starts, chars, new_offsets, new_chars)
    return new_offsets, new_chars


def gather_column(device: Device, column: Column, indices: Any) -> Column:
    """Return the rows ``indices`` of ``column`` as a new flat column.

    Why: this materializes a gather map. Plain strings are compacted into new
    chars with offsets starting at 0; a dictionary column keeps (shares) its
    dictionary and gathers only the codes.

    Parameters
    ----------
    device
        Where the column and indices live.
    column
        Any column.
    indices
        ``int32`` or ``int64`` row indices into ``column``.

    Returns
    -------
    Column
        ``len(indices)`` rows; validity is ``None`` when ``column.validity`` is.
    """
    validity = None if column.validity is None else gather(device, column.validity, indices)
    if column.is_dictionary:
        return Column(column.dtype, gather(device, column.data, indices), validity, None, column.dictionary)
    if column.offsets is not None:
        offsets, chars = _gather_strings(device, column.offsets, column.data, indices)
        return Column(column.dtype, chars, validity, offsets, None)
    return Column(column.dtype, gather(device, column.data, indices), validity)


def dictionary_row_validity(device: Device, column: Column) -> Any:
    """Return the per-row validity of a dictionary column, counting null dictionary values.

    Why: a row is null when its own validity says so *or* when its code points
    at a null dictionary entry; kernels that read values through the dictionary
    need both in one array. Returns ``None`` when no row can be null.
    """
    dictionary_validity = column.dictionary.validity
    if dictionary_validity is None or len(column.dictionary) == 0:
        return column.validity
    through_codes = gather(device, dictionary_validity, column.data)
    return through_codes if column.validity is None else through_codes & column.validity


def decoded_column(device: Device, column: Column) -> Column:
    """Return a dictionary column's values row by row as a plain string column (a plain column as it is).

    A row is NULL where its own validity or its dictionary entry says so; an empty dictionary (an all-NULL
    column) gives empty NULL rows.
    """
    if column.dictionary is None:
        return column
    xp, rows = device.xp, len(column)
    if len(column.dictionary) == 0:  # no value to gather: its codes index nothing
        return Column(column.dtype, xp.zeros(0, dtype=xp.uint8), xp.zeros(rows, dtype=xp.bool_),
                      xp.zeros(rows + 1, dtype=xp.int64), None)
    values = gather_column(device, column.dictionary, column.data)
    return Column(column.dtype, values.data, dictionary_row_validity(device, column), values.offsets, None)


def rows_or_dictionary(device: Device, column: Column) -> Column:
    """Return ``column`` decoded (:func:`decoded_column`) when its dictionary holds more values than it has
    rows, else as it is.

    Why: per-value work on a dictionary (interning its strings, hashing, ranking or packing them as key
    words, then gathering the results by code) is meant to be done once for many rows; over a batch of fewer
    rows than values it costs more than the same work on the rows' own strings. A hash build side of up to
    ``DICTIONARY_BUILD_MAX_ROWS`` (65,536) rows keeps its strings as a dictionary, so a few rows joined to
    TPC-DS's item (18,000 rows at SF1) carried all of them: q65's TopN over 115 rows ranked ``i_item_desc``'s
    13,453 values at each compaction, and q22's rollup over 9,000 pre-aggregated rows interned
    ``i_product_name``'s 17,964 values in every merge step (whose emitted keys then carried every interned
    value on). Decoded, the work is the rows'; an interner keeps only the strings rows use.
    """
    if column.dictionary is None or len(column.dictionary) <= len(column):
        return column
    return decoded_column(device, column)
