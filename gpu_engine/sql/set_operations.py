"""Plan SQL set operations: UNION [ALL], INTERSECT and EXCEPT (distinct), as Velox composes them from its nodes.

* ``UNION ALL`` is one LocalPartition with a source per branch: each branch is
  a producer pipeline of the Task and their rows meet in one local exchange
  (Velox plans it the same way; no operator of its own), which hands whole
  batches round-robin (``arbitrary``) to every driver of the pipeline above.
* ``UNION`` is that LocalPartition under a grouping aggregation on every
  column with no aggregates (``SELECT DISTINCT``); with several drivers its
  partial step groups each driver's rows before they are repartitioned.
* ``INTERSECT`` / ``EXCEPT`` tag each row with its side (1 left, 2 right),
  union the two, group by every column and keep the groups whose smallest and
  largest tags say the row was on both sides (INTERSECT: 1 and 2) or only on
  the left (EXCEPT: largest 1).
* A branch of a distinct form written ``SELECT DISTINCT`` loses that DISTINCT
  in the optimizer (:mod:`gpu_engine.optimizer.distinct_branches`): the
  grouping above removes the same duplicates.
* ``INTERSECT ALL`` / ``EXCEPT ALL`` keep ``min(m, n)`` / ``max(m - n, 0)``
  copies of a row found ``m`` times on the left and ``n`` on the right: each
  branch numbers the copies of each row (``row_number()`` in a Window
  partitioned by every column), and the number joins the grouping keys, so
  the k-th copy is on both sides exactly when k <= min(m, n) and only on the
  left when n < k <= m; the distinct forms' test then keeps the right ones.

Grouping puts NULLs in one group, which is SQL's NULL-equal semantics of the
distinct forms. Branch columns are unified position by position to DuckDB's
common type (:func:`~gpu_engine.plans.type_coercion.common_type`: INTEGER with
BIGINT is BIGINT, an integer with a decimal a wide enough decimal) and a branch
is cast where its type differs; columns take the first branch's names.
``UNION BY NAME`` is refused by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import pyarrow as pa
from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.plans.expressions import Cast, ColumnRef, Literal
from gpu_engine.plans.nodes import LocalPartitionNode, PlanNode, ProjectNode
from gpu_engine.plans.null_type import is_null_typed, null_typed_field, sql_type
from gpu_engine.columnar.types import is_string
from gpu_engine.plans.type_coercion import common_type
from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.renaming import aliased

if TYPE_CHECKING:
    from gpu_engine.sql.planner import QueryPlanner, Relation

__all__ = ["plan_set_operation", "ordered_set_operation", "check_set_operation_widths", "set_operation_name"]

#: Arguments of sqlglot's SetOperation the planner reads; any other set (``side``, ``kind``, ``on``) is refused.
_PLANNED_ARGS = {"this", "expression", "distinct", "by_name", "with_", "order", "limit", "offset"}
_SIDE = "$setop_side"
_COPY = "$setop_copy"  # which copy of its row a row is, in its branch (INTERSECT ALL / EXCEPT ALL)


def set_operation_name(query: exp.SetOperation) -> str:
    """Return the construct as SQL writes it: ``UNION ALL``, ``INTERSECT``, ``EXCEPT ALL``…"""
    return query.key.upper() + ("" if query.args.get("distinct") else " ALL")


def _error(message: str, tree: exp.Expression) -> SqlError:
    line, col = position_of(tree)
    return SqlError(message, line=line, col=col, name=set_operation_name(tree) if
                    isinstance(tree, exp.SetOperation) else tree.sql(dialect="duckdb")[:80])


def plan_set_operation(planner: "QueryPlanner", query: exp.SetOperation, ctes: Mapping[str, exp.Expression]
                       ) -> tuple["Relation", list[tuple[str, str]]]:
    """Return the relation of ``query`` (a set operation without ORDER BY / LIMIT) and its (name, internal) outputs.

    Each branch is planned as a query of its own (a branch may be a set
    operation itself, or a parenthesized query with its own ORDER BY / LIMIT).
    """
    from gpu_engine.sql.planner import Relation

    name = set_operation_name(query)
    for key, value in query.args.items():
        if value and key not in _PLANNED_ARGS:
            raise _error(f"unsupported SQL: {name} with {key.upper()}", query)
    if query.args.get("by_name"):
        raise _error(f"unsupported SQL: {query.key.upper()} BY NAME; list the columns of each branch in the same "
                     "order", query)
    distinct = bool(query.args.get("distinct"))
    left_branch, right_branch = query.this, query.expression
    left_nulls, right_nulls = _bare_null_positions(left_branch), _bare_null_positions(right_branch)
    both = {position for position in left_nulls if position in right_nulls}
    if both:  # NULL in every branch: a column of SQL's NULL type (plans/null_type.py), typed by what it meets later
        left_nulls = [position for position in left_nulls if position not in both]
        right_nulls = [position for position in right_nulls if position not in both]
    if left_nulls and right_nulls:  # NULLs on both sides at different columns: each typed by the other's
        probe, probe_outputs = planner._plan_query(_cast_nulls(left_branch, dict.fromkeys(left_nulls, "INTEGER")),
                                                   ctes)  # the left's other columns' types, for the right's NULLs
        right_branch = _typed_nulls(right_branch, right_nulls, probe, probe_outputs)
        right_nulls = []
    if left_nulls:  # SELECT NULL AS x … UNION SELECT a …: the NULL takes the other branch's type, as in DuckDB
        right, right_outputs = planner._plan_query(right_branch, ctes)
        left, left_outputs = planner._plan_query(_typed_nulls(left_branch, left_nulls, right, right_outputs), ctes)
    else:
        left, left_outputs = planner._plan_query(left_branch, ctes)
        if right_nulls:
            right_branch = _typed_nulls(right_branch, right_nulls, left, left_outputs)
        right, right_outputs = planner._plan_query(right_branch, ctes)
    if len(left_outputs) != len(right_outputs):
        raise _error(f"each branch of {name} must have the same number of columns: the left has "
                     f"{len(left_outputs)}, the right {len(right_outputs)}", query)
    left_schema, right_schema = left.node.output_schema, right.node.output_schema
    names, fields = [], []
    for position, ((out_name, left_internal), (_, right_internal)) in enumerate(zip(left_outputs, right_outputs)):
        left_field, right_field = left_schema.field(left_internal), right_schema.field(right_internal)
        try:
            dtype = _branch_type(sql_type(left_field), sql_type(right_field))
        except TypeError:
            raise _error(f"{name}: column {position + 1} ({out_name!r}) is {left_field.type} in the left branch "
                         f"and {right_field.type} in the right, which have no common type; CAST one of them",
                         query) from None
        names.append(out_name)
        nullable = left_field.nullable or right_field.nullable
        fields.append(null_typed_field(planner._fresh(out_name), nullable) if pa.types.is_null(dtype)
                      else pa.field(planner._fresh(out_name), dtype, nullable))
    tagged = isinstance(query, (exp.Intersect, exp.Except))
    numbered = tagged and not distinct  # INTERSECT ALL / EXCEPT ALL: each copy of a row is a row of its own
    schema = pa.schema(fields + ([pa.field(_SIDE, pa.int32(), False)] if tagged else []))
    keys = tuple(f.name for f in fields)
    sources = tuple(_aligned(planner, relation.node, [i for _, i in outputs], schema, side if tagged else None)
                    for side, (relation, outputs) in enumerate(((left, left_outputs), (right, right_outputs)), 1))
    if numbered:
        try:
            sources = tuple(planner._builder(source).window([_quote(k) for k in keys], [],
                                                            [f"row_number() AS {_quote(_COPY)}"]).plan()
                            for source in sources)
        except PlanError as error:
            raise planner._plan_error(error, query) from None
        schema = sources[0].output_schema
    group_keys = keys + ((_COPY,) if numbered else ())
    # Whole batches round-robin, not repartitioned by the keys: the grouping above then gets a partial step on
    # each driver before its repartition (gpu_engine.planning.local_exchanges), which cuts the rows to their
    # distinct ones first (TPC-DS q14's INTERSECT: 2.5M rows of 3,837 distinct keys hashed across drivers).
    union = LocalPartitionNode(id=planner.ids.next_id(), output_schema=schema, sources=sources,
                               partition_kind="arbitrary", keys=())
    rows = left.rows + right.rows
    node: PlanNode = union
    try:
        if tagged:
            # (trees, as the planner's other snippets: no text written out and parsed again)
            builder = planner._builder(union).aggregation(
                [_quote(k) for k in group_keys], [aliased(exp.Min(this=_column(_SIDE)), "$setop_first"),
                                                  aliased(exp.Max(this=_column(_SIDE)), "$setop_last")])
            last = exp.EQ(this=_column("$setop_last"), expression=exp.Literal.number(1 + isinstance(
                query, exp.Intersect)))
            keep = (exp.And(this=exp.EQ(this=_column("$setop_first"), expression=exp.Literal.number(1)),
                            expression=last) if isinstance(query, exp.Intersect) else last)
            node = builder.filter(keep).project([_quote(k) for k in keys]).plan()
            rows = left.rows
        elif distinct:
            node = planner._builder(union).aggregation([_quote(k) for k in keys], []).plan()
    except PlanError as error:
        raise planner._plan_error(error, query) from None
    stats = {} if tagged or distinct else _union_statistics(left, left_outputs, right, right_outputs, keys)
    return Relation(node, {}, frozenset(), max(1.0, rows), stats), list(zip(names, keys))


def _union_statistics(left: "Relation", left_outputs, right: "Relation", right_outputs, keys) -> dict:
    """Return a UNION ALL's column statistics: per column known in both branches, the larger distinct count and
    the widest range.

    Why: a relation without a column's statistics counts its rows as that column's distinct values, which
    reads a fact table's foreign key as unique: TPC-DS q5's union of store_sales and store_returns (3.2M rows)
    joined to 12 stores was estimated at 12 rows, joined first, and its 3M rows became the build side of the
    join with 15 dates.
    """
    from gpu_engine.sql.statistics import ColumnStatistics

    stats = {}
    for key, (_, left_name), (_, right_name) in zip(keys, left_outputs, right_outputs):
        a, b = left.stats.get(left_name), right.stats.get(right_name)
        if a is None or b is None or not a.ndv or not b.ndv:
            continue
        try:
            low = None if a.minimum is None or b.minimum is None else min(a.minimum, b.minimum)
            high = None if a.maximum is None or b.maximum is None else max(a.maximum, b.maximum)
        except TypeError:  # values of two types (a branch cast): the range is unknown
            low = high = None
        stats[key] = ColumnStatistics(max(a.ndv, b.ndv), low, high)
    return stats


def _branch_type(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """Return the type a column of two branches unifies to: DuckDB's common type, and VARCHAR for text beside a
    number, a date or a boolean (DuckDB casts the other branch's values to text: ``SELECT 1 UNION SELECT 'x'``)."""
    try:
        return common_type(left, right)
    except TypeError:
        if is_string(left) != is_string(right) and not any(pa.types.is_null(t) or pa.types.is_binary(t)
                                                             for t in (left, right)):
            return pa.string()
        raise


#: SQL type names of the Arrow types a bare NULL branch column may take from the other branch.
_SQL_TYPES = {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
              pa.float32(): "REAL", pa.float64(): "DOUBLE", pa.string(): "VARCHAR", pa.large_string(): "VARCHAR",
              pa.bool_(): "BOOLEAN", pa.date32(): "DATE", pa.timestamp("us"): "TIMESTAMP",
              pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ", pa.month_day_nano_interval(): "INTERVAL",
              pa.time64("us"): "TIME"}


def _unwrapped(branch: exp.Expression) -> exp.Expression:
    while isinstance(branch, (exp.Subquery, exp.Paren)) and not any(
            branch.args.get(key) for key in ("order", "limit", "offset")):
        branch = branch.this
    return branch


def _bare_null_positions(branch: exp.Expression) -> list[int]:
    """Return the positions where a branch selects a bare ``NULL`` (a column of no type of its own).

    A branch that is a set operation itself has one where each of its branches has (``SELECT NULL UNION ALL
    SELECT NULL``), so the outer branch types it, as DuckDB unifies every branch of a chain.
    """
    select = _unwrapped(branch)
    if isinstance(select, exp.SetOperation) and not any(select.args.get(k) for k in ("order", "limit", "offset")):
        right = set(_bare_null_positions(select.expression))
        return [position for position in _bare_null_positions(select.this) if position in right]
    if not isinstance(select, exp.Select):
        return []
    return [i for i, e in enumerate(select.expressions)
            if isinstance(e.this if isinstance(e, exp.Alias) else e, exp.Null) or _null_values_cells(select, e)]


def _null_values_cells(select: exp.Select, item: exp.Expression) -> list[exp.Null]:
    """Return the cells of the VALUES column that ``item`` selects when every one is a bare NULL, else [].

    Why: ``SELECT * FROM (VALUES (NULL)) v(a) UNION ALL SELECT DATE …`` (a bare ``VALUES (NULL)`` branch reads
    so too) is a NULL-typed column in DuckDB, typed by the other branch; the engine's VALUES would type it
    INTEGER first. Only a column the SELECT reads once, as its output, is typed so (elsewhere its INTEGER
    type may matter).
    """
    column = item.this if isinstance(item, exp.Alias) else item
    source = select.args.get("from_")
    values = source.this if source is not None else None
    if not isinstance(column, exp.Column) or not isinstance(values, exp.Values) or select.args.get("joins"):
        return []
    alias = values.args.get("alias")
    names = [c.name for c in alias.columns] if alias is not None else []
    if column.name not in names or (column.table and column.table != alias.name):
        return []
    if sum(1 for node in select.find_all(exp.Column) if node.name == column.name) != 1:
        return []
    index = names.index(column.name)
    cells = [row.expressions[index] if isinstance(row, exp.Tuple) else row for row in values.expressions]
    return cells if all(isinstance(cell, exp.Null) for cell in cells) else []


def _cast_nulls(branch: exp.Expression, types: Mapping[int, str]) -> exp.Expression:
    """Return a copy of ``branch`` with its bare NULL at each position of ``types`` cast to that SQL type."""
    copy = branch.copy()
    pending = [copy]
    while pending:
        select = _unwrapped(pending.pop())
        if isinstance(select, exp.SetOperation):
            pending += [select.this, select.expression]
            continue
        for position, name in types.items():
            item = select.expressions[position]
            null = item.this if isinstance(item, exp.Alias) else item
            for cell in _null_values_cells(select, item) or [null]:
                cell.replace(exp.Cast(this=exp.Null(), to=exp.DataType.build(name, dialect="duckdb")))
    return copy


def _typed_nulls(branch: exp.Expression, positions: list[int], other: "Relation",
                 other_outputs: list[tuple[str, str]]) -> exp.Expression:
    """Return a copy of ``branch`` whose bare NULLs at ``positions`` are cast to the other branch's column types."""
    types = {}
    for position in positions:
        if position >= len(other_outputs):
            continue  # the column counts differ: the caller says so
        field = other.node.output_schema.field(other_outputs[position][1])
        dtype = field.type
        if is_null_typed(field):
            continue  # the other's column is of the NULL type too (a derived table's NULL): both stay untyped
        if pa.types.is_decimal(dtype):
            types[position] = f"DECIMAL({dtype.precision}, {dtype.scale})"
        elif dtype in _SQL_TYPES:
            types[position] = _SQL_TYPES[dtype]
        # else left untyped: the planner asks for a CAST
    return _cast_nulls(branch, types)


def _column(name: str) -> exp.Column:
    """Return the internal column ``name`` as a tree."""
    return exp.column(exp.to_identifier(name, quoted=True))


def _quote(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def _aligned(planner: "QueryPlanner", node: PlanNode, internals: list[str], schema: pa.Schema,
             side: int | None) -> PlanNode:
    """Project a branch onto the set operation's columns: its names, its unified types and the side tag."""
    names, expressions = [], []
    for internal, target in zip(internals, schema):
        source = node.output_schema.field(internal)
        column = ColumnRef(internal, source.type)
        names.append(target.name)
        if is_null_typed(source):  # a column of SQL's NULL type takes the other branch's type
            expressions.append(column if is_null_typed(target) else Literal(None, target.type))
        else:
            expressions.append(column if column.dtype == target.type else Cast(column, target.type))
    if side is not None:
        names.append(_SIDE)
        expressions.append(Literal(side, pa.int32()))
    return ProjectNode(id=planner.ids.next_id(), output_schema=schema, sources=(node,), names=tuple(names),
                       expressions=tuple(expressions))


def ordered_set_operation(query: exp.SetOperation, alias: str) -> exp.Select:
    """Return ``SELECT <its columns> FROM (<query>) AS alias ORDER BY … LIMIT …`` for a set operation with clauses.

    Why: ORDER BY, LIMIT and OFFSET written after a set operation apply to its
    whole result and name its output columns (the first branch's names), so
    they are planned as the clauses of a SELECT over it.
    """
    inner = query.copy()
    clauses = {}
    for key in ("order", "limit", "offset"):
        if inner.args.get(key) is not None:
            clauses[key] = inner.args[key]
            inner.set(key, None)
    select = exp.Select(expressions=[exp.alias_(exp.column(name, table=alias, quoted=True), name, quoted=True)
                                     for name in query.named_selects])
    select.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(
        this=exp.to_identifier(alias, quoted=True)))))

    def qualify(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table:
            return exp.column(node.args["this"].copy(), table=alias, quoted=True)
        return node

    for key, value in clauses.items():
        select.set(key, value.transform(qualify) if key == "order" else value)
    return select


def check_set_operation_widths(tree: exp.Expression) -> None:
    """Refuse a set operation whose branches select different numbers of columns, naming both counts.

    Checked before names are resolved and again once every ``*`` is expanded
    (sqlglot's own check fails with an internal message); before expansion a
    branch selecting ``*`` is skipped.
    """
    for node in tree.find_all(exp.SetOperation):
        widths = []
        for branch in (node.this, node.expression):
            while isinstance(branch, (exp.Subquery, exp.Paren)):
                branch = branch.this
            selects = branch.selects if isinstance(branch, (exp.Select, exp.SetOperation)) else None
            if not selects or any(isinstance(s, exp.Star) or s.find(exp.Star) for s in selects):
                break
            widths.append(len(selects))
        else:
            if widths[0] != widths[1]:
                raise _error(f"each branch of {set_operation_name(node)} must have the same number of columns: "
                             f"the left has {widths[0]}, the right {widths[1]}", node)
