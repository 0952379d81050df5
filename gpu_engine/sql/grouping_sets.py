"""Plan ``GROUP BY GROUPING SETS / ROLLUP / CUBE`` and ``grouping()``: a GroupId under one aggregation.

As Velox and Presto plan them: the grouping sets are expanded to lists of key
expressions (``ROLLUP (a, b)`` is ``(a, b), (a), ()``; ``CUBE`` every subset;
several items of a GROUP BY combine as a cross product, ``GROUP BY a,
ROLLUP (b)`` being ``(a, b), (a)``; Spark's ``GROUP BY a, b WITH ROLLUP`` is
``ROLLUP (a, b)``); a :class:`~gpu_engine.plans.nodes.GroupIdNode`
repeats the rows once per set with the keys outside it NULL and the set's id
in a column of its own; one ordinary aggregation groups by the keys and that
id, so a key's own NULLs and the NULLs of a set that leaves it out stay
distinct groups, and the aggregation splits into PARTIAL and FINAL steps
across drivers as any other. When every aggregate is decomposable (sum, count,
min, max, avg, none DISTINCT) the rows are aggregated by all the keys first and
GroupId repeats those groups' intermediate states, merged by a FINAL step: the
sets then repeat the groups, not the input rows (TPC-DS q22: a ROLLUP of four
item strings over 2.3M inventory rows aggregated 11.7M repeated rows); the local planner runs that GroupId and
the INTERMEDIATE step above it as one operator merging each set from its nearest finer set
(:mod:`gpu_engine.operators.group_id_aggregation`). Each ``grouping(k1, …, kn)`` (and Spark's
``grouping_id``) is a column computed from the group id after the
aggregation: bit ``n - 1 - i`` is set when ``ki`` is not grouped in the row's
set (DuckDB's definition: the leftmost argument is the most significant
bit); HAVING, the SELECT list and ORDER BY then read it like a key.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.planning_context import TreeKey
from gpu_engine.sql.renaming import aliased

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.sql.planner import QueryPlanner, Relation

__all__ = ["uses_grouping_sets", "plan_grouping_sets", "GROUPING_CALLS", "MAX_GROUPING_SETS"]

#: At most this many grouping sets a GROUP BY may expand to (CUBE of 12 keys); every set repeats the input rows.
MAX_GROUPING_SETS = 4096

_SET_ITEMS = (exp.Rollup, exp.Cube, exp.GroupingSets)
GROUPING_CALLS = (exp.Grouping, exp.GroupingId)


def _error(message: str, node: exp.Expression | None) -> SqlError:
    line, col = position_of(node)
    return SqlError(message, line=line, col=col, name=node.sql(dialect="duckdb")[:80] if node is not None else None)


def _grouping_calls(tree: exp.Expression) -> list[exp.Expression]:
    """Return the ``grouping()`` calls of ``tree`` itself, not those of subqueries nested in it (theirs)."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, GROUPING_CALLS):
            out.append(node)
        elif not (isinstance(node, (exp.Subquery, exp.Exists)) or (isinstance(node, exp.Select) and node is not tree)):
            stack.extend(reversed(list(node.iter_expressions())))
    return out


def _trailing_form(select: exp.Select) -> type | None:
    """Return Rollup or Cube for Spark's (and MySQL's) ``GROUP BY a, b WITH ROLLUP | WITH CUBE``, else None.

    sqlglot keeps that form beside the GROUP BY list (an argument-less item under ``rollup`` / ``cube``), where
    a planner reading the list alone would group by ``a, b`` only; ClickHouse's ``WITH TOTALS`` is refused.
    """
    clause = select.args.get("group")
    if clause is None:
        return None
    if clause.args.get("totals"):
        raise _error("GROUP BY ... WITH TOTALS; write GROUP BY ROLLUP (...) or GROUPING SETS (..., ())", clause)
    for kind, form in (("rollup", exp.Rollup), ("cube", exp.Cube)):
        items = clause.args.get(kind) or []
        if any(isinstance(item, form) and not item.expressions for item in items):
            return form
        if items:  # a ROLLUP (...) item sqlglot put beside the list: plan it as part of the list
            raise _error(f"GROUP BY {kind.upper()} written where it is not read; put it in the GROUP BY list", clause)
    return None


def _group_items(select: exp.Select, group: list[exp.Expression]) -> list[exp.Expression]:
    """Return the GROUP BY items, ``a, b WITH ROLLUP`` read as ``ROLLUP (a, b)`` (``WITH CUBE`` as ``CUBE``)."""
    form = _trailing_form(select)
    return [form(expressions=[item.copy() for item in group])] if form is not None else group


def uses_grouping_sets(group: list[exp.Expression], trees: list[exp.Expression], select: exp.Select) -> bool:
    """Return True when the GROUP BY has ROLLUP, CUBE or GROUPING SETS, or a clause calls ``grouping()``."""
    return (any(isinstance(item, _SET_ITEMS) for item in group) or _trailing_form(select) is not None
            or any(_grouping_calls(tree) for tree in trees))


def _elements(item: exp.Expression) -> list[exp.Expression]:
    """Return the keys one element of ROLLUP/CUBE/GROUPING SETS names: ``(a, b)`` two, ``a`` one, ``()`` none."""
    if isinstance(item, exp.Tuple):  # ((x > 0), k): the key x > 0, as a lone (x > 0) is (it was refused as x)
        return [element.unnest() for element in item.expressions]
    if isinstance(item, exp.Paren):
        return _elements(item.this)
    return [item]


def _expand(item: exp.Expression) -> list[list[exp.Expression]]:
    """Return the grouping sets one GROUP BY item stands for, each a list of key expressions."""
    if isinstance(item, exp.Rollup):
        parts = [_elements(e) for e in item.expressions]
        return [[key for part in parts[:n] for key in part] for n in range(len(parts), -1, -1)]
    if isinstance(item, exp.Cube):
        parts = [_elements(e) for e in item.expressions]
        if len(parts) > 12:
            raise _error(f"CUBE of {len(parts)} items makes {2 ** len(parts)} grouping sets; at most "
                         f"{MAX_GROUPING_SETS} are supported", item)
        return [[key for keep, part in zip(mask, parts) if keep for key in part]
                for mask in itertools.product((True, False), repeat=len(parts))]
    if isinstance(item, exp.GroupingSets):
        sets = []
        for element in item.expressions:
            if isinstance(element, (exp.Rollup, exp.Cube)):
                sets.extend(_expand(element))
            elif isinstance(element, exp.GroupingSets):
                raise _error("GROUPING SETS nested in GROUPING SETS; list the sets in one GROUPING SETS", element)
            else:
                sets.append(_elements(element))
        return sets
    return [[item]]


def _positional(key: exp.Expression, projections: list[exp.Expression]) -> exp.Expression:
    """Return the SELECT-list expression an integer key of a grouping set names by position (``ROLLUP (a, 2)``
    groups by the second output, as DuckDB reads it), else ``key``.

    Why here: the qualifier resolves positions in a plain GROUP BY list only, not inside ROLLUP / CUBE /
    GROUPING SETS, where the planner refused ``1`` as "a constant".
    """
    if not (isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit()):
        return key
    position = int(key.this)
    if not 1 <= position <= len(projections):
        raise _error(f"GROUP BY position {position} is out of range: the SELECT list has {len(projections)} "
                     f"column{'s' if len(projections) != 1 else ''} (1 to {len(projections)})", key)
    named = projections[position - 1]
    return (named.this if isinstance(named, exp.Alias) else named).copy()


def _grouping_sets(group: list[exp.Expression], projections: list[exp.Expression]) -> list[list[exp.Expression]]:
    """Return the cross product of the GROUP BY items' sets, in DuckDB's order (a key listed twice in a set once);
    an integer key is the SELECT list's expression at that position (:func:`_positional`)."""
    sets: list[list[exp.Expression]] = [[]]
    for item in group:
        sets = [left + right for left in sets for right in _expand(item)]
        if len(sets) > MAX_GROUPING_SETS:
            raise _error(f"the GROUP BY expands to more than {MAX_GROUPING_SETS} grouping sets", item)
    written = {TreeKey(key) for keys in sets for key in keys if _positional(key, projections) is key}
    unique = []
    for keys in sets:
        texts = {}
        for key in keys:
            resolved = _positional(key, projections)
            if resolved is not key and TreeKey(resolved) in written:
                # DuckDB keeps the two as distinct keys and reads the SELECT list's column from the positional
                # one (NULL in the sets holding only the written one): refused rather than answered otherwise.
                raise _error(f"GROUP BY position {key.this} repeats the key {resolved.sql(dialect='duckdb')} "
                             "written in the same GROUP BY; name the key once (by name or by position)", key)
            key = resolved
            if isinstance(key, (exp.Literal, exp.Null, exp.Boolean)):
                raise _error("GROUP BY a constant in a grouping set (group by a column or an expression)", key)
            if isinstance(key, (*_SET_ITEMS, exp.Tuple)):
                raise _error(f"{key.key.upper()} inside a grouping set element; write the sets out", key)
            texts.setdefault(TreeKey(key), key)
        unique.append(list(texts.values()))
    return unique


def plan_grouping_sets(planner: "QueryPlanner", relation: "Relation", group: list[exp.Expression],
                       aggregates: list[exp.Expression], trees: list[exp.Expression], select: exp.Select, ctes=None):
    """Plan the GroupId, the aggregation and the ``grouping()`` columns; return what ``plan_aggregation`` returns.

    That is the aggregated relation, the replacements (a key, an aggregate or a
    ``grouping()`` call, by :class:`~gpu_engine.sql.planning_context.TreeKey` -> its column) and the columns of the
    keys by ``(table alias, column)``, so HAVING, SELECT and ORDER BY are
    planned as for a plain GROUP BY.
    """
    from gpu_engine.plans.nodes import PlanNode
    from gpu_engine.sql.aggregate_planning import aggregates_of, typed_scalar_subqueries
    from gpu_engine.sql.planning_context import Relation, quoted
    from gpu_engine.sql.predicates import defined_aliases

    sets = _grouping_sets(_group_items(select, group), select.expressions)
    keys: dict[TreeKey, exp.Expression] = {}
    for kept in sets:
        for key in kept:
            keys.setdefault(TreeKey(key), key)
    replacements: dict[TreeKey, str] = {}
    key_columns: dict[tuple[str, str], str] = {}
    pairs, pre = [], []  # (key output name, input column); projections of expression keys
    for identity, key in keys.items():
        if isinstance(key, exp.Column):
            source = relation.columns.get((key.table, key.name))
            if source is None:
                line, col = position_of(key)
                raise SqlError(f"column {key.sql()} is not available", line=line, col=col)
            name = _fresh_beside(planner, relation.node, key.name, key.table)
            key_columns[(key.table, key.name)] = name
        else:
            if aggregates_of(key):  # its own, not a subquery's (``ROLLUP (1)`` over ``(SELECT count(*) ...)``)
                raise _error("an aggregate in GROUP BY", key)
            source = planner._fresh(f"$key{len(pairs)}")
            if key.find(exp.Subquery) is not None:  # computed per input row, typed, as a plain GROUP BY key's
                typed = typed_scalar_subqueries(planner, key, relation, relation.columns, {}, ctes or {},
                                                defined_aliases(select))
                pre.append(aliased(typed, source) if isinstance(typed, exp.Expression) else (source, typed))
            else:
                pre.append(aliased(planner._renamed(key, relation.columns), source))
            name = _fresh_beside(planner, relation.node, f"$grouped{len(pairs)}")
        replacements[identity] = name
        pairs.append((name, source))
    calls = []
    for aggregate in aggregates:
        identity = TreeKey(aggregate)
        if identity in replacements:
            continue
        name = planner._fresh(f"${aggregate.key}{len(calls)}")
        calls.append(aliased(planner._renamed(aggregate, relation.columns), name))
        replacements[identity] = name
    group_id = _fresh_beside(planner, relation.node, "$group_id")
    position = {identity: i for i, identity in enumerate(keys)}
    set_names = [[pairs[position[TreeKey(key)]][0] for key in kept] for kept in sets]
    node: PlanNode = relation.node
    try:
        builder = planner._builder(node)
        columns = list(node.output_schema.names)
        if pre:
            builder = builder.project([quoted(n) for n in columns] + pre)
        read = {relation.columns.get((c.table, c.name)) for a in aggregates for c in a.find_all(exp.Column)}
        inputs = [name for name in columns if name in read]  # what the aggregates read passes through
        if _decomposable(aggregates):
            builder = _pre_aggregated(planner, builder, pairs, calls, set_names, group_id)
        else:
            builder = builder.group_id(set_names, inputs, group_id, grouping_keys=pairs)
            builder = builder.aggregation([name for name, _ in pairs] + [group_id], calls)
        masks = _grouping_columns(planner, trees, keys, sets, replacements, group_id)
        if masks:
            passed = [quoted(n) for n in builder.plan().output_schema.names]
            builder = builder.project(passed + masks)
        node = builder.plan()
    except PlanError as error:
        raise planner._plan_error(error, aggregates[0] if aggregates else select) from None
    rows = max(1.0, relation.rows / 10) * len(sets)
    return Relation(node, dict(key_columns), relation.aliases, rows, {}), replacements, dict(key_columns)


#: Aggregates whose PARTIAL states merge exactly in a FINAL step over GroupId's repeated groups.
_DECOMPOSABLE = (exp.Sum, exp.Count, exp.Min, exp.Max, exp.Avg)


def _decomposable(aggregates: list[exp.Expression]) -> bool:
    """Return True when every aggregate is a sum, count, min, max or avg without DISTINCT."""
    return bool(aggregates) and all(
        isinstance(a, _DECOMPOSABLE) and a.find(exp.Distinct) is None and not a.args.get("distinct")
        for a in aggregates)


def _pre_aggregated(planner: "QueryPlanner", builder, pairs, calls, set_names, group_id: str):
    """Return ``builder`` with the PARTIAL aggregation by every key, GroupId over its groups and the FINAL merge."""
    from gpu_engine.plans.aggregates import aggregation_output_schema, final_step_aggregates
    from gpu_engine.plans.nodes import AggregationNode, AggregationStep

    sources = list(dict.fromkeys(source for _, source in pairs))
    builder = builder.partial_aggregation(sources, calls)
    partial = builder.plan()
    states = [name for name in partial.output_schema.names if name not in sources]
    builder = builder.group_id(set_names, states, group_id, grouping_keys=pairs)
    expanded = builder.plan()
    keys = tuple(name for name, _ in pairs) + (group_id,)
    merged = final_step_aggregates(partial.aggregates, partial.aggregate_names)
    schema = aggregation_output_schema(AggregationStep.FINAL, [expanded.output_schema.field(k) for k in keys],
                                       partial.aggregate_names, merged)
    global_sets = expanded.global_grouping_sets
    # An INTERMEDIATE step per driver gives the sets without keys their row over an empty input (as a raw step
    # does: hash_aggregation's _add_global_groups); the FINAL step merges across drivers.
    middle = AggregationNode(id=planner.ids.next_id(), output_schema=aggregation_output_schema(
                                 AggregationStep.INTERMEDIATE, [expanded.output_schema.field(k) for k in keys],
                                 partial.aggregate_names, merged),
                             sources=(expanded,), step=AggregationStep.INTERMEDIATE, grouping_keys=keys,
                             aggregate_names=partial.aggregate_names, aggregates=merged,
                             global_grouping_sets=global_sets, group_id_key=group_id if global_sets else None)
    final = AggregationNode(id=planner.ids.next_id(), output_schema=schema, sources=(middle,),
                            step=AggregationStep.FINAL, grouping_keys=keys, aggregate_names=partial.aggregate_names,
                            aggregates=merged)
    return planner._builder(final)


def _fresh_beside(planner: "QueryPlanner", node, name: str, alias: str | None = None) -> str:
    """Return a fresh internal name that no column of ``node`` has (a key's copy must not shadow its input)."""
    fresh = planner._fresh(name, alias)
    while fresh in node.output_schema.names:
        fresh = planner._fresh(fresh)
    return fresh


def _bigint(value: int) -> exp.Cast:
    """Return ``CAST(value AS BIGINT)`` as a tree."""
    return exp.Cast(this=exp.Literal.number(value), to=exp.DataType.build("BIGINT"))


def _grouping_columns(planner: "QueryPlanner", trees: list[exp.Expression], keys: dict[TreeKey, exp.Expression],
                      sets: list[list[exp.Expression]], replacements: dict[TreeKey, str], group_id: str
                      ) -> list[exp.Expression]:
    """Return a projection per distinct ``grouping()`` call, its bit mask chosen by the group id."""
    projections = []
    set_keys = [{TreeKey(key) for key in kept} for kept in sets]
    for tree in trees:
        for call in _grouping_calls(tree):
            identity = TreeKey(call)
            if identity in replacements:
                continue
            arguments = list(call.expressions) or ([call.this] if call.this is not None else [])
            if not arguments and isinstance(call, exp.GroupingId):  # Spark's grouping_id(): every key, in order
                arguments = list(keys.values())
            if not arguments:
                raise _error("grouping() needs at least one argument", call)
            for argument in arguments:
                if TreeKey(argument) not in keys:
                    raise _error(f"the argument {argument.sql(dialect='duckdb')} of grouping() must be a grouping "
                                 "column (a key of the GROUP BY)", argument)
            width = len(arguments)
            masks = [sum(1 << (width - 1 - i) for i, argument in enumerate(arguments)
                         if TreeKey(argument) not in kept) for kept in set_keys]
            name = planner._fresh(f"$grouping{len(projections)}")
            if len(set(masks)) == 1:
                value = _bigint(masks[0])
            else:  # a tree, as the planner's other snippets (no text written out and parsed again)
                group = exp.column(exp.to_identifier(group_id, quoted=True))
                value = exp.Case(ifs=[exp.If(this=exp.EQ(this=group.copy(), expression=exp.Literal.number(i)),
                                             true=_bigint(mask)) for i, mask in enumerate(masks)])
            projections.append(aliased(value, name))
            replacements[identity] = name
    return projections
