"""Evaluate DuckDB's bit operations on integers: ``a & b``, ``a | b``, ``xor(a, b)``, ``~a``, ``a << n``, ``a >> n``
and ``bit_count(a)``.

Why array code: each is one or two device array operations per batch (``xp``: NumPy on ``cpu``, CuPy on a GPU),
so the same code runs on every device and no kernel is generated per query (fused kernels do not lower these
functions; a stretch holding one is evaluated by the eager operators). Values are taken as int64 and the result
narrowed to the operands' common type (DuckDB's: ``INTEGER & BIGINT`` is a BIGINT), which is exact for ``&``,
``|``, ``xor`` and ``~`` (two's complement wraps into the narrower type as DuckDB's fixed-width operators do).

Shifts follow DuckDB: ``a << n`` raises for a negative ``a`` or ``n``, for ``n`` at or past the type's width, and
where the result overflows the type; ``a >> n`` is an arithmetic shift, 0 for a negative ``n`` or one at or past
the width. ``bit_count`` counts the set bits of the value in its own width (``bit_count(-1::INTEGER)`` is 32), a
TINYINT.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.columnar.column import Column
from gpu_engine.device import Device
from gpu_engine.expressions.nulls import and_validity
from gpu_engine.expressions.numeric import narrow_values, raise_at_first

__all__ = ["BITWISE_FUNCTIONS", "evaluate_bitwise_function"]

#: The functions this module evaluates (operators by their SQL spelling).
BITWISE_FUNCTIONS = ("&", "|", "xor", "~", "<<", ">>", "bit_count")


def _to_type(xp, values, dtype: pa.DataType):
    """Return int64 ``values`` as ``dtype``'s storage (wrapping, as a fixed-width operator of that type does)."""
    return values.astype(np.dtype(dtype.to_pandas_dtype()), copy=False)


def evaluate_bitwise_function(device: Device, name: str, columns: Sequence[Column], dtype: pa.DataType) -> Column:
    """Return ``name`` over the evaluated integer argument ``columns`` as ``dtype``."""
    xp = device.xp
    validity = and_validity(*(column.validity for column in columns))
    values = [narrow_values(device, column, name) for column in columns]
    if validity is not None:  # NULL rows hold any value: keep them out of the shift checks
        values = [xp.where(validity, v, 0) for v in values]
    if name == "bit_count":
        width = columns[0].dtype.bit_width
        bits = values[0].view(xp.uint64) & np.uint64((1 << width) - 1 if width < 64 else (1 << 64) - 1)
        count = xp.zeros(bits.shape, dtype=xp.int64)
        for shift in range(0, 64, 8):  # a byte at a time, through a table of each byte's set bits
            count = count + xp.take(_byte_bits(xp), ((bits >> np.uint64(shift)) & np.uint64(255)).astype(xp.int64))
        return Column(pa.int8(), count.astype(xp.int8), validity)
    if name == "~":
        return Column(dtype, _to_type(xp, ~values[0], dtype), validity)
    left, right = values
    if name in ("&", "|", "xor"):
        result = left & right if name == "&" else left | right if name == "|" else left ^ right
        return Column(dtype, _to_type(xp, result, dtype), validity)
    width = dtype.bit_width
    inside = (right >= 0) & (right < width)
    shift = xp.where(inside, right, 0)
    if name == ">>":
        result = xp.where(inside, left >> shift, 0)
        return Column(dtype, _to_type(xp, result, dtype), validity)
    largest = (1 << (width - 1)) - 1 if pa.types.is_signed_integer(dtype) else (1 << width) - 1
    raise_at_first(device, left < 0, validity, "Cannot left-shift negative number")
    raise_at_first(device, right < 0, validity, "Cannot left-shift by negative number")
    # DuckDB shifts 0 by any count past the width to 0; any other number raises
    raise_at_first(device, (right >= width) & (left != 0), validity, f"Left-shift value is out of range (at least {width})")
    limit = xp.right_shift(np.int64(min(largest, (1 << 63) - 1)), shift)
    raise_at_first(device, inside & (left >= 0) & (left > limit), validity, "Overflow in left shift")
    return Column(dtype, _to_type(xp, xp.where(inside & (left >= 0) & (left <= limit), left << shift, 0), dtype),
                  validity)


def _byte_bits(xp):
    """Return the set bits of each byte value 0..255 (an int64 array of ``xp``)."""
    return xp.asarray(np.array([bin(b).count("1") for b in range(256)], dtype=np.int64))
