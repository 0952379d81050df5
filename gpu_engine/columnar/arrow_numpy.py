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

import numpy as np
import pyarrow as pa

__all__ = ["has_numpy_layout", "numpy_values", "arrow_values", "arrow_strings", "numpy_validity", "empty_table"]

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
