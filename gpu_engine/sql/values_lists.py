"""Plan constant sources: ``SELECT`` without FROM and ``VALUES`` lists, as rows of a Values node.

* ``SELECT e1, e2`` (no FROM) reads one row of no interest: once its output
  columns are named it becomes ``SELECT e1, e2 FROM (VALUES (0)) AS "$dual"("$dual")``
  (:func:`finish_constant_sources`), so WHERE, GROUP BY, aggregates, ORDER BY and
  subqueries over it plan as over any table, and its expressions run in the
  Project above the Values node like any other (on the device, in kernels). A
  scalar subquery without FROM in an expression (``(SELECT a + 1)``) is that
  expression.
* ``VALUES (…), (…)`` in FROM is a :class:`~gpu_engine.plans.nodes.ValuesNode`
  holding the rows as an Arrow table when every cell is a literal (the common
  case, however many rows); a list with computed cells (``(1 + 1, upper('a'))``)
  is a UNION ALL of one-row SELECTs, each a Project over the one-row Values.
  Column types are unified as DuckDB unifies them (its max type:
  :func:`~gpu_engine.plans.type_coercion.common_type`; ``(1), (2.5)`` is
  DECIMAL(11,1)), unnamed columns are ``col0``, ``col1``… and a bare ``VALUES``
  statement is ``SELECT * FROM (VALUES …)``, as in DuckDB.

A column of only NULLs has no type of its own in DuckDB (its ``"NULL"`` type);
the engine's columns always have one, so it is INTEGER, the type DuckDB gives
such a column when it stores it (``CREATE TABLE … AS SELECT NULL``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import pyarrow as pa
from sqlglot import exp

from gpu_engine.columnar.arrow_numpy import arrow_from_pylist
from gpu_engine.columnar.types import is_interval
from gpu_engine.errors import PlanError
from gpu_engine.plans.expressions import Literal
from gpu_engine.plans.nodes import ValuesNode
from gpu_engine.plans.null_type import null_typed_field
from gpu_engine.plans.scalar_translation import ScalarTranslator
from gpu_engine.plans.type_coercion import common_type
from gpu_engine.sql.errors import SqlError, position_of

if TYPE_CHECKING:
    from gpu_engine.sql.planner import QueryPlanner, Relation

__all__ = ["values_statement_as_select", "with_constant_sources", "finish_constant_sources",
           "plan_values", "DUAL", "UNTYPED_NULL_TYPE"]

#: The alias (and only column) of the one-row source a SELECT without FROM reads.
DUAL = "$dual"
#: The tree's meta key for its SELECTs, from :func:`with_constant_sources` to :func:`finish_constant_sources`.
_SELECTS = "constant_sources.selects"
#: The type of a column holding only bare NULLs (DuckDB stores its "NULL" type as INTEGER).
UNTYPED_NULL_TYPE = pa.int32()


def _error(message: str, node: exp.Expression, name: str) -> SqlError:
    line, col = position_of(node)
    return SqlError(message, line=line, col=col, name=name)


def _dual() -> exp.Values:
    return exp.Values(expressions=[exp.Tuple(expressions=[exp.Literal.number(0)])],
                      alias=exp.TableAlias(this=exp.to_identifier(DUAL, quoted=True),
                                           columns=[exp.to_identifier(DUAL, quoted=True)]))


def values_statement_as_select(tree: exp.Expression) -> exp.Expression:
    """Return a bare ``VALUES …`` statement as ``SELECT * FROM (VALUES …) AS valueslist`` (else ``tree``)."""
    return _as_select(tree) if isinstance(tree, exp.Values) else tree


def with_constant_sources(tree: exp.Expression, nodes: list[exp.Expression]) -> exp.Expression:
    """Return ``tree`` with its constant sources in the form qualification and the planner read, in place.

    ``nodes``: the tree's VALUES, SELECT and subquery nodes (:func:`~gpu_engine.sql.refusals.refuse_unsupported`
    meets them on its walk, so no other walk is needed: per query, each walk of a 20,000-node WHERE costs
    tens of milliseconds). A VALUES list where a query goes (``x IN (VALUES …)``, a CTE's body, a scalar
    subquery) becomes ``SELECT * FROM (VALUES …) AS valueslist``; every VALUES list gets DuckDB's column
    names where the text gives none (``col0``, ``col1``…); a scalar subquery without FROM is its expression
    (:func:`_scalar_value`). Refused: rows of different lengths, more column names than columns, and ``*`` in
    a SELECT without FROM (DuckDB's errors). :func:`finish_constant_sources` gives the SELECTs without FROM
    their source later, and types bare NULL outputs.
    """
    selects = [node for node in nodes if isinstance(node, exp.Select)]
    for values in [node for node in nodes if isinstance(node, exp.Values)]:
        parent = values.parent
        if isinstance(parent, exp.In) and values in parent.expressions:  # x IN (VALUES …): a subquery
            select = _as_select(values)
            parent.set("expressions", [])
            parent.set("query", exp.Subquery(this=select))
            values = select.args["from_"].this
            selects.append(select)
        elif isinstance(parent, (exp.Subquery, exp.CTE)) and parent.this is values:  # (VALUES …) as a query
            select = _as_select(values)
            values.replace(select)
            values = select.args["from_"].this
            selects.append(select)
        _name_columns(values)
    for subquery in [node for node in nodes if isinstance(node, exp.Subquery)]:
        value = _scalar_value(subquery)
        if value is not None:  # (SELECT a + 1) in an expression: the expression itself
            subquery.replace(exp.Paren(this=value))
    for select in selects:
        if select.args.get("from_") is None:
            star = next((e for e in select.expressions if isinstance(e, exp.Star) or (
                isinstance(e, exp.Column) and isinstance(e.this, exp.Star))), None)
            if star is not None:
                raise _error("SELECT * needs a FROM clause: a SELECT without FROM has no columns to expand", star,
                             "*")
    tree.meta[_SELECTS] = selects
    return tree


def finish_constant_sources(tree: exp.Expression) -> None:
    """Make every SELECT without FROM read the one-row dual source, in place, over the SELECTs
    :func:`with_constant_sources` recorded (a bare NULL output stays: a column of SQL's NULL type,
    :mod:`gpu_engine.plans.null_type`).

    Run after the output columns are named: ``SELECT (SELECT 1)`` is named ``(SELECT 1)``, as written.
    """
    recorded = tree.meta.pop(_SELECTS, None)
    if recorded is not None and not any(select.args.get("from_") is None for select in recorded):
        return  # most queries: nothing to do, and no walk
    selects = list(tree.find_all(exp.Select))  # as they are now (naming copies a SELECT inside an output)
    for select in selects:
        if select.args.get("from_") is None:
            select.set("from_", exp.From(this=_dual()))


#: Clauses that make a SELECT without FROM more than the value of its one expression.
_CLAUSES = ("from_", "joins", "where", "group", "having", "qualify", "order", "limit", "offset", "distinct",
            "with_", "windows")


def _scalar_value(subquery: exp.Subquery) -> exp.Expression | None:
    """Return the expression a scalar subquery ``(SELECT e)`` (no FROM, no other clause) stands for, else None.

    Why: ``SELECT a, (SELECT a + 1) FROM t`` is ``a + 1`` per row (DuckDB's meaning); planned as a subquery
    over the one-row source it would be a correlated subquery outside WHERE, or a join for a constant. Kept as
    a subquery: one that is itself a SELECT item without an alias (its text names the column), one in FROM,
    IN, EXISTS or a set operation, and one whose expression aggregates, windows or is a bare NULL.
    """
    select = subquery.this
    if not isinstance(select, exp.Select) or len(select.expressions) != 1 or subquery.args.get("alias"):
        return None
    if any(select.args.get(key) for key in _CLAUSES) or isinstance(subquery.parent, (
            exp.From, exp.Join, exp.In, exp.Exists, exp.SetOperation, exp.CTE, exp.Lateral)):
        return None
    if isinstance(subquery.parent, exp.Select) and subquery in subquery.parent.expressions:
        return None
    value = select.expressions[0]
    value = value.this if isinstance(value, exp.Alias) else value
    if isinstance(value, (exp.Null, exp.Star)) or any(
            isinstance(node, (exp.AggFunc, exp.Window, exp.Query, exp.Star)) for node in value.walk()):
        return None
    return value.copy()


def _as_select(values: exp.Values) -> exp.Select:
    """Return ``SELECT * FROM (VALUES …) AS valueslist``: a VALUES list where a query goes, its ORDER BY, LIMIT
    and OFFSET on the SELECT."""
    values = values.copy()
    if values.args.get("alias") is None:
        values.set("alias", exp.TableAlias(this=exp.to_identifier("valueslist")))
    select = exp.select(exp.Star()).from_(values)
    for key in ("order", "limit", "offset"):
        if values.args.get(key) is not None:
            select.set(key, values.args[key])
            values.set(key, None)
    return select


def _entries(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def _name_columns(values: exp.Values) -> None:
    """Check a VALUES list's row lengths and name its columns as DuckDB does (the alias's names, then colN)."""
    rows = values.expressions
    width = len(rows[0].expressions) if rows else 0
    for row in rows[1:]:
        if len(row.expressions) != width:
            raise _error(f"VALUES lists must all be the same length: the first row has {_entries(width)}, "
                         f"this one {_entries(len(row.expressions))}", row, "VALUES")
    alias = values.args.get("alias")
    if alias is None:
        alias = exp.TableAlias(this=exp.to_identifier("valueslist"))
        values.set("alias", alias)
    names = list(alias.columns)
    if len(names) > width:
        raise _error(f"VALUES list {alias.name!r} has {width} columns but {len(names)} column names are given",
                     values, alias.name)
    names += [exp.to_identifier(f"col{i}") for i in range(len(names), width)]
    alias.set("columns", names)


def _label(values: exp.Values) -> str:
    return f"VALUES list {values.alias_or_name}"


def plan_values(planner: "QueryPlanner", values: exp.Values, alias: str, ctes: Mapping[str, exp.Expression]
                ) -> "Relation":
    """Return the relation of a VALUES list in FROM, its columns named ``(alias, column)``.

    Literal rows become one Values node; rows with computed cells a UNION ALL of one-row SELECTs.
    """
    from gpu_engine.sql.planner import Relation

    names = [c.name for c in values.args["alias"].columns]
    rows = values.expressions
    translator = ScalarTranslator(pa.schema([]), _label(values))
    cells = [[_literal(cell, values, translator) for cell in row.expressions] for row in rows]
    if any(literal is None for row in cells for literal in row):
        return _computed_rows(planner, values, alias, names, ctes)
    types, null_columns = [], []
    for position, name in enumerate(names):
        dtype = pa.null()
        for row_number, row in enumerate(cells):
            try:
                dtype = common_type(dtype, row[position].dtype)
            except TypeError:
                raise _error(f"{_label(values)}: column {position + 1} ({name!r}) is {dtype} in an earlier row "
                             f"and {row[position].dtype} in row {row_number + 1}, which have no common type; "
                             "CAST one of them", rows[row_number].expressions[position], name) from None
        null_columns.append(pa.types.is_null(dtype))
        types.append(UNTYPED_NULL_TYPE if pa.types.is_null(dtype) else dtype)
    internal = [planner._fresh(name, alias) for name in names]
    arrays = []
    for position, dtype in enumerate(types):
        try:
            arrays.append(arrow_from_pylist([_value_as(row[position], dtype) for row in cells], dtype))  # no pandas
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError) as error:
            raise _error(f"{_label(values)}: column {position + 1} ({names[position]!r}) cannot hold every value "
                         f"as {dtype}: {error}", values, names[position]) from None
    # a column of only NULLs is of SQL's NULL type (INTEGER storage), typed by what it meets later
    schema = pa.schema([null_typed_field(n) if untyped else pa.field(n, t)
                        for n, t, untyped in zip(internal, types, null_columns)])
    node = ValuesNode(id=planner.ids.next_id(), output_schema=schema,
                      data=pa.Table.from_arrays(arrays, schema=schema))
    columns = {(alias, name): i for name, i in zip(names, internal)}
    return Relation(node, columns, frozenset([alias]), float(max(1, len(rows))), {})


def _value_as(literal: Literal, dtype: pa.DataType):
    """Return the literal's value as a value of ``dtype`` (an Arrow cast where its own type differs)."""
    if literal.value is None or literal.dtype == dtype:
        return literal.value
    return arrow_from_pylist([literal.value], literal.dtype).cast(dtype)[0].as_py()  # pa.scalar imports pandas


def _literal(cell: exp.Expression, values: exp.Values, translator: ScalarTranslator) -> Literal | None:
    """Return the typed literal a cell is (``1``, ``-2.5``, ``'a'``, ``NULL``, ``DATE '…'``), or None."""
    if isinstance(cell, (exp.Literal, exp.Null, exp.Boolean)):
        pass  # the common cell: nothing inside to look for
    elif any(isinstance(node, (exp.Column, exp.Query, exp.Subquery, exp.Star)) for node in cell.walk()):
        if any(isinstance(node, exp.Column) for node in cell.walk()):
            column = next(node for node in cell.walk() if isinstance(node, exp.Column))
            raise _error(f"{_label(values)}: a cell cannot read column {column.sql(dialect='duckdb')!r} (VALUES "
                         "rows are constants; join the table instead)", column, column.sql(dialect="duckdb"))
        return None
    try:
        expr = translator.translate(cell)  # the parsed cell (the query's nesting is checked): no text parsed again
    except PlanError:
        return None  # the row's SELECT plans it and names the problem
    # An INTERVAL constant has no Arrow scalar of its own: its row is planned as a SELECT.
    return expr if isinstance(expr, Literal) and not is_interval(expr.dtype) else None


def _computed_rows(planner: "QueryPlanner", values: exp.Values, alias: str, names: list[str],
                   ctes: Mapping[str, exp.Expression]) -> "Relation":
    """Plan a VALUES list with computed cells as the UNION ALL of one SELECT per row over the dual source."""
    from gpu_engine.sql.planner import Relation

    query: exp.Expression | None = None
    for row in values.expressions:
        select = exp.Select(expressions=[exp.alias_(cell.copy(), exp.to_identifier(name, quoted=True))
                                         for cell, name in zip(row.expressions, names)])
        select.set("from_", exp.From(this=_dual()))
        query = select if query is None else exp.Union(this=query, expression=select, distinct=False)
    relation, outputs = planner._plan_query(query, ctes)
    columns = {(alias, name): internal for name, (_, internal) in zip(names, outputs)}
    return Relation(relation.node, columns, frozenset([alias]), float(max(1, len(values.expressions))),
                    relation.stats)
