"""Plan a Session's views inline: splice each view's query into the text of a query that reads it.

Why text: a query over views is then an ordinary query (its views' queries
as derived tables), planned, cached (:mod:`gpu_engine.sql.plan_cache`, keyed by
the expanded text, so a replaced view plans again) and split into shared CTEs
like any other, and a view reads the tables and views as they are when the
query runs, as DuckDB's views do. :class:`Expansion` keeps where each
reference was, so an error points into the text as the user wrote it.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.refusals import KNOWN_CATALOGS, KNOWN_SCHEMAS

__all__ = ["View", "Expansion", "expand", "expand_views", "find_name", "moved_error"]

_POSITION = re.compile(r" \(line (\d+), column (\d+)\)$")


@dataclass(frozen=True)
class View:
    """A session's view: its name as written, its query's text (in ``dialect``) and its column names."""

    name: str
    query: str
    dialect: str
    columns: tuple[str, ...]


def find_name(names, name: str) -> str | None:
    """Return the key of ``names`` equal to ``name`` ignoring case (DuckDB's names are case-insensitive)."""
    if name in names:
        return name
    return next((key for key in names if key.lower() == name.lower()), None)


def moved_error(error: SqlError, line: int, col: int, prefix: str = "") -> SqlError:
    """Return ``error`` with its position at (``line``, ``col``) and ``prefix`` before its message."""
    message = _POSITION.sub("", str(error))
    if error.candidates:
        message = message.removesuffix("; did you mean " + " or ".join(error.candidates) + "?")
    return SqlError(prefix + message, line=line, col=col, name=error.name, candidates=error.candidates)


def _error(message: str, node: exp.Expression | None, name: str | None = None) -> SqlError:
    line, col = position_of(node)
    return SqlError(message, line=line, col=col, name=name)


def expand_views(text: str, views: Mapping[str, View], dialect: str, reading: tuple[str, ...] = ()) -> str:
    """Return ``text`` with every table reference naming a view replaced by the view's query, recursively.

    The view's query goes in as a derived table, ``(SELECT * FROM (<query>) AS "v"(<its columns>)) AS v``
    (the reference's own alias kept), spliced into the text at the reference. A name a CTE of the text
    defines is that CTE, not the view. ``reading``: the views being expanded around this text, to refuse a
    cycle. :func:`expand` also says where the references were, to move error positions back.
    """
    return _expand(text, views, dialect, reading)[0]


@dataclass(frozen=True)
class Expansion:
    """A query text with its views spliced in (:attr:`text`), and where each view reference was written.

    ``splices``: per reference, its start and end in :attr:`written`, the length of what replaced it and the
    view's name, in text order.
    """

    written: str
    text: str
    splices: tuple[tuple[int, int, int, str], ...]

    @contextmanager
    def positions_as_written(self):
        """Move a SqlError's position from the expanded text back to the text as written.

        A position inside a view's spliced query points at the reference and names the view.
        """
        try:
            yield
        except SqlError as error:
            if not self.splices or error.line is None or error.column_number is None:
                raise
            offset = _offset(self.text, error.line, error.column_number)
            if offset is None:
                raise
            prefix = ""
            shift = 0
            for start, end, length, name in self.splices:
                if offset < start + shift:
                    break
                if offset < start + shift + length:
                    offset, shift, prefix = start + shift, shift, f"in view {name!r}: "
                    break
                shift += length - (end - start)
            line, col = _line_col(self.written, max(0, offset - shift))
            raise moved_error(error, line, col, prefix) from None


def expand(text: str, views: Mapping[str, View], dialect: str) -> Expansion:
    """Return the :class:`Expansion` of ``text`` (itself, with no splice, when it reads no view)."""
    expanded, splices = _expand(text, views, dialect, ())
    return Expansion(text, expanded, tuple(splices))


def _offset(text: str, line: int, col: int) -> int | None:
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return None
    return start + col - 1


def _line_col(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _expand(text: str, views: Mapping[str, View], dialect: str, reading: tuple[str, ...]
            ) -> tuple[str, list[tuple[int, int, int, str]]]:
    if not views:
        return text, []
    lowered = text.lower()
    if not any(name.lower() in lowered for name in views):  # most texts: no parse at all
        return text, []
    try:
        tree = sqlglot.parse_one(text, read=dialect)
    except (ParseError, TokenError):
        return text, []  # the planner reports the syntax error with its position
    if tree is None:
        return text, []
    shadowed = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    splices = []
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or table.name.lower() in shadowed:
            continue
        key = find_name(views, table.name)
        if key is None or (table.catalog and table.catalog.lower() not in KNOWN_CATALOGS.get(dialect, ())) or (
                table.db and table.db.lower() not in KNOWN_SCHEMAS.get(dialect, ())):
            continue
        view = views[key]
        if any(r.lower() == key.lower() for r in reading):
            chain = " -> ".join(reading + (view.name,))
            raise _error(f"view {reading[0]!r} reads itself ({chain}); a view cannot refer to itself", table,
                         table.name)
        start = min(part.meta.get("start", 0) for part in table.parts)
        end = table.this.meta.get("end")
        if end is None:
            continue
        body = expand_views(view.query, views, view.dialect, reading + (view.name,))
        if view.dialect != dialect:
            body = sqlglot.transpile(body, read=view.dialect, write=dialect)[0]
        inner = exp.to_identifier(view.name, quoted=True).sql(dialect=dialect)
        if view.columns:
            inner += "(" + ", ".join(exp.to_identifier(c, quoted=True).sql(dialect=dialect)
                                     for c in view.columns) + ")"
        replacement = f"(SELECT * FROM ({body}) AS {inner})"
        if table.args.get("alias") is None:
            replacement += " AS " + exp.to_identifier(table.name, quoted=table.this.quoted).sql(dialect=dialect)
        splices.append((start, end + 1, replacement, view.name))
    splices.sort(key=lambda splice: splice[0])
    for start, end, replacement, _ in reversed(splices):
        text = text[:start] + replacement + text[end:]
    return text, [(start, end, len(replacement), name) for start, end, replacement, name in splices]
