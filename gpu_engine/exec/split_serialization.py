"""Write connector splits as versioned JSON and read them back, so a Task's inputs travel with its plan.

This lives in ``exec/`` beside :mod:`gpu_engine.exec.split` rather than in
``plans/``: splits are an execution concept, and ``gpu_engine.plans`` must not
import ``gpu_engine.exec`` (exec already depends on plans, never the reverse).
It reuses the plan format's machinery (:class:`~gpu_engine.plans.serialization.DataclassCodec`):
a document is ``{"format": 1, "split": {"type": "ParquetSplit", "path": ...,
"row_groups": [0, 1]}}``; an ``ArrowSplit``'s table is Arrow IPC stream bytes in
base64, as a ``ValuesNode``'s data is.

The registered classes are the dataclasses :mod:`gpu_engine.exec.split` exports
(every ``ConnectorSplit`` subclass in its ``__all__``), plus ``RemoteSplit`` by
name when that module defines one, so a new split kind is serialized from its
dataclass fields without touching this module.

A split read from a document names files and row groups that a Task will open,
so the reader checks it (:func:`check_split`): row groups and destinations are
never negative or repeated, and given the registered tables the split may be
for (``tables=``), a Parquet split must name one of their files and only row
groups that file has. Without ``tables`` no path is trusted or refused: pass
them wherever a document comes from outside the process.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable

from gpu_engine.exec import split as _split
from gpu_engine.exec.split import ConnectorSplit, ParquetSplit, RemoteSplit
from gpu_engine.plans.serialization import DataclassCodec, SerializationError, dump_document, load_document

__all__ = ["SPLIT_CODEC", "split_to_dict", "split_from_dict", "split_to_json", "split_from_json", "check_split"]

_SPLIT_KEY = "split"


def _split_classes() -> list[type]:
    """Return the split dataclasses to register: ``__all__``'s ConnectorSplit subclasses, then ``RemoteSplit``."""
    found = [getattr(_split, name) for name in _split.__all__]
    classes = [cls for cls in found
               if isinstance(cls, type) and issubclass(cls, ConnectorSplit) and cls is not ConnectorSplit]
    remote = getattr(_split, "RemoteSplit", None)
    if isinstance(remote, type) and dataclasses.is_dataclass(remote) and remote not in classes:
        classes.append(remote)
    return classes


SPLIT_CODEC = DataclassCodec(_split_classes())
"""The codec of split documents: ParquetSplit, ArrowSplit and any other split :mod:`gpu_engine.exec.split` exports."""


def split_to_dict(split: Any) -> dict[str, Any]:
    """Return a split as a JSON-ready ``{"format": 1, "split": {...}}`` document.

    Raises
    ------
    TypeError
        When ``split`` is not of a registered split class.
    """
    if type(split) not in SPLIT_CODEC.classes:
        names = ", ".join(cls.__name__ for cls in SPLIT_CODEC.classes)
        raise TypeError(f"expected a split ({names}), got {type(split).__name__}")
    return SPLIT_CODEC.to_document(_SPLIT_KEY, split)


def split_from_dict(document: Any, *, tables: Iterable[Any] | None = None) -> Any:
    """Return the split a :func:`split_to_dict` document describes, checked by :func:`check_split`.

    ``tables``: the registered tables (``Session.table(name)``) the split may
    read; a Parquet split must then name one of their files.

    Raises
    ------
    gpu_engine.plans.serialization.SerializationError
        For a malformed document or an unregistered type name, naming the
        path, or a split the checks refuse.
    """
    split = SPLIT_CODEC.from_document(document, _SPLIT_KEY, object)
    check_split(split, tables)
    return split


def check_split(split: Any, tables: Iterable[Any] | None = None) -> None:
    """Refuse a split naming a file of no given table, or row groups its file lacks.

    Parameters
    ----------
    split
        A split, as read from a document.
    tables
        Registered tables (anything with ``name`` and ``files``); None skips
        the file checks, not the range checks.

    Raises
    ------
    gpu_engine.plans.serialization.SerializationError
        Naming the path in the document (``$.split.path``, ``$.split.row_groups[2]``).
    """
    if isinstance(split, RemoteSplit) and split.destination < 0:
        raise SerializationError(f"a destination is 0 or more, got {split.destination}", "$.split.destination")
    if not isinstance(split, ParquetSplit):
        return
    for index, group in enumerate(split.row_groups):
        if group < 0 or group in split.row_groups[:index]:
            what = "negative" if group < 0 else "repeated"
            raise SerializationError(f"row group {group} is {what}", f"$.split.row_groups[{index}]")
    if tables is None:
        return
    tables = list(tables)
    path = os.path.realpath(split.path)
    owner = next((table for table in tables if path in {os.path.realpath(f) for f in table.files}), None)
    if owner is None:
        names = ", ".join(repr(table.name) for table in tables) or "(none)"
        raise SerializationError(f"{split.path} is not a file of the registered tables {names}", "$.split.path")
    from gpu_engine.connectors.data_source import parquet_metadata  # exec must not import connectors at load time

    try:
        groups = parquet_metadata(split.path).num_row_groups
    except (OSError, ValueError) as exc:
        raise SerializationError(f"cannot read {split.path} of table {owner.name!r}: {exc}", "$.split.path") from None
    for index, group in enumerate(split.row_groups):
        if group >= groups:
            raise SerializationError(f"row group {group} is out of range: {split.path} (table {owner.name!r}) has "
                                     f"{groups} row group(s)", f"$.split.row_groups[{index}]")


def split_to_json(split: Any, *, indent: int | None = None) -> str:
    """Return a split as JSON text another process can rebuild with :func:`split_from_json`."""
    return dump_document(split_to_dict(split), indent=indent)


def split_from_json(text: str | bytes, *, tables: Iterable[Any] | None = None) -> Any:
    """Return the split :func:`split_to_json` wrote, checked as :func:`split_from_dict` checks it.

    Raises
    ------
    gpu_engine.plans.serialization.SerializationError
        For malformed JSON or a malformed document, naming the path, or a split the checks refuse.
    """
    return split_from_dict(load_document(text), tables=tables)
