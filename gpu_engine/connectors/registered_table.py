"""Describe a table registered in a Session and cut it into splits.

A Parquet table is a file or a directory of files; each split is one file and
a run of its row groups. An in-memory table (a ``pyarrow.Table`` or
``RecordBatch``, a dict of columns, a pandas or Polars DataFrame, anything
with ``__arrow_c_stream__``) becomes a ``pyarrow.Table`` cut into slices.

Checks made at ``register``, so a bad source fails there, naming the table
and the file, rather than half-way through a query:

* every file of a directory is opened and its schema compared with the
  first file's; a file that disagrees on a column's name or type is refused
  (the engine does not unify types across files as DuckDB's
  ``union_by_name`` does: a silent widening would change sums and
  comparisons, so the user decides by rewriting or casting the files);
* a file that is not Parquet, or is corrupt, is refused; its footer is
  checked by the engine's own reader
  (:mod:`gpu_engine.connectors.parquet_footer`) before pyarrow reads it;
* duplicate column names are refused (columns are addressed by name);
* an in-memory column of Arrow's null type (``pa.nulls(n)``, a pandas column
  of only ``None``) is a column of SQL's NULL type, as DuckDB reads it: NULL
  storage marked on its field (:mod:`gpu_engine.plans.null_type`), so it takes
  the type of whatever it meets;
* columns of types the engine cannot compute on (lists, structs, times,
  durations, binary) are kept in the schema with their Arrow type, so the
  table registers; a plan that reads such a column fails at build time
  (``PlanBuilder.table_scan`` names the column and its type).

Files are checked again when a query asks for their splits: a file rewritten
since ``register`` with other columns or types fails the query naming it, and
one truncated or replaced by something unreadable fails saying it changed
since ``register`` (each file's size and modification time are kept).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from gpu_engine.columnar.types import normalize_type
from gpu_engine.connectors.data_source import parquet_metadata
from gpu_engine.connectors.parquet_footer import ParquetFooter, read_footer
from gpu_engine.errors import DataSourceError
from gpu_engine.exec.split import ArrowSplit, ConnectorSplit, ParquetSplit
from gpu_engine.plans.null_type import NULL_STORAGE, null_type_metadata, null_typed_field

__all__ = ["RegisteredTable", "register_source", "supported_columns", "DEFAULT_SPLIT_ROWS", "ACCEPTED_SOURCES"]

#: What ``Session.register`` accepts besides cuDF tables, as error messages list it.
ACCEPTED_SOURCES = ("a Parquet file or directory path (str or os.PathLike)", "a pyarrow.Table or RecordBatch",
                    "a dict of column name -> list or array", "a pandas or Polars DataFrame",
                    "an object with __arrow_c_stream__")

#: Rows per split: small enough that a few drivers share even a 0.1-scale
#: lineitem evenly (splits are handed out one at a time, so drivers that finish
#: early take more), large enough that a split's fixed costs stay negligible.
DEFAULT_SPLIT_ROWS = 1 << 18
#: A table registered without ``split_rows`` is cut into at least this many splits where its row groups
#: (or rows) allow, so that drivers share a small table too. Why: TPC-H's customer (150k rows, 4 row
#: groups), part and supplier fit in one 256k-row split, so one driver scanned each while the others
#: waited on the joins that need them; as 4 splits, TPC-H Q22 went from 86 to 62 ms and the 23 queries
#: at SF1 on 2 cores from 1.72x to 1.62x DuckDB's time (same process, interleaved medians).
MIN_SPLITS_PER_TABLE = 8
#: ... but no split smaller than this many rows (unless the table is): a split has fixed costs.
MIN_SPLIT_ROWS = 1 << 14


@dataclass(frozen=True)
class RegisteredTable:
    """A named table: its engine-level schema and how to enumerate its splits."""

    name: str
    schema: pa.Schema
    files: tuple[str, ...] = ()
    table: pa.Table | None = field(default=None, compare=False, repr=False)
    split_rows: int = DEFAULT_SPLIT_ROWS
    #: Each file's (size, modification time in ns) at ``register``, so an error can say the file changed since.
    versions: tuple[tuple[int, int], ...] = field(default=(), compare=False, repr=False)
    #: True where ``table`` was made of the caller's mutable memory (a pandas DataFrame's or a dict's numpy
    #: arrays, which Arrow wraps without a copy): its rows change when the caller writes to the frame, so nothing
    #: read from them while planning (a column proven unique: optimizer.statistics.unique_column) may be kept.
    borrowed: bool = field(default=False, compare=False, repr=False)

    def footer(self, path: str) -> ParquetFooter:
        """Return the checked footer of one of the table's files, or raise naming the table and the file.

        Raises
        ------
        FileNotFoundError
            For a file deleted since ``register``.
        DataSourceError
            For a file no longer Parquet or whose footer is inconsistent; the message says when the file
            changed since ``register``.
        """
        return _checked(self.name, path, read_footer, self._registered_version(path))

    def _registered_version(self, path: str) -> tuple[int, int] | None:
        return dict(zip(self.files, self.versions)).get(path)

    def splits(self) -> list[ConnectorSplit]:
        """Return the splits covering the whole table."""
        if self.table is not None:
            rows = self.table.num_rows
            step = max(1, self.split_rows)
            return [ArrowSplit(self.table.slice(start, step)) for start in range(0, rows, step)] or [ArrowSplit(self.table.slice(0, 0))]
        out: list[ConnectorSplit] = []
        for path in self.files:
            registered = self._registered_version(path)
            metadata = _file_metadata(self.name, path, registered)  # read once per process and file version (cached)
            out.extend(self._file_splits(path, metadata, registered))
        return out

    def _file_splits(self, path: str, metadata, registered: tuple[int, int] | None) -> tuple[ParquetSplit, ...]:
        """Return one file's splits, its schema checked against the registered one: once per footer object.

        Why: every run of every query asked for them, and checking the schema (a type normalized per column)
        and walking the row groups cost ~10% of a warm TPC-H pass's main-thread time at SF 0.01. Both follow
        from the footer (one object per file version, :func:`parquet_metadata`), the registered schema and
        ``split_rows``: a rewritten file has a new footer object, checked and cut again.
        """
        key = (id(self), path)
        kept = _FILE_SPLITS.get(key)
        if kept is not None and kept[0] is metadata and kept[1] is self:
            return kept[2]
        _check_unchanged(self, path, _metadata_schema(self.name, path, metadata, registered))
        splits = []
        group, rows, first = 0, 0, 0
        for group in range(metadata.num_row_groups):
            rows += metadata.row_group(group).num_rows
            if rows >= self.split_rows:
                splits.append(ParquetSplit(path, tuple(range(first, group + 1))))
                first, rows = group + 1, 0
        if first < metadata.num_row_groups:
            splits.append(ParquetSplit(path, tuple(range(first, metadata.num_row_groups))))
        if len(_FILE_SPLITS) >= _MAX_FILE_SPLITS:
            _FILE_SPLITS.clear()
        # The footer and the table held here too: their ids are not reused while the entry is kept.
        _FILE_SPLITS[key] = (metadata, self, tuple(splits))
        return tuple(splits)


#: (registered table's id, path) -> (footer object, the table, its splits), see RegisteredTable._file_splits.
_FILE_SPLITS: dict[tuple[int, str], tuple[object, RegisteredTable, tuple[ParquetSplit, ...]]] = {}
_MAX_FILE_SPLITS = 1024


def supported_columns(schema: pa.Schema) -> list[str]:
    """Return the columns of a registered schema the engine can read (see the module docstring)."""
    return [f.name for f in schema if _is_supported(f.type)]


def _is_supported(dtype: pa.DataType) -> bool:
    try:
        normalize_type(dtype)
    except TypeError:
        return False
    return True


def _engine_schema(schema: pa.Schema, name: str, where: str) -> pa.Schema:
    """Return the engine's logical types of ``schema``; unsupported types stay as they are (refused when read)."""
    seen: set[str] = set()
    fields = []
    for f in schema:
        if f.name in seen:
            raise DataSourceError(f"table {name!r}: {where} has two columns named {f.name!r}; "
                                  "columns are addressed by name, so rename one")
        seen.add(f.name)
        # (SQL's NULL type kept: a CTE computed once marks it on its columns, plans/null_type.py)
        fields.append(pa.field(f.name, normalize_type(f.type) if _is_supported(f.type) else f.type,
                               metadata=null_type_metadata(f)))
    return pa.schema(fields)


def _file_metadata(name: str, path: str, registered: tuple[int, int] | None = None):
    """Return a Parquet file's footer, or raise DataSourceError naming the table and the file."""
    return _checked(name, path, parquet_metadata, registered)


def _checked(name: str, path: str, read, registered: tuple[int, int] | None):
    """Return ``read(path)`` (a footer reader), raising errors that name the table, the file and any change.

    ``registered`` is the file's (size, modification time) at ``register``: a file truncated or rewritten
    since then is said to have changed, which is what the user needs to know.
    """
    try:
        return read(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"table {name!r}: file {path} no longer exists; register the table again") from None
    except (OSError, pa.ArrowException, DataSourceError) as exc:  # not Parquet, truncated, inconsistent footer
        message = str(exc)
        if not message.startswith("cannot read"):
            message = f"cannot read {path} as Parquet: {message}"
        raise DataSourceError(f"table {name!r}: {message}{_change_since(path, registered)}") from None


def _change_since(path: str, registered: tuple[int, int] | None) -> str:
    """Return how a file differs from its registered version, in words ("" when unknown or unchanged)."""
    if registered is None:
        return ""
    try:
        status = os.stat(path)
    except OSError:
        return ""
    size, modified_ns = registered
    if status.st_size != size:
        return f"; the file changed since the table was registered ({size} bytes then, {status.st_size} now)"
    if status.st_mtime_ns != modified_ns:
        return "; the file was rewritten since the table was registered"
    return ""


def _file_version(path: str) -> tuple[int, int]:
    status = os.stat(path)
    return status.st_size, status.st_mtime_ns


def _file_schema(name: str, path: str, registered: tuple[int, int] | None = None) -> pa.Schema:
    return _metadata_schema(name, path, _file_metadata(name, path, registered), registered)


#: Arrow schemas of cached footers, by the footer object's identity (the footers themselves are kept by
#: parquet_metadata, once per file version): converting lineitem's took 50 us on every query's splits.
_ARROW_SCHEMAS: dict[int, tuple[object, pa.Schema]] = {}
_MAX_ARROW_SCHEMAS = 256


def _metadata_schema(name: str, path: str, metadata, registered: tuple[int, int] | None) -> pa.Schema:
    """Return the Arrow schema of a file's parsed footer, converted once per footer object."""
    kept = _ARROW_SCHEMAS.get(id(metadata))
    if kept is not None and kept[0] is metadata:
        return kept[1]
    try:
        schema = metadata.schema.to_arrow_schema()
    except pa.ArrowException as exc:
        raise DataSourceError(f"table {name!r}: cannot read the schema of {path}: {exc}"
                              f"{_change_since(path, registered)}") from None
    if len(_ARROW_SCHEMAS) >= _MAX_ARROW_SCHEMAS:
        _ARROW_SCHEMAS.clear()
    _ARROW_SCHEMAS[id(metadata)] = (metadata, schema)  # the footer held here too: its id is not reused meanwhile
    return schema


def _schema_difference(expected: pa.Schema, actual: pa.Schema) -> str | None:
    """Return how ``actual`` differs from ``expected`` in words, or None when they hold the same columns and types."""
    if expected.names != actual.names:
        return f"its columns are {', '.join(actual.names)}, expected {', '.join(expected.names)}"
    for want, got in zip(expected, actual):
        if want.type != got.type:
            return f"column {want.name!r} is {got.type}, expected {want.type}"
    return None


def _check_unchanged(table: RegisteredTable, path: str, schema: pa.Schema) -> None:
    """Refuse a file that lost a registered column or changed its type since ``register``, naming the file.

    Only the registered columns are compared (a scan reads columns by name),
    so a caller may describe a file by a subset of its columns.
    """
    for want in table.schema:
        index = schema.get_field_index(want.name)
        if index < 0:
            difference = f"column {want.name!r} is missing"
        else:
            got = schema.field(index).type
            got = normalize_type(got) if _is_supported(got) else got
            if got == want.type or _same_instants(got, want.type):
                continue
            difference = f"column {want.name!r} is {got}, was {want.type}"
        raise DataSourceError(f"table {table.name!r}: {path} changed since the table was registered: "
                              f"{difference}; register the table again")


def _same_instants(got: pa.DataType, want: pa.DataType) -> bool:
    """Return True for timestamps of any unit, both with a zone or both without (a scan reads any unit)."""
    return pa.types.is_timestamp(got) and pa.types.is_timestamp(want) and (got.tz is None) == (want.tz is None)


def _as_arrow_table(name: str, source) -> pa.Table | None:
    """Return an in-memory source as a ``pyarrow.Table``, or None when ``source`` is not one (a path)."""
    if isinstance(source, pa.Table):
        return source
    if isinstance(source, pa.RecordBatch):
        return pa.Table.from_batches([source])
    if isinstance(source, dict):
        try:
            return pa.table(source)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise DataSourceError(f"table {name!r}: cannot make Arrow columns of the dict: {exc}") from None
    module = type(source).__module__.split(".")[0]
    if module == "pandas" and hasattr(source, "columns"):
        return pa.Table.from_pandas(source, preserve_index=False)
    if module == "polars" and hasattr(source, "to_arrow"):
        return source.to_arrow()
    if hasattr(source, "__arrow_c_stream__"):
        return pa.table(source)
    return None


def _null_typed_columns(table: pa.Table) -> pa.Table:
    """Return ``table`` with its columns of Arrow's null type as columns of SQL's NULL type (see the module
    docstring): the scan had no reader for ``pa.null()`` ("unsupported column type null")."""
    nulls = [i for i, f in enumerate(table.schema) if pa.types.is_null(f.type)]
    for i in nulls:
        table = table.set_column(i, null_typed_field(table.schema.field(i).name),
                                 pa.nulls(table.num_rows, NULL_STORAGE))
    return table


def register_source(name: str, source, split_rows: int | None = None) -> RegisteredTable:
    """Describe ``source`` as a table named ``name`` (see the module docstring for what is accepted and checked).

    Raises
    ------
    ValueError
        For an empty table name.
    TypeError
        For a source of another kind, listing :data:`ACCEPTED_SOURCES`.
    FileNotFoundError
        For a path that does not exist or a directory without ``.parquet`` files.
    DataSourceError
        For a file that is not Parquet, files that disagree on their columns, duplicate column names, or a file
        without columns.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a table name must be a non-empty string, got {name!r}")
    if split_rows is not None and (isinstance(split_rows, bool) or not isinstance(split_rows, int) or split_rows < 1):
        raise ValueError(f"table {name!r}: split_rows must be a positive integer (rows per split) or None, "
                         f"got {split_rows!r}")
    table = _as_arrow_table(name, source)
    if table is not None:
        table = _null_typed_columns(table)
        rows = split_rows or max(1, min(_default_split_rows(table.num_rows), table.num_rows))
        borrowed = type(source).__module__.split(".")[0] == "pandas" or isinstance(source, dict) and any(
            type(values).__module__ == "numpy" for values in source.values())
        return RegisteredTable(name, _engine_schema(table.schema, name, "the table"), (), table, rows,
                               borrowed=borrowed)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"cannot register a {type(source).__module__}.{type(source).__qualname__} as table {name!r}; "
                        "accepted: " + "; ".join(ACCEPTED_SOURCES))
    path = Path(source)
    if path.is_dir():
        files = dataset_files(path)
        if not files:
            raise FileNotFoundError(f"table {name!r}: no .parquet files under {path}")
    elif path.is_file():
        files = (str(path),)
    else:
        raise FileNotFoundError(f"table {name!r}: {path} is neither a Parquet file nor a directory")
    return register_files(name, files, split_rows)


def register_files(name: str, files: tuple[str, ...], split_rows: int | None = None) -> RegisteredTable:
    """Describe the Parquet ``files`` as one table named ``name`` (:func:`register_source`'s checks), e.g. a glob's
    matches (:mod:`gpu_engine.sql.file_sources`)."""
    schema = _engine_schema(_file_schema(name, files[0]), name, files[0])
    if not len(schema):  # (a query over it failed while planning, asking for a bug report; DuckDB refuses the file)
        raise DataSourceError(f"table {name!r}: {files[0]} has no columns; a table needs at least one")
    for path_text in files[1:]:
        difference = _schema_difference(schema, _engine_schema(_file_schema(name, path_text), name, path_text))
        if difference is not None:
            raise DataSourceError(f"table {name!r}: {path_text} does not match {files[0]}: {difference}; the files "
                                  "of a table must have the same columns and types (rewrite or cast the file)")
    if split_rows is None:
        split_rows = _default_split_rows(sum(_file_metadata(name, f).num_rows for f in files))
    return RegisteredTable(name, schema, files, None, split_rows, tuple(_file_version(f) for f in files))


#: A directory's entries whose names start with these are not the table's data (pyarrow.dataset's and Spark's rule):
#: ``.hidden`` files, ``_SUCCESS``/``_metadata`` markers, ``_temporary`` folders of unfinished writes.
IGNORED_PREFIXES = (".", "_")


def dataset_files(folder: Path) -> tuple[str, ...]:
    """Return the ``.parquet`` files under ``folder``, sorted, skipping every file or subfolder whose name starts
    with one of :data:`IGNORED_PREFIXES` (as pyarrow.dataset and Spark do)."""
    return tuple(str(p) for p in sorted(folder.rglob("*.parquet"))
                 if not any(part.startswith(IGNORED_PREFIXES) for part in p.relative_to(folder).parts))


def _default_split_rows(table_rows: int) -> int:
    """Return the rows per split of a table of ``table_rows`` registered without ``split_rows``.

    :data:`DEFAULT_SPLIT_ROWS`, or fewer, so the table makes :data:`MIN_SPLITS_PER_TABLE` splits, but not
    fewer than :data:`MIN_SPLIT_ROWS` (a Parquet split still holds whole row groups).
    """
    return max(MIN_SPLIT_ROWS, min(DEFAULT_SPLIT_ROWS, -(-table_rows // MIN_SPLITS_PER_TABLE)))
