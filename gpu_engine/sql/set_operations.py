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
distinct forms.

Binding, on the planned branches (each planned once; no branch rewritten and
planned again): columns are unified position by position to DuckDB's common
type (:func:`~gpu_engine.plans.type_coercion.common_type`: INTEGER with BIGINT
is BIGINT, an integer with a decimal a wide enough decimal; a boolean beside a
number the number's type; text beside another type VARCHAR), over a whole
UNION [ALL] chain at once as DuckDB does, and a branch is cast in a Project
where its type differs; a branch column of NULLs only (SQL's NULL type, or a
VALUES column of bare NULLs) is a NULL literal of the unified type there.
Columns take the first branch's names; ORDER BY after the operation may also
name a later branch's column. Its UNION ALL statistics for the SQL join
ordering are the typed plan's rule
(:func:`~gpu_engine.optimizer.cardinality.union_columns`). ``UNION [ALL] BY
NAME`` matches the branches' columns by name (:func:`_matched_by_name`);
INTERSECT / EXCEPT BY NAME are refused by name, as DuckDB refuses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import pyarrow as pa
from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.plans.expressions import Cast, ColumnRef, Literal
from gpu_engine.columnar.arrow_numpy import empty_table
from gpu_engine.optimizer.empty_relations import propagate_empty_relations
from gpu_engine.plans.nodes import LocalPartitionNode, PlanNode, ProjectNode, ValuesNode
from gpu_engine.plans.null_type import is_hugeint_field, is_null_typed, plan_field, sql_type
from gpu_engine.columnar.types import is_integer, is_interval, is_numeric, is_string, is_temporal, is_time
from gpu_engine.plans.type_coercion import HUGEINT, common_type
from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.planning_context import quoted
from gpu_engine.sql.renaming import aliased
from gpu_engine.optimizer.cardinality import union_columns

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

    Each branch is planned once, as a query of its own (a branch may be a set operation itself, or a
    parenthesized query with its own ORDER BY / LIMIT). A chain of one operation written without parentheses
    (``a UNION ALL b UNION ALL c``, ``a UNION b UNION c``) is unified as one: as DuckDB's binder does for its
    UNION chains, each column takes the common type of every branch and each branch is cast to it directly
    (``tinyint UNION ALL double UNION ALL 'x'`` gives ``'1'``, not ``'1.0'``); INTERSECT and EXCEPT chains and
    a UNION beside a UNION ALL unify pair by pair, as DuckDB does. A branch column of bare NULLs (SQL's NULL
    type, or a VALUES column of NULLs only) takes the type the others agree on, as a NULL literal of it.
    """
    branches = _chained_branches(query)
    for node in _chain_nodes(query):
        _refuse_unplanned(node)
    name = set_operation_name(query)
    planned = [planner._plan_query(branch, ctes) for branch in branches]
    nulls = [_all_null_positions(branch, relation, outputs) for branch, (relation, outputs) in zip(branches, planned)]
    if query.args.get("by_name"):
        planned, nulls = _matched_by_name(planned, nulls)
    for _, outputs in planned[1:]:
        if len(outputs) != len(planned[0][1]):
            raise _error(f"each branch of {name} must have the same number of columns: the left has "
                         f"{len(planned[0][1])}, the right {len(outputs)}", query)
    types = _unified_types(query, branches, planned, nulls)
    names = [out_name for out_name, _ in planned[0][1]]
    relation, outputs = planned[0]
    for index in range(1, len(branches)):  # left-deep, as written: one LocalPartition per operation
        fields = [plan_field(planner._fresh(out_name), dtype, nullable, hugeint=hugeint)
                  for out_name, (dtype, nullable, hugeint) in zip(names, types)]
        right, right_outputs = planned[index]
        relation = _combined(planner, query, fields, (relation, outputs, nulls[0] if index == 1 else set()),
                             (right, right_outputs, nulls[index]))
        outputs = list(zip(names, (f.name for f in fields)))
    return relation, outputs


def _matched_by_name(planned, nulls):
    """Return the branches of a ``UNION [ALL] BY NAME`` with their outputs as the union's columns, and their
    positions of NULLs only: the union's columns are the first branch's names, then each name a later branch adds
    (in its order; names compare case-insensitively, the first spelling kept, as DuckDB does), and a branch
    lacking one gives NULL there (internal name None)."""
    names: dict[str, str] = {}
    for _, outputs in planned:
        for out_name, _ in outputs:
            names.setdefault(out_name.lower(), out_name)
    matched, matched_nulls = [], []
    for (relation, outputs), all_null in zip(planned, nulls):
        position = {out_name.lower(): i for i, (out_name, _) in reversed(list(enumerate(outputs)))}
        row = [(spelled, outputs[position[key]][1] if key in position else None) for key, spelled in names.items()]
        matched.append((relation, row))
        matched_nulls.append({i for i, key in enumerate(names) if key not in position or position[key] in all_null})
    return matched, matched_nulls


def _refuse_unplanned(query: exp.SetOperation) -> None:
    """Refuse the forms of a set operation the planner does not plan (INTERSECT / EXCEPT BY NAME, a ``side`` /
    ``kind``)."""
    name = set_operation_name(query)
    for key, value in query.args.items():
        if value and key not in _PLANNED_ARGS:
            raise _error(f"unsupported SQL: {name} with {key.upper()}", query)
    if query.args.get("by_name") and not isinstance(query, exp.Union):
        raise _error(f"unsupported SQL: {query.key.upper()} BY NAME (as in DuckDB, only UNION [ALL] BY NAME matches "
                     "columns by name); list the columns of each branch in the same order", query)


def _chain_nodes(query: exp.SetOperation) -> list[exp.SetOperation]:
    """Return the set operations of ``query``'s UNION chain, outermost first: ``query`` itself, and while it is a
    UNION [ALL], its left operand when that is the same operation written without parentheses or clauses."""
    nodes = [query]
    while isinstance(query, exp.Union):
        left = query.this
        if type(left) is not type(query) or bool(left.args.get("distinct")) != bool(query.args.get("distinct")) \
                or bool(left.args.get("by_name")) != bool(query.args.get("by_name")) or any(left.args.get(key) is not None for key in ("order", "limit", "offset", "with_", "with")):
            break
        nodes.append(left)
        query = left
    return nodes


def _chained_branches(query: exp.SetOperation) -> list[exp.Expression]:
    """Return the branches of ``query``'s chain (:func:`_chain_nodes`) in the written order."""
    nodes = _chain_nodes(query)
    return [nodes[-1].this] + [node.expression for node in reversed(nodes)]


def _all_null_positions(branch: exp.Expression, relation: "Relation", outputs: list[tuple[str, str]]) -> set[int]:
    """Return the positions where a planned branch's column holds only NULLs and has no type of its own.

    That is a column of SQL's NULL type (``SELECT NULL``, a set operation of such branches), and a column the
    branch selects, once, from a VALUES column whose every cell is a bare NULL: the VALUES planner types that
    INTEGER, where DuckDB leaves it to the other branches (``SELECT * FROM (VALUES (NULL)) v(a) UNION ALL SELECT
    DATE ...``). Both become a NULL literal of the unified type.
    """
    schema = relation.node.output_schema
    positions = {i for i, (_, internal) in enumerate(outputs) if is_null_typed(schema.field(internal))}
    select = _unwrapped(branch)
    if isinstance(select, exp.Select):
        positions.update(i for i, item in enumerate(select.expressions) if _null_values_cells(select, item))
    return positions


def _unified_types(query: exp.SetOperation, branches, planned, nulls) -> list[tuple[pa.DataType, bool, bool]]:
    """Return per output column the branches' common type (``pa.null()``: NULLs only), its nullability and whether
    it is DuckDB's HUGEINT (every branch an integer or a HUGEINT: :func:`gpu_engine.plans.null_type.plan_field`)."""
    name = set_operation_name(query)
    types = []
    for position, (out_name, _) in enumerate(planned[0][1]):
        dtype, nullable, integral = pa.null(), False, True
        for index, (relation, outputs) in enumerate(planned):
            if position in nulls[index]:
                nullable = True
                continue
            field = relation.node.output_schema.field(outputs[position][1])
            nullable = nullable or field.nullable
            huge = is_hugeint_field(field)
            try:
                dtype = _branch_type(dtype, sql_type(field), (integral and dtype == HUGEINT, huge))
            except TypeError:
                where = (("the left branch", "the right") if len(branches) == 2 else
                         (f"branches 1 to {index}", f"branch {index + 1}"))
                raise _error(f"{name}: column {position + 1} ({out_name!r}) is {dtype} in {where[0]} and "
                             f"{field.type} in {where[1]}, which have no common type; CAST one of them",
                             query) from None
            integral = integral and (huge or is_integer(field.type) or is_null_typed(field))
        types.append((dtype, nullable, integral and dtype == HUGEINT))
    return types


def _combined(planner: "QueryPlanner", query: exp.SetOperation, fields: list[pa.Field], left, right) -> "Relation":
    """Return the relation of the set operation of two planned operands (each ``(relation, outputs, the
    positions of its columns of NULLs only)``), each projected onto ``fields``."""
    from gpu_engine.sql.planner import Relation

    distinct = bool(query.args.get("distinct"))
    tagged = isinstance(query, (exp.Intersect, exp.Except))
    numbered = tagged and not distinct  # INTERSECT ALL / EXCEPT ALL: each copy of a row is a row of its own
    schema = pa.schema(fields + ([pa.field(_SIDE, pa.int32(), False)] if tagged else []))
    keys = tuple(f.name for f in fields)
    sources = tuple(_aligned(planner, relation.node, [i for _, i in outputs], schema, side if tagged else None,
                             all_null)
                    for side, (relation, outputs, all_null) in enumerate((left, right), 1))
    if tagged:
        sources = _unneeded_sides_emptied(planner, query, sources)
    if numbered:
        try:
            sources = tuple(planner._builder(source).window([quoted(k) for k in keys], [],
                                                            [f"row_number() AS {quoted(_COPY)}"]).plan()
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
    rows = left[0].rows + right[0].rows
    node: PlanNode = union
    try:
        if tagged:
            # (trees, as the planner's other snippets: no text written out and parsed again)
            builder = planner._builder(union).aggregation(
                [quoted(k) for k in group_keys], [aliased(exp.Min(this=_column(_SIDE)), "$setop_first"),
                                                  aliased(exp.Max(this=_column(_SIDE)), "$setop_last")])
            last = exp.EQ(this=_column("$setop_last"), expression=exp.Literal.number(1 + isinstance(
                query, exp.Intersect)))
            keep = (exp.And(this=exp.EQ(this=_column("$setop_first"), expression=exp.Literal.number(1)),
                            expression=last) if isinstance(query, exp.Intersect) else last)
            node = builder.filter(keep).project([quoted(k) for k in keys]).plan()
            rows = left[0].rows
        elif distinct:
            node = planner._builder(union).aggregation([quoted(k) for k in keys], []).plan()
    except PlanError as error:
        raise planner._plan_error(error, query) from None
    stats = {} if tagged or distinct else _union_statistics(left, right, keys)
    return Relation(node, {}, frozenset(), max(1.0, rows), stats)


def _unneeded_sides_emptied(planner: "QueryPlanner", query: exp.SetOperation,
                            sources: tuple[PlanNode, PlanNode]) -> tuple[PlanNode, PlanNode]:
    """Return an INTERSECT's / EXCEPT's two aligned sides with the side whose rows cannot matter an empty VALUES.

    Why: DuckDB drops a side that can only be empty (``WHERE false``, ``LIMIT 0``, a FALSE HAVING, as
    :func:`~gpu_engine.optimizer.empty_relations.propagate_empty_relations` finds it) while planning, so the
    other side's rows are never cast to the unified type: ``SELECT DATE ... WHERE false EXCEPT SELECT 1`` is
    empty there, where casting ``1`` to DATE raises. An empty left side empties EXCEPT [ALL] and INTERSECT [ALL]
    whatever the right holds, and an empty right side empties INTERSECT [ALL]; the other side is then never
    read. An empty right side of EXCEPT [ALL] leaves the left as it is (distinct for EXCEPT): it stays.
    """
    empty = [isinstance(found := propagate_empty_relations(source), ValuesNode) and found.data.num_rows == 0
             for source in sources]
    unneeded = empty[0] or (empty[1] and isinstance(query, exp.Intersect))
    if not unneeded:
        return sources
    return tuple(ValuesNode(id=planner.ids.next_id(), output_schema=source.output_schema,
                            data=empty_table(source.output_schema)) for source in sources)


def _union_statistics(left, right, keys) -> dict:
    """Return a UNION ALL's column statistics, for the SQL join ordering: the typed plan's rule
    (:func:`~gpu_engine.optimizer.cardinality.union_columns`) over the branches' statistics of each column.

    Why: a relation without a column's statistics counts its rows as that column's distinct values, which
    reads a fact table's foreign key as unique: TPC-DS q5's union of store_sales and store_returns (3.2M rows)
    joined to 12 stores was estimated at 12 rows, joined first, and its 3M rows became the build side of the
    join with 15 dates.
    """
    branches = []
    for relation, outputs, _ in (left, right):
        branches.append({key: relation.stats[internal] for key, (_, internal) in zip(keys, outputs)
                         if internal in relation.stats})
    return union_columns(keys, branches)


def _branch_type(left: pa.DataType, right: pa.DataType, hugeint: tuple[bool, bool] = (False, False)) -> pa.DataType:
    """Return the type a column of two branches unifies to: DuckDB's common type; VARCHAR for text beside a
    number, a date or a boolean (DuckDB casts the other branch's values to text: ``SELECT 1 UNION SELECT 'x'``);
    the number's type for a boolean beside a number (``SELECT true UNION ALL SELECT 2.5`` is DECIMAL(2,1) 1.0);
    the date's, timestamp's, time's or interval's type beside a number or a boolean, a date's or timestamp's
    beside a TIME, an interval's beside a date, timestamp or time, as DuckDB: the cast of the other branch's rows
    then fails when a row is cast (``CAST(1 AS DATE)``, ``CAST(TIME ... AS DATE)``), so an empty branch answers."""
    try:
        return common_type(left, right, hugeint)
    except TypeError:
        if is_string(left) != is_string(right) and not any(pa.types.is_null(t) or pa.types.is_binary(t)
                                                             for t in (left, right)):
            return pa.string()
        for boolean, number in ((left, right), (right, left)):
            if pa.types.is_boolean(boolean) and is_numeric(number):
                return number
        for moment, number in ((left, right), (right, left)):
            if (is_temporal(moment) or is_time(moment) or is_interval(moment)) and (
                    is_numeric(number) or pa.types.is_boolean(number)):
                return moment
            if is_temporal(moment) and is_time(number):  # TIME beside a DATE / TIMESTAMP: the date's type
                return moment
            if is_interval(moment) and (is_temporal(number) or is_time(number)):  # a DATE / TIME beside an INTERVAL
                return moment
        raise


def _unwrapped(branch: exp.Expression) -> exp.Expression:
    while isinstance(branch, (exp.Subquery, exp.Paren)) and not any(
            branch.args.get(key) for key in ("order", "limit", "offset")):
        branch = branch.this
    return branch


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


def _column(name: str) -> exp.Column:
    """Return the internal column ``name`` as a tree."""
    return exp.column(exp.to_identifier(name, quoted=True))


def _aligned(planner: "QueryPlanner", node: PlanNode, internals: list[str], schema: pa.Schema,
             side: int | None, all_null: set[int]) -> PlanNode:
    """Project a branch onto the set operation's columns: its names, its unified types and the side tag; a column
    of NULLs only (at ``all_null``, :func:`_all_null_positions`) as a NULL of the unified type."""
    names, expressions = [], []
    for position, (internal, target) in enumerate(zip(internals, schema)):
        names.append(target.name)
        if internal is None:  # UNION BY NAME: a column this branch lacks
            expressions.append(Literal(None, target.type))
            continue
        source = node.output_schema.field(internal)
        column = ColumnRef(internal, source.type)
        if is_null_typed(source) or position in all_null:  # no type of its own: takes the other branches' type
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
    they are planned as the clauses of a SELECT over it. A name resolves as
    DuckDB's binder resolves it: an output name, else the name a later branch
    gives that column (``SELECT a AS x … UNION ALL SELECT b AS y … ORDER BY
    y``), else a qualified column a branch selects as it is (``ORDER BY t.a``);
    any other is refused naming the columns there are (not the synthetic
    alias of the SELECT written here).
    """
    inner = query.copy()
    clauses = {}
    for key in ("order", "limit", "offset"):
        if inner.args.get(key) is not None:
            clauses[key] = inner.args[key]
            inner.set(key, None)
    names = _result_names(query)
    select = exp.Select(expressions=[exp.alias_(exp.column(name, table=alias, quoted=True), name, quoted=True)
                                     for name in names])
    select.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(
        this=exp.to_identifier(alias, quoted=True)))))

    def qualify(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not _in_subquery(node, clauses["order"]):
            position = _order_column_position(node, query)
            if position is None:
                line, col = position_of(node)
                raise SqlError(f"ORDER BY {node.sql(dialect='duckdb')}: the result of {set_operation_name(query)} "
                               f"has no such column (its columns: {', '.join(names)}); name one of them or its "
                               "position", line=line, col=col, name=node.sql(dialect="duckdb"),
                               candidates=names)
            return exp.column(exp.to_identifier(names[position], quoted=True), table=alias, quoted=True)
        return node

    for key, value in clauses.items():
        select.set(key, value.transform(qualify) if key == "order" else value)
    return select


def _in_subquery(node: exp.Expression, top: exp.Expression) -> bool:
    """Return whether ``node`` sits in a query nested inside ``top`` (its columns are that query's own)."""
    parent = node.parent
    while parent is not None and parent is not top:
        if isinstance(parent, (exp.Query, exp.Subquery)):
            return True
        parent = parent.parent
    return False


def _branch_selects(query: exp.Expression) -> list[exp.Select]:
    """Return the SELECTs whose columns a set operation's result has, left to right (through parentheses)."""
    query = _unwrapped(query)
    while isinstance(query, exp.Subquery):
        query = query.this
    if isinstance(query, exp.SetOperation):
        return _branch_selects(query.this) + _branch_selects(query.expression)
    return [query] if isinstance(query, exp.Select) else []


def _result_names(query: exp.Expression) -> list[str]:
    """Return the names of a query's result columns: the first branch's, and for UNION BY NAME each name a later
    branch adds (:func:`_matched_by_name`)."""
    while isinstance(query, (exp.Subquery, exp.Paren)):
        query = query.this
    if isinstance(query, exp.Union) and query.args.get("by_name"):
        names = {}
        for name in _result_names(query.this) + _result_names(query.expression):
            names.setdefault(name.lower(), name)
        return list(names.values())
    if isinstance(query, exp.SetOperation):
        return _result_names(query.this)
    return list(query.named_selects)


def _order_column_position(column: exp.Column, query: exp.SetOperation) -> int | None:
    """Return the output position an ORDER BY column after ``query`` names (:func:`ordered_set_operation`)."""
    names = _result_names(query)
    if not column.table and column.name in names:
        return names.index(column.name)
    lowered = [name.lower() for name in names]
    by_name = isinstance(query, exp.Union) and query.args.get("by_name")  # a branch's column sits at its name
    for select in _branch_selects(query):
        for position, item in enumerate(select.expressions[:len(names)]):
            value = item.this if isinstance(item, exp.Alias) else item
            if (column.table and isinstance(value, exp.Column) and value.table == column.table
                    and value.name == column.name) or (not column.table and item.alias_or_name == column.name):
                return lowered.index(item.alias_or_name.lower()) if by_name else position
    return None


def check_set_operation_widths(tree: exp.Expression) -> None:
    """Refuse a set operation whose branches select different numbers of columns, naming both counts.

    Checked before names are resolved and again once every ``*`` is expanded
    (sqlglot's own check fails with an internal message); before expansion a
    branch selecting ``*`` is skipped.
    """
    for node in tree.find_all(exp.SetOperation):
        if node.args.get("by_name"):  # UNION BY NAME: branches of any widths (sql/set_operations._matched_by_name)
            continue
        widths = []
        for branch in (node.this, node.expression):
            while isinstance(branch, (exp.Subquery, exp.Paren)):
                branch = branch.this
            selects = branch.selects if isinstance(branch, (exp.Select, exp.SetOperation)) else None
            if isinstance(branch, exp.SetOperation) and any(n.args.get("by_name") for n in branch.find_all(
                    exp.SetOperation)):  # its width is its names' (the planner checks the planned widths)
                break
            if not selects or any(isinstance(s, exp.Star) or s.find(exp.Star) for s in selects):
                break
            widths.append(len(selects))
        else:
            if widths[0] != widths[1]:
                raise _error(f"each branch of {set_operation_name(node)} must have the same number of columns: "
                             f"the left has {widths[0]}, the right {widths[1]}", node)
