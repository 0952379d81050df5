"""Plan DuckDB's ``range(...)`` / ``generate_series(...)`` table functions in FROM as a Range source.

``FROM range(5)``, ``range(2, 10, 3)``, ``generate_series(1, n)`` (through ``n``), ``generate_series(DATE
'2024-01-01', DATE '2024-12-31', INTERVAL 1 MONTH)``: sqlglot reads both as one ``GenerateSeries`` node (its
``is_end_exclusive`` tells them apart). Before the query is qualified, each becomes a one-column VALUES list
marked with the call (:func:`with_series_as_sources`), so qualification, ``*`` expansion, joins, CTEs and
subqueries see an ordinary derived table named as DuckDB names it (the alias, or the function's name; the column
``range`` / ``generate_series`` unless the alias names it: ``range(3) t(x)``). The planner then plans the marked
list as a :class:`~gpu_engine.plans.nodes.RangeNode` (:func:`plan_series`), whose rows are generated on the
device when the query runs (:mod:`gpu_engine.operators.range`).

Spark's ``range(end)`` / ``range(start, end[, step[, numPartitions]])`` (an Anonymous call to sqlglot) is the same
exclusive series, its column ``id`` (the partition count only checked: the drivers split the series anyway).

A series reading the columns of FROM items before it (``FROM t, generate_series(1, t.n) g(x)``, DuckDB's
implicit LATERAL) is planned after the items it reads are joined, as an
:class:`~gpu_engine.plans.nodes.UnnestNode` over them (:func:`unnested`): each row repeated once per element of
its own series (:mod:`gpu_engine.operators.unnest`); a series may read an earlier series. A ``string_split``
list that :mod:`gpu_engine.sql.unnest_selects` made a FROM item (marked :data:`SPLIT_LIST`) is planned the same
way, as an Unnest of its pieces. Refused by name: such a
series in a query with outer joins, reading no FROM item before it (an outer query's column), over timestamps,
and an argument that is a subquery. ``range(3)`` as a scalar (a list) is refused by
the list refusals. As DuckDB, ``range(3) r`` names its one column ``r`` and still answers to ``r.range`` (and a
bare ``range`` in its SELECT): those references are renamed before qualification. Column names past the first are ignored, as DuckDB ignores them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.plans.plan_builder import PlanBuilder
from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.predicates import in_nested_query

if TYPE_CHECKING:
    from gpu_engine.sql.planner import QueryPlanner, Relation

__all__ = ["with_series_arguments_held", "with_series_arguments_released", "with_series_as_sources", "plan_series",
           "is_series_source", "is_correlated_series", "series_columns", "unnested", "SERIES", "SPLIT_LIST",
           "SPLIT_OUTER"]

#: The meta key of a VALUES list that stands for a range/generate_series call (the call's node).
SERIES = "series_sources.call"
#: The meta key of the WHERE conjunct that holds a correlated series' arguments through qualification and pruning.
_HELD = "series_sources.held"
#: Rows assumed for a series whose bounds are not integer literals (for join ordering only).
_UNKNOWN_ROWS = 1000.0


def _error(message: str, node: exp.Expression, name: str) -> SqlError:
    line, col = position_of(node)
    return SqlError(message, line=line, col=col, name=name)


#: The meta key of a FROM item :mod:`gpu_engine.sql.unnest_selects` made of a string_split list (``unnest(string_split
#: (s, ','))`` as a SELECT output), planned as an Unnest of its pieces over the items it reads.
SPLIT_LIST = "series_sources.split"
#: The sqlglot ``meta`` key marking a split list of Spark's ``LATERAL VIEW OUTER`` (a NULL text keeps its row) or a
#: series of DuckDB's ``LEFT JOIN LATERAL generate_series(...) ON true`` (an empty or NULL series keeps its row).
SPLIT_OUTER = "series_sources.split_outer"
#: The argument keys of the calls a marked VALUES list stands for.
_KEYS = {exp.GenerateSeries: ("start", "end", "step"), exp.Split: ("this", "expression")}


def _function(call: exp.Expression) -> str:
    if isinstance(call, exp.Split):
        return "string_split"
    return "range" if call.args.get("is_end_exclusive") else "generate_series"


def _arguments(call: exp.Expression) -> list[exp.Expression]:
    return [call.args[key] for key in _KEYS[type(call)] if call.args.get(key) is not None]


def _is_temporal(call: exp.GenerateSeries) -> bool:
    """Return True where the series is of timestamps (an INTERVAL step or a DATE/TIMESTAMP bound)."""
    for argument in _arguments(call):
        if isinstance(argument, exp.Interval):
            return True
        if isinstance(argument, exp.Cast) and argument.to.this in (
                exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATETIME):
            return True
    return False


def with_series_as_sources(tree: exp.Expression, dialect: str) -> exp.Expression:
    """Return ``tree`` with every ``range(...)`` / ``generate_series(...)`` FROM item a marked VALUES list."""
    for table in list(tree.find_all(exp.Table)):
        call = table.this
        if dialect == "spark" and isinstance(call, exp.Anonymous) and call.name.lower() == "range":
            call = _spark_range(call, table)
        split = isinstance(call, exp.Split) and table.meta.get(SPLIT_LIST)
        if not isinstance(call, exp.GenerateSeries) and not split:
            continue
        function = _function(call)
        if dialect not in ("duckdb", "spark"):
            raise _error(f"table functions are not supported in the {dialect} dialect ({function}(...) in FROM); "
                         "register the data with Session.register(name, path_or_table), or use the duckdb dialect "
                         "where range(...) and generate_series(...) are sources", table, function)
        for argument in _arguments(call):
            query = next(argument.find_all(exp.Query), None)
            if query is not None:
                raise _error(f"unsupported SQL: a subquery as an argument of {function}(...); give it constant "
                             "arguments", query, function)
            column = next(argument.find_all(exp.Column), None)
            if column is not None and dialect != "duckdb" and not split:
                raise _error(f"unsupported SQL: {function}(...) reading column {column.sql(dialect='duckdb')!r} "
                             f"(a table function over another FROM item's rows); give {function} constant "
                             f"arguments and join it, e.g. FROM t JOIN {function}(1, (upper bound)) s ON "
                             f"s.{function} <= t.n", column, function)
        alias = table.args.get("alias")
        name = alias.name if alias is not None and alias.name else function
        columns = list(alias.columns) if alias is not None else []
        column = columns[0] if columns else exp.to_identifier("id" if dialect == "spark" else function)
        if not columns and dialect == "duckdb" and alias is not None and alias.name:
            column = alias.this.copy()  # DuckDB: range(3) r names its one column r, and r.range still reads it
            _renamed_references(table, alias.name, function, column)
        cell = exp.cast(exp.Null(), "VARCHAR" if isinstance(call, exp.Split) else "TIMESTAMP" if _is_temporal(call)
                        else "BIGINT")
        values = exp.Values(expressions=[exp.Tuple(expressions=[cell])],
                            alias=exp.TableAlias(this=exp.to_identifier(name, quoted=alias is not None and bool(
                                alias.this) and alias.this.quoted), columns=[column.copy()]))
        values.meta[SERIES] = call.copy()
        if is_correlated_series(values):
            tree.meta[_HELD] = True  # its arguments are held through qualification (with_series_arguments_held)
        table.replace(values)
    return tree


def _renamed_references(table: exp.Table, alias: str, function: str, column: exp.Identifier) -> None:
    """Read ``alias.function`` (and a bare ``function`` in the SELECT of the FROM item) as the column ``alias``."""
    select = table.parent.parent if table.parent is not None else None
    if not isinstance(select, exp.Select):
        return
    for reference in list(select.find_all(exp.Column)):
        if reference.name.lower() != function:
            continue
        qualified = reference.table and reference.table.lower() == alias.lower()
        if qualified or (not reference.table and not in_nested_query(reference, select)):
            written = reference.this.copy()
            reference.set("this", column.copy())
            parent = reference.parent
            if isinstance(parent, exp.Select) and any(e is reference for e in parent.expressions):
                reference.replace(exp.alias_(reference.copy(), written))  # the output keeps the written name


def _spark_range(call: exp.Anonymous, table: exp.Table) -> exp.GenerateSeries:
    """Return Spark's ``range(end)`` / ``range(start, end[, step[, numPartitions]])`` as the exclusive series it is
    (its column is ``id``; the partition count is a hint the engine's drivers make moot, so only checked)."""
    arguments = list(call.expressions)
    if not 1 <= len(arguments) <= 4:
        raise _error(f"range() takes 1 to 4 arguments (end, or start, end[, step[, numPartitions]]), got "
                     f"{len(arguments)}", table, "range")
    if len(arguments) == 4 and not (isinstance(arguments[3], exp.Literal) and not arguments[3].is_string):
        raise _error("range()'s numPartitions (argument 4) must be an integer constant", arguments[3], "range")
    start, end = (exp.Literal.number(0), arguments[0]) if len(arguments) == 1 else arguments[:2]
    series = exp.GenerateSeries(start=start, end=end, is_end_exclusive=True)
    if len(arguments) > 2:
        series.set("step", arguments[2])
    return series


def is_series_source(item: exp.Expression) -> bool:
    """Return True for a FROM item :func:`with_series_as_sources` made."""
    return isinstance(item, exp.Values) and SERIES in item.meta


def plan_series(planner: "QueryPlanner", values: exp.Values, alias: str) -> "Relation":
    """Return the Range relation of a marked VALUES list, its one column named ``(alias, column)``."""
    from gpu_engine.sql.planner import Relation

    call: exp.GenerateSeries = values.meta[SERIES]
    function = _function(call)
    name = values.args["alias"].columns[0].name
    internal = planner._fresh(name, alias)
    step = call.args.get("step")
    try:
        node = PlanBuilder(planner.catalog, id_generator=planner.ids).range(
            call.args["start"], call.args["end"], "1" if step is None else step,
            inclusive=function == "generate_series", name=internal).plan()
    except PlanError as error:
        raise planner._plan_error(error, call) from None
    return Relation(node, {(alias, name): internal}, frozenset([alias]), _estimated_rows(call), {})


def _estimated_rows(call: exp.GenerateSeries) -> float:
    """Return the series' length where its bounds and step are integer literals, else a guess."""
    values = []
    for key, default in (("start", None), ("end", None), ("step", 1)):
        argument = call.args.get(key)
        if argument is None and default is not None:
            values.append(default)
            continue
        negative = isinstance(argument, exp.Neg)
        literal = argument.this if negative else argument
        if not isinstance(literal, exp.Literal) or literal.is_string or not literal.this.lstrip("-").isdigit():
            return _UNKNOWN_ROWS
        values.append(-int(literal.this) if negative else int(literal.this))
    start, stop, step = values
    if step == 0:
        return 1.0
    inclusive = not call.args.get("is_end_exclusive")
    span = stop - start
    count = span // step + 1 if inclusive else -(-span // step)
    return float(max(1, count))


def is_correlated_series(item: exp.Expression) -> bool:
    """Return True for a series FROM item whose arguments read columns (of the FROM items before it)."""
    return is_series_source(item) and (isinstance(item.meta[SERIES], exp.Split)
                                       or any(True for _ in _columns_read(item)))


def _columns_read(values: exp.Values):
    for argument in _arguments(values.meta[SERIES]):
        yield from argument.find_all(exp.Column)


def _column_key(column: exp.Column) -> str:
    """Return a column's name as qualification spells it (DuckDB folds unquoted names to lower case)."""
    return column.name if column.this.quoted else column.name.lower()


def series_columns(items: list[exp.Expression]) -> set[tuple[str, str]]:
    """Return the (alias, column) pairs the correlated series among ``items`` read, for the scans to read them.

    An unqualified column is asked of every other item (a scan ignores names its table lacks).
    """
    aliases = [item.alias_or_name for item in items]
    out = set()
    for item in items:
        if not is_correlated_series(item):
            continue
        for column in _columns_read(item):
            if column.table:
                out.add((column.table, _column_key(column)))
            else:
                out.update((alias, _column_key(column)) for alias in aliases if alias != item.alias_or_name)
    return out


def unnested(planner: "QueryPlanner", items: list[exp.Expression], relations: dict[str, "Relation"],
             pushed: dict[str, list[exp.Expression]], pending: list[exp.Expression],
             needed: set[tuple[str, str]]) -> dict[str, "Relation"]:
    """Return ``relations`` with each correlated series of ``items`` planned as an Unnest over the items it reads.

    ``relations`` holds the other items' relations by alias; the items a series reads are joined first (on the
    WHERE's conditions between them), the series' own conditions (``pushed``) filter its rows.
    """
    from gpu_engine.sql.join_ordering import join_written
    from gpu_engine.sql.planner import Relation
    from gpu_engine.sql.predicates import filtered

    relations = dict(relations)
    owner = {}  # alias of a FROM item -> the key of the relation holding it now
    for key in relations:
        owner[key] = key
    for position, item in enumerate(items):
        if not is_correlated_series(item):
            continue
        alias = item.alias_or_name
        call: exp.GenerateSeries = item.meta[SERIES]
        function = _function(call)
        before = [other.alias_or_name for other in items[:position]]
        read = set()
        names = {}
        for column in _columns_read(item):
            key = _column_key(column)
            if column.table:
                if column.table not in before:
                    raise _error(f"unsupported SQL: {function}(...) reads {column.sql(dialect='duckdb')}, not a "
                                 "column of a FROM item before it (a table function may read the items before it "
                                 f"in FROM, not an outer query's); write the series beside its table, FROM t, "
                                 f"{function}(1, t.n) g, and aggregate or join that", column, function)
                read.add(column.table)
                names[id(column)] = column.table
                continue
            found = [a for a in before if (a, key) in relations.get(owner.get(a, a), _NO_RELATION).columns]
            if len(found) != 1:
                what = "is ambiguous there" if found else "is not a column of a FROM item before it"
                raise _error(f"unsupported SQL: {function}(...) reads {column.name!r}, which {what}; qualify it "
                             "with the FROM item it reads (t.n)", column, function)
            read.add(found[0])
            names[id(column)] = found[0]
        keys = list(dict.fromkeys(owner[a] for a in before if a in read))
        members = [relations.pop(key) for key in keys]
        relation = members[0] if len(members) == 1 else join_written(planner, members, pending, needed)
        arguments = [_qualified(a, names) for a in _arguments(call)]
        column_name = item.args["alias"].columns[0].name
        internal = planner._fresh(column_name, alias)
        try:
            builder = planner._builder(relation.node)
            rendered = [planner._renamed(a, relation.columns) for a in arguments]
            if function == "string_split":
                node = builder.unnest_split(*rendered, name=internal, outer=bool(call.meta.get(SPLIT_OUTER))).plan()
            else:
                node = builder.unnest_series(*rendered[:2], "1" if len(rendered) < 3 else rendered[2],
                                             inclusive=function == "generate_series", name=internal,
                                             outer=bool(call.meta.get(SPLIT_OUTER))).plan()
        except PlanError as error:
            raise planner._plan_error(error, call) from None
        columns = dict(relation.columns)
        columns[(alias, column_name)] = internal
        expanded = Relation(node, columns, relation.aliases | {alias}, relation.rows * _ROWS_PER_SERIES,
                            dict(relation.stats))
        expanded = filtered(planner, expanded, pushed.get(alias, []))
        relations[alias] = expanded
        for a in list(owner):
            if owner[a] in keys:
                owner[a] = alias
        owner[alias] = alias
    return relations


#: Rows assumed per input row of a series that reads columns (for join ordering only).
_ROWS_PER_SERIES = 10.0


class _NoRelation:
    columns: dict = {}


_NO_RELATION = _NoRelation()


def _qualified(argument: exp.Expression, tables: dict[int, str]) -> exp.Expression:
    """Return a copy of ``argument`` with each column qualified by the FROM item it reads."""
    copy = argument.copy()
    for original, column in zip(argument.find_all(exp.Column), copy.find_all(exp.Column)):
        column.set("table", exp.to_identifier(tables[id(original)]))
        if not column.this.quoted:
            column.set("this", exp.to_identifier(column.name.lower()))
    return copy


def with_series_arguments_held(tree: exp.Expression) -> exp.Expression:
    """Put each correlated series' arguments in a WHERE conjunct of its SELECT, in place, until released.

    Why: the call's arguments sit in the marked VALUES list's meta, where qualification would not qualify their
    columns and projection pruning would not see them read (``FROM (SELECT n, s FROM t) d,
    generate_series(1, d.n)`` would lose ``d.n``); in the WHERE they are qualified and kept as any column read.
    """
    if not tree.meta.get(_HELD):
        return tree
    for values in list(tree.find_all(exp.Values)):
        if not is_correlated_series(values):
            continue
        select = values.parent.parent if values.parent is not None else None
        if not isinstance(select, exp.Select):
            continue
        held = exp.Anonymous(this="series_arguments", expressions=[a.copy() for a in _arguments(values.meta[SERIES])])
        held.meta[_HELD] = values
        select.where(held, copy=False)
    return tree


def with_series_arguments_released(tree: exp.Expression) -> exp.Expression:
    """Give each held series its qualified arguments back and take the held conjuncts out of the WHERE, in place."""
    if not tree.meta.get(_HELD):
        return tree
    for held in [node for node in tree.find_all(exp.Anonymous) if _HELD in node.meta]:
        values = held.meta.pop(_HELD)
        call = values.meta[SERIES]
        for key, argument in zip([k for k in _KEYS[type(call)] if call.args.get(k) is not None], held.expressions):
            call.set(key, argument.copy())
        parent = held.parent
        if isinstance(parent, exp.Where):
            parent.pop()
        elif isinstance(parent, exp.And):
            other = parent.expression if parent.this is held else parent.this
            parent.replace(other)
        else:  # moved elsewhere by a rewrite: leave it readable as TRUE
            held.replace(exp.true())
    return tree
