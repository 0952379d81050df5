"""Plan ``unnest(list)`` / Spark's ``explode(list)`` in a SELECT list as the FROM item it means (issue 30 item 6).

``SELECT t.n, unnest(generate_series(1, t.n)) AS x FROM t`` repeats each row of ``t`` once per element of its
list, the element as ``x``: the rows of ``FROM t, generate_series(1, t.n) u(x)`` (an implicit LATERAL join, which
:mod:`gpu_engine.sql.series_sources` plans as an Unnest over ``t``), and a row whose list is empty or NULL gives
no row, as DuckDB and Spark drop it. So before the query is qualified the call becomes a column of a new FROM item
joined after the others, the lists the engine can build without list columns:

* ``generate_series(a, b[, step])`` / ``range(...)`` (DuckDB's list functions; elements as the table functions'),
  with column arguments or constants;
* a list of constants, ``[1, 2, 3]`` / Spark's ``array(1, 2, 3)``: a VALUES list (one row per element);
* ``string_split(s, separator)`` / Spark's ``split(s, separator)`` of a column (Spark's separator a constant
  without regular expression characters): an Unnest of the pieces over the FROM items.

Spark's ``FROM t LATERAL VIEW explode(list) e AS v`` is that FROM item too, joined where the view is written
(``LATERAL VIEW OUTER`` keeps a row whose split text is NULL, with a NULL element; a list of constants is never
empty).
DuckDB's ``unnest(list)`` as a FROM item (``FROM unnest([1, 2, 3]) u(x)``, ``FROM t, unnest(string_split(t.s,
',')) p``) is the same item in place, its column named by the alias (``unnest`` without one).

The column is named as DuckDB names it (``unnest(generate_series(1, t.n))``; Spark: ``col``) unless aliased.
Refused by name, with the FROM form as the alternative: two unnests in one SELECT (DuckDB zips them), an unnest
inside an expression, in a grouping or aggregating SELECT, with DISTINCT or windows, and lists of other kinds
(``array_agg`` results, ``string_split_regex``), which the list refusals name.
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from gpu_engine.sql.duckdb_names import duckdb_column_name
from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.series_sources import SPLIT_LIST, SPLIT_OUTER

__all__ = ["with_unnested_selects"]

#: The lists planned (sqlglot's nodes: DuckDB's string_split is a Split, Spark's split a RegexpSplit).
_LISTS = (exp.GenerateSeries, exp.Array, exp.Split, exp.RegexpSplit)
#: Characters that make Spark's split pattern a regular expression rather than a literal separator.
_REGEX_CHARACTERS = set(".$|()[]{}^?*+\\")

#: The alias of the FROM item an unnest becomes (numbered per query; no user writes it).
_ALIAS = "$unnest{}"


def _error(message: str, node: exp.Expression, dialect: str) -> SqlError:
    line, col = position_of(node)
    if dialect == "spark":
        alternative = "join the rows instead: FROM t JOIN range(1, 100) r ON r.id <= t.n"
    else:
        alternative = "write the list as a FROM item: FROM t, generate_series(1, t.n) g(x), or (VALUES (1), (2)) v(x)"
    return SqlError(f"unsupported SQL: {message}; {alternative}", line=line, col=col,
                    name="explode" if dialect == "spark" else "unnest")


def with_unnested_selects(tree: exp.Expression, dialect: str) -> exp.Expression:
    """Return ``tree`` with each SELECT-list ``unnest(list)`` / ``explode(list)`` a column of a joined FROM item."""
    if dialect == "duckdb":
        for item in list(tree.find_all(exp.Unnest)):
            if isinstance(item.parent, (exp.From, exp.Join)):
                _unnest_item(item, dialect)
    for select in list(tree.find_all(exp.Select)) if dialect == "spark" else []:
        if select.args.get("laterals"):
            _lateral_views(select, dialect)
    calls = [node for node in tree.find_all(exp.Explode) if type(node) is exp.Explode]  # posexplode: refused later
    if not calls:
        return tree
    counter = itertools.count(1)
    for call in calls:
        if call.parent is None:  # already taken out with its SELECT's other unnest (refused below)
            continue
        _unnested(call, dialect, next(counter))
    return tree


def _unnested(call: exp.Explode, dialect: str, number: int) -> None:
    projection = call.parent if isinstance(call.parent, exp.Alias) else call
    select = projection.parent
    if not isinstance(select, exp.Select) or not any(p is projection for p in select.expressions):
        if isinstance(call.this, _LISTS):
            raise _error("an unnest inside an expression or clause (only a SELECT output of its own is planned)",
                         call, dialect)
        return  # another list kind: the list refusals name it
    if isinstance(call.this, exp.GenerateSeries) and dialect != "duckdb":
        raise _error("explode(sequence(...)) (Spark's sequence counts down where start > stop)", call, dialect)
    if isinstance(call.this, exp.RegexpSplit) and dialect == "duckdb":
        return  # string_split_regex: the list refusals name it
    if not isinstance(call.this, _LISTS):
        return  # another list kind: the list refusals name it
    others = [p for p in select.expressions if p is not projection and p.find(exp.Explode)]
    if others:
        raise _error("two unnests in one SELECT (DuckDB pairs their elements)", others[0], dialect)
    grouped = select.args.get("group") or select.args.get("having") or select.args.get("distinct") or any(
        p.find(exp.AggFunc) or p.find(exp.Window) for p in select.expressions)
    if grouped:
        raise _error("an unnest in a grouping, aggregating, DISTINCT or windowed SELECT", call, dialect)
    alias = _ALIAS.format(number)
    if isinstance(projection, exp.Alias):
        name = projection.alias
    else:
        name = "col" if dialect == "spark" else _duckdb_name(call)
    column = exp.to_identifier("unnested")
    item = _item(call.this, alias, column, dialect)
    reference = exp.column(column.copy(), table=exp.to_identifier(alias, quoted=True))
    projection.replace(exp.alias_(reference, exp.to_identifier(name, quoted=True)))
    if select.args.get("from_") is None and select.args.get("from") is None:
        select.set("from_", exp.From(this=item))
    else:
        select.append("joins", exp.Join(this=item))


def _lateral_views(select: exp.Select, dialect: str) -> None:
    """Join each ``LATERAL VIEW explode(list) alias AS column`` of ``select`` as the FROM item of its list, in place."""
    views = list(select.args["laterals"])
    for view in views:
        call = view.this
        if type(call) is not exp.Explode or not isinstance(call.this, _LISTS) or not view.args.get("view"):
            return  # posexplode, another list: refused by the planner's LATERAL VIEW refusal
        if isinstance(call.this, exp.GenerateSeries):
            raise _error("explode(sequence(...)) (Spark's sequence counts down where start > stop)", call, dialect)
    for number, view in enumerate(views, 1):
        alias = view.args.get("alias")
        name = alias.name if alias is not None and alias.name else f"$view{number}"
        columns = list(alias.columns) if alias is not None else []
        column = columns[0].copy() if columns else exp.to_identifier("col")
        item = _item(view.this.this, name, column, dialect)
        if view.args.get("outer") and isinstance(item, exp.Table):  # a split list: a NULL text keeps its row
            item.this.meta[SPLIT_OUTER] = True  # (a list of constants is never empty: OUTER changes nothing)
        select.append("joins", exp.Join(this=item))
    select.set("laterals", None)


def _unnest_item(item: exp.Unnest, dialect: str) -> None:
    """Replace ``FROM unnest(list) [alias[(column)]]`` by the FROM item of its list, in place."""
    lists = list(item.expressions)
    if len(lists) != 1 or item.args.get("offset") or not isinstance(lists[0], _LISTS) \
            or isinstance(lists[0], exp.RegexpSplit):
        return  # unnest of several lists, WITH ORDINALITY or another list: the list refusals name it
    alias = item.args.get("alias")
    name = alias.name if alias is not None and alias.name else "unnest"
    columns = list(alias.columns) if alias is not None else []
    column = columns[0].copy() if columns else exp.to_identifier(name)
    item.replace(_item(lists[0], name, column, dialect))


def _item(lst: exp.Expression, alias: str, column: exp.Identifier, dialect: str) -> exp.Expression:
    """Return the FROM item whose rows are the list's elements, one column ``column``."""
    table_alias = exp.TableAlias(this=exp.to_identifier(alias, quoted=True), columns=[column.copy()])
    if isinstance(lst, exp.GenerateSeries):
        return exp.Table(this=lst.copy(), alias=table_alias)
    if isinstance(lst, (exp.Split, exp.RegexpSplit)):
        if lst.args.get("limit") is not None:
            raise _error("split(...) with a limit", lst, dialect)
        separator = lst.expression
        if isinstance(lst, exp.RegexpSplit) and not (isinstance(separator, exp.Literal) and separator.is_string
                                                     and not set(separator.this) & _REGEX_CHARACTERS):
            raise _error("split(...) by a regular expression (a constant separator without regular expression "
                         "characters is planned)", separator, dialect)
        if lst.this.find(exp.Column) is None and separator.find(exp.Column) is None:
            raise _error("unnest of a constant string's pieces (write them as a list of constants)", lst, dialect)
        table = exp.Table(this=exp.Split(this=lst.this.copy(), expression=separator.copy()), alias=table_alias)
        table.meta[SPLIT_LIST] = True
        return table
    elements = list(lst.expressions)
    if not elements:
        raise _error("unnest of an empty list (it has no rows)", lst, dialect)
    reading = next((e for e in elements if e.find(exp.Column, exp.Query)), None)
    if reading is not None:
        raise _error("a list of columns or subqueries (only constant lists are planned as rows)", reading, dialect)
    return exp.Values(expressions=[exp.Tuple(expressions=[element.copy()]) for element in elements],
                      alias=table_alias)


def _duckdb_name(call: exp.Explode) -> str:
    """Return DuckDB's name of an unaliased ``unnest(list)`` column."""
    lst = call.this
    if isinstance(lst, exp.GenerateSeries):
        exclusive = bool(lst.args.get("is_end_exclusive"))
        arguments = [lst.args.get(k) for k in ("start", "end", "step") if lst.args.get(k) is not None]
        if exclusive and len(arguments) == 2 and isinstance(arguments[0], exp.Literal) \
                and arguments[0].this == "0" and not lst.args.get("step"):
            arguments = arguments[1:]  # range(n): sqlglot writes the start 0 DuckDB's name leaves out
        function = '"range"' if exclusive else "generate_series"
        return f"unnest({function}({', '.join(duckdb_column_name(a) for a in arguments)}))"
    if isinstance(lst, exp.Split):
        return f"unnest(string_split({duckdb_column_name(lst.this)}, {duckdb_column_name(lst.expression)}))"
    return f"unnest(list_value({', '.join(duckdb_column_name(e) for e in lst.expressions)}))"
