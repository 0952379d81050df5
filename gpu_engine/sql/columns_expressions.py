"""Expand DuckDB's ``COLUMNS(...)`` star expression before the query is qualified.

Why: ``SELECT max(COLUMNS('^price')) FROM t`` is DuckDB's way to write one
expression over every column a pattern names; sqlglot parses it (``exp.Columns``)
but leaves it alone, and the planner met it as an unknown function. As
DuckDB's binder does, each SELECT-list expression holding one ``COLUMNS(...)``
becomes one expression per matching column of the SELECT's FROM items, named
by that column (or by the expression's alias, repeated), and a WHERE holding
it becomes the AND of its expansions. The arguments: a regular expression
(matched anywhere in the name, case-sensitive: Python's ``re.search``, the same
for the patterns RE2 and Python share), ``*`` or ``t.*``, or a list of names.
The columns are those ``*`` would expand to, found by qualifying a copy of the
query whose SELECT list is ``*`` (innermost SELECTs first, so a derived
table's expanded columns are known to the query over it).

Refused by name: a lambda (``COLUMNS(c -> ...)``), two different ``COLUMNS``
in one expression (DuckDB refuses them too), ``COLUMNS`` outside the SELECT
list and WHERE, a pattern that names no column (DuckDB's binder error).
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

import pyarrow as pa
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify

from gpu_engine.sql.errors import SqlError, position_of, unsupported
from gpu_engine.sql.predicates import own_scope_nodes

__all__ = ["with_columns_expanded"]

_PROBE = "gpu_engine_columns_probe"


def _own_columns_calls(tree: exp.Expression) -> list[exp.Columns]:
    """Return the COLUMNS(...) nodes of ``tree``'s own scope (not those of SELECTs nested in it)."""
    return own_scope_nodes(tree, (exp.Columns,))


def _star_columns(tree: exp.Expression, select: exp.Select, schema, dialect: str) -> list[tuple[str, str]]:
    """Return (table alias, name) of each column ``*`` expands to in ``select`` (a SELECT of ``tree``)."""
    # Copied without the notes earlier passes keep in meta that hold tree nodes (constant_sources' SELECTs:
    # copying them copies the tree again, without end).
    held = {}
    for node in tree.walk():
        if node._meta:
            kept = {k: v for k, v in node._meta.items() if isinstance(v, (int, str, bool, float))}
            if len(kept) != len(node._meta):
                held[id(node)] = (node, node._meta)
                node._meta = kept
    select.meta[_PROBE] = True
    try:
        probe = tree.copy()
    finally:
        select.meta.pop(_PROBE, None)
        for node, meta in held.values():
            node._meta = meta
    target = next(s for s in probe.find_all(exp.Select) if s.meta.get(_PROBE))
    target.set("expressions", [exp.Star()])
    for key in ("group", "having", "order", "qualify", "distinct", "where"):
        target.set(key, None)
    try:
        # partially: another SELECT's COLUMNS(...) is not expanded yet, and a query over it names columns it
        # does not list yet (two derived tables with COLUMNS joined, the compose fuzz, seed 90955)
        qualify(probe, schema=schema, dialect=dialect, quote_identifiers=False, validate_qualify_columns=False,
                identify=False, allow_partial_qualification=True)
    except Exception as error:  # noqa: BLE001 - the query's own qualification names the problem later
        raise unsupported(f"COLUMNS(...) over FROM items whose columns could not be listed ({error})",
                          select) from None
    target = next(s for s in probe.find_all(exp.Select) if s.meta.get(_PROBE))
    out = []
    for projection in target.expressions:
        column = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(column, exp.Column):
            out.append((column.table, projection.alias_or_name))
    return out


def _matcher(call: exp.Columns) -> Callable[[list[tuple[str, str]]], list[tuple[str, str]]]:
    """Return the function picking the columns ``call`` names, in the order DuckDB expands them."""
    argument = call.this
    if isinstance(argument, exp.Star):
        return lambda columns: columns
    if isinstance(argument, exp.Column) and isinstance(argument.this, exp.Star):
        table = argument.table
        return lambda columns: [c for c in columns if c[0] == table]
    if isinstance(argument, exp.Literal) and argument.is_string:
        try:
            pattern = re.compile(argument.this)
        except re.error as error:
            raise unsupported(f"COLUMNS('{argument.this}'): not a regular expression ({error})", call) from None
        return lambda columns: [c for c in columns if pattern.search(c[1])]
    if isinstance(argument, exp.Array) and all(isinstance(e, exp.Literal) and e.is_string
                                               for e in argument.expressions):
        wanted = [e.this for e in argument.expressions]

        def listed(columns):  # in the FROM items' order, as DuckDB expands them
            names = {c[1].lower() for c in columns}
            for name in wanted:
                if name.lower() not in names:
                    line, col = position_of(call)
                    raise SqlError(f"COLUMNS list names column {name!r}, which is not among "
                                   f"{', '.join(c[1] for c in columns)}", line=line, col=col, name=name)
            lowered = {name.lower() for name in wanted}
            return [c for c in columns if c[1].lower() in lowered]
        return listed
    raise unsupported("COLUMNS(...) of other than a regular expression, *, t.* or a list of names (a lambda: "
                      "write the columns, or a regular expression)", call)


def _expanded(tree: exp.Expression, columns: list[tuple[str, str]]) -> list[tuple[exp.Expression, str]]:
    """Return ``tree`` once per column its one COLUMNS(...) names, each with that column's name."""
    calls = _own_columns_calls(tree)
    if len({call.sql() for call in calls}) > 1:
        raise unsupported("two different COLUMNS(...) in one expression", calls[1])
    chosen = _matcher(calls[0])(columns)
    if not chosen:
        line, col = position_of(calls[0])
        raise SqlError(f"{calls[0].sql(dialect='duckdb')} matches no column (the columns: "
                       f"{', '.join(c[1] for c in columns)})", line=line, col=col, name=calls[0].sql())
    out = []
    for table, name in chosen:
        column = exp.column(name, table=table or None, quoted=True)
        if isinstance(tree, exp.Columns):  # the whole expression: replace() on a root changes nothing
            out.append((column, name))
            continue
        copy = tree.copy()
        for call in _own_columns_calls(copy):
            call.replace(column.copy())
        out.append((copy, name))
    return out


def with_columns_expanded(tree: exp.Expression, schema, dialect: str) -> exp.Expression:
    """Return ``tree`` (parsed, not yet qualified) with every COLUMNS(...) expanded (module docstring).

    ``schema``: the catalog as sqlglot's qualifier reads it.
    """
    if tree.find(exp.Columns) is None:
        return tree
    for select in reversed(list(tree.find_all(exp.Select))):  # breadth first, reversed: inner SELECTs first
        for key in ("group", "having", "order", "qualify", "joins"):
            value = select.args.get(key)
            for part in value if isinstance(value, list) else [value] if value is not None else []:
                calls = _own_columns_calls(part)
                if calls:
                    clause = {"joins": "JOIN ... ON", "group": "GROUP BY", "order": "ORDER BY"}.get(key, key.upper())
                    raise unsupported(f"COLUMNS(...) in {clause} (DuckDB "
                                      "expands it in the SELECT list and WHERE)", calls[0])
        where = select.args.get("where")
        in_where = where is not None and _own_columns_calls(where.this)
        in_list = any(_own_columns_calls(p) for p in select.expressions)
        if not (in_where or in_list):
            continue
        columns = _star_columns(tree, select, schema, dialect)
        if in_list:
            projections = []
            for projection in select.expressions:
                if not _own_columns_calls(projection):
                    projections.append(projection)
                    continue
                alias = projection.alias if isinstance(projection, exp.Alias) else None
                body = projection.this if isinstance(projection, exp.Alias) else projection
                for expression, name in _expanded(body, columns):
                    projections.append(exp.alias_(expression, alias or name, quoted=True))
            select.set("expressions", projections)
        if in_where:
            select.set("where", exp.Where(this=exp.and_(*[exp.Paren(this=e) for e, _ in
                                                          _expanded(where.this, columns)])))
    return tree
