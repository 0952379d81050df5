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
  without regular expression characters): an Unnest of the pieces over the FROM items; of a string constant,
  the VALUES list of its pieces, cut while planning.

Spark's ``FROM t LATERAL VIEW explode(list) e AS v`` is that FROM item too, joined where the view is written
(``LATERAL VIEW OUTER`` keeps a row whose split text is NULL, with a NULL element; a list of constants is never
empty).
DuckDB's ``unnest(list)`` as a FROM item (``FROM unnest([1, 2, 3]) u(x)``, ``FROM t, unnest(string_split(t.s,
',')) p``) is the same item in place, its column named by the alias (``unnest`` without one).

A list written ``[x, y, ...]`` / ``array(x, y, ...)`` whose elements read columns, two or more unnests of such
lists in one SELECT (DuckDB pairs their elements, NULL past the end of the shorter lists) and Spark's
``posexplode(array(...))`` (``pos``, 0-based INT, then ``col``; ``AS (p, v)``; ``LATERAL VIEW [OUTER]
posexplode(...) e AS p, v``) are planned by position instead: a VALUES list of the positions 0..n-1 of the
longest list joined after the FROM items, and each output the CASE picking its list's element at the position
(a LATERAL VIEW's or ``FROM t, unnest([t.a, t.b]) u(x)``'s element column is that CASE wherever the SELECT
names it, its subqueries too where no FROM item of theirs has the name; a bare name another FROM item of the SELECT
has is refused as ambiguous, as DuckDB does). No list column is ever built. Without a column alias
(``FROM t, unnest(...) u``) the element is ``u``, ``u.unnest`` or ``unnest``, as in DuckDB.

The column is named as DuckDB names it (``unnest(generate_series(1, t.n))``; Spark: ``col``) unless aliased.
A ``generate_series``/``range`` of integer constants paired with another unnest is written out as the list of its
BIGINT elements first (at most 10,000).
Refused by name, with the FROM form as the alternative: two unnests in one SELECT where one is a series reading
columns or a split list (their pairing needs the lists' lengths per row) or sits inside an expression, two generators in one Spark
SELECT (Spark refuses them too), ``posexplode`` of ``split``/``sequence`` (the Unnest operator has no position
column), a list holding a subquery, ``SELECT *`` beside a list reading columns where a FROM item's columns are not
known here (a CTE's ``SELECT *``; elsewhere the ``*`` is written out as the FROM items' columns, the element in its item's
place), an unnest inside an expression, in a
grouping or aggregating SELECT, with DISTINCT or windows, and lists of other kinds (``array_agg`` results,
``string_split_regex``), which the list refusals name.
"""

from __future__ import annotations

import itertools
from typing import Mapping

import pyarrow as pa
from sqlglot import exp

from gpu_engine.sql.ambiguous_columns import ambiguous_column_error, item_columns, items_holding
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
#: The column of a list's positions (0-based) where an unnest is planned by position (no user writes it).
_POSITION = "$position"


def _error(message: str, node: exp.Expression, dialect: str) -> SqlError:
    line, col = position_of(node)
    if dialect == "spark":
        alternative = "join the rows instead: FROM t JOIN range(1, 100) r ON r.id <= t.n"
    else:
        alternative = "write the list as a FROM item: FROM t, generate_series(1, t.n) g(x), or (VALUES (1), (2)) v(x)"
    return SqlError(f"unsupported SQL: {message}; {alternative}", line=line, col=col,
                    name="explode" if dialect == "spark" else "unnest")


def with_unnested_selects(tree: exp.Expression, dialect: str,
                          catalog: Mapping[str, pa.Schema] | None = None) -> exp.Expression:
    """Return ``tree`` with each SELECT-list ``unnest(list)`` / ``explode(list)`` a column of a joined FROM item
    (``catalog``: the tables' schemas, to tell a bare element name from another FROM item's column)."""
    catalog = catalog or {}
    if dialect == "duckdb":
        for item in list(tree.find_all(exp.Unnest)):
            lateral = item.parent
            if isinstance(lateral, exp.Lateral) and isinstance(lateral.parent, exp.Join):  # JOIN LATERAL unnest(...)
                if lateral.args.get("alias") is not None:  # (a table function reads the items before it anyway)
                    item.set("alias", lateral.args["alias"].copy())
                lateral.replace(item)
            if isinstance(item.parent, (exp.From, exp.Join)):
                _unnest_item(item, dialect, catalog)
    for select in list(tree.find_all(exp.Select)) if dialect == "spark" else []:
        if select.args.get("laterals"):
            _lateral_views(select, dialect, catalog)
    calls = [node for node in tree.find_all(exp.Explode) if type(node) in (exp.Explode, exp.Posexplode)]
    if not calls:
        return tree
    counter = itertools.count(1)
    done: set[int] = set()
    for call in calls:
        if id(call) in done:  # already planned with its SELECT's other unnests (zipped)
            continue
        done |= _unnested(call, dialect, next(counter))
    return tree


def _unnested(call: exp.Explode, dialect: str, number: int) -> set[int]:
    """Plan ``call`` (and the other unnests of its SELECT, zipped) as a joined FROM item; return the calls planned."""
    projection = call.parent if isinstance(call.parent, (exp.Alias, exp.Aliases)) else call
    select = projection.parent
    if not isinstance(select, exp.Select) or not any(p is projection for p in select.expressions):
        if isinstance(call.this, _LISTS):
            raise _error("an unnest inside an expression or clause (only a SELECT output of its own is planned)",
                         call, dialect)
        return set()  # another list kind: the list refusals name it
    if isinstance(call, exp.Posexplode) and not isinstance(call.this, exp.Array):
        if isinstance(call.this, _LISTS):
            raise _error("posexplode of split(...) or sequence(...) (the pieces' positions are not planned; "
                         "posexplode(array(...)) is, and explode(split(...)) gives the pieces)", call, dialect)
        return set()  # another list kind: the list refusals name it
    if isinstance(call.this, exp.GenerateSeries) and dialect != "duckdb":
        raise _error("explode(sequence(...)) (Spark's sequence counts down where start > stop)", call, dialect)
    if isinstance(call.this, exp.RegexpSplit) and dialect == "duckdb":
        return set()  # string_split_regex: the list refusals name it
    if not isinstance(call.this, _LISTS):
        return set()  # another list kind: the list refusals name it
    others = [p for p in select.expressions if p is not projection and p.find(exp.Explode)]
    if others and dialect == "spark":
        raise _error("two generators in one SELECT (Spark allows one per SELECT clause)", others[0], dialect)
    if others and dialect == "duckdb":  # constant integer series are lists of their elements, so they pair too
        projection = _series_written_out(select, projection, call)
        others = [_series_written_out(select, other, other.this if isinstance(other, exp.Alias) else other)
                  for other in others]
    zipped = [(projection, call)]
    for other in others:
        inner = other.this if isinstance(other, exp.Alias) else other
        if type(inner) is not exp.Explode or not isinstance(inner.this, exp.Array) \
                or not isinstance(call.this, exp.Array):
            raise _error("two unnests in one SELECT where one is not a list written [x, y, ...] or is inside an "
                         "expression (DuckDB pairs their elements; lists written [x, y, ...] are paired)",
                         other.find(exp.Explode) or other, dialect)
        zipped.append((other, inner))
    grouped = select.args.get("group") or select.args.get("having") or select.args.get("distinct") or any(
        p.find(exp.AggFunc) or p.find(exp.Window) for p in select.expressions)
    if grouped:
        raise _error("an unnest in a grouping, aggregating, DISTINCT or windowed SELECT", call, dialect)
    if len(zipped) > 1 or isinstance(call, exp.Posexplode) or (
            isinstance(call.this, exp.Array) and any(e.find(exp.Column) for e in call.this.expressions)):
        _by_position(select, zipped, dialect, number)
        return {id(c) for _, c in zipped}
    alias = _ALIAS.format(number)
    if isinstance(projection, exp.Alias):
        name = projection.alias
    else:
        name = "col" if dialect == "spark" else _duckdb_name(call)
    column = exp.to_identifier("unnested")
    item = _item(call.this, alias, column, dialect)
    reference = exp.column(column.copy(), table=exp.to_identifier(alias, quoted=True))
    projection.replace(exp.alias_(reference, exp.to_identifier(name, quoted=True)))
    _join(select, item)
    return {id(call)}


#: The most elements of a constant series written out as a list to be paired with another unnest.
_MOST_WRITTEN_OUT = 10_000


def _integer(node: exp.Expression | None) -> int | None:
    """Return the value of an integer literal (``-3`` too), else None."""
    negative = isinstance(node, exp.Neg)
    node = node.this if negative else node
    if isinstance(node, exp.Literal) and not node.is_string and node.this.lstrip("-").isdigit():
        return -int(node.this) if negative else int(node.this)
    return None


def _series_written_out(select: exp.Select, projection: exp.Expression, call: exp.Expression) -> exp.Expression:
    """Write ``unnest(generate_series/range(constants))`` out as the list of its BIGINT elements, in place, so a
    zipped unnest pairs it; return the projection (aliased with DuckDB's name for the series where it was not)."""
    lst = call.this if type(call) is exp.Explode else None
    if not isinstance(lst, exp.GenerateSeries):
        return projection
    bounds = [_integer(lst.args.get(k)) for k in ("start", "end")]
    step = _integer(lst.args.get("step")) if lst.args.get("step") is not None else 1
    if None in bounds or step is None or step == 0:
        return projection  # refused below by name (a zero step raises in DuckDB)
    start, end = bounds
    if lst.args.get("is_end_exclusive"):
        elements = range(start, end, step)
    else:
        elements = range(start, end + (1 if step > 0 else -1), step)
    if len(elements) > _MOST_WRITTEN_OUT:
        return projection
    if not elements:
        return projection  # an empty series: refused below (its type comes from no element)
    if not isinstance(projection, exp.Alias):
        aliased = exp.alias_(call, exp.to_identifier(_duckdb_name(call), quoted=True))
        select.set("expressions", [aliased if p is projection else p for p in select.expressions])
        projection = aliased
    call.set("this", exp.Array(expressions=[exp.cast(exp.Literal.number(e), "BIGINT") for e in elements]))
    return projection


def _join(select: exp.Select, item: exp.Expression) -> None:
    """Join ``item`` after ``select``'s FROM items (as its FROM item where it has none)."""
    if select.args.get("from_") is None and select.args.get("from") is None:
        select.set("from_", exp.From(this=item))
    else:
        select.append("joins", exp.Join(this=item))


def _positions(lists: list[exp.Array], alias: str, dialect: str) -> tuple[exp.Expression, exp.Column, list]:
    """Return the FROM item of the positions 0..n-1 of the longest of ``lists`` (VALUES), its column, and per list
    the CASE that picks the list's element at that position (NULL past its end, as DuckDB pads a zipped unnest)."""
    for lst in lists:
        if not lst.expressions:
            raise _error("unnest of an empty list (it has no rows)", lst, dialect)
        reading = next((e for e in lst.expressions if e.find(exp.Query)), None)
        if reading is not None:
            raise _error("a list holding a subquery (lists of constants and columns are planned)", reading, dialect)
    longest = max(len(lst.expressions) for lst in lists)
    column = exp.to_identifier(_POSITION, quoted=True)
    item = exp.Values(expressions=[exp.Tuple(expressions=[exp.Literal.number(i)]) for i in range(longest)],
                      alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True), columns=[column.copy()]))
    position = exp.column(column.copy(), table=exp.to_identifier(alias, quoted=True))
    picks = [exp.Case(ifs=[exp.If(this=exp.EQ(this=position.copy(), expression=exp.Literal.number(i)),
                                  true=element.copy()) for i, element in enumerate(lst.expressions)])
             for lst in lists]
    return item, position, picks


def _by_position(select: exp.Select, zipped: list, dialect: str, number: int) -> None:
    """Plan the unnests of lists written ``[x, y, ...]`` (constants or columns) as a join with the lists'
    positions, each output the CASE picking its list's element: one list over columns, DuckDB's zipped unnests
    (NULL-padded to the longest) and Spark's ``posexplode`` (its ``pos`` the 0-based position, then ``col``)."""
    item, position, picks = _positions([call.this for _, call in zipped], _ALIAS.format(number), dialect)
    for (projection, call), pick in zip(zipped, picks):
        if isinstance(call, exp.Posexplode):
            names = [a.name for a in projection.expressions] if isinstance(projection, exp.Aliases) else []
            if len(names) not in (0, 2) or isinstance(projection, exp.Alias):
                raise _error("posexplode(...) AS names two columns, its position and its element: AS (p, v)",
                             projection, dialect)
            pos, col = names or ["pos", "col"]
            outputs = [exp.alias_(position.copy(), exp.to_identifier(pos, quoted=True)),
                       exp.alias_(pick, exp.to_identifier(col, quoted=True))]
        else:
            if isinstance(projection, exp.Alias):
                name = projection.alias
            else:
                name = "col" if dialect == "spark" else _duckdb_name(call)
            outputs = [exp.alias_(pick, exp.to_identifier(name, quoted=True))]
        index = next(i for i, p in enumerate(select.expressions) if p is projection)
        select.set("expressions", select.expressions[:index] + outputs + select.expressions[index + 1:])
    _join(select, item)


def _lateral_views(select: exp.Select, dialect: str, catalog: Mapping[str, pa.Schema]) -> None:
    """Join each ``LATERAL VIEW explode(list) alias AS column`` of ``select`` as the FROM item of its list, in place."""
    views = list(select.args["laterals"])
    for view in views:
        call = view.this
        if type(call) not in (exp.Explode, exp.Posexplode) or not isinstance(call.this, _LISTS) \
                or not view.args.get("view"):
            return  # another list: refused by the planner's LATERAL VIEW refusal
        if isinstance(call, exp.Posexplode) and not isinstance(call.this, exp.Array):
            raise _error("posexplode of split(...) or sequence(...) (the pieces' positions are not planned; "
                         "posexplode(array(...)) is, and explode(split(...)) gives the pieces)", call, dialect)
        if isinstance(call.this, exp.GenerateSeries):
            raise _error("explode(sequence(...)) (Spark's sequence counts down where start > stop)", call, dialect)
    for number, view in enumerate(views, 1):
        alias = view.args.get("alias")
        name = alias.name if alias is not None and alias.name else f"$view{number}"
        columns = list(alias.columns) if alias is not None else []
        call = view.this
        if isinstance(call, exp.Posexplode) or any(e.find(exp.Column) for e in call.this.expressions):
            _lateral_view_by_position(select, call, name, columns, dialect, catalog)
            continue
        column = columns[0].copy() if columns else exp.to_identifier("col")
        item = _item(view.this.this, name, column, dialect)
        if view.args.get("outer") and isinstance(item, exp.Table):  # a split list: a NULL text keeps its row
            item.this.meta[SPLIT_OUTER] = True  # (a list of constants is never empty: OUTER changes nothing)
        select.append("joins", exp.Join(this=item))
    select.set("laterals", None)


def _lateral_view_by_position(select: exp.Select, call: exp.Explode, name: str, columns: list, dialect: str,
                              catalog: Mapping[str, pa.Schema]) -> None:
    """Join ``LATERAL VIEW [pos]explode(array(...)) name AS [p,] v`` (elements reading columns, or posexplode's
    positions) as the positions of the array, in place: ``p`` is the position column itself, and each reference
    to ``v`` in ``select`` (outside its subqueries) becomes the CASE picking the element at the position."""
    positional = isinstance(call, exp.Posexplode)
    if len(columns) not in (0, 2 if positional else 1):
        raise _error(f"LATERAL VIEW {'posexplode' if positional else 'explode'}(...) AS names "
                     f"{'two columns, its position and its element' if positional else 'one column'}", call, dialect)
    names = [c.name for c in columns] or (["pos", "col"] if positional else ["col"])
    item = _item_by_position(select, call.this, positional, name, names, dialect, catalog)
    select.append("joins", exp.Join(this=item))


def _item_by_position(select: exp.Select, lst: exp.Array, positional: bool, name: str, names: list[str],
                      dialect: str, catalog: Mapping[str, pa.Schema], also: tuple[str, ...] = ()) -> exp.Expression:
    """Return the FROM item ``name`` of the positions of ``lst`` (its column ``names[0]`` where ``positional``),
    each reference to the element column ``names[-1]`` (or a name of ``also``) in ``select`` made the CASE picking
    the element at the position, in place (see :func:`_element_references`)."""
    if any(isinstance(p, exp.Star) or isinstance(p, exp.Column) and isinstance(p.this, exp.Star)
           for p in select.expressions) and not _star_expanded(select, lst, name, names[-1], positional, catalog):
        raise _error("SELECT * beside a list reading columns where a FROM item's columns are not known here (a "
                     "CTE's SELECT *), or a table's * (its element is no column of its own: name the columns)",
                     select.expressions[0], dialect)
    for element in [c for c in lst.find_all(exp.Column) if not c.table]:  # qualified where one FROM item has it,
        holders = items_holding((i for i in _from_items(select) if not _inside(lst, i)), catalog, element.name)
        if len(holders) == 1:  # so a copy in a subquery reads it there too (d.n + 10 = x: x's n is t.n)
            element.set("table", exp.to_identifier(holders[0]))
    item, position, picks = _positions([lst], name, dialect)
    if positional:
        item.args["alias"].set("columns", [exp.to_identifier(names[0])])
        picks = [exp.Case(ifs=[exp.If(this=exp.EQ(this=exp.column(names[0], table=exp.to_identifier(name, quoted=True)),
                                                  expression=branch.this.expression.copy()), true=branch.args["true"].copy())
                               for branch in picks[0].args["ifs"]])]
    for column in _element_references(select, lst, name, (names[-1], *also), catalog, elements=lst):
        if isinstance(column.parent, exp.Select) and column.arg_key == "expressions":
            column.replace(exp.alias_(picks[0].copy(), exp.to_identifier(column.name, quoted=True)))
        else:
            column.replace(picks[0].copy())
    return item


def _star_expanded(select: exp.Select, lst: exp.Array, name: str, element: str, positional: bool,
                   catalog: Mapping[str, pa.Schema]) -> bool:
    """Write ``select``'s bare ``*`` out as its FROM items' columns in order, the list's element among them where
    its FROM item stands (``FROM t, unnest([t.a, t.b]) u(x)``: t's columns, then ``x``, as DuckDB's ``*``), in
    place; return False, changing nothing, where that cannot be done here: a FROM item's columns unknown (a
    CTE's ``SELECT *``), a ``t.*``, a LATERAL VIEW's or posexplode's list."""
    if positional or select.args.get("laterals"):
        return False
    if any(isinstance(p, exp.Column) and isinstance(p.this, exp.Star) for p in select.expressions):
        return False
    columns: list[exp.Expression] = []
    for source in _from_items(select):
        if _inside(lst, source):
            columns.append(exp.column(exp.to_identifier(element, quoted=True), table=exp.to_identifier(name)))
            continue
        known = _item_columns(source, catalog)
        if known is None or not source.alias_or_name:
            return False
        columns += [exp.alias_(exp.column(exp.to_identifier(c, quoted=True),
                                          table=exp.to_identifier(source.alias_or_name)),
                               exp.to_identifier(c, quoted=True)) for c in known]
    expressions = []
    for projection in select.expressions:
        expressions += [c.copy() for c in columns] if isinstance(projection, exp.Star) else [projection]
    select.set("expressions", expressions)
    return True


def _from_items(select: exp.Select) -> list[exp.Expression]:
    """``select``'s FROM items (its FROM and its joins' items)."""
    source = select.args.get("from_") or select.args.get("from")
    return ([source.this] if source is not None else []) + [j.this for j in select.args.get("joins") or []]


def _element_references(select: exp.Select, item: exp.Expression, name: str, names: tuple[str, ...],
                        catalog: Mapping[str, pa.Schema], elements: exp.Expression | None = None) -> list[exp.Column]:
    """The columns of ``select`` naming the element of its FROM item ``item`` (alias ``name``): ``x`` or
    ``name.x`` for ``x`` in ``names``, outside ``item``, in any case (``X``, ``U.x``), as DuckDB matches names. A bare one in ``select`` itself that another FROM item
    has too is ambiguous, as DuckDB says (the rewrite replaces it before qualify could tell). One inside a
    subquery (not a derived table) is the element unless a SELECT between them has a FROM item aliased ``name``
    or holding the name (or a bare column name of ``elements``, which the replacement copies there); where such a
    SELECT's columns are not known (a CTE's ``SELECT *``), it is left alone, and qualify names it unknown."""
    bare = {c.name for c in elements.find_all(exp.Column) if not c.table} if elements is not None else set()
    qualified = {c.table for c in elements.find_all(exp.Column) if c.table} if elements is not None else set()
    outputs = set(select.named_selects)
    folded, folded_name = {n.lower() for n in names}, name.lower()  # DuckDB and Spark match names ignoring case
    found = []
    for column in list(select.find_all(exp.Column)):
        if column.name.lower() not in folded or (column.table and column.table.lower() != folded_name) \
                or _inside(column, item):
            continue
        inner = column.find_ancestor(exp.Select)
        if inner is select:
            if not column.table and isinstance(column.parent, exp.Ordered) and column.name in outputs:
                continue  # ORDER BY x: the output x (DuckDB's choice), which qualify resolves
            if not column.table:
                others = items_holding((i for i in _from_items(select) if not _inside(item, i)), catalog,
                                       column.name)
                if others:
                    raise ambiguous_column_error(column.name, [name, *others], column)
            found.append(column)
        elif _visible(column, select, name, bare | ({column.name} if not column.table else set()),
                      qualified | {name}, catalog):
            found.append(column)
    return found


def _inside(node: exp.Expression, ancestor: exp.Expression) -> bool:
    """Whether ``node`` lies in ``ancestor``'s tree."""
    return any(a is ancestor for a in _ancestors(node))


def _ancestors(node: exp.Expression):
    while node is not None:
        yield node
        node = node.parent


def _visible(column: exp.Column, select: exp.Select, name: str, bare: set[str], tables: set[str],
             catalog: Mapping[str, pa.Schema]) -> bool:
    """Whether ``column``, in a subquery of ``select``, sees ``select``'s FROM item ``name``: no SELECT between has
    a FROM item holding a name of ``bare`` or aliased as one of ``tables``, each such SELECT's columns known, and
    no derived table between."""
    for node in _ancestors(column):
        if node is select:
            return True
        if isinstance(node, exp.Subquery) and isinstance(node.parent, (exp.From, exp.Join)):
            return False  # a derived table: it sees no FROM item beside it
        if isinstance(node, exp.Select):
            for source in _from_items(node):
                columns = _item_columns(source, catalog)
                if columns is None or source.alias_or_name in tables or bare & set(columns):
                    return False
            if node.args.get("laterals"):
                return False
    return False


def _item_columns(source: exp.Expression, catalog: Mapping[str, pa.Schema]) -> list[str] | None:
    """The columns of the FROM item ``source`` (:func:`item_columns`), a CTE's too: a table name that a WITH
    around ``source`` defines has that query's output names (None where they are not known: a ``*``)."""
    columns = item_columns(source, catalog)
    if columns is not None or not isinstance(source, exp.Table) or source.args.get("db"):
        return columns
    for node in _ancestors(source):
        with_ = node.args.get("with_") or node.args.get("with")
        for cte in with_.expressions if isinstance(with_, exp.With) else ():
            if cte.alias.lower() != source.name.lower():
                continue
            alias = cte.args.get("alias")
            if alias is not None and alias.columns:
                return [c.name for c in alias.columns]
            names = list(cte.this.named_selects) if isinstance(cte.this, exp.Query) else []
            return None if not names or any(isinstance(p, exp.Star) or isinstance(p, exp.Column)
                                             and isinstance(p.this, exp.Star) for p in cte.this.selects) else names
    return None


def _unnest_item(item: exp.Unnest, dialect: str, catalog: Mapping[str, pa.Schema]) -> None:
    """Replace ``FROM unnest(list) [alias[(column)]]`` by the FROM item of its list, in place."""
    lists = list(item.expressions)
    if len(lists) != 1 or item.args.get("offset") or not isinstance(lists[0], _LISTS) \
            or isinstance(lists[0], exp.RegexpSplit):
        return  # unnest of several lists, WITH ORDINALITY or another list: the list refusals name it
    alias = item.args.get("alias")
    name = alias.name if alias is not None and alias.name else "unnest"
    columns = list(alias.columns) if alias is not None else []
    column = columns[0].copy() if columns else exp.to_identifier(name)
    # without a column alias DuckDB names the element "unnest" (u.unnest), and the alias names it too (u, u.u)
    also = ("unnest",) if not columns and name != "unnest" else ()
    select = item.parent.parent if isinstance(item.parent, exp.Join) else None
    if select is None and isinstance(item.parent, exp.From):
        select = item.parent.parent
    if isinstance(lists[0], exp.Array) and isinstance(select, exp.Select) and any(
            e.find(exp.Column) for e in lists[0].expressions):  # FROM t, unnest([t.a, t.b]) u(x): by position
        item.replace(_item_by_position(select, lists[0], False, name, [column.name], dialect, catalog, also))
        return
    if also and isinstance(select, exp.Select):
        for reference in _element_references(select, item, name, also, catalog):
            renamed = exp.column(column.copy(), table=exp.to_identifier(name))
            if isinstance(reference.parent, exp.Select) and reference.arg_key == "expressions":
                renamed = exp.alias_(renamed, exp.to_identifier(reference.name, quoted=True))
            reference.replace(renamed)
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
            pieces = _constant_pieces(lst, dialect)
            if pieces is None:
                raise _error("unnest of a constant string's pieces other than a string split by a string (write "
                             "them as a list of constants)", lst, dialect)
            if not pieces:  # a NULL string's split is NULL: no rows, a VARCHAR column
                return exp.Subquery(this=exp.select(exp.alias_(exp.cast(exp.null(), "VARCHAR"), column.copy()))
                                    .where(exp.false()), alias=table_alias)
            return exp.Values(expressions=[exp.Tuple(expressions=[exp.Literal.string(piece)]) for piece in pieces],
                              alias=table_alias)
        table = exp.Table(this=exp.Split(this=lst.this.copy(), expression=separator.copy()), alias=table_alias)
        table.meta[SPLIT_LIST] = True
        return table
    elements = list(lst.expressions)
    if not elements:
        raise _error("unnest of an empty list (it has no rows)", lst, dialect)
    reading = next((e for e in elements if e.find(exp.Column, exp.Query)), None)
    if reading is not None:
        raise _error("a list holding a subquery (lists of constants and columns are planned)"
                     if reading.find(exp.Query) else "a list of columns as the first FROM item (it reads no FROM "
                     "item before it)", reading, dialect)
    return exp.Values(expressions=[exp.Tuple(expressions=[element.copy()]) for element in elements],
                      alias=table_alias)


def _null_constant(node: exp.Expression) -> bool:
    """Return whether ``node`` is NULL written as a constant (``NULL``, ``CAST(NULL AS VARCHAR)``, ``NULL::TEXT``)."""
    while isinstance(node, (exp.Cast, exp.Paren)):
        node = node.this
    return isinstance(node, exp.Null)


def _constant_pieces(lst: exp.Expression, dialect: str) -> list[str] | None:
    """Return the pieces of a split of a string constant by a string constant, as DuckDB's ``string_split`` (an
    empty separator: each character) and Spark's ``split`` by a literal separator (not empty) cut it; none for a
    NULL string (its split is NULL: unnest gives no rows) and, in Spark, a NULL separator; DuckDB splits by a NULL
    separator into the whole string. None for other constants (a number, an expression), which stay refused."""
    text, separator = lst.this, lst.expression
    if _null_constant(text) or (_null_constant(separator) and dialect == "spark"):
        return []
    if _null_constant(separator) and isinstance(text, exp.Literal) and text.is_string:
        return [text.this]
    if not all(isinstance(e, exp.Literal) and e.is_string for e in (text, separator)):
        return None
    if separator.this == "":
        return list(text.this) if isinstance(lst, exp.Split) else None
    return text.this.split(separator.this)


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
