"""Move fixed-width values between Arrow and NumPy through their buffers, without pyarrow's pandas shim.

Why: pyarrow imports pandas (~300 modules, ~215 ms CPU) the first time a process converts Arrow to NumPy
(``Array.to_numpy`` runs the C++ pandas writer, which initializes pandas' static data) or NumPy to Arrow
(``pa.array(ndarray)`` asks whether the values are a pandas Series). A query that only reads Parquet and
returns Arrow has no use for pandas, yet every new process (a CLI run, a test worker, a Spark executor)
paid that import before its first rows (issue 29 item 4). The engine's hot paths (reading columns, taking
rows) move primitive values, whose Arrow layout is one plain buffer: NumPy views it directly, and a NumPy
array becomes an Arrow array by wrapping its memory. Other types (or arrays with nulls where a caller needs
them) go through pyarrow as before.
"""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa

__all__ = ["has_numpy_layout", "numpy_values", "arrow_values", "arrow_strings", "numpy_validity", "empty_table",
           "arrow_from_pylist"]

#: Arrow type id -> NumPy dtype of the types whose values buffer is one fixed-width value per row.
_NUMPY_DTYPES = {
    pa.int8().id: np.dtype(np.int8), pa.int16().id: np.dtype(np.int16), pa.int32().id: np.dtype(np.int32),
    pa.int64().id: np.dtype(np.int64), pa.uint8().id: np.dtype(np.uint8), pa.uint16().id: np.dtype(np.uint16),
    pa.uint32().id: np.dtype(np.uint32), pa.uint64().id: np.dtype(np.uint64),
    pa.float16().id: np.dtype(np.float16), pa.float32().id: np.dtype(np.float32),
    pa.float64().id: np.dtype(np.float64),
    pa.date32().id: np.dtype(np.int32), pa.date64().id: np.dtype(np.int64),
    pa.timestamp("us").id: np.dtype(np.int64), pa.duration("us").id: np.dtype(np.int64),
    pa.time32("s").id: np.dtype(np.int32), pa.time64("us").id: np.dtype(np.int64),
}


def has_numpy_layout(arrow_type: pa.DataType) -> bool:
    """Whether :func:`numpy_values` reads ``arrow_type``'s values from its buffers (no pyarrow conversion)."""
    return arrow_type.id in _NUMPY_DTYPES or pa.types.is_boolean(arrow_type)


def _bits(buffer: pa.Buffer | None, offset: int, n: int) -> np.ndarray:
    """An Arrow bitmap's ``n`` bits from ``offset`` as a bool array (LSB first, as Arrow numbers them)."""
    if buffer is None:
        return np.zeros(n, dtype=np.bool_)
    return np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), count=offset + n, bitorder="little")[offset:].view(
        np.bool_)


def numpy_values(array: pa.Array) -> np.ndarray:
    """``array``'s values as NumPy (integers for dates, times, timestamps and durations), as
    ``array.to_numpy(zero_copy_only=False)`` gives them for an array without nulls (a null's slot holds whatever
    its buffer holds). Fixed-width arrays are read from their buffers (a read-only view), booleans unpacked from
    their bits; other types go to pyarrow."""
    dtype = _NUMPY_DTYPES.get(array.type.id)
    n, offset = len(array), array.offset
    if pa.types.is_boolean(array.type):
        return _bits(array.buffers()[1], offset, n)
    if dtype is None:
        return array.to_numpy(zero_copy_only=False)
    data = array.buffers()[1]
    # count: a producer's buffer need not be a whole number of values (one exact-size for its bytes, a shared or
    # padded one); without it np.frombuffer refused such a buffer ('buffer size must be a multiple of element size')
    values = np.zeros(n, dtype=dtype) if data is None else np.frombuffer(data, dtype=dtype, count=offset + n)[offset:]
    values.flags.writeable = False  # Arrow's memory, read-only as pyarrow gives it (numba types it apart)
    return values


def numpy_validity(array: pa.Array) -> np.ndarray:
    """Per row, whether ``array`` holds a value there (``array.is_valid()`` as a bool array)."""
    if array.null_count == 0:
        return np.ones(len(array), dtype=np.bool_)
    if pa.types.is_null(array.type):
        return np.zeros(len(array), dtype=np.bool_)
    return _bits(array.buffers()[0], array.offset, len(array))


def arrow_values(values: np.ndarray) -> pa.Array:
    """A 1-D NumPy array of integers, floats or bools as an Arrow array without nulls (``pa.array(values)``),
    wrapping its memory where its layout is Arrow's."""
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"arrow_values takes a 1-D array, got {values.ndim} dimensions")
    if values.dtype == np.bool_:
        return pa.Array.from_buffers(pa.bool_(), len(values),
                                     [None, pa.py_buffer(np.packbits(values, bitorder="little"))])
    if values.dtype.kind not in "iuf":
        return pa.array(values)
    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def arrow_strings(values: list[str]) -> pa.Array:
    """A list of Python strings (no None) as an Arrow large_string array (``pa.array(values, pa.large_string())``)."""
    encoded = [value.encode("utf-8") for value in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(value) for value in encoded], out=offsets[1:])
    return pa.Array.from_buffers(pa.large_string(), len(encoded),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def empty_table(schema: pa.Schema) -> pa.Table:
    """A zero-row table of ``schema`` (``schema.empty_table()``, which makes each column with ``pa.array([])``)."""
    return pa.Table.from_arrays([pa.nulls(0, field.type) for field in schema], schema=schema)


_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH = datetime.datetime(1970, 1, 1)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_MASK_64 = (1 << 64) - 1


class _Fallback(Exception):
    """A value the buffer builders do not write exactly as pyarrow would: pyarrow converts the list."""


def _microseconds_as(micros: int, unit: str) -> int:
    per_second = _PER_SECOND[unit]
    if per_second >= 1_000_000:
        return micros * (per_second // 1_000_000)
    if micros % (1_000_000 // per_second):
        raise _Fallback  # a fraction the unit cannot hold: pyarrow's error (or rounding) decides
    return micros // (1_000_000 // per_second)


def _tick(value, dtype: pa.DataType) -> int:
    """``value`` as the integer Arrow stores for a date, time or timestamp of ``dtype``."""
    if pa.types.is_date32(dtype) and type(value) is datetime.date:
        return (value - _EPOCH_DATE).days
    if pa.types.is_timestamp(dtype) and type(value) is datetime.datetime and value.tzinfo is None and not dtype.tz:
        delta = value - _EPOCH
        return _microseconds_as((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds, dtype.unit)
    if pa.types.is_time(dtype) and type(value) is datetime.time and value.tzinfo is None:
        seconds = (value.hour * 60 + value.minute) * 60 + value.second
        return _microseconds_as(seconds * 1_000_000 + value.microsecond, dtype.unit)
    raise _Fallback


def _decimal_words(value, dtype: pa.DataType) -> int:
    """The unscaled integer of a Decimal that ``dtype`` holds exactly (else pyarrow decides)."""
    if type(value) is not decimal.Decimal or not value.is_finite():
        raise _Fallback
    sign, digits, exponent = value.as_tuple()
    if exponent < -dtype.scale:
        raise _Fallback
    unscaled = int("".join(map(str, digits)) or "0") * 10 ** (exponent + dtype.scale)
    if len(str(unscaled)) > dtype.precision:
        raise _Fallback
    return -unscaled if sign else unscaled


def _fixed_width(values: list, dtype: pa.DataType, valid: np.ndarray) -> pa.Array:
    n = len(values)
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    if pa.types.is_boolean(dtype):
        if any(type(v) is not bool for v in values if v is not None):
            raise _Fallback
        bits = np.array([bool(v) for v in values], dtype=np.bool_)
        return pa.Array.from_buffers(dtype, n, [validity, pa.py_buffer(np.packbits(bits, bitorder="little"))])
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype) and not pa.types.is_float16(dtype):
        kinds = (int,) if pa.types.is_integer(dtype) else (int, float)
        if any(type(v) not in kinds for v in values if v is not None):
            raise _Fallback  # bools, Decimals, NumPy scalars: pyarrow's rules
        numpy_type = _NUMPY_DTYPES[dtype.id]
        if pa.types.is_integer(dtype):
            bounds = np.iinfo(numpy_type)
            if any(v is not None and not bounds.min <= v <= bounds.max for v in values):
                raise _Fallback  # pyarrow's error names the value
        data = np.array([0 if v is None else v for v in values], dtype=numpy_type)
        if pa.types.is_floating(dtype) and any(v is not None and float(x) != v for v, x in zip(values, data)):
            raise _Fallback  # a float32 that loses digits, an integer beyond a double's 53 bits: pyarrow decides
        return pa.Array.from_buffers(dtype, n, [validity, pa.py_buffer(data)])
    if pa.types.is_date32(dtype) or pa.types.is_timestamp(dtype) or pa.types.is_time(dtype):
        width = np.int32 if pa.types.is_date32(dtype) or pa.types.is_time32(dtype) else np.int64
        data = np.array([0 if v is None else _tick(v, dtype) for v in values], dtype=width)
        return pa.Array.from_buffers(dtype, n, [validity, pa.py_buffer(data)])
    if pa.types.is_decimal128(dtype):
        unscaled = [0 if v is None else _decimal_words(v, dtype) for v in values]
        words = np.array([[x & _MASK_64, (x >> 64) & _MASK_64] for x in unscaled], dtype=np.uint64).reshape(n, 2)
        return pa.Array.from_buffers(dtype, n, [validity, pa.py_buffer(words)])
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        if any(type(v) is not str for v in values if v is not None):
            raise _Fallback
        encoded = [b"" if v is None else v.encode("utf-8") for v in values]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(v) for v in encoded], out=offsets[1:])
        if pa.types.is_string(dtype):
            if offsets[-1] >= 2**31:
                raise _Fallback
            offsets = offsets.astype(np.int32)
        return pa.Array.from_buffers(dtype, n, [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])
    raise _Fallback


def arrow_from_pylist(values: list, dtype: pa.DataType) -> pa.Array:
    """Python values (None for NULL) as an Arrow array of ``dtype``, equal to ``pa.array(values, dtype)``.

    Why: ``pa.array`` on a list imports pandas (it asks whether the list is a pandas object), ~0.2 s of a new
    process's first query; the planner's constant rows (VALUES, a SELECT without FROM) and a string split's
    pieces are short Python lists. Booleans, integers, floats, dates, naive timestamps and times, DECIMAL(<=38)
    and strings are written into buffers here; any other type, or a value these builders would not write
    exactly as pyarrow does (an overflow, a fraction the unit cannot hold, a zoned value), goes to ``pa.array``
    with its own conversions and errors.
    """
    values = list(values)
    try:
        if pa.types.is_null(dtype):
            if any(v is not None for v in values):
                raise _Fallback
            return pa.nulls(len(values), dtype)
        valid = np.array([v is not None for v in values], dtype=np.bool_)
        return _fixed_width(values, dtype, valid)
    except _Fallback:
        return pa.array(values, dtype)
