"""Serialize plan fragments to versioned JSON and back, so another process can rebuild a Task without pickle.

A Spark executor (or any other worker) must rebuild exactly the plan the
coordinator built, from text it can log, diff and inspect. Pickle would run
arbitrary code on load and ties both sides to one Python build; this module
instead walks the frozen dataclasses generically, as Velox's
``ISerializable``/``DeserializationRegistry`` does for its plan nodes:

* a document is ``{"format": 1, "plan": {...}}``; a reader refuses formats it
  does not know;
* a dataclass becomes an object tagged with its class name, ``{"type":
  "FilterNode", "id": "1", ...}``, one key per ``__init__`` field in declaration
  order; only classes registered in a :class:`DataclassCodec` can be named, so a
  document cannot make the reader instantiate anything else;
* the reader is driven by the fields' type annotations: ``tuple[X, ...]`` is a
  JSON list, ``X | None`` may be ``null``, an enum (``AggregationStep``) is its
  member name, an int field only takes an int, and a nested object must name a
  registered subclass of the annotated class (an ``Expr`` where an ``Expr`` is
  expected, never a plan node);
* Arrow types use a small readable grammar (:func:`format_arrow_type`):
  ``int64``, ``decimal128(15, 2)``, ``date32``, ``timestamp[us, tz=UTC]``,
  ``string``; a schema is ``{"fields": [{"name": ..., "type": ...}, ...]}``
  (``"nullable": false`` and ``"metadata"`` only when they apply);
* a ``pyarrow.Table`` (``ValuesNode.data``, ``ArrowSplit.table``) is the only
  binary payload: ``{"arrow_ipc_base64": "..."}``, the Arrow IPC stream bytes in
  base64;
* values of ``Any`` fields (``Literal.value``) describe themselves: JSON null,
  booleans, integers, strings and finite floats are themselves, and
  ``{"type": "decimal", "value": "0.06"}`` (exact text, exponent kept),
  ``{"type": "date", "value": "1998-09-02"}``, ``{"type": "timestamp", "value":
  <ISO 8601>}`` and ``{"type": "float", "value": "nan" | "inf" | "-inf"}`` the
  rest, so the output is strict JSON.

Every error on reading is a :class:`SerializationError` (a ``ValueError``)
whose ``path`` names the place in the document, e.g.
``$.plan.sources[0].predicate.dtype``.

Splits are serialized by :mod:`gpu_engine.exec.split_serialization`, which
builds its own codec from this module's machinery, so ``gpu_engine.plans``
never imports ``gpu_engine.exec``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import decimal
import enum
import json
import math
import numbers
import re
import types
import typing
from typing import Any, Iterable, Mapping

import pyarrow as pa

from gpu_engine.errors import PlanError
from gpu_engine.plans import expressions as _expressions
from gpu_engine.plans import nodes as _nodes
from gpu_engine.plans import subqueries as _subqueries
from gpu_engine.plans.expressions import MAX_EXPRESSION_DEPTH, allow_recursion_depth
from gpu_engine.plans.intervals import IntervalValue
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_validation import validate_plan

__all__ = [
    "FORMAT_VERSION",
    "SerializationError",
    "DocumentTooDeep",
    "DataclassCodec",
    "PLAN_CODEC",
    "format_arrow_type",
    "parse_arrow_type",
    "dump_document",
    "load_document",
    "plan_to_dict",
    "plan_from_dict",
    "plan_to_json",
    "plan_from_json",
]

FORMAT_VERSION = 1

_TYPE_KEY = "type"
_TABLE_KEY = "arrow_ipc_base64"
_FORMAT_KEY = "format"
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class SerializationError(ValueError):
    """Raise for a document (or a value being written) that this format cannot represent.

    Parameters
    ----------
    message
        What is wrong.
    path
        Where, as a JSONPath-like string: ``$.plan.sources[0].count``.
    """

    def __init__(self, message: str, path: str):
        self.path = path
        super().__init__(f"{message} (at {path})")


class DocumentTooDeep(SerializationError, PlanError):
    """Raise for a document (or a plan being written) nested deeper than :data:`MAX_DOCUMENT_DEPTH` levels.

    Why both types: it is this format's refusal (callers of the reader catch :class:`SerializationError`), and
    for a plan document it is what a plan too deep to plan is (:mod:`gpu_engine.planning.plan_depth`): a
    :class:`~gpu_engine.errors.PlanError` naming the depth and what to do instead, never a bare
    ``RecursionError`` from Python's JSON reader or this codec's walk.
    """

    def __init__(self, depth: int, path: str, *, writing: bool = False):
        self.depth = depth
        self.node = self.column = self.tree = None  # PlanError's fields: a document has no node to name yet
        verb = "to serialize" if writing else "to read"
        SerializationError.__init__(
            self, f"the {'value' if writing else 'document'} nests too deeply {verb} ({depth} levels, at most "
            f"{MAX_DOCUMENT_DEPTH} are supported: a plan node takes two levels, an expression level one); combine "
            "consecutive filters and projections into one node each, or run an inner part of the plan first and "
            "register its result as a table", path)


# -- Arrow types ----------------------------------------------------------------------

_SIMPLE_TYPES: dict[str, pa.DataType] = {
    "null": pa.null(), "bool": pa.bool_(),
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "uint64": pa.uint64(),
    "float16": pa.float16(), "float32": pa.float32(), "float64": pa.float64(),
    "string": pa.string(), "large_string": pa.large_string(), "string_view": pa.string_view(),
    "binary": pa.binary(), "large_binary": pa.large_binary(), "binary_view": pa.binary_view(),
    "date32": pa.date32(), "date64": pa.date64(), "month_day_nano_interval": pa.month_day_nano_interval(),
}
_SIMPLE_NAMES = {dtype: name for name, dtype in _SIMPLE_TYPES.items()}
# pyarrow's own spellings (``str(dtype)``) are accepted on reading.
_TYPE_ALIASES = {"boolean": "bool", "halffloat": "float16", "float": "float32", "double": "float64",
                 "utf8": "string", "large_utf8": "large_string", "date32[day]": "date32", "date64[ms]": "date64"}
_DECIMALS = {name: getattr(pa, name) for name in ("decimal32", "decimal64", "decimal128", "decimal256")
             if hasattr(pa, name)}
_UNIT_TYPES = {"time32": pa.time32, "time64": pa.time64, "duration": pa.duration}
_DECIMAL_PATTERN = re.compile(r"(decimal\d+)\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")
_TIMESTAMP_PATTERN = re.compile(r"timestamp\[(s|ms|us|ns)(?:,\s*tz=([^\]]+))?\]")
_UNIT_PATTERN = re.compile(r"(time32|time64|duration)\[(s|ms|us|ns)\]")


def format_arrow_type(dtype: pa.DataType, path: str = "$") -> str:
    """Return the JSON spelling of an Arrow type, e.g. ``decimal128(15, 2)`` or ``timestamp[us, tz=UTC]``.

    Raises
    ------
    SerializationError
        For types outside the grammar (nested, dictionary, extension types).
    """
    name = _SIMPLE_NAMES.get(dtype)
    if name is not None:
        return name
    if pa.types.is_decimal(dtype):  # Decimal128Type -> decimal128
        return f"{type(dtype).__name__.removesuffix('Type').lower()}({dtype.precision}, {dtype.scale})"
    if pa.types.is_timestamp(dtype):
        return f"timestamp[{dtype.unit}, tz={dtype.tz}]" if dtype.tz else f"timestamp[{dtype.unit}]"
    if pa.types.is_time32(dtype) or pa.types.is_time64(dtype) or pa.types.is_duration(dtype):
        kind = "duration" if pa.types.is_duration(dtype) else "time32" if pa.types.is_time32(dtype) else "time64"
        return f"{kind}[{dtype.unit}]"
    raise SerializationError(f"the Arrow type {dtype} has no JSON spelling", path)


def parse_arrow_type(text: str, path: str = "$") -> pa.DataType:
    """Return the Arrow type a :func:`format_arrow_type` spelling (or pyarrow's ``str``) names.

    Raises
    ------
    SerializationError
        For text that names no type, or invalid parameters (``decimal128(99, 2)``).
    """
    if not isinstance(text, str):
        raise SerializationError(f"an Arrow type must be a string, got {_json_kind(text)}", path)
    spelled = text.strip()
    spelled = _TYPE_ALIASES.get(spelled, spelled)
    if spelled in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[spelled]
    try:
        if (match := _DECIMAL_PATTERN.fullmatch(spelled)) and match[1] in _DECIMALS:
            return _DECIMALS[match[1]](int(match[2]), int(match[3]))
        if match := _TIMESTAMP_PATTERN.fullmatch(spelled):
            return pa.timestamp(match[1], tz=match[2].strip() if match[2] else None)
        if match := _UNIT_PATTERN.fullmatch(spelled):
            return _UNIT_TYPES[match[1]](match[2])
    except (ValueError, TypeError, pa.ArrowException) as exc:
        raise SerializationError(f"invalid Arrow type {text!r}: {exc}", path) from None
    raise SerializationError(f"unknown Arrow type {text!r}", path)


# -- schemas and tables --------------------------------------------------------------------


def _metadata_to_json(metadata: Mapping[bytes, bytes] | None, path: str) -> dict[str, str] | None:
    if not metadata:
        return None
    try:
        return {key.decode(): value.decode() for key, value in metadata.items()}
    except UnicodeDecodeError:
        raise SerializationError("Arrow metadata must be UTF-8 text", path) from None


def _metadata_from_json(data: Any, path: str) -> dict[str, str]:
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise SerializationError(f"metadata must be an object of strings, got {_json_kind(data)}", path)
    return data


def _schema_to_json(schema: pa.Schema, path: str) -> dict[str, Any]:
    fields = []
    for i, f in enumerate(schema):
        entry: dict[str, Any] = {"name": f.name, "type": format_arrow_type(f.type, f"{path}.fields[{i}].type")}
        if not f.nullable:
            entry["nullable"] = False
        if (metadata := _metadata_to_json(f.metadata, f"{path}.fields[{i}].metadata")) is not None:
            entry["metadata"] = metadata
        fields.append(entry)
    out: dict[str, Any] = {"fields": fields}
    if (metadata := _metadata_to_json(schema.metadata, f"{path}.metadata")) is not None:
        out["metadata"] = metadata
    return out


def _schema_from_json(data: Any, path: str) -> pa.Schema:
    _check_keys(data, required=("fields",), optional=("metadata",), path=path)
    if not isinstance(data["fields"], list):
        raise SerializationError(f"fields must be a list, got {_json_kind(data['fields'])}", f"{path}.fields")
    fields = []
    for i, entry in enumerate(data["fields"]):
        where = f"{path}.fields[{i}]"
        _check_keys(entry, required=("name", "type"), optional=("nullable", "metadata"), path=where)
        name, nullable = entry["name"], entry.get("nullable", True)
        if not isinstance(name, str):
            raise SerializationError(f"a field name must be a string, got {_json_kind(name)}", f"{where}.name")
        if not isinstance(nullable, bool):
            raise SerializationError(f"nullable must be a boolean, got {_json_kind(nullable)}", f"{where}.nullable")
        metadata = _metadata_from_json(entry["metadata"], f"{where}.metadata") if "metadata" in entry else None
        fields.append(pa.field(name, parse_arrow_type(entry["type"], f"{where}.type"), nullable, metadata))
    metadata = _metadata_from_json(data["metadata"], f"{path}.metadata") if "metadata" in data else None
    return pa.schema(fields, metadata)


def _table_to_json(table: pa.Table) -> dict[str, str]:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return {_TABLE_KEY: base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")}


def _table_from_json(data: Any, path: str) -> pa.Table:
    _check_keys(data, required=(_TABLE_KEY,), optional=(), path=path)
    where = f"{path}.{_TABLE_KEY}"
    if not isinstance(data[_TABLE_KEY], str):
        raise SerializationError(f"expected base64 text, got {_json_kind(data[_TABLE_KEY])}", where)
    try:
        payload = base64.b64decode(data[_TABLE_KEY], validate=True)
        return pa.ipc.open_stream(payload).read_all()
    except (binascii.Error, ValueError, OSError, pa.ArrowException) as exc:
        raise SerializationError(f"not base64 Arrow IPC stream bytes: {exc}", where) from None


# -- the generic dataclass walk -------------------------------------------------------------


def _json_kind(data: Any) -> str:
    if data is None:
        return "null"
    if isinstance(data, bool):
        return f"boolean {data}".lower()
    if isinstance(data, (int, float)):
        return f"number {data!r}"
    if isinstance(data, str):
        return f"string {data[:40]!r}"
    return "a list" if isinstance(data, list) else "an object" if isinstance(data, dict) else type(data).__name__


def _check_keys(data: Any, *, required: Iterable[str], optional: Iterable[str], path: str) -> None:
    if not isinstance(data, dict):
        raise SerializationError(f"expected an object, got {_json_kind(data)}", path)
    required = tuple(required)
    for key in required:
        if key not in data:
            raise SerializationError(f"missing key {key!r}", path)
    allowed = set(required) | set(optional)
    for key in data:
        if key not in allowed:
            raise SerializationError(f"unknown key {key!r}; expected {', '.join(sorted(allowed))}", f"{path}.{key}")


@dataclasses.dataclass(frozen=True)
class _FieldSpec:
    name: str
    hint: Any
    required: bool


class DataclassCodec:
    """Convert registered frozen dataclasses to JSON-ready values and back, driven by their field annotations.

    Parameters
    ----------
    classes
        The dataclasses a document may name in its ``"type"`` tags, by class
        name. Nothing else can be instantiated on reading.

    Raises
    ------
    TypeError
        For a class that is not a dataclass, or two classes with one name.
    """

    def __init__(self, classes: Iterable[type]):
        self._classes: dict[str, type] = {}
        self._fields: dict[type, tuple[_FieldSpec, ...]] = {}
        for cls in classes:
            self._register(cls)

    def _register(self, cls: type) -> None:
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise TypeError(f"only dataclasses can be registered, got {cls!r}")
        if self._classes.setdefault(cls.__name__, cls) is not cls:
            raise TypeError(f"two registered classes are named {cls.__name__}")
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # unresolvable annotations: accept any JSON value for those fields
            hints = {}
        specs = tuple(
            _FieldSpec(f.name, hints.get(f.name, Any),
                       f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
            for f in dataclasses.fields(cls) if f.init)
        if any(spec.name == _TYPE_KEY for spec in specs):
            raise TypeError(f"{cls.__name__} has a field named {_TYPE_KEY!r}, which the format uses as its tag")
        self._fields[cls] = specs

    @property
    def classes(self) -> tuple[type, ...]:
        """Return the registered classes, in registration order."""
        return tuple(self._classes.values())

    # -- writing --------------------------------------------------------------------------

    def encode(self, value: Any, path: str = "$") -> Any:
        """Return ``value`` as JSON-ready data (dicts, lists, str, int, float, bool, None).

        Raises
        ------
        SerializationError
            For an object of an unregistered class or a type the format lacks.
        """
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, enum.Enum):
            return value.name
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, float):
            if math.isfinite(value):
                return value
            return {_TYPE_KEY: "float", "value": "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"}
        if isinstance(value, decimal.Decimal):
            return {_TYPE_KEY: "decimal", "value": str(value)}
        if isinstance(value, datetime.datetime):
            return {_TYPE_KEY: "timestamp", "value": value.isoformat()}
        if isinstance(value, datetime.date):
            return {_TYPE_KEY: "date", "value": value.isoformat()}
        if isinstance(value, pa.DataType):
            return format_arrow_type(value, path)
        if isinstance(value, pa.Schema):
            return _schema_to_json(value, path)
        if isinstance(value, pa.Table):
            return _table_to_json(value)
        if isinstance(value, tuple):
            return [self.encode(item, f"{path}[{i}]") for i, item in enumerate(value)]
        cls = type(value)
        if self._classes.get(cls.__name__) is cls:
            out = {_TYPE_KEY: cls.__name__}
            for spec in self._fields[cls]:
                out[spec.name] = self.encode(getattr(value, spec.name), f"{path}.{spec.name}")
            return out
        raise SerializationError(f"cannot serialize a {cls.__module__}.{cls.__qualname__}; registered classes: "
                                 + ", ".join(self._classes), path)

    def to_document(self, key: str, value: Any) -> dict[str, Any]:
        """Return ``{"format": 1, key: <value encoded>}``.

        Raises
        ------
        SerializationError
            Also for a value nesting deeper than :data:`MAX_DOCUMENT_DEPTH`
            levels, which no reader would accept.
        """
        depth = _value_nesting(value)
        if depth > MAX_DOCUMENT_DEPTH:
            raise DocumentTooDeep(depth, f"$.{key}", writing=True)
        allow_recursion_depth(depth)
        try:
            return {_FORMAT_KEY: FORMAT_VERSION, key: self.encode(value, f"$.{key}")}
        except RecursionError:
            raise DocumentTooDeep(depth, f"$.{key}", writing=True) from None

    # -- reading --------------------------------------------------------------------------

    def decode(self, data: Any, hint: Any, path: str = "$") -> Any:
        """Return the value that JSON ``data`` describes, checked against the annotation ``hint``.

        Raises
        ------
        SerializationError
            For data that does not fit ``hint``, naming ``path``.
        """
        if hint is Any or hint is object:
            return self._decode_self_describing(data, path)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            if data is None and type(None) in args:
                return None
            options = [arg for arg in args if arg is not type(None)]
            for option in options[:-1]:
                try:
                    return self.decode(data, option, path)
                except SerializationError:
                    pass
            return self.decode(data, options[-1], path)
        if origin is tuple or hint is tuple:
            return self._decode_tuple(data, args, path)
        if hint is type(None):
            if data is not None:
                raise SerializationError(f"expected null, got {_json_kind(data)}", path)
            return None
        if not isinstance(hint, type):
            raise SerializationError(f"fields annotated {hint} cannot be read", path)
        return self._decode_class(data, hint, path)

    def _decode_tuple(self, data: Any, args: tuple, path: str) -> tuple:
        if not isinstance(data, list):
            raise SerializationError(f"expected a list, got {_json_kind(data)}", path)
        if not args:
            item_hints = [Any] * len(data)
        elif len(args) == 2 and args[1] is Ellipsis:
            item_hints = [args[0]] * len(data)
        elif len(args) == len(data):
            item_hints = list(args)
        else:
            raise SerializationError(f"expected a list of {len(args)} items, got {len(data)}", path)
        return tuple(self.decode(item, item_hint, f"{path}[{i}]")
                     for i, (item, item_hint) in enumerate(zip(data, item_hints)))

    def _decode_class(self, data: Any, hint: type, path: str) -> Any:
        if issubclass(hint, enum.Enum):
            if not isinstance(data, str) or data not in hint.__members__:
                raise SerializationError(f"expected one of {', '.join(hint.__members__)} ({hint.__name__}), "
                                         f"got {_json_kind(data)}", path)
            return hint[data]
        if hint is bool or hint is str:
            if not isinstance(data, hint):
                raise SerializationError(f"expected a {'boolean' if hint is bool else 'string'}, "
                                         f"got {_json_kind(data)}", path)
            return data
        if hint is int:
            if isinstance(data, bool) or not isinstance(data, int):
                raise SerializationError(f"expected an integer, got {_json_kind(data)}", path)
            return data
        if issubclass(hint, pa.DataType):
            return parse_arrow_type(data, path)
        if hint is pa.Schema:
            return _schema_from_json(data, path)
        if hint is pa.Table:
            return _table_from_json(data, path)
        if dataclasses.is_dataclass(hint):
            return self._decode_dataclass(data, hint, path)
        value = self._decode_self_describing(data, path)  # float, Decimal, date, datetime
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, hint) or (hint is datetime.date and isinstance(value, datetime.datetime)):
            raise SerializationError(f"expected a {hint.__name__}, got {_json_kind(data)}", path)
        return value

    def _decode_dataclass(self, data: Any, base: type, path: str) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get(_TYPE_KEY), str):
            raise SerializationError(f"expected an object with a {_TYPE_KEY!r} tag naming a {base.__name__}, "
                                     f"got {_json_kind(data)}", path)
        name = data[_TYPE_KEY]
        cls = self._classes.get(name)
        if cls is None:
            allowed = [n for n, c in self._classes.items() if issubclass(c, base)]
            raise SerializationError(f"unknown type {name!r}; expected one of {', '.join(allowed)}", path)
        if not issubclass(cls, base):
            raise SerializationError(f"{name} is not a kind of {base.__name__}, which this place holds", path)
        specs = self._fields[cls]
        _check_keys(data, required=[s.name for s in specs if s.required],
                    optional=[_TYPE_KEY] + [s.name for s in specs], path=path)
        values = {spec.name: self.decode(data[spec.name], spec.hint, f"{path}.{spec.name}")
                  for spec in specs if spec.name in data}
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"cannot build a {name}: {exc}", path) from None

    def _decode_self_describing(self, data: Any, path: str) -> Any:
        if data is None or isinstance(data, (bool, int, float, str)):
            return data
        if isinstance(data, list):
            return tuple(self._decode_self_describing(item, f"{path}[{i}]") for i, item in enumerate(data))
        if isinstance(data, dict) and data.get(_TYPE_KEY) in ("float", "decimal", "date", "timestamp"):
            _check_keys(data, required=(_TYPE_KEY, "value"), optional=(), path=path)
            return _decode_scalar(data[_TYPE_KEY], data["value"], f"{path}.value")
        return self._decode_dataclass(data, object, path)

    def from_document(self, document: Any, key: str, base: type) -> Any:
        """Return the value under ``key`` of a ``{"format": 1, key: ...}`` document, which must be a ``base``.

        Raises
        ------
        SerializationError
            For another format version, missing or extra keys, or a malformed value.
        """
        _check_keys(document, required=(_FORMAT_KEY, key), optional=(), path="$")
        version = document[_FORMAT_KEY]
        if isinstance(version, bool) or not isinstance(version, int) or version != FORMAT_VERSION:  # 1.0 too
            raise SerializationError(f"unsupported format {_json_kind(version)}; this reader understands "
                                     f"format {FORMAT_VERSION}", f"$.{_FORMAT_KEY}")
        for attempt in range(2):
            try:
                return self._decode_dataclass(document[key], base, f"$.{key}")
            except RecursionError:
                depth = _data_nesting(document[key])
                if attempt or depth > MAX_DOCUMENT_DEPTH:
                    raise DocumentTooDeep(depth, f"$.{key}") from None
                allow_recursion_depth(depth)  # as deep as PlanBuilder allows: make room, decode it again


def _value_nesting(value: Any) -> int:
    """Return how deeply a value nests dataclasses and tuples (as its document will), counted without recursion."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, tuple):
            stack.extend((child, depth + 1) for child in item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend((getattr(item, f.name), depth + 1) for f in dataclasses.fields(item))
    return deepest


def _data_nesting(data: Any) -> int:
    """Return how deeply decoded JSON nests its objects and lists, counted without recursion."""
    deepest = 0
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        else:
            deepest = max(deepest, depth)
    return deepest


def _decode_scalar(tag: str, text: Any, path: str) -> Any:
    if tag == "float":
        if isinstance(text, str) and text in _NON_FINITE:
            return _NON_FINITE[text]
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            return float(text)
        raise SerializationError(f"a float is a number or one of nan, inf, -inf; got {_json_kind(text)}", path)
    if not isinstance(text, str):
        raise SerializationError(f"a {tag} value is written as a string, got {_json_kind(text)}", path)
    try:
        if tag == "decimal":
            return decimal.Decimal(text)
        if tag == "date":
            return datetime.date.fromisoformat(text)
        return datetime.datetime.fromisoformat(text)
    except (ValueError, decimal.InvalidOperation):
        raise SerializationError(f"invalid {tag} {text!r}", path) from None


# -- JSON text ---------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise SerializationError(f"non-standard JSON constant {name}; write {{\"type\": \"float\", \"value\": "
                             "\"nan\"}} instead", "$")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise SerializationError(f"duplicate key {key!r} in a JSON object", "$")
        out[key] = value
    return out


def dump_document(document: Mapping[str, Any], *, indent: int | None = None) -> str:
    """Return a document as strict JSON text (no NaN or Infinity constants)."""
    return json.dumps(document, allow_nan=False, indent=indent)


def load_document(text: str | bytes) -> Any:
    """Return the JSON value of ``text``, refusing NaN/Infinity constants and duplicate keys.

    Raises
    ------
    SerializationError
        For text that is not strict JSON; :class:`DocumentTooDeep` (also a
        :class:`~gpu_engine.errors.PlanError`) for text nested deeper than
        :data:`MAX_DOCUMENT_DEPTH` levels, naming its depth.
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise SerializationError(f"expected JSON text, got a {type(text).__name__}", "$")
    depth = _text_nesting(text)
    if depth > MAX_DOCUMENT_DEPTH:  # refused before json.loads recurses (in C) that deep
        raise DocumentTooDeep(depth, "$")
    # json.loads takes a frame or two per level: only documents beyond ~100 levels need a raised limit
    # (a plan as deep as PlanBuilder allows, read in a fresh process).
    allow_recursion_depth(max(0, depth - 100) // 4)
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except SerializationError:
        raise
    except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError
        raise SerializationError(f"malformed JSON: {exc}", "$") from None
    except RecursionError:
        raise DocumentTooDeep(depth, "$") from None


#: The deepest JSON a plan document may be: a plan's nodes nest two levels each
#: (an object in a list of sources), an expression's one level each.
MAX_DOCUMENT_DEPTH = 4 * MAX_EXPRESSION_DEPTH
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _text_nesting(text: str | bytes) -> int:
    """Return how deeply JSON text nests its objects and lists, outside strings (regular expressions: C speed)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if text.count("[") + text.count("{") <= 64:  # cannot nest deeper than it opens
        return text.count("[") + text.count("{")
    deepest = depth = 0
    for match in _JSON_BRACKET.finditer(_JSON_STRING.sub("", text)):
        depth += 1 if match[0] in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


# -- plans ---------------------------------------------------------------------------------------


def _exported_dataclasses(module: types.ModuleType, bases: tuple[type, ...]) -> list[type]:
    """Return the concrete dataclasses a module exports (``bases`` themselves are abstract)."""
    found = (getattr(module, name) for name in module.__all__)
    return [obj for obj in found if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj not in bases]


PLAN_CODEC = DataclassCodec([
    *_exported_dataclasses(_nodes, (PlanNode,)),
    *_exported_dataclasses(_expressions, (_expressions.Expr,)),
    *_exported_dataclasses(_subqueries, ()),
    IntervalValue,
])
"""The codec of plan documents: every plan node, ``SortKey``, every expression class (the subquery predicates
too) and the interval constants literals carry."""

_PLAN_KEY = "plan"


def plan_to_dict(node: PlanNode) -> dict[str, Any]:
    """Return a plan fragment as a JSON-ready ``{"format": 1, "plan": {...}}`` document.

    Raises
    ------
    TypeError
        When ``node`` is not a plan node.
    SerializationError
        For a value the format cannot hold (a nested Arrow type, an unregistered class).
    """
    if not isinstance(node, PlanNode):
        raise TypeError(f"expected a PlanNode, got {type(node).__name__}")
    return PLAN_CODEC.to_document(_PLAN_KEY, node)


def plan_from_dict(document: Any, *, validate: bool = True) -> PlanNode:
    """Return the plan fragment a :func:`plan_to_dict` document describes, checked as PlanBuilder checks plans.

    Raises
    ------
    SerializationError
        For a malformed document, naming the path of the offending value, or
        a plan PlanBuilder would refuse (:func:`~gpu_engine.plans.plan_validation.validate_plan`:
        ``LIMIT -5``, an unknown join type or operator, a literal that does
        not fit its type, an output schema that contradicts the input,
        duplicate node ids), naming the node. ``validate=False`` skips those
        checks (the format's own tests carry arbitrary values through it);
        such a plan must not be executed.
    """
    plan = PLAN_CODEC.from_document(document, _PLAN_KEY, PlanNode)
    if not validate:
        return plan
    try:
        validate_plan(plan)
    except PlanError as error:  # the rules PlanBuilder enforces: a document must not get around them
        raise SerializationError(f"invalid plan: {error}", _node_paths(plan).get(error.node, f"$.{_PLAN_KEY}")) from None
    return plan


def _node_paths(root: PlanNode) -> dict[str, str]:
    """Return each node's label -> its place in the document (``$.plan.sources[1]``), the first one per label."""
    paths: dict[str, str] = {}
    stack = [(root, f"$.{_PLAN_KEY}")]
    while stack:
        node, path = stack.pop()
        paths.setdefault(node.label, path)
        stack.extend((source, f"{path}.sources[{i}]") for i, source in enumerate(node.sources))
    return paths


def plan_to_json(node: PlanNode, *, indent: int | None = None) -> str:
    """Return a plan fragment as JSON text another process can rebuild with :func:`plan_from_json`."""
    return dump_document(plan_to_dict(node), indent=indent)


def plan_from_json(text: str | bytes, *, validate: bool = True) -> PlanNode:
    """Return the plan fragment :func:`plan_to_json` wrote, checked as :func:`plan_from_dict` checks it.

    Raises
    ------
    SerializationError
        For malformed JSON or a malformed document, naming the path, or a plan PlanBuilder would refuse;
        :class:`DocumentTooDeep`, also a :class:`~gpu_engine.errors.PlanError`, for a plan nested deeper than
        the reader takes, naming its depth.
    """
    return plan_from_dict(load_document(text), validate=validate)
