"""Run the statements a Session keeps catalog entries for: CREATE VIEW, CREATE TABLE AS and DROP.

* ``CREATE [OR REPLACE] [TEMP] VIEW v [(x, y)] AS <query>`` keeps the query's
  text in the session (every view is session-scoped: TEMP or not, it lives as
  long as the Session). A view is planned inline where a query reads it
  (:mod:`gpu_engine.sql.views`: it reads the tables and views as they are
  when the query runs, as DuckDB's views do). Its columns are
  named when it is created, as DuckDB names them (the query's output names,
  or the names in the parentheses, then the rest).
* ``CREATE [OR REPLACE] [TEMP] TABLE t AS <query>`` runs the query and
  registers its rows as an in-memory table of the session.
* ``DROP VIEW|TABLE [IF EXISTS] name`` removes one (DROP TABLE
  also removes a table registered with :meth:`Session.register`).

Results are those DuckDB returns: a ``Count`` column (BIGINT) holding the
rows a CREATE TABLE AS wrote (no row for a view), and an empty ``Success``
column (BOOLEAN) for DROP. Errors (:class:`~gpu_engine.sql.errors.SqlError`,
with the position of the name): an unknown name, a name taken without OR
REPLACE (or by an object of the other kind), a view that would read itself
(directly or through other views), and a view whose query does not plan.
Tables and views share one namespace, case-insensitive as DuckDB's.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.refusals import KNOWN_CATALOGS, KNOWN_SCHEMAS
from gpu_engine.sql.views import View, expand_views, find_name, moved_error

if TYPE_CHECKING:
    from gpu_engine.session import Session

__all__ = ["is_catalog_statement", "run_catalog_statement"]

#: A text whose first word (after blanks and comments) is CREATE or DROP: a statement, not a query.
_STATEMENT = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*(create|drop)\b", re.IGNORECASE | re.DOTALL)
_SUPPORTED = "CREATE [OR REPLACE] [TEMP] VIEW, CREATE [OR REPLACE] [TEMP] TABLE ... AS SELECT and DROP VIEW/TABLE"


def is_catalog_statement(text: str) -> bool:
    """Return True when ``text`` starts with CREATE or DROP (checked without parsing, so queries pay nothing)."""
    return isinstance(text, str) and _STATEMENT.match(text) is not None


def _error(message: str, node: exp.Expression | None, name: str | None = None) -> SqlError:
    line, col = position_of(node)
    return SqlError(message, line=line, col=col, name=name)


def _parse(text: str, dialect: str) -> exp.Expression:
    from gpu_engine.sql.rewrite import parse_one_statement

    return parse_one_statement(text, dialect)


def _name(table: exp.Expression, dialect: str, what: str) -> str:
    """Return the name a CREATE or DROP names, refusing a catalog or schema other than the session's."""
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier) or not table.name:
        raise _error(f"{what} needs a name", table)
    schemas = KNOWN_SCHEMAS.get(dialect, ()) + ("temp",)
    if (table.catalog and table.catalog.lower() not in KNOWN_CATALOGS.get(dialect, ()) + ("temp",)) or (
            table.db and table.db.lower() not in schemas):
        raise _error(f"{what}: unknown schema in {table.sql(dialect=dialect)}; views and tables live in the "
                     f"session (name them without a schema, or in {' or '.join(schemas)})", table, table.name)
    return table.name


def run_catalog_statement(session: "Session", text: str, dialect: str, timeout: float | None) -> pa.Table:
    """Run the CREATE or DROP statement ``text`` on ``session`` and return DuckDB's result for it."""
    tree = _parse(text, dialect)
    if isinstance(tree, exp.Create):
        kind = (tree.args.get("kind") or "").upper()
        if kind == "VIEW":
            return _create_view(session, tree, text, dialect)
        if kind == "TABLE":
            return _create_table(session, tree, text, dialect, timeout)
        raise _error(f"unsupported statement: CREATE {kind or '...'}; the engine runs {_SUPPORTED}", tree, kind)
    if isinstance(tree, exp.Drop):
        return _drop(session, tree, dialect)
    kind = str(tree.this).split()[0].upper() if isinstance(tree, exp.Command) else tree.key.upper()
    raise _error(f"unsupported statement: {kind}; the engine runs {_SUPPORTED}", tree, kind)


def _properties(create: exp.Create, what: str, dialect: str) -> None:
    """Refuse CREATE options other than TEMP/TEMPORARY (every view and table is the session's)."""
    properties = create.args.get("properties")
    for prop in properties.expressions if properties is not None else []:
        if not isinstance(prop, exp.TemporaryProperty):
            raise _error(f"unsupported option of {what}: {prop.sql(dialect=dialect)}", create,
                         prop.sql(dialect=dialect))
    for key in ("unique", "concurrently", "refresh"):
        if create.args.get(key):
            raise _error(f"unsupported option of {what}: {key.upper()}", create, key.upper())


def _target(create: exp.Create) -> tuple[exp.Table, list[exp.Expression]]:
    target = create.this
    if isinstance(target, exp.Schema):
        return target.this, list(target.expressions)
    return target, []


def _count(rows: int | None) -> pa.Table:
    return pa.table({"Count": pa.array([] if rows is None else [rows], pa.int64())})


def _taken(session: "Session", name: str, kind: str, create: exp.Create, table: exp.Table) -> bool:
    """Return True when ``name`` exists as ``kind`` and IF NOT EXISTS says to keep it; raise when it may not be
    replaced (it exists without OR REPLACE, or as the other kind)."""
    views, tables = session._views, session._tables
    other_kind, other = ("table", find_name(tables, name)) if kind == "view" else ("view", find_name(views, name))
    if other is not None:
        raise _error(f"cannot create {kind} {name!r}: a {other_kind} named {other!r} exists (DROP "
                     f"{other_kind.upper()} it first)", table, name)
    existing = find_name(views if kind == "view" else tables, name)
    if existing is None:
        return False
    if create.args.get("exists"):
        return True
    if not create.args.get("replace"):
        raise _error(f"{kind} {existing!r} already exists; write CREATE OR REPLACE {kind.upper()} to replace it, "
                     f"or DROP {kind.upper()} it first", table, name)
    return False


_AS = re.compile(r"\bAS\b", re.IGNORECASE)


def _query_text(text: str, table: exp.Table) -> tuple[str, int, int]:
    """Return the text of a CREATE's query as written (after the AS that follows the name) and the line and
    column where it starts, so the query is planned from the user's text and its errors point into it."""
    end = table.this.meta.get("end")
    match = _AS.search(text, end + 1 if end is not None else 0)
    start = match.end() if match is not None else 0
    while start < len(text) and text[start].isspace():
        start += 1
    body = text[start:].rstrip().rstrip(";")
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    return body, line, col


@contextmanager
def _positions_in_statement(line: int, col: int):
    """Move the position of a SqlError raised for the query of a CREATE to where the query is in the statement."""
    try:
        yield
    except SqlError as error:
        if error.line is None:
            raise
        new_col = error.column_number + (col - 1 if error.line == 1 else 0)
        raise moved_error(error, error.line + line - 1, new_col) from None


def _create_view(session: "Session", create: exp.Create, text: str, dialect: str) -> pa.Table:
    from gpu_engine.sql import RegisteredStatistics, plan_sql
    from gpu_engine.sql.file_sources import register_file_sources

    _properties(create, "CREATE VIEW", dialect)
    table, names = _target(create)
    name = _name(table, dialect, "CREATE VIEW")
    query = create.args.get("expression")
    if not isinstance(query, (exp.Query, exp.Values)):
        raise _error("CREATE VIEW needs AS followed by a query", create, name)
    if _taken(session, name, "view", create, table):
        return _count(None)
    body, line, col = _query_text(text, table)
    candidate = {key: view for key, view in session._views.items() if key.lower() != name.lower()}
    candidate[name] = View(name, body, dialect, ())
    with _positions_in_statement(line, col):  # errors point into the statement, not into its query alone
        expanded = expand_views(body, candidate, dialect, reading=(name,))
        register_file_sources(session, expanded, dialect)  # a view over 'x.parquet' (gpu_engine.sql.file_sources)
        plan = plan_sql(expanded, session._planning_catalog(), RegisteredStatistics(session._tables), dialect=dialect)
    planned = list(plan.output_schema.names)
    if len(names) > len(planned):
        raise _error(f"CREATE VIEW {name}: {len(names)} column names for a query of {len(planned)} columns",
                     names[len(planned)], names[len(planned)].name)
    columns = tuple(n.name for n in names) + tuple(planned[len(names):])
    for key in [k for k in session._views if k.lower() == name.lower()]:
        del session._views[key]
    session._views[name] = View(name, body, dialect, columns)
    return _count(None)


def _create_table(session: "Session", create: exp.Create, text: str, dialect: str, timeout: float | None
                  ) -> pa.Table:
    _properties(create, "CREATE TABLE", dialect)
    table, columns = _target(create)
    name = _name(table, dialect, "CREATE TABLE")
    query = create.args.get("expression")
    if not isinstance(query, (exp.Query, exp.Values)):
        raise _error(f"CREATE TABLE {name} needs AS followed by a query (CREATE TABLE ... AS SELECT); to add data "
                     "from Python, use Session.register(name, table)", create, name)
    if columns:
        raise _error(f"CREATE TABLE {name} (...) AS: name the columns in the query instead", columns[0], name)
    if _taken(session, name, "table", create, table):
        return _count(None)
    body, line, col = _query_text(text, table)
    with _positions_in_statement(line, col):
        result = session.sql(body, timeout=timeout, dialect=dialect)
    existing = find_name(session._tables, name)
    if existing is not None and existing != name:
        session._tables.pop(existing)
        session.uncache(existing)
    session.register(name, result)
    return _count(result.num_rows)


def _drop(session: "Session", drop: exp.Drop, dialect: str) -> pa.Table:
    kind = (drop.args.get("kind") or "").upper()
    if kind not in ("VIEW", "TABLE"):
        raise _error(f"unsupported statement: DROP {kind or '...'}; the engine runs {_SUPPORTED}", drop, kind)
    tables = drop.args.get("tables") or ([drop.this] if drop.this is not None else [])
    if len(tables) > 1:  # as DuckDB: several names in one DROP are refused
        raise _error(f"DROP {kind} names {len(tables)} objects; drop one at a time", tables[1], tables[1].name)
    names = [(_name(table, dialect, f"DROP {kind}"), table) for table in tables]
    own, other = (session._views, session._tables) if kind == "VIEW" else (session._tables, session._views)
    for name, table in names:  # every name is checked before anything is dropped
        if find_name(own, name) is None:
            found = find_name(other, name)
            if found is not None:
                other_kind = "table" if kind == "VIEW" else "view"
                raise _error(f"DROP {kind} {name}: {found!r} is a {other_kind}; write DROP {other_kind.upper()}",
                             table, name)
            if not drop.args.get("exists"):
                raise _error(f"DROP {kind}: unknown {kind.lower()} {name!r}", table, name)
    for name, _ in names:
        key = find_name(own, name)
        if key is None:
            continue
        del own[key]
        if kind == "TABLE":
            session.uncache(key)
    return pa.table({"Success": pa.array([], pa.bool_())})
