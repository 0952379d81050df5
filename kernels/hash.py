"""Hash key columns row-wise to 64 bits, with the same result on every device.

Why: LocalPartition, PartitionedOutput and hash joins must agree on which rows
share a hash whichever device (or twin) computed it. So both twins call the same
scalar mixing functions below -- numba njit functions, which numba.cuda compiles
as device functions when a CUDA kernel calls them -- and only their loops differ.

Kernel bodies wrap reused njit results in ``np.uint64(...)``: a no-op when
compiled, but under the CUDA simulator njit calls return Python ints, which the
next call would otherwise type as int64.

Consumers that bucket rows which were already partitioned by ``hash % n`` must
not reuse these low bits (they are constant within a partition); the group-by
table, for one, hashes its own normalized key words with a different mix.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from numba import cuda, njit

from gpu_engine.columnar.column import Column
from gpu_engine.columnar.types import is_floating, is_interval, is_string
from gpu_engine.device import Device
from gpu_engine.kernels.gather import dictionary_row_validity, gather, rows_or_dictionary
from gpu_engine.kernels.launch import launch_twin, read_only

__all__ = [
    "hash_columns",
    "fixed_width_key_words",
    "fmix64",
    "combine_hash",
    "NULL_HASH",
    "CANONICAL_NAN_BITS",
]

SEED = np.uint64(0x243F6A8885A308D3)
NULL_HASH = np.uint64(0x5BD1E9955BD1E995)
CANONICAL_NAN_BITS = np.uint64(0x7FF8000000000000)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MAGNITUDE_BITS = np.uint64(0x7FFFFFFFFFFFFFFF)
_INFINITY_BITS = np.uint64(0x7FF0000000000000)
_FMIX_1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX_2 = np.uint64(0xC4CEB9FE1A85EC53)
_U2 = np.uint64(2)
_U6 = np.uint64(6)
_U33 = np.uint64(33)


@njit(nogil=True, cache=True)
def fmix64(h):
    """Return murmur3's 64-bit finalizer of ``h`` (a bijection with full avalanche)."""
    h ^= h >> _U33
    h *= _FMIX_1
    h ^= h >> _U33
    h *= _FMIX_2
    h ^= h >> _U33
    return h


@njit(nogil=True, cache=True)
def combine_hash(h, k):
    """Fold the hash ``k`` of the next column into the running row hash ``h`` (order matters)."""
    return fmix64(h ^ (k + _GOLDEN + (h << _U6) + (h >> _U2)))


@njit(nogil=True, cache=True)
def _string_hash_start(length):
    return fmix64(SEED ^ np.uint64(length))


@njit(nogil=True, cache=True)
def _string_hash_step(h, word):
    return fmix64(h ^ word)


@njit(nogil=True, cache=True)
def _combine_column_word(h, word, valid):
    return combine_hash(h, fmix64(word) if valid else NULL_HASH)


# ------------------------------------------------------------------- CPU twins
@njit(nogil=True, cache=True)
def _string_hashes_cpu(offsets, chars, out):
    for i in range(out.shape[0]):
        start = offsets[i]
        stop = offsets[i + 1]
        h = np.uint64(_string_hash_start(stop - start))
        word = np.uint64(0)
        shift = 0
        for position in range(start, stop):
            word |= np.uint64(chars[position]) << np.uint64(shift)
            shift += 8
            if shift == 64:
                h = np.uint64(_string_hash_step(h, word))
                word = np.uint64(0)
                shift = 0
        if shift:
            h = np.uint64(_string_hash_step(h, word))
        out[i] = h


@njit(nogil=True, cache=True)
def _double_key_words_cpu(bits, out):
    """Write each double's key word from its bits: every NaN as one NaN, -0.0 as 0.0, any other value as is."""
    for i in range(bits.shape[0]):
        word = bits[i]
        magnitude = word & _MAGNITUDE_BITS
        if magnitude > _INFINITY_BITS:  # all exponent bits and some mantissa bit: a NaN
            out[i] = CANONICAL_NAN_BITS
        elif magnitude == 0:
            out[i] = np.uint64(0)
        else:
            out[i] = word


@njit(nogil=True, cache=True)
def _combine_column_cpu(hashes, words, validity, has_validity, first):
    for i in range(hashes.shape[0]):
        valid = validity[i] if has_validity else True
        hashes[i] = _combine_column_word(SEED if first else hashes[i], words[i], valid)


# ------------------------------------------------------------------ CUDA twins
@cuda.jit
def _string_hashes_cuda(offsets, chars, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        start = offsets[i]
        stop = offsets[i + 1]
        h = np.uint64(_string_hash_start(stop - start))
        word = np.uint64(0)
        shift = 0
        for position in range(start, stop):
            word |= np.uint64(chars[position]) << np.uint64(shift)
            shift += 8
            if shift == 64:
                h = np.uint64(_string_hash_step(h, word))
                word = np.uint64(0)
                shift = 0
        if shift:
            h = np.uint64(_string_hash_step(h, word))
        out[i] = h


@cuda.jit
def _combine_column_cuda(hashes, words, validity, has_validity, first):
    for i in range(cuda.grid(1), hashes.shape[0], cuda.gridsize(1)):
        valid = validity[i] if has_validity else True
        hashes[i] = _combine_column_word(SEED if first else hashes[i], words[i], valid)


# ---------------------------------------------------------------- entry points
def fixed_width_key_words(device: Device, column: Column) -> Any:
    """Return one exact ``uint64`` word per row of a fixed-width column.

    Why: hashing, group-by key normalization and sort keys all need a value's
    identity as 64 bits. Integers, dates, timestamps and decimals give their
    int64 value (so int32 ``-1`` and int64 ``-1`` agree); bool gives 0/1; floats
    give their float64 bit pattern with ``-0.0`` folded into ``0.0`` and every
    NaN into one NaN. Words of null rows are unspecified (callers mask them).

    Parameters
    ----------
    device
        Where ``column`` lives.
    column
        A fixed-width (not string) column.

    Returns
    -------
    array
        ``uint64`` of ``len(column)``; a view of ``column.data`` when no conversion is needed.
    """
    xp = device.xp
    if is_string(column.dtype):
        raise TypeError(f"fixed_width_key_words needs a fixed-width column, not {column.dtype}")
    data = column.data
    if is_interval(column.dtype):
        from gpu_engine.errors import ExecutionError

        raise ExecutionError("this key path does not take INTERVAL values (their keys are the normalized blocks of "
                             "kernels.group_by.normalize_keys)")
    if data.ndim == 2:
        from gpu_engine.errors import ExecutionError

        raise ExecutionError(f"grouping, joining or partitioning on {column.dtype} values beyond 64 bits is not "
                             "supported; CAST the key to a decimal of 18 digits or fewer, or to DOUBLE")
    if is_floating(column.dtype):
        if device.kernel_flavor == "cpu" and data.dtype == np.float64:
            # One pass over the bits: the array operations below made seven over the column and its
            # temporaries (a fifth of db-benchmark q6's driver time went to the median's sort words of 10M doubles).
            out = np.empty(data.shape[0], dtype=np.uint64)
            _double_key_words_cpu(read_only(np, data.view(np.uint64)), out)  # one signature (launch.read_only)
            return out
        # Integer tests on the bits: float arithmetic would raise warnings on signaling NaNs.
        is_nan = data != data
        wide = xp.where(is_nan, data.dtype.type(0), data).astype(xp.float64, copy=False)
        bits = xp.ascontiguousarray(wide).view(xp.uint64)
        is_zero = (bits & _MAGNITUDE_BITS) == 0
        return xp.where(is_nan, CANONICAL_NAN_BITS, xp.where(is_zero, np.uint64(0), bits))
    if data.dtype.kind in "ub":
        return xp.ascontiguousarray(data.astype(xp.uint64, copy=False))
    return xp.ascontiguousarray(data.astype(xp.int64, copy=False)).view(xp.uint64)


def _string_hashes(device: Device, column: Column) -> Any:
    xp = device.xp
    n = len(column)
    out = xp.empty(n, dtype=xp.uint64)
    if n == 0:
        return out
    offsets = xp.ascontiguousarray(column.offsets.astype(xp.int64, copy=False))
    chars = column.data if column.data.shape[0] else xp.zeros(1, dtype=xp.uint8)
    launch_twin(device, n, _string_hashes_cpu, _string_hashes_cuda, offsets, chars, out)
    return out


def _column_hash_words(device: Device, column: Column) -> tuple[Any, Any]:
    """Return per-row words to mix (string hashes for strings) and the row validity."""
    column = rows_or_dictionary(device, column)  # hash a dictionary's values only where they are fewer than rows
    if column.is_dictionary:
        dictionary_hashes = _string_hashes(device, column.dictionary)
        if dictionary_hashes.shape[0] == 0:  # only nulls can point into an empty dictionary
            return device.xp.zeros(len(column), dtype=device.xp.uint64), column.validity
        return gather(device, dictionary_hashes, column.data), dictionary_row_validity(device, column)
    if is_string(column.dtype):
        return _string_hashes(device, column), column.validity
    if is_interval(column.dtype):  # one word of the normalized fields: intervals DuckDB equates route alike
        from gpu_engine.expressions.intervals import normalized_fields

        xp = device.xp
        months, days, micros = (xp.ascontiguousarray(f.astype(xp.int64)).view(xp.uint64)
                                for f in normalized_fields(xp, column.data))
        return (months * _INTERVAL_MIX[0]) ^ (days * _INTERVAL_MIX[1]) ^ micros, column.validity
    return fixed_width_key_words(device, column), column.validity


#: Odd multipliers that spread an INTERVAL's months and days apart before the three fields are combined.
_INTERVAL_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))


def hash_columns(device: Device, columns: Sequence[Column]) -> Any:
    """Return the combined 64-bit hash of each row of one or more key columns.

    Why: partitioning and hash joins route equal keys to the same place, so the
    hash depends only on logical values: the same on every device, for a
    dictionary or a plain string column, for int32 or int64 keys.

    Parameters
    ----------
    device
        Where the columns live; selects the kernel twin.
    columns
        Key columns of equal length (at least one). Nulls hash to a fixed
        constant; floats hash ``-0.0`` as ``0.0`` and all NaNs alike; strings
        hash their UTF-8 bytes.

    Returns
    -------
    array
        ``uint64`` of ``len(columns[0])`` on ``device``.
    """
    if not columns:
        raise ValueError("hash_columns needs at least one column")
    xp = device.xp
    n = len(columns[0])
    hashes = xp.empty(n, dtype=xp.uint64)  # the first column's pass starts every row from SEED
    if n == 0:
        return hashes
    no_validity = xp.zeros(1, dtype=xp.bool_)
    for position, column in enumerate(columns):
        if len(column) != n:
            raise ValueError(f"hash_columns got columns of {n} and {len(column)} rows")
        words, validity = _column_hash_words(device, column)
        has_validity = validity is not None
        validity = xp.ascontiguousarray(validity) if has_validity else no_validity
        launch_twin(device, n, _combine_column_cpu, _combine_column_cuda,
                    hashes, words, validity, has_validity, position == 0)
    return hashes
