"""Evaluate ``strptime(text, format)``: text parsed into a TIMESTAMP by a strftime-style format, as DuckDB does.

``try_strptime`` is the same parse, NULL where a text does not match instead of an error.

Why on the host: the format is a small grammar over text (month names, 12-hour
clocks, literal text) that turns user-typed text into values, rarely on a hot
path; Python's ``datetime.strptime`` reads the specifiers
:data:`~gpu_engine.plans.functions.STRPTIME_SPECIFIERS` as DuckDB does. Each
distinct text is parsed once (a dictionary's values, else the rows), and the
rows take their value by code on the device. A text that does not parse raises
DuckDB's error naming it and the format (only for rows that are read: an unused
dictionary value never fails a query).
"""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.device import Device
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions.strings import string_validity
from gpu_engine.plans.functions import strptime_format

__all__ = ["strptime"]

_EPOCH = datetime.datetime(1970, 1, 1)
_MICROSECOND = datetime.timedelta(microseconds=1)


def _parse(texts: list[str | None], fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """Return (microseconds since 1970, parsed) per text; a NULL text counts as parsed."""
    micros = np.zeros(len(texts), dtype=np.int64)
    parsed = np.ones(len(texts), dtype=bool)
    for position, text in enumerate(texts):
        if text is None:
            continue
        try:
            micros[position] = (datetime.datetime.strptime(text, fmt) - _EPOCH) // _MICROSECOND
        except ValueError:
            parsed[position] = False
    return micros, parsed


def strptime(device: Device, column: Column, fmt: str, strict: bool = True) -> Column:
    """Return the TIMESTAMP (microseconds) each text of ``column`` names in format ``fmt``.

    ``strict=False`` is ``try_strptime``: a text that does not match is NULL instead.

    Raises
    ------
    ExecutionError
        For the first row whose text does not match the format, naming the text and the format (``strict``).
    """
    xp = device.xp
    strptime_format(fmt)
    table = column.dictionary if column.dictionary is not None else column
    texts = table.to_arrow(device).to_pylist()
    micros, parsed = _parse(texts, fmt)
    values, ok = device.asarray(micros), device.asarray(parsed)
    if column.dictionary is not None:
        codes = column.data.astype(xp.int64)
        safe = xp.clip(codes, 0, max(len(texts) - 1, 0))
        values, ok = (xp.take(values, safe), xp.take(ok, safe)) if len(texts) else (
            xp.zeros(len(column), dtype=xp.int64), xp.ones(len(column), dtype=xp.bool_))
    validity = string_validity(device, column)
    failed = ~ok if validity is None else ~ok & validity
    if not strict:
        return Column(pa.timestamp("us"), xp.where(failed, 0, values).astype(xp.int64), ~failed if validity is None
                      else validity & ~failed)
    if bool(device.to_host(xp.any(failed).reshape(1))[0]):
        row = int(device.to_host(xp.argmax(failed).reshape(1))[0])
        text = texts[int(device.to_host(column.data[row:row + 1])[0])] if column.dictionary is not None else texts[row]
        raise ExecutionError(f'Could not parse string "{text}" according to format specifier "{fmt}"')
    return Column(pa.timestamp("us"), xp.where(failed, 0, values).astype(xp.int64), validity)
