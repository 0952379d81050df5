"""Exchange tables with cuDF on the device: cuDF frames in, cuDF frames out, Parquet through cuDF's reader.

Why: data that already sits in GPU memory as a ``cudf.DataFrame`` or a
``pylibcudf.Table`` should become engine Columns without a copy, and results
should go back the same way. Both sides use Arrow's layout, so most buffers
are shared: a value buffer is wrapped as a CuPy array through its
``__cuda_array_interface__`` (pylibcudf's ``gpumemoryview``), and the Column
keeps a reference to it.

What is converted, and why:

* **validity** — cuDF keeps a bitmask, the engine a byte per row (kernels read
  it with the values' index). Unpacking it (``xp.unpackbits`` on the device)
  is the one conversion every nullable column pays. A column with nulls also
  gets its null slots zeroed (one device pass), since kernels may compute on
  null slots and the engine keeps them at 0 (as :meth:`Column.from_arrow` does).
* **string offsets** — cuDF's are ``int32`` (``int64`` for large columns), the
  engine's ``int64``: one device cast. The chars buffer is shared.
* **decimals** — cuDF's ``DECIMAL32``/``DECIMAL128`` become the engine's
  ``int64`` scaled integers (a device cast; a 128-bit value must fit 64 bits);
  ``DECIMAL64`` is shared.
* **dictionaries / categoricals** — codes become ``int32`` codes, string
  categories the dictionary; other categories are decoded by a gather.

Going back (:func:`batch_to_cudf`) packs validity into a bitmask and rebases
string offsets; fixed-width values are shared with the result frame.

cuDF runs its work on its own stream; the engine's drivers on non-blocking
streams of their own. So each conversion from cuDF waits for the device once
(``cudaDeviceSynchronize``) before a driver reads the buffers.

Without cuDF nothing here is imported by the engine; :func:`is_cudf_source`
recognizes cuDF objects by their class, without importing cuDF.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.types import is_decimal, is_string
from gpu_engine.device import Device

__all__ = [
    "cudf_available",
    "require_cudf",
    "is_cudf_source",
    "validity_from_bitmask",
    "bitmask_from_validity",
    "batch_from_cudf",
    "batch_to_cudf",
    "arrow_to_cudf",
    "cudf_to_arrow",
    "read_parquet_split",
    "check_parquet_reader",
    "resolve_parquet_reader",
    "PARQUET_READERS",
]

PARQUET_READERS = ("auto", "pyarrow", "cudf", "device")
_MASK_PADDING = 64  # libcudf pads null masks to 64 bytes
_TIMESTAMP_UNITS = {"TIMESTAMP_SECONDS": "s", "TIMESTAMP_MILLISECONDS": "ms", "TIMESTAMP_MICROSECONDS": "us",
                    "TIMESTAMP_NANOSECONDS": "ns"}
_FIXED_TYPES = {
    "INT8": pa.int8(), "INT16": pa.int16(), "INT32": pa.int32(), "INT64": pa.int64(),
    "UINT8": pa.uint8(), "UINT16": pa.uint16(), "UINT32": pa.uint32(), "UINT64": pa.uint64(),
    "FLOAT32": pa.float32(), "FLOAT64": pa.float64(),
}


# ------------------------------------------------------------------ imports
@cache
def cudf_available() -> bool:
    """Return True when ``cudf`` and ``pylibcudf`` import."""
    try:
        importlib.import_module("cudf")
        importlib.import_module("pylibcudf")
    except Exception:  # noqa: BLE001 - any failure to import means: not available
        return False
    return True


def require_cudf(purpose: str) -> tuple[ModuleType, ModuleType]:
    """Return ``(cudf, pylibcudf)``, or raise ImportError saying what needed them."""
    if not cudf_available():
        raise ImportError(f"{purpose} needs cuDF (the cudf and pylibcudf packages, e.g. "
                          "`pip install cudf-cu12` or `cudf-cu13`); it is not importable here")
    return importlib.import_module("cudf"), importlib.import_module("pylibcudf")


def is_cudf_source(source: Any) -> bool:
    """Return True for a ``cudf.DataFrame`` or a ``pylibcudf.Table`` (checked by class, cuDF is not imported)."""
    cls = type(source)
    module = cls.__module__ or ""
    return ((module.startswith("cudf.") and cls.__name__ == "DataFrame")
            or (module.startswith("pylibcudf") and cls.__name__ == "Table"))


def check_parquet_reader(reader: str, device: Device) -> None:
    """Raise ValueError for an unknown ``parquet_reader``, or ``"cudf"`` or ``"device"`` where it cannot run."""
    if reader not in PARQUET_READERS:
        raise ValueError(f"unknown parquet_reader {reader!r}; choose one of {', '.join(PARQUET_READERS)}")
    if reader == "device" and device.kernel_flavor != "cuda":
        raise ValueError(f"parquet_reader='device' decodes pages with CUDA kernels and needs device 'cuda' "
                         f"(or 'cuda-sim'), not {device.name!r}")
    if reader == "cudf":
        if not device.is_gpu:
            raise ValueError(f"parquet_reader='cudf' reads into GPU memory and needs device 'cuda', not {device.name!r}")
        require_cudf("parquet_reader='cudf'")


def resolve_parquet_reader(reader: str, device: Device) -> str:
    """Return the reader a scan on ``device`` uses: ``"auto"`` is ``"cudf"`` on ``cuda`` when cuDF imports, else
    ``"device"`` on ``cuda``, else ``"pyarrow"``.

    Why: on a GPU, cuDF decodes Parquet on the device, so the host neither
    decodes nor copies decoded columns; without cuDF the engine's own device
    decoder does so for the fixed-width columns it reads
    (:mod:`gpu_engine.connectors.parquet_device_columns`, the rest decoded on
    the host); off the GPU the engine's host decoder and pyarrow decode
    (``"pyarrow"``). Explicit values are kept as given (:func:`check_parquet_reader`
    rejects ``"cudf"`` and ``"device"`` where they cannot run; ``"device"`` runs on
    ``cuda-sim`` too, which is how CI checks it).
    """
    check_parquet_reader(reader, device)
    if reader != "auto":
        return reader
    if not device.is_gpu:
        return "pyarrow"
    return "cudf" if cudf_available() else "device"


# ------------------------------------------------------------------ bitmasks
def validity_from_bitmask(xp: Any, mask: Any, offset: int, rows: int) -> Any:
    """Return one bool per row from an Arrow/cuDF validity bitmask (bit ``offset + i`` is row ``i``, LSB first)."""
    first = offset // 8
    shift = offset % 8
    nbytes = (shift + rows + 7) // 8
    bits = xp.unpackbits(mask[first:first + nbytes], bitorder="little")
    return bits[shift:shift + rows].astype(xp.bool_)


def bitmask_from_validity(xp: Any, validity: Any) -> Any:
    """Return a validity bitmask (LSB first) of one bool per row, padded to 64 bytes as libcudf allocates them."""
    packed = xp.packbits(validity.astype(xp.bool_, copy=False), bitorder="little")
    size = max(_MASK_PADDING, -(-int(packed.shape[0]) // _MASK_PADDING) * _MASK_PADDING)
    padded = xp.zeros(size, dtype=xp.uint8)
    padded[: packed.shape[0]] = packed
    return padded


# ------------------------------------------------------------- cuDF -> engine
def _bytes_of(xp: Any, buffer: Any) -> Any:
    """Return a device buffer as a uint8 CuPy array, without a copy; the array keeps ``buffer`` alive.

    ``buffer`` is a ``gpumemoryview``, or any object with a
    ``__cuda_array_interface__``, or with ``ptr`` and ``size`` (pylibcudf's
    Span protocol).
    """
    if hasattr(buffer, "__cuda_array_interface__"):
        array = xp.asarray(buffer)
        return array.reshape(-1).view(xp.uint8) if array.dtype != xp.uint8 else array.reshape(-1)
    size = int(getattr(buffer, "size", getattr(buffer, "nbytes", 0)))
    memory = xp.cuda.UnownedMemory(int(buffer.ptr), size, buffer)
    return xp.ndarray((size,), dtype=xp.uint8, memptr=xp.cuda.MemoryPointer(memory, 0))


def _typed(xp: Any, buffer: Any, dtype: Any, start: int, count: int) -> Any:
    if buffer is None:  # libcudf leaves the buffers of an empty column unallocated
        return xp.zeros(count, dtype=dtype)
    raw = _bytes_of(xp, buffer)
    itemsize = np.dtype(dtype).itemsize
    return raw[: (raw.shape[0] // itemsize) * itemsize].view(dtype)[start:start + count]


def _plc_columns(source: Any, column_names: Sequence[str] | None) -> tuple[list[str], list[Any], list[Any]]:
    """Return names, pylibcudf columns and Arrow type hints (or None) of a cuDF frame or pylibcudf table."""
    cudf, plc = require_cudf("a cuDF table")
    if isinstance(source, plc.Table):
        columns = list(source.columns())
        names = list(column_names) if column_names is not None else [f"c{i}" for i in range(len(columns))]
        if len(names) != len(columns):
            raise ValueError(f"{len(names)} column names for a pylibcudf.Table of {len(columns)} columns")
        return names, columns, [None] * len(columns)
    names = [str(name) for name in source.columns]
    hints = list(source.head(0).to_arrow().schema.types)  # exact types (decimal precision) at no cost
    columns = []
    for name in source.columns:
        series = source[name]
        if isinstance(series.dtype, cudf.CategoricalDtype):
            columns.append(("categorical", series))
        elif hasattr(series, "to_pylibcudf"):
            columns.append(series.to_pylibcudf()[0])
        else:  # older cuDF
            columns.append(series._column.to_pylibcudf(mode="read"))
    return names, columns, hints


def _column_from_plc(xp: Any, column: Any, hint: pa.DataType | None) -> Column:
    """Wrap one pylibcudf column as an engine Column (see the module docstring for what is converted)."""
    if isinstance(column, tuple):  # a cuDF categorical Series
        return _column_from_categorical(xp, column[1], hint)
    type_id = column.type().id().name
    rows, offset = column.size(), column.offset()
    validity = None
    if column.null_count() and column.null_mask() is not None:
        validity = validity_from_bitmask(xp, _bytes_of(xp, column.null_mask()), offset, rows)
    if type_id == "STRING":
        if rows == 0 or not column.children():
            return Column(pa.string(), xp.zeros(0, dtype=xp.uint8), None, xp.zeros(rows + 1, dtype=xp.int64), None)
        offsets_child = column.child(0)
        width = np.int64 if offsets_child.type().id().name == "INT64" else np.int32
        offsets = _typed(xp, offsets_child.data(), width, offsets_child.offset() + offset, rows + 1).astype(xp.int64)
        chars_buffer = column.data() if column.data() is not None else (
            column.child(1).data() if len(column.children()) > 1 else None)  # chars were a child before cuDF 24.02
        chars = _bytes_of(xp, chars_buffer) if chars_buffer is not None else xp.zeros(0, dtype=xp.uint8)
        return Column(pa.string(), chars, validity, offsets, None)
    if type_id == "DICTIONARY32":
        indices = _column_from_plc(xp, column.child(0), None)
        keys = _column_from_plc(xp, column.child(1), hint.value_type if hint is not None and pa.types.is_dictionary(hint) else None)
        codes = indices.data[offset:offset + rows].astype(xp.int32)
        return _dictionary_column(xp, codes, validity, keys)
    dtype, values = _fixed_values(xp, column, type_id, offset, rows, hint)
    if validity is not None:
        values = xp.where(validity, values, values.dtype.type(0))
    return Column(dtype, values, validity)


def _fixed_values(xp: Any, column: Any, type_id: str, offset: int, rows: int, hint: pa.DataType | None):
    data = column.data()
    if type_id in _FIXED_TYPES:
        dtype = _FIXED_TYPES[type_id]
        return dtype, _typed(xp, data, dtype.to_pandas_dtype(), offset, rows)
    if type_id == "BOOL8":
        return pa.bool_(), _typed(xp, data, np.uint8, offset, rows).view(xp.bool_)
    if type_id == "TIMESTAMP_DAYS":
        return pa.date32(), _typed(xp, data, np.int32, offset, rows)
    if type_id in _TIMESTAMP_UNITS:
        unit = _TIMESTAMP_UNITS[type_id]
        dtype = hint if hint is not None and pa.types.is_timestamp(hint) else pa.timestamp(unit)
        return dtype, _typed(xp, data, np.int64, offset, rows)
    if type_id in ("DECIMAL32", "DECIMAL64", "DECIMAL128"):
        scale = -column.type().scale()
        precision = hint.precision if hint is not None and is_decimal(hint) else {"DECIMAL32": 9, "DECIMAL64": 18}.get(type_id, 38)
        dtype = pa.decimal128(min(precision, 38), scale)
        if type_id == "DECIMAL32":
            return dtype, _typed(xp, data, np.int32, offset, rows).astype(xp.int64)
        if type_id == "DECIMAL64":
            return dtype, _typed(xp, data, np.int64, offset, rows)
        words = _typed(xp, data, np.int64, 2 * offset, 2 * rows).reshape(rows, 2)
        low = xp.ascontiguousarray(words[:, 0])
        if bool(xp.any(words[:, 1] != (low >> 63))):
            raise OverflowError(f"a decimal({precision}, {scale}) column holds values beyond 64 bits; not supported yet")
        return dtype, low
    raise TypeError(f"cuDF column type {type_id} is not supported by the engine")


def _dictionary_column(xp: Any, codes: Any, validity: Any, keys: Column) -> Column:
    """Return a dictionary Column for string keys; decode other keys by gathering."""
    if validity is not None:
        codes = xp.where(validity, codes, 0).astype(xp.int32)
    if is_string(keys.dtype):
        return Column(pa.string(), xp.ascontiguousarray(codes), validity, None, keys)
    values = keys.data[codes] if keys.data.shape[0] else xp.zeros(codes.shape[0], dtype=keys.data.dtype)
    if keys.validity is not None and keys.data.shape[0]:
        key_valid = keys.validity[codes]
        validity = key_valid if validity is None else validity & key_valid
    if validity is not None:
        values = xp.where(validity, values, values.dtype.type(0))
    return Column(keys.dtype, values, validity)


def _column_from_categorical(xp: Any, series: Any, hint: pa.DataType | None) -> Column:
    cudf, _ = require_cudf("a cuDF categorical column")
    codes_column = _column_from_plc(xp, series.cat.codes.to_pylibcudf()[0], None)
    categories = cudf.Series(series.cat.categories)
    keys = _column_from_plc(xp, categories.to_pylibcudf()[0], hint.value_type if hint is not None and pa.types.is_dictionary(hint) else None)
    return _dictionary_column(xp, codes_column.data.astype(xp.int32), codes_column.validity, keys)


def batch_from_cudf(source: Any, device: Device, column_names: Sequence[str] | None = None,
                    schema: pa.Schema | None = None) -> Batch:
    """Wrap a ``cudf.DataFrame`` or ``pylibcudf.Table`` as a device Batch, sharing its buffers.

    Parameters
    ----------
    source
        The frame or table.
    device
        A GPU device.
    column_names
        Names for a ``pylibcudf.Table``'s columns (default ``c0``, ``c1``, …).
    schema
        Engine types to give the columns where cuDF's are less precise
        (decimal precision); by position.
    """
    if not device.is_gpu:
        raise ValueError(f"cuDF data can be wrapped on device 'cuda' only, not {device.name!r}")
    xp = device.xp
    names, columns, hints = _plc_columns(source, column_names)
    if schema is not None:
        hints = [schema.field(i).type for i in range(len(columns))]
    xp.cuda.runtime.deviceSynchronize()  # cuDF's stream is not ordered with the drivers' non-blocking streams
    wrapped = tuple(_column_from_plc(xp, column, hint) for column, hint in zip(columns, hints))
    rows = len(wrapped[0]) if wrapped else (source.num_rows() if hasattr(source, "num_rows") else len(source))
    if schema is not None:
        wrapped = tuple(Column(field.type, c.data, c.validity, c.offsets, c.dictionary) if c.dtype != field.type
                        and _same_layout(c.dtype, field.type) else c for c, field in zip(wrapped, schema))
    xp.cuda.get_current_stream().synchronize()  # the conversions above ran on this thread's current stream
    return Batch(tuple(names), wrapped, device, None, rows)


def _same_layout(have: pa.DataType, want: pa.DataType) -> bool:
    return (is_string(have) and is_string(want)) or (is_decimal(have) and is_decimal(want) and have.scale == want.scale)


def read_parquet_split(split: Any, columns: Sequence[str], schema: pa.Schema, device: Device) -> Batch:
    """Read one Parquet split's ``columns`` with cuDF's GPU reader into a device Batch of ``schema``'s types."""
    cudf, _ = require_cudf("parquet_reader='cudf'")
    row_groups = [list(split.row_groups)] if split.row_groups else None
    frame = cudf.read_parquet(split.path, columns=list(columns), row_groups=row_groups)
    return batch_from_cudf(frame, device, schema=pa.schema([schema.field(c) for c in columns]))


# ------------------------------------------------------------- engine -> cuDF
def _plc_column(device: Device, plc: ModuleType, column: Column) -> Any:
    """Return a pylibcudf column over an engine Column's buffers (validity packed, offsets rebased)."""
    xp = device.xp
    if column.dictionary is not None and len(column.dictionary) == 0:
        # every row NULL: its codes index nothing, and gathering through them reads past the one offset (the guard
        # of columnar/concat._decoded): all-NULL plain strings instead
        rows = len(column)
        column = Column(column.dtype, xp.zeros(0, dtype=xp.uint8), xp.zeros(rows, dtype=xp.bool_),
                        xp.zeros(rows + 1, dtype=xp.int64), None)
    elif column.dictionary is not None:
        from gpu_engine.kernels.gather import dictionary_row_validity, gather_column

        values = gather_column(device, column.dictionary, column.data)
        column = Column(values.dtype, values.data, dictionary_row_validity(device, column), values.offsets, None)
    rows = len(column)
    mask, null_count = None, 0
    if column.validity is not None:
        null_count = rows - int(xp.count_nonzero(column.validity))
        if null_count:
            mask = plc.gpumemoryview(bitmask_from_validity(xp, column.validity))
    dtype = column.dtype
    if is_string(dtype):
        start, stop = (int(column.offsets[0]), int(column.offsets[-1])) if rows else (0, 0)
        width = (xp.int32, plc.TypeId.INT32) if stop - start < 2**31 else (xp.int64, plc.TypeId.INT64)
        offsets = (column.offsets - start).astype(width[0])
        chars = column.data[start:stop] if stop > start else xp.zeros(1, dtype=xp.uint8)
        offsets_child = plc.Column(plc.DataType(width[1]), rows + 1, plc.gpumemoryview(offsets), None, 0, 0, [])
        return plc.Column(plc.DataType(plc.TypeId.STRING), rows, plc.gpumemoryview(chars), mask, null_count, 0,
                          [offsets_child])
    values = xp.ascontiguousarray(column.data)
    if pa.types.is_boolean(dtype):
        data_type, values = plc.DataType(plc.TypeId.BOOL8), values.view(xp.uint8)
    elif pa.types.is_date32(dtype):
        data_type = plc.DataType(plc.TypeId.TIMESTAMP_DAYS)
    elif pa.types.is_timestamp(dtype):
        unit = {v: k for k, v in _TIMESTAMP_UNITS.items()}[dtype.unit]
        data_type = plc.DataType(getattr(plc.TypeId, unit))
    elif is_decimal(dtype):
        if dtype.precision <= 18:
            data_type = plc.DataType(plc.TypeId.DECIMAL64, -dtype.scale)
        else:
            data_type = plc.DataType(plc.TypeId.DECIMAL128, -dtype.scale)
            values = xp.ascontiguousarray(xp.stack([values, values >> 63], axis=1))
    else:
        type_id = next(name for name, arrow in _FIXED_TYPES.items() if arrow == dtype)
        data_type = plc.DataType(getattr(plc.TypeId, type_id))
    data = plc.gpumemoryview(values) if rows else None
    return plc.Column(data_type, rows, data, mask, null_count, 0, [])


def batch_to_cudf(batch: Batch) -> Any:
    """Return a ``cudf.DataFrame`` over a device batch's buffers (flat; the gather map applied first)."""
    cudf, plc = require_cudf("output='cudf'")
    xp = batch.device.xp
    flat = batch.materialize()
    series = [cudf.Series.from_pylibcudf(_plc_column(batch.device, plc, column)) for column in flat.columns]
    xp.cuda.get_current_stream().synchronize()  # cuDF reads them on its own stream
    return cudf.DataFrame(dict(zip(flat.names, series)))


def cudf_to_arrow(source: Any, column_names: Sequence[str] | None = None) -> pa.Table:
    """Return a cuDF frame or pylibcudf table copied to a host Arrow table (for host devices)."""
    _, plc = require_cudf("a cuDF table")
    if isinstance(source, plc.Table):
        table = plc.interop.to_arrow(source)
        names = list(column_names) if column_names is not None else [f"c{i}" for i in range(table.num_columns)]
        return table.rename_columns(names)
    return source.to_arrow(preserve_index=False)


def arrow_to_cudf(table: pa.Table) -> Any:
    """Return a ``cudf.DataFrame`` copied from a host Arrow table (results of a host device)."""
    cudf, _ = require_cudf("output='cudf'")
    return cudf.DataFrame.from_arrow(table)
