"""Hold one column's buffers, in Arrow layout, on a device.

A :class:`Column` is the engine's ``BaseVector``: values (or string chars, or
dictionary codes), an optional per-row validity array and, for strings, offsets.
All buffers are arrays of one device's array module (NumPy or CuPy). The
conversion to and from Arrow lives here because it is the only place where the
Arrow bitmap layout and the engine's byte-per-row validity meet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_engine.columnar.arrow_numpy import has_numpy_layout, numpy_validity, numpy_values
from gpu_engine.columnar.types import (
    MAX_INT64_DECIMAL_PRECISION, is_decimal, is_interval, is_string, normalize_type, physical_dtype,
)
from gpu_engine.device import Device

__all__ = ["Column", "host_fingerprint", "FINGERPRINT_MAX_BYTES"]


@dataclass(eq=False)
class Column:
    """One column of a batch.

    Attributes
    ----------
    dtype
        Logical Arrow type (see :mod:`gpu_engine.columnar.types`).
    data
        Fixed-width values; for strings the ``uint8`` chars; for a dictionary
        column the ``int32`` codes into :attr:`dictionary`.
    validity
        ``bool_`` per row, True where the value is valid; ``None`` when no row is null.
    offsets
        For plain strings: ``int64`` offsets, ``len + 1`` of them, absolute into
        ``data`` (they need not start at 0, so slicing is zero-copy).
    dictionary
        For dictionary-encoded strings: the distinct values, a plain string Column
        on the same device. Filters, gathers and partitioning then move 4-byte codes.
    fingerprint
        On a dictionary's values: a digest of their contents, taken on the host
        when the column came from Arrow (``None`` when unknown or too large to
        be worth hashing). Per-dictionary work (a fused kernel's lookup tables,
        interned keys) is cached by it, without reading the values back.
    """

    dtype: pa.DataType
    data: Any
    validity: Any = None
    offsets: Any = None
    dictionary: "Column | None" = None
    fingerprint: str | None = None

    def __len__(self) -> int:
        if self.dictionary is None and self.offsets is not None:
            return int(self.offsets.shape[0]) - 1
        return int(self.data.shape[0])

    @property
    def is_dictionary(self) -> bool:
        """Return True when :attr:`data` holds codes into :attr:`dictionary`."""
        return self.dictionary is not None

    @property
    def is_string(self) -> bool:
        """Return True for string columns, plain or dictionary-encoded."""
        return is_string(self.dtype)

    @property
    def nbytes(self) -> int:
        """Return the bytes held by this column's buffers (dictionary included)."""
        total = int(self.data.nbytes)
        if self.validity is not None:
            total += int(self.validity.nbytes)
        if self.offsets is not None:
            total += int(self.offsets.nbytes)
        if self.dictionary is not None:
            total += self.dictionary.nbytes
        return total

    # ------------------------------------------------------------------ Arrow in
    @classmethod
    def from_arrow(cls, array: pa.Array | pa.ChunkedArray, device: Device) -> "Column":
        """Copy an Arrow array into device buffers of the engine's layout."""
        host = _column_from_arrow(array)
        return host.to_device(device)

    @classmethod
    def from_strings(cls, values: Sequence[str], device: Device) -> "Column":
        """Return Python strings (no NULLs) as a string column on ``device``, as :meth:`from_arrow` makes it.

        Why not through ``pa.array``: a string literal needs no Arrow array (``pa.array`` also asks whether its
        input is a pandas object, which imports pandas on its first call: 0.26 s of a new process's CPU).
        """
        encoded = [value.encode() for value in values]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.array([len(chunk) for chunk in encoded], dtype=np.int64), out=offsets[1:])
        chars = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
        return cls(pa.string(), chars, None, offsets).to_device(device)

    @classmethod
    def from_numpy(cls, values: np.ndarray, dtype: pa.DataType, device: Device, validity: np.ndarray | None = None) -> "Column":
        """Wrap host values of a fixed-width logical type as a device column."""
        return cls(dtype, device.asarray(values), None if validity is None else device.asarray(validity))

    def to_device(self, device: Device) -> "Column":
        """Return this column with every buffer on ``device`` (no copy where already there)."""
        move = device.asarray
        return Column(
            self.dtype,
            move(self.data),
            None if self.validity is None else move(self.validity),
            None if self.offsets is None else move(self.offsets),
            None if self.dictionary is None else self.dictionary.to_device(device),
            self.fingerprint,
        )

    # ----------------------------------------------------------------- Arrow out
    def to_arrow(self, device: Device) -> pa.Array:
        """Copy this column back to the host as an Arrow array (dictionaries decoded)."""
        n = len(self)
        validity = None if self.validity is None else device.to_host(self.validity)
        mask_buffer = None
        null_count = 0
        if validity is not None:
            null_count = int(n - np.count_nonzero(validity))
            if null_count:
                mask_buffer = pa.py_buffer(np.packbits(validity, bitorder="little"))
        if self.dictionary is not None:
            codes = device.to_host(self.data).astype(np.int32, copy=False)
            if null_count:
                codes = np.where(validity, codes, 0)
            values = self.dictionary.to_arrow(device)
            indices = pa.Array.from_buffers(pa.int32(), n, [mask_buffer, pa.py_buffer(codes)], null_count=null_count)
            return pc.take(values, indices) if len(values) else pa.nulls(n, pa.string())
        if is_string(self.dtype):
            offsets = device.to_host(self.offsets).astype(np.int64, copy=False)
            start, stop = int(offsets[0]), int(offsets[-1])
            chars = device.to_host(self.data)[start:stop]
            rebased = offsets - start if start else offsets
            array = pa.Array.from_buffers(
                pa.large_string(), n, [mask_buffer, pa.py_buffer(rebased), pa.py_buffer(np.ascontiguousarray(chars))],
                null_count=null_count,
            )
            return array.cast(pa.string()) if stop - start < 2**31 - 1 else array
        data = device.to_host(self.data)
        if is_decimal(self.dtype):
            if data.ndim == 2:  # wide: already Arrow's (low, high) words
                words = np.ascontiguousarray(data, dtype=np.int64)
            else:
                values = data.astype(np.int64, copy=False)
                words = np.empty((n, 2), dtype=np.int64)
                words[:, 0] = values
                words[:, 1] = values >> 63
            return pa.Array.from_buffers(self.dtype, n, [mask_buffer, pa.py_buffer(words)], null_count=null_count)
        if is_interval(self.dtype):  # Arrow's month_day_nano: int32 months, int32 days, int64 nanoseconds
            values = np.zeros(n, dtype=_MONTH_DAY_NANO)
            words = data.reshape(n, 3)
            values["months"], values["days"], values["nanos"] = words[:, 0], words[:, 1], words[:, 2] * 1000
            return pa.Array.from_buffers(self.dtype, n, [mask_buffer, pa.py_buffer(values)], null_count=null_count)
        if pa.types.is_boolean(self.dtype):
            bits = pa.py_buffer(np.packbits(data.astype(np.bool_, copy=False), bitorder="little"))
            return pa.Array.from_buffers(pa.bool_(), n, [mask_buffer, bits], null_count=null_count)
        data = np.ascontiguousarray(data.astype(physical_dtype(self.dtype), copy=False))
        return pa.Array.from_buffers(self.dtype, n, [mask_buffer, pa.py_buffer(data)], null_count=null_count)


#: One value of Arrow's month_day_nano interval buffer.
_MONTH_DAY_NANO = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")])

#: Dictionaries with more bytes than this are not fingerprinted (hashing them would cost more than it saves).
FINGERPRINT_MAX_BYTES = 1 << 20


def host_fingerprint(column: Column) -> str | None:
    """Return a digest of a host column's buffers, or None when it is larger than :data:`FINGERPRINT_MAX_BYTES`."""
    import hashlib

    if column.nbytes > FINGERPRINT_MAX_BYTES:
        return None
    digest = hashlib.blake2b(digest_size=16)
    for buffer in (column.offsets, column.data, column.validity):
        if buffer is not None:
            digest.update(np.ascontiguousarray(buffer).view(np.uint8).data)
        digest.update(b"|")
    return digest.hexdigest()


def _read_only(values: np.ndarray) -> np.ndarray:
    """Mark values read from Arrow read-only, as pyarrow's conversion gave them: numba types a writable array
    apart, so a column decoded with NULLs would compile kernels a second time."""
    values.flags.writeable = False
    return values


def _validity_of(array: pa.Array) -> np.ndarray | None:
    if array.null_count == 0:
        return None
    return numpy_validity(array)


def _column_from_arrow(array: pa.Array | pa.ChunkedArray) -> Column:
    """Build a host (NumPy) Column from Arrow, normalizing types on the way."""
    if isinstance(array, pa.ChunkedArray):
        if pa.types.is_dictionary(array.type):
            array = array.unify_dictionaries()
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
        if isinstance(array, pa.ChunkedArray):  # empty chunked array
            array = pa.nulls(0, array.type)
    dtype = array.type
    if pa.types.is_dictionary(dtype):
        if not is_string(dtype.value_type):
            return _column_from_arrow(array.dictionary_decode())
        codes = numpy_values(array.indices.cast(pa.int32()))
        if array.indices.null_count:  # a NULL's code is 0 (not fill_null: its Python scalar imports pandas)
            codes = _read_only(np.where(numpy_validity(array.indices), codes, np.int32(0)))
        dictionary = _column_from_arrow(array.dictionary)
        dictionary.fingerprint = host_fingerprint(dictionary)
        return Column(pa.string(), np.ascontiguousarray(codes), _validity_of(array), None, dictionary)
    logical = normalize_type(dtype)
    validity = _validity_of(array)
    n = len(array)
    if is_string(logical):
        if not pa.types.is_large_string(dtype):
            array = array.cast(pa.large_string())
        buffers = array.buffers()
        if not n:
            return Column(logical, np.zeros(0, np.uint8), validity, np.zeros(1, np.int64), None)
        offsets = np.frombuffer(buffers[1], dtype=np.int64)[array.offset : array.offset + n + 1]
        start, stop = int(offsets[0]), int(offsets[-1])
        # Keep only the chars this slice uses: a sliced Arrow array shares its parent's whole buffer.
        chars = np.frombuffer(buffers[2], dtype=np.uint8)[start:stop] if buffers[2] is not None else np.zeros(0, np.uint8)
        return Column(logical, chars, validity, offsets - start, None)
    if pa.types.is_decimal(dtype) and dtype.bit_width <= 64:  # decimal32/decimal64: one integer a value
        values = np.frombuffer(array.buffers()[1], dtype=np.dtype(f"int{dtype.bit_width}"))[array.offset:array.offset + n]
        values = values.astype(np.int64) if dtype.bit_width < 64 else values
        if validity is not None:
            values = np.where(validity, values, 0)
        return Column(logical, values, validity)
    if pa.types.is_decimal(dtype):
        if pa.types.is_decimal256(dtype):
            try:
                array = array.cast(pa.decimal128(min(dtype.precision, 38), dtype.scale))
            except pa.ArrowInvalid:  # a value past 38 digits: the user's data to narrow, named
                from gpu_engine.errors import DataSourceError

                raise DataSourceError(f"a {dtype} value has more than 38 digits, the most an engine decimal holds; "
                                      "cast the column to a narrower decimal or to float64 before registering it") from None
        words = np.frombuffer(array.buffers()[1], dtype=np.int64)[2 * array.offset : 2 * (array.offset + n)].reshape(n, 2)
        if validity is not None:
            words = np.where(validity[:, None], words, 0)
        if dtype.precision > MAX_INT64_DECIMAL_PRECISION and np.any(words[:, 1] != (words[:, 0] >> 63)):
            # Some value needs 128 bits: keep Arrow's (low, high) words (see gpu_engine.expressions.numeric).
            return Column(logical, np.ascontiguousarray(words), validity)
        return Column(logical, words[:, 0].copy(), validity)
    if is_interval(logical):  # DuckDB keeps microseconds: Arrow's nanoseconds truncated toward zero, as it reads them
        values = np.frombuffer(array.buffers()[1], dtype=_MONTH_DAY_NANO)[array.offset:array.offset + n]
        words = np.empty((n, 3), dtype=np.int64)
        nanos = values["nanos"].astype(np.int64)
        words[:, 0], words[:, 1] = values["months"], values["days"]
        words[:, 2] = np.where(nanos >= 0, nanos // 1000, -((-nanos) // 1000))
        if validity is not None:
            words = np.where(validity[:, None], words, 0)
        return Column(logical, np.ascontiguousarray(words), validity)
    if pa.types.is_date64(dtype):  # milliseconds past a day's start cut toward zero, as DuckDB reads them (a safe
        array = array.cast(pa.date32(), safe=False)  # cast raised Arrow's "would lose data" on any such value)
    if pa.types.is_time(dtype):  # every TIME becomes microseconds of the day (nanoseconds cut), in NumPy:
        ticks = numpy_values(array).astype(np.int64)  # pyarrow's arithmetic with a Python scalar imports pandas
        micros = ticks // 1000 if dtype.unit == "ns" else ticks * {"s": 1_000_000, "ms": 1000, "us": 1}[dtype.unit]
        if validity is not None:  # a NULL's slot holds whatever its buffer held: zeroed, as for other types
            micros = np.where(validity, micros, 0)
        # read-only as every other type's values from Arrow (a writable array is another numba specialization)
        return Column(logical, _read_only(np.ascontiguousarray(micros, dtype=physical_dtype(logical))), validity)
    if pa.types.is_date32(array.type):
        array = array.view(pa.int32())
    elif pa.types.is_timestamp(array.type):
        array = array.view(pa.int64())
    if validity is None:
        values = numpy_values(array)
    elif has_numpy_layout(array.type):  # NULLs' slots zeroed here: fill_null's Python scalar imports pandas
        values = numpy_values(array)
        values = _read_only(np.where(validity, values, np.zeros(1, dtype=values.dtype)))
    else:
        values = numpy_values(array.fill_null(False if pa.types.is_boolean(array.type) else 0))
    return Column(logical, np.ascontiguousarray(values, dtype=physical_dtype(logical)), validity)
