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
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gpu_engine.exec import split as _split
from gpu_engine.exec.split import ConnectorSplit
from gpu_engine.plans.serialization import DataclassCodec, dump_document, load_document

__all__ = ["SPLIT_CODEC", "split_to_dict", "split_from_dict", "split_to_json", "split_from_json"]

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


def split_from_dict(document: Any) -> Any:
    """Return the split a :func:`split_to_dict` document describes.

    Raises
    ------
    gpu_engine.plans.serialization.SerializationError
        For a malformed document or an unregistered type name, naming the path.
    """
    return SPLIT_CODEC.from_document(document, _SPLIT_KEY, object)


def split_to_json(split: Any, *, indent: int | None = None) -> str:
    """Return a split as JSON text another process can rebuild with :func:`split_from_json`."""
    return dump_document(split_to_dict(split), indent=indent)


def split_from_json(text: str | bytes) -> Any:
    """Return the split :func:`split_to_json` wrote.

    Raises
    ------
    gpu_engine.plans.serialization.SerializationError
        For malformed JSON or a malformed document, naming the path.
    """
    return split_from_dict(load_document(text))
