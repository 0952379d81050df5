"""Parquet files named in SQL text: ``FROM 'data/x.parquet'``, ``FROM read_parquet('x.parquet')``.

Why: users who query their own files type what DuckDB answers -- a string
literal naming a ``.parquet`` file, a glob (``'dir/*.parquet'``) or a
directory, or ``read_parquet(path)`` / ``read_parquet([path, ...])`` /
``parquet_scan(...)`` -- and were told "unknown table". Each distinct set of
paths becomes a table the Session registers through ``register``'s machinery
(:func:`gpu_engine.connectors.registered_table.register_files`: the validated
footer reader, statistics, file versions) under a name made from the absolute
paths (:func:`file_table_name`); the rewrite (:func:`with_file_tables`) puts
that name in the FROM item's place before tables are checked and qualified,
keeping the item's alias (DuckDB's default alias: the file's stem, or the
function's name) and column list.

Before each plan the Session checks the table against the files now
(:func:`current_file_table`): another file list (a glob matching a new file)
or another file version (a rewritten file) registers the table again, a new
object, so :class:`~gpu_engine.sql.plan_cache.PlanCache` (keyed by the table
objects) plans the text anew rather than reuse a plan of the old file.

The tables are the engine's, not the user's: ``Session.catalog`` leaves them
out, EXPLAIN names a scan of one by the paths as written, and
``Session.sql_plan`` keys a kept plan by the file tables its own text names
only (a new file set made every other kept plan miss once). At most
:data:`FILE_TABLES` are kept, the least recently named dropped first (a loop
over a day's files registered one per file, for ever); one named again is
registered again.

DuckDB options we do not support (``hive_partitioning``, ``union_by_name``,
...) and the other readers (``read_csv``, ``read_json``) are refused by name.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Mapping

from sqlglot import exp

from gpu_engine.errors import DataSourceError
from gpu_engine.sql.errors import SqlError, position_of

#: The table functions that read Parquet files (DuckDB's names).
PARQUET_FUNCTIONS = ("read_parquet", "parquet_scan")
#: DuckDB's other file readers: refused naming the alternative.
OTHER_READERS = ("read_csv", "read_csv_auto", "read_json", "read_json_auto", "read_ndjson", "read_ndjson_auto",
                 "read_text", "read_blob", "read_xlsx")
#: Prefix of the tables the Session registers for file sources.
FILE_TABLE_PREFIX = "__file_"
#: The file tables a Session keeps at most (each holds its files' footers and statistics, not their rows).
FILE_TABLES = 64
_GLOB_CHARACTERS = frozenset("*?[")


#: A string literal right after FROM or JOIN (``FROM 'dir/'``): a file source that need not say "parquet".
_QUOTED_FROM_ITEM = re.compile(r"\b(?:from|join)\s*'", re.IGNORECASE)


def mentions_files(text: str) -> bool:
    """Return whether ``text`` may name a file source (a cheap test before any walk).

    Why so narrow: a text that passes is parsed once more before each plan-cache lookup; a ``/`` (a division) alone
    would make every warm TPC-H run pay it.
    """
    lowered = text.lower()
    return "parquet" in lowered or "read_" in lowered or _QUOTED_FROM_ITEM.search(text) is not None


def _function_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.ReadParquet):
        return "read_parquet"
    if isinstance(node, exp.ReadCSV):
        return "read_csv"
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return None


def _is_path_name(name: str) -> bool:
    """A quoted FROM name DuckDB reads as a file: a ``.parquet`` name, a glob, or a path with a separator."""
    return name.lower().endswith(".parquet") or bool(_GLOB_CHARACTERS & set(name)) or "/" in name or os.sep in name


def _file_paths(item: exp.Table, catalog: Mapping[str, object] | None) -> tuple[str, ...] | None:
    """Return the paths a FROM item names (as written), or None for an item that names no file."""
    this = item.this
    if isinstance(this, exp.Identifier):
        if not this.quoted or item.args.get("db") or not _is_path_name(this.name):
            return None
        if catalog is not None and any(this.name.lower() == name.lower() for name in catalog):
            return None  # a registered table of that name (Session.register("a/b", ...)) comes first
        return (this.name,)
    function = _function_name(this)
    if function in OTHER_READERS:
        line, col = position_of(item)
        raise SqlError(f"{function}(...) in FROM: only Parquet files are read; convert the file to Parquet and use "
                       "read_parquet('path') or FROM 'path.parquet', or register the data with Session.register",
                       line=line, col=col, name=function)
    if function not in PARQUET_FUNCTIONS:
        return None
    arguments = list(this.expressions) if isinstance(this, (exp.ReadParquet, exp.Anonymous)) else []
    line, col = position_of(item)
    for option in arguments[1:]:
        name = option.this.name if isinstance(option, (exp.EQ, exp.PropertyEQ)) else option.sql("duckdb")
        raise SqlError(f"{function}(...) option {name!r} is not supported; {function} takes one path, a glob or a "
                       "list of paths (hive partitions, union_by_name, filename columns: register the files with "
                       "Session.register)", line=line, col=col, name=name)
    if not arguments:
        raise SqlError(f"{function}() needs a path: {function}('data/x.parquet')", line=line, col=col, name=function)
    first = arguments[0]
    values = first.expressions if isinstance(first, exp.Array) else [first]
    if not values or not all(isinstance(v, exp.Literal) and v.is_string for v in values):
        raise SqlError(f"{function}(...): the path must be a string literal or a list of them, not "
                       f"{first.sql('duckdb')}", line=line, col=col, name=function)
    return tuple(v.this for v in values)


def _default_alias(item: exp.Table) -> str:
    """DuckDB's name for an unaliased file source: the file's stem, or the function's name."""
    if isinstance(item.this, exp.Identifier):
        return Path(item.this.name.rstrip("/")).name.split(".")[0] or item.this.name
    return _function_name(item.this) or "file"


def file_table_name(paths: tuple[str, ...]) -> str:
    """The Session's table name for the files ``paths`` name, from their absolute paths (the current directory's)."""
    digest = hashlib.sha1("\0".join(os.path.abspath(p) for p in paths).encode()).hexdigest()[:16]
    return FILE_TABLE_PREFIX + digest


def file_sources(tree: exp.Expression, catalog: Mapping[str, object] | None = None
                 ) -> list[tuple[exp.Table, tuple[str, ...]]]:
    """Return the FROM items of ``tree`` that name files, each with its paths as written (refusing bad ones)."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    out = []
    for item in tree.find_all(exp.Table):
        if isinstance(item.this, exp.Identifier) and item.name.lower() in ctes:
            continue
        paths = _file_paths(item, catalog)
        if paths is not None:
            out.append((item, paths))
    return out


def with_file_tables(tree: exp.Expression, catalog: Mapping[str, object] | None) -> exp.Expression:
    """Put the Session's table of each file source in its FROM item's place, keeping its alias and columns."""
    for item, paths in file_sources(tree, catalog):
        name = file_table_name(paths)
        if catalog is not None and name not in catalog:
            line, col = position_of(item)
            written = repr(paths[0]) if isinstance(item.this, exp.Identifier) else f"{_function_name(item.this)}(...)"
            raise SqlError(f"FROM {written}: files named in SQL text are read by Session.sql / Session.sql_plan "
                           "(which register them); with plan_sql, register the file as a table first", line=line,
                           col=col,
                           name=paths[0])
        identifier = exp.to_identifier(name, quoted=True)
        identifier.meta.update({k: v for k, v in (item.this.meta or {}).items()})
        alias = item.args.get("alias")
        if alias is None:
            alias = exp.TableAlias(this=exp.to_identifier(_default_alias(item)))
        item.set("this", identifier)
        item.set("alias", alias)
    return tree


def _expanded(path: str) -> list[str]:
    """The files one written path names: itself, a directory's Parquet files, or a glob's matches (sorted)."""
    if _GLOB_CHARACTERS & set(path):
        matches = sorted(glob.glob(path, recursive=True))
        if not matches:
            raise FileNotFoundError(f"no file matches the glob {path!r}")
        return [m for m in matches if os.path.isfile(m)] or matches
    return [path]


def current_file_table(name: str, paths: tuple[str, ...], registered, split_rows: int | None):
    """Return ``registered`` (the table of ``paths`` registered before, or None) if it still describes the files
    now, else the files registered again (a new table object)."""
    from gpu_engine.connectors.file_versions import file_version
    from gpu_engine.connectors.registered_table import dataset_files, register_files

    files: list[str] = []
    for path in paths:
        for match in _expanded(path):
            if os.path.isdir(match):
                found = dataset_files(Path(match))
                if not found:
                    raise FileNotFoundError(f"no .parquet files under {match}")
                files.extend(found)
            elif os.path.isfile(match):
                files.append(match)
            else:
                raise FileNotFoundError(f"{match} is neither a Parquet file nor a directory")
    if registered is not None and list(registered.files) == files:
        try:
            if all(file_version(f) == v for f, v in zip(files, registered.versions)):
                return registered
        except OSError:
            pass
    return register_files(name, tuple(files), split_rows)


#: (text, dialect) -> the file sources the text names: (paths, line, col, the quoted name or None), kept for the
#: last texts so a warm run of a text over files stats its files rather than parsing the text again (a warm
#: sql_plan: 190 us of CPU -> 20 us).
_WRITTEN: OrderedDict[tuple[str, str], tuple] = OrderedDict()
_WRITTEN_TEXTS = 256
_WRITTEN_LOCK = threading.Lock()


def _written_sources(text: str, dialect: str) -> tuple:
    """Return the file sources ``text`` names, each as (paths as written, line, col, its quoted name or None)."""
    from gpu_engine.sql.rewrite import parse_one_statement

    key = (text, dialect)
    with _WRITTEN_LOCK:
        if (found := _WRITTEN.get(key)) is not None:
            _WRITTEN.move_to_end(key)
            return found
    try:
        tree = parse_one_statement(text, dialect)
    except SqlError:
        return ()  # the planner reports the text's syntax error
    found = tuple((paths, *position_of(item), item.this.name if isinstance(item.this, exp.Identifier) else None)
                  for item, paths in file_sources(tree, None))
    with _WRITTEN_LOCK:
        _WRITTEN[key] = found
        while len(_WRITTEN) > _WRITTEN_TEXTS:
            _WRITTEN.popitem(last=False)
    return found


def register_file_sources(session, text: str, dialect: str) -> frozenset[str]:
    """Register (or register again where the files changed) the tables of the file sources ``text`` names; return
    their names (a kept plan of ``text`` depends on these file tables only)."""
    if not mentions_files(text):
        return frozenset()
    catalog = session._tables
    done = set()
    for paths, line, col, quoted in _written_sources(text, dialect):
        if quoted is not None and any(quoted.lower() == n.lower() for n in catalog):
            continue  # a registered table of that name comes first (as with_file_tables decides)
        name = file_table_name(paths)
        if name in done:
            continue
        done.add(name)
        try:
            table = current_file_table(name, paths, catalog.get(name), None)
        except (OSError, DataSourceError, ValueError) as error:
            reason = str(error).replace(f"table {name!r}: ", "")  # (the table's name is ours, not the user's)
            raise SqlError(f"cannot read file source {', '.join(map(repr, paths))}: {reason}", line=line, col=col,
                           name=paths[0]) from None
        if catalog.get(name) is not table:
            session.register_file_table(name, table, paths)
        else:
            session.register_file_table(name, None, paths)  # (named now: the last to drop)
    for name in list(session._file_sources)[:max(0, len(session._file_sources) - FILE_TABLES)]:
        if name not in done:  # the least recently named beyond the bound, never one this text reads
            session.drop_file_table(name)
    return frozenset(done)
