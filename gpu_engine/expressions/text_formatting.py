"""Evaluate ``printf(format, ...)`` and ``format(format, ...)``: values formatted into text, as DuckDB does.

Why on the host: formatting is per row text building (widths, padding, float digits) that Python's ``%`` and
``str.format`` do exactly as C's printf and fmt's ``{}`` for the subset the engine accepts
(:func:`printf_tokens`, :func:`format_tokens`); it is a function for display, not a hot path. The arguments
arrive typed by the translator (``%s`` and ``{}`` as VARCHAR, ``%d`` as an integer, ``%f``/``%e``/``%g`` as
DOUBLE), so each row formats Python values of one type per argument.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import pyarrow as pa

from gpu_engine.columnar import Column
from gpu_engine.columnar.types import is_decimal, is_floating, is_integer, is_string, is_temporal
from gpu_engine.device import Device

__all__ = ["printf_tokens", "format_tokens", "format_rows", "specifier_argument", "PRINTF_CONVERSIONS"]

#: printf conversions the engine formats, by the argument each takes.
PRINTF_CONVERSIONS = {"s": "text", "d": "integer", "i": "integer", "f": "float", "F": "float",
                      "e": "float", "E": "float", "g": "float", "G": "float"}
_PRINTF_SPEC = re.compile(r"%([-+ 0#]*)(\d*)(?:\.(\d*))?([a-zA-Z%]?)")


def specifier_argument(name: str, spec: str, dtype: pa.DataType) -> pa.DataType:
    """Return the type an argument of ``dtype`` is formatted as under ``spec`` (DuckDB's binding: text,
    booleans and dates as VARCHAR, floats and decimals as DOUBLE, integers as they are).

    Raises
    ------
    TypeError
        Where DuckDB refuses the pair (a number under ``%s``, a float under ``%d``, an integer under ``%f``).
    """
    text_like = is_string(dtype) or is_temporal(dtype) or pa.types.is_boolean(dtype) or pa.types.is_null(dtype)
    floating = is_floating(dtype) or is_decimal(dtype)
    wanted = "any" if spec == "{}" else PRINTF_CONVERSIONS[spec[-1]]
    if text_like and wanted in ("any", "text"):
        return pa.string()
    if is_integer(dtype) and wanted in ("any", "integer"):
        return pa.string() if wanted == "any" else dtype
    if floating and wanted in ("any", "float"):
        return pa.string() if wanted == "any" else pa.float64()
    raise TypeError(f"{name}(): {spec} does not format a value of type {dtype}")


def printf_tokens(fmt: str) -> list[tuple[str, str]]:
    """Split a printf format into ``("text", text)`` and ``("spec", "%-5.2f")`` tokens.

    Raises
    ------
    TypeError
        For a conversion other than :data:`PRINTF_CONVERSIONS` (``%x``, ``%c``, ``%*d``, ``%n$d``...).
    """
    tokens, position = [], 0
    while position < len(fmt):
        percent = fmt.find("%", position)
        if percent < 0:
            tokens.append(("text", fmt[position:]))
            break
        if percent > position:
            tokens.append(("text", fmt[position:percent]))
        if fmt.startswith("%%", percent):
            tokens.append(("text", "%"))
            position = percent + 2
            continue
        match = _PRINTF_SPEC.match(fmt, percent)
        if match.group(4) in ("g", "G") and match.group(3) in ("", "0"):
            raise TypeError(f"printf() does not support the specifier {match.group(0)!r} (a precision of 0 with "
                            "%g: write %.1g or %e)")
        if match.group(4) not in PRINTF_CONVERSIONS:
            raise TypeError(f"printf() does not support the specifier {match.group(0)!r} (supported: %s, %d, %i, "
                            "%f, %e, %g with flags -+ 0#, a width and a precision; format with CAST or strftime "
                            "first)")
        tokens.append(("spec", match.group(0)))
        position = match.end()
    return tokens


def format_tokens(fmt: str) -> list[tuple[str, str]]:
    """Split a ``format`` (fmt) template into ``("text", text)`` and ``("spec", "{}")`` tokens.

    Raises
    ------
    TypeError
        For a replacement field other than ``{}`` (an index, a name or a format spec), or a lone brace.
    """
    tokens, position, text = [], 0, []
    while position < len(fmt):
        char = fmt[position]
        if fmt.startswith("{{", position) or fmt.startswith("}}", position):
            text.append(char)
            position += 2
        elif fmt.startswith("{}", position):
            if text:
                tokens.append(("text", "".join(text)))
                text = []
            tokens.append(("spec", "{}"))
            position += 2
        elif char in "{}":
            end = fmt.find("}", position)
            field = fmt[position:end + 1] if end >= 0 and char == "{" else char
            raise TypeError(f"format() supports the replacement field {{}} only, not {field!r} (for widths or "
                            "digits use printf, e.g. printf('%.2f', x))")
        else:
            text.append(char)
            position += 1
    if text:
        tokens.append(("text", "".join(text)))
    return tokens


def _format_value(spec: str, value: Any) -> str:
    return str(value) if spec == "{}" else spec % value


def format_rows(device: Device, name: str, fmt: str, columns: Sequence[Column], rows: int) -> Column:
    """Return ``name(fmt, columns...)`` per row; a row with a NULL argument is NULL (as DuckDB)."""
    tokens = printf_tokens(fmt) if name == "printf" else format_tokens(fmt)
    values = [column.to_arrow(device).to_pylist() for column in columns]
    out = []
    for row in range(rows):
        arguments = [column_values[row] for column_values in values]
        if any(argument is None for argument in arguments):
            out.append(None)
            continue
        parts, next_argument = [], 0
        for kind, text in tokens:
            if kind == "text":
                parts.append(text)
            else:
                parts.append(_format_value(text, arguments[next_argument]))
                next_argument += 1
        out.append("".join(parts))
    return Column.from_arrow(pa.array(out, pa.string()), device)
