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

Refused by name: arguments reading another FROM item's columns (``FROM t, generate_series(1, t.n)``, DuckDB's
LATERAL join, not built) or a subquery. ``range(3)`` as a scalar (a list) is refused by
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

__all__ = ["with_series_as_sources", "plan_series", "is_series_source", "SERIES"]

#: The meta key of a VALUES list that stands for a range/generate_series call (the call's node).
SERIES = "series_sources.call"
#: Rows assumed for a series whose bounds are not integer literals (for join ordering only).
_UNKNOWN_ROWS = 1000.0


def _error(message: str, node: exp.Expression, name: str) -> SqlError:
    line, col = position_of(node)
    return SqlError(message, line=line, col=col, name=name)


def _function(call: exp.GenerateSeries) -> str:
    return "range" if call.args.get("is_end_exclusive") else "generate_series"


def _arguments(call: exp.GenerateSeries) -> list[exp.Expression]:
    return [call.args[key] for key in ("start", "end", "step") if call.args.get(key) is not None]


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
        if not isinstance(call, exp.GenerateSeries):
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
            if column is not None:
                raise _error(f"unsupported SQL: {function}(...) reading column {column.sql(dialect='duckdb')!r} "
                             f"(a table function over another FROM item's rows is a LATERAL join, not supported); "
                             f"give {function} constant arguments and join it, e.g. FROM t JOIN {function}(1, "
                             f"(upper bound)) s ON s.{function} <= t.n", column, function)
        alias = table.args.get("alias")
        name = alias.name if alias is not None and alias.name else function
        columns = list(alias.columns) if alias is not None else []
        column = columns[0] if columns else exp.to_identifier("id" if dialect == "spark" else function)
        if not columns and dialect == "duckdb" and alias is not None and alias.name:
            column = alias.this.copy()  # DuckDB: range(3) r names its one column r, and r.range still reads it
            _renamed_references(table, alias.name, function, column)
        cell = exp.cast(exp.Null(), "TIMESTAMP" if _is_temporal(call) else "BIGINT")
        values = exp.Values(expressions=[exp.Tuple(expressions=[cell])],
                            alias=exp.TableAlias(this=exp.to_identifier(name, quoted=alias is not None and bool(
                                alias.this) and alias.this.quoted), columns=[column.copy()]))
        values.meta[SERIES] = call.copy()
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
