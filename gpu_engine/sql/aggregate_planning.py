"""Plan a SELECT's aggregation: GROUP BY and its aggregate calls, HAVING, and scalar subqueries outside WHERE.

Why a module of its own: aggregation is where the SELECT's later clauses
change what they can read — after it, SELECT, HAVING and ORDER BY see only
grouping keys and aggregate results, which they find by their trees'
structural identity (the replacements, keyed by
:class:`~gpu_engine.sql.planning_context.TreeKey`). One single-step aggregation is planned (the executor
splits it into partial and final steps across drivers); grouping sets go
through :mod:`~gpu_engine.sql.grouping_sets`. A scalar subquery in the
SELECT list or ORDER BY is a typed
:class:`~gpu_engine.plans.subqueries.ScalarSubquery` of the final Project
(:func:`typed_scalar_subqueries`): uncorrelated, its one-row plan
(:func:`~gpu_engine.sql.decorrelation.scalar_relation`); one correlated by
column equalities (any shape: an aggregate, rows, GROUP BY, a window as its value;
:mod:`~gpu_engine.sql.correlated_scalar_rows`), its rows per correlation key, correlated on
outer columns (an aggregating query's grouping keys, read after the
aggregation). The same forms in HAVING or QUALIFY are ScalarSubqueries of the
Filter above the aggregation, where a top-level ``[NOT] EXISTS`` / ``x [NOT]
IN (SELECT …)`` conjunct is a typed Exists / InSubquery (:func:`post_filter`);
inside an aggregate's arguments they are computed per input row by a Project
below the aggregation (:func:`with_subquery_arguments`). The optimizer's
decorrelation rule joins them all, as in WHERE.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES, allowed_argument, takes_order, unsupported_aggregate_text
from gpu_engine.sql.decorrelation import scalar_relation, subquery_select
from gpu_engine.sql.errors import SqlError, position_of, unsupported
from gpu_engine.sql.filtered_distinct import (
    plan_filtered_distinct, plan_global_distinct, with_filtered_distinct_merged,
)
from gpu_engine.sql.grouping_sets import GROUPING_CALLS, plan_grouping_sets, uses_grouping_sets
from gpu_engine.sql.planning_context import Relation, TreeKey, quoted, tree_hashes
from gpu_engine.sql.predicates import defined_aliases, free_columns, has_subquery
from gpu_engine.sql.renaming import aliased
from gpu_engine.sql.tuple_counts import with_tuple_counts
from gpu_engine.sql.windows import is_window_function

if TYPE_CHECKING:
    from gpu_engine.sql.planner import QueryPlanner

__all__ = ["aggregates_of", "aggregate_calls", "plan_group_by", "plan_aggregation", "typed_scalar_subqueries",
           "post_filter"]


def aggregates_of(tree: exp.Expression) -> list[exp.Expression]:
    """Return the aggregate calls of ``tree`` itself, not those of subqueries nested in it."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, SQL_AGGREGATES):
            out.append(node)
            continue
        if isinstance(node, (exp.Subquery, exp.Exists)) or (isinstance(node, exp.Select) and node is not tree):
            continue
        stack.extend(node.iter_expressions())
    return out


def _check_aggregate_arguments(aggregate: exp.Expression) -> None:
    """Refuse an aggregate call with an argument or clause the engine would otherwise drop.

    ``max(v, 2)`` (DuckDB: the two largest values, as a list) parses as ``max``
    with a ``count``; ``count(a, b)`` has more ``expressions``; ``sum(a ORDER BY b)``
    wraps its argument in an ORDER BY.
    """
    name = aggregate.sql_name().lower()
    if isinstance(aggregate.this, exp.Order) and not takes_order(aggregate):
        raise unsupported(f"ORDER BY inside {name}(...)", aggregate)
    for key, value in aggregate.args.items():
        if key == "big_int" or not value or allowed_argument(aggregate, key):
            continue
        if key == "count" and isinstance(aggregate, (exp.Min, exp.Max)):
            raise unsupported(f"{name}(x, n) (the n {'largest' if name == 'max' else 'smallest'} values); "
                              f"{name} takes one argument", aggregate)
        raise unsupported(f"{name}(...) with more than one argument", aggregate)


def aggregate_calls(trees: list[exp.Expression]) -> list[exp.Expression]:
    """Return the aggregate calls of ``trees`` (not those of their subqueries), refusing those the engine lacks.

    A function sqlglot parses as an aggregate the engine does not compute, an
    aggregate inside an aggregate, or an argument the engine would drop
    (:func:`_check_aggregate_arguments`) is refused by name.
    """
    for t in trees:
        for node in t.find_all(exp.AggFunc):
            if not isinstance(node, (*SQL_AGGREGATES, *GROUPING_CALLS)) and not is_window_function(node):
                raise unsupported(unsupported_aggregate_text(node), node)
    aggregates = [a for t in trees for a in aggregates_of(t)]
    for a in aggregates:
        if any(aggregates_of(argument) for argument in a.iter_expressions()):  # (a subquery's own are its own)
            raise unsupported("an aggregate inside an aggregate", a)
        _check_aggregate_arguments(a)
    return aggregates


def plan_group_by(planner: QueryPlanner, relation: Relation, select: exp.Select, group: list[exp.Expression],
                  aggregates: list[exp.Expression], trees: list[exp.Expression], having: exp.Expression | None, ctes):
    """Plan GROUP BY (grouping sets too), the aggregates and HAVING over ``relation`` (the joined FROM items).

    Return the relation, the replacements (a key or an aggregate call, by its
    :class:`~gpu_engine.sql.planning_context.TreeKey` -> its column) and the columns of the keys by ``(table alias, column)``,
    through which the later clauses (windows, QUALIFY, SELECT, ORDER BY)
    read the aggregated rows. Without GROUP BY or aggregates the relation
    comes back as it is.
    """
    replacements: dict[TreeKey, str] = {}
    columns = relation.columns
    if having is not None and not group and not aggregates:  # HAVING makes the query one group (DuckDB)
        column = next((c for t in trees for c in free_columns(t)), None)
        if column is not None:
            line, col = position_of(column)
            raise SqlError(f"column {column.name!r} must appear in the GROUP BY clause or be used in an aggregate "
                           "function (HAVING makes the query one group)", line=line, col=col, name=column.name)
        raise unsupported("HAVING without GROUP BY or an aggregate", select.args["having"])
    relation, aggregates, tuple_counts = with_tuple_counts(planner, relation, aggregates)  # count(DISTINCT (a, b))
    relation, aggregates, arguments = with_subquery_arguments(planner, relation, aggregates, ctes,
                                                              defined_aliases(select))  # sum(CASE WHEN (SELECT …))
    tuple_counts = {**{key: original for key, original in tuple_counts.items() if key not in arguments.values()},
                    **{key: tuple_counts.get(middle, middle) for key, middle in arguments.items()}}
    if uses_grouping_sets(group, trees, select):
        relation, replacements, columns = plan_grouping_sets(planner, relation, group, aggregates, trees, select, ctes)
    elif group or aggregates:
        relation, replacements, columns = plan_aggregation(planner, relation, group, aggregates, select, ctes)
    for key, original in tuple_counts.items():
        replacements[original] = replacements[key]
    if having is not None:
        relation = post_filter(planner, relation, having, columns, replacements, ctes, defined_aliases(select))
    return relation, replacements, columns


def with_subquery_arguments(planner: QueryPlanner, relation: Relation, aggregates: list[exp.Expression], ctes,
                            outer_aliases: set[str]) -> tuple[Relation, list[exp.Expression], dict[TreeKey, TreeKey]]:
    """Return ``relation`` with each scalar subquery inside an aggregate's arguments computed per input row (a
    Project holding a typed :class:`~gpu_engine.plans.subqueries.ScalarSubquery`, which the optimizer's
    decorrelation rule joins below the aggregation: a nested-loop join with an uncorrelated one's single row, a
    left hash join on a correlated aggregate's keys), the aggregates reading those columns, and each rewritten
    aggregate's key -> its original's key (the original is what the SELECT list, HAVING and ORDER BY spell).

    Why: ``sum(CASE WHEN v > (SELECT avg(w) FROM u) THEN 1 ELSE 0 END)`` reads the subquery's value for every row
    it sums (DuckDB's meaning); it was refused ("an aggregate inside an aggregate"), its correlated form a
    LEFT-joined derived table of the sqlglot tree.
    """
    if not any(aggregate.find(exp.Subquery) is not None for aggregate in aggregates):
        return relation, aggregates, {}
    columns = dict(relation.columns)
    projected: list[tuple[str, object]] = []
    rewritten: dict[TreeKey, exp.Expression] = {}  # an aggregate -> it reading the projected columns
    out, originals = [], {}
    for aggregate in aggregates:
        if aggregate.find(exp.Subquery) is None:
            out.append(aggregate)
            continue
        key = TreeKey(aggregate)
        if key not in rewritten:
            new = aggregate.copy()
            for subquery in _outermost_scalar_subqueries(new):
                name = planner._fresh("$argument")
                projected.append((name, typed_scalar_subqueries(planner, subquery.copy(), relation, relation.columns,
                                                                {}, ctes, outer_aliases)))
                columns[("$argument", name)] = name
                subquery.replace(exp.column(name, table="$argument"))
            rewritten[key] = new
            originals[TreeKey(new)] = key
        out.append(rewritten[key])
    passthrough = [quoted(n) for n in relation.node.output_schema.names]
    try:
        node = planner._builder(relation.node).project(passthrough + projected).plan()
    except PlanError as error:
        raise planner._plan_error(error, aggregates[0]) from None
    return dataclasses.replace(relation, node=node, columns=columns), out, originals


def plan_aggregation(planner: QueryPlanner, relation: Relation, group: list[exp.Expression],
                     aggregates: list[exp.Expression], select: exp.Select, ctes=None):
    """Plan GROUP BY and the aggregates; return the relation and how later clauses find keys and results.

    A key holding a scalar subquery (uncorrelated, or correlated by column equalities) is computed per input row by
    the Project ahead of the aggregation, typed (:func:`typed_scalar_subqueries`); the later clauses find it by its
    tree (:class:`~gpu_engine.sql.planning_context.TreeKey`), as any key.
    """
    replacements: dict[TreeKey, str] = {}
    key_names: list[str] = []
    key_columns: dict[tuple[str, str], str] = {}
    pre = []  # projections ahead of the aggregation, when a key is an expression
    for key in group:
        # a constant key (`GROUP BY 'x'`, a bound parameter, a positional reference to a constant) is a projected
        # column like any expression key: one group over rows, none over no rows (DuckDB's answers)
        identity = TreeKey(key)
        if identity in replacements:
            continue
        if isinstance(key, exp.Column):
            name = relation.columns.get((key.table, key.name))
            if name is None:
                line, col = position_of(key)
                raise SqlError(f"column {key.sql()} is not available", line=line, col=col)
            key_columns[(key.table, key.name)] = name
        elif key.find(exp.Subquery) is not None:
            name = planner._fresh(f"$key{len(key_names)}")
            typed = typed_scalar_subqueries(planner, key, relation, relation.columns, {}, ctes or {},
                                            defined_aliases(select))
            pre.append(aliased(typed, name) if isinstance(typed, exp.Expression) else (name, typed))
        else:
            name = planner._fresh(f"$key{len(key_names)}")
            pre.append(aliased(planner._renamed(key, relation.columns), name))
        replacements[identity] = name
        key_names.append(name)
    calls, names = [], []
    kinds: dict[TreeKey | None, list[str]] = {}  # DISTINCT argument (None: not DISTINCT) -> its calls
    for aggregate in aggregates:
        identity = TreeKey(aggregate)
        if identity in replacements:
            continue
        name = planner._fresh(f"${aggregate.key}{len(names)}")
        call = aliased(planner._renamed(aggregate, relation.columns), name)
        calls.append(call)
        names.append(name)
        replacements[identity] = name
        argument = aggregate.this
        if isinstance(argument, exp.Order):  # string_agg(DISTINCT x, s ORDER BY x): DISTINCT under the ORDER BY
            argument = argument.this
        kinds.setdefault(TreeKey(argument) if isinstance(argument, exp.Distinct) else None, []).append(call)
    if not key_names and len(kinds) > 1 and any(kind is not None for kind in kinds):
        return _split_global_aggregation(planner, relation, list(kinds.values()), replacements, select)
    node = relation.node
    try:
        builder = planner._builder(node)
        if pre:
            passthrough = [quoted(n) for n in node.output_schema.names]
            builder = builder.project(passthrough + pre)
        node = builder.aggregation([quoted(k) for k in key_names], calls).plan()
    except PlanError as error:
        raise planner._plan_error(error, aggregates[0] if aggregates else group[0]) from None
    if key_names:
        ndv = 1.0
        for k in key_names:
            known = relation.stats[k].ndv if k in relation.stats else 0
            ndv *= known or max(1.0, relation.rows / 10)
        rows = max(1.0, min(relation.rows, ndv))
    else:
        rows = 1.0
    stats = {k: relation.stats[k].capped(rows) for k in key_names if k in relation.stats}
    aggregated = Relation(node, dict(key_columns), relation.aliases, rows, stats)
    return aggregated, replacements, dict(key_columns)


def _clone(planner: QueryPlanner, node: PlanNode) -> PlanNode:
    """Return a copy of a plan subtree with fresh node ids (a second evaluation of the same input)."""
    sources = tuple(_clone(planner, source) for source in node.sources)
    return dataclasses.replace(node, id=planner.ids.next_id(), sources=sources)


def _split_global_aggregation(planner: QueryPlanner, relation: Relation, call_groups: list[list], replacements, select):
    """Compute ``count(DISTINCT a), sum(b)`` without GROUP BY as one aggregation per DISTINCT argument.

    Why: the aggregation operator runs DISTINCT as a group-by on the
    argument first, which serves one argument at a time; each group of
    calls aggregates its own evaluation of the input (planned again, as a
    CTE referenced twice is) and the one-row results are cross joined.
    """
    node = None
    try:
        node = plan_global_distinct(planner, relation.node, [call for calls in call_groups for call in calls])
        if node is not None:  # one DISTINCT value: the plain aggregates combined from per-value ones, one pass
            return Relation(node, {}, relation.aliases, 1.0, {}), replacements, {}
        for number, (calls, one_value) in enumerate(with_filtered_distinct_merged(call_groups)):
            source = relation.node if number == 0 else _clone(planner, relation.node)
            if one_value:  # DISTINCT aggregates of one value under different FILTERs: one pass
                part = plan_filtered_distinct(planner, source, calls)
            else:
                part = planner._builder(source).aggregation([], calls).plan()
            if node is None:
                node = part
            else:
                columns = list(node.output_schema.names) + list(part.output_schema.names)
                node = planner._builder(node).nested_loop_join(part, columns).plan()
    except PlanError as error:
        raise planner._plan_error(error, select) from None
    return Relation(node, {}, relation.aliases, 1.0, {}), replacements, {}


def typed_scalar_subqueries(planner: QueryPlanner, tree: exp.Expression, relation: Relation, columns, replacements,
                            ctes, outer_aliases: set[str], label: str = "Project"):
    """Return a SELECT-list expression renamed over ``relation`` (SQL text), or, when it holds scalar subqueries,
    typed with each a :class:`~gpu_engine.plans.subqueries.ScalarSubquery` the Project holds (the optimizer rule
    :func:`~gpu_engine.optimizer.decorrelation.decorrelate_subqueries` joins it in): an uncorrelated one its
    planned one-row plan, one aggregate correlated by column equalities its rows per correlation key (grouped by
    them), correlated on the outer columns — an aggregating query's grouping keys, read after its aggregation.
    """
    if not has_subquery(tree):
        return planner._renamed(tree, columns, replacements)
    from gpu_engine.plans.expressions import ColumnRef
    from gpu_engine.plans.sql_translator import parse_expression
    from gpu_engine.plans.subqueries import OuterColumn, ScalarSubquery, transformed
    from gpu_engine.sql.correlated_scalar_rows import bind_correlated_scalar
    from gpu_engine.sql.decorrelation import split_correlated
    from gpu_engine.sql.renaming import conjunction

    written, tree = tree, tree.copy()
    # an aggregate computed with a subquery in its argument, a GROUP BY key holding one: its column
    for computed in _computed_with_subqueries(tree, replacements):
        name = replacements[TreeKey(computed)]
        columns = {**columns, ("$aggregated", name): name}
        if computed is tree:
            return planner._renamed(exp.column(name, table="$aggregated"), columns, replacements)
        computed.replace(exp.column(name, table="$aggregated"))
    if not has_subquery(tree):
        return planner._renamed(tree, columns, replacements)
    marks, fields = {}, []
    for n, mark in enumerate(_value_marks(tree)):  # EXISTS / IN as values: typed predicates (mark joins' flags)
        if replacements and not isinstance(mark, exp.Exists):
            for call in aggregates_of(mark.this):  # sum(a) > ALL (...) in HAVING: the aggregate's column
                name = replacements.get(TreeKey(call))
                if name is not None:
                    columns = {**columns, ("$aggregated", name): name}
                    if call is mark.this:
                        mark.set("this", exp.column(name, table="$aggregated"))
                    else:
                        call.replace(exp.column(name, table="$aggregated"))
        name = planner._fresh(f"$mark{n}")
        marks[name] = _typed_value_mark(planner, mark, dataclasses.replace(relation, columns=dict(columns)),
                                        outer_aliases, ctes)
        fields.append(pa.field(name, pa.bool_()))
        columns = {**columns, ("$mark", name): name}
        if mark is tree:
            tree = exp.column(name, table="$mark")
        else:
            mark.replace(exp.column(name, table="$mark"))
    if has_subquery(tree) and tree.find(exp.Subquery) is None:
        raise unsupported("EXISTS or IN (SELECT ...) outside WHERE", tree)
    scalars: dict[str, tuple[PlanNode, list[exp.Expression]]] = {}  # value column -> its plan, its equalities
    for subquery in _outermost_scalar_subqueries(tree):
        select = subquery_select(subquery.this)
        correlated = []
        if isinstance(select, exp.Select) and _outer_of(select):
            _inner, _local, correlated = split_correlated(select, outer_aliases)
            if not correlated:
                raise unsupported("a correlated reference inside a derived table or a nested subquery", subquery)
        if correlated:  # its rows per correlation key
            scalar, column, equalities = bind_correlated_scalar(planner, subquery, select, outer_aliases, ctes)
        else:
            (scalar, column), equalities = scalar_relation(planner, subquery, ctes), []
        name = scalar.columns[(column.table, column.name)]
        scalars[name] = (scalar.node, equalities, subquery)
        fields.extend(f for f in scalar.node.output_schema if f.name not in {g.name for g in fields})
        columns = {**columns, **scalar.columns}
        if subquery is tree:
            tree = column
            break
        subquery.replace(column)
    outer_schema = relation.node.output_schema
    outer_names = set(outer_schema.names)
    schema = pa.schema(list(outer_schema) + [f for f in fields if f.name not in outer_names])
    try:
        typed = parse_expression(planner._renamed(tree, columns, replacements), schema, label)
    except PlanError as error:
        raise planner._plan_error(error, written) from None
    correlations = {}
    for name, (_node, equalities, subquery) in scalars.items():
        if equalities:
            keys = []
            for equality in equalities:  # outer column = alias.k<n>
                try:
                    keys.append(planner._renamed(equality, columns, replacements))
                except SqlError:
                    if not replacements:  # not an aggregating query: the column's own error
                        raise
                    raise unsupported(f"a correlated subquery reading {equality.this.sql()}, which is not a "
                                      "GROUP BY key", subquery) from None
            try:
                typed_keys = parse_expression(conjunction(keys), schema, label)
            except PlanError as error:
                raise planner._plan_error(error, subquery) from None
            correlations[name] = transformed(typed_keys, lambda node: OuterColumn(node.name, node.dtype)
                                             if isinstance(node, ColumnRef) and node.name in outer_names else None)
    return transformed(typed, lambda node: (ScalarSubquery(scalars[node.name][0], node.name, node.dtype,
                                                           correlations.get(node.name))
                                            if node.name in scalars else marks.get(node.name))
                       if isinstance(node, ColumnRef) else None)


def _computed_with_subqueries(tree: exp.Expression, replacements) -> list[exp.Expression]:
    """Return the outermost parts of ``tree`` holding a subquery that the aggregation computed already (a key of
    ``replacements``: an aggregate with a subquery in its argument, a GROUP BY key holding one)."""
    found, stack = [], [tree] if replacements else []
    hashes = tree_hashes(tree) if replacements else {}
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Select, exp.SetOperation)):
            continue
        if TreeKey(node, hashes) in replacements and node.find(exp.Subquery) is not None:
            found.append(node)
            continue
        if not isinstance(node, exp.Subquery):
            stack.extend(node.iter_expressions())
    return found


def _value_marks(tree: exp.Expression) -> list[exp.Expression]:
    """Return the EXISTS / ``x IN (SELECT …)`` / ``x op ANY|ALL (SELECT …)`` of ``tree``'s own scope (outside its
    scalar subqueries), which :func:`~gpu_engine.sql.subquery_values.typed_value_mark` left to the Project."""
    from gpu_engine.sql.decorrelation import quantified_parts

    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Exists) or isinstance(node, exp.In) and node.args.get("query") is not None or \
                quantified_parts(node) is not None:
            found.append(node)
        elif not isinstance(node, (exp.Subquery, exp.Select, exp.SetOperation)):
            stack.extend(node.iter_expressions())
    return found


def _typed_value_mark(planner: QueryPlanner, mark: exp.Expression, relation: Relation, outer_aliases, ctes):
    """Return an EXISTS / IN used as a value as a typed :class:`~gpu_engine.plans.subqueries.Exists` /
    ``InSubquery`` over ``relation``'s columns (the rule's mark join: every row kept, IN's flag NULL-aware).

    The WHERE path's typing (:func:`~gpu_engine.sql.decorrelation.semi_join_of`, ``_typed_predicate``) may
    project an outer key first (a cast to the common type, ``x + 1``); a value has no Filter to carry that
    projection, so each projected column is read as its expression (the rule projects a key that is not a column
    itself, :func:`~gpu_engine.optimizer.decorrelation.decorrelate_subqueries`).
    """
    from gpu_engine.plans.expressions import ColumnRef
    from gpu_engine.plans.nodes import ProjectNode
    from gpu_engine.plans.subqueries import InSubquery, OuterColumn, QuantifiedComparison, transformed
    from gpu_engine.sql.decorrelation import _typed_predicate, semi_join_of

    semi = semi_join_of(planner, mark, False, outer_aliases, ctes, mark)
    keyed, predicate = _typed_predicate(planner, relation, semi)
    if isinstance(mark, exp.In) and not isinstance(predicate, InSubquery):
        raise unsupported("x IN (SELECT ...) as a value whose sides have no common join type; cast one side", mark)
    node, computed = keyed.node, {}
    while node is not relation.node:  # the key projections _typed_predicate added, innermost last
        if not isinstance(node, ProjectNode):
            raise unsupported("EXISTS / IN as a value needing its outer keys computed", mark)
        computed.update({name: expr for name, expr in zip(node.names, node.expressions) if name not in computed})
        node = node.sources[0]
    outer = set(relation.node.output_schema.names)

    def inlined(expr):
        def step(ref):
            if isinstance(ref, (ColumnRef, OuterColumn)) and ref.name not in outer and ref.name in computed:
                value = inlined(computed[ref.name])
                return transformed(value, lambda c: OuterColumn(c.name, c.dtype) if isinstance(
                    c, ColumnRef) else None) if isinstance(ref, OuterColumn) else value
            return None
        return transformed(expr, step)

    if not computed:
        return predicate
    changes = {}
    if predicate.correlation is not None:
        changes["correlation"] = inlined(predicate.correlation)
    if isinstance(predicate, (InSubquery, QuantifiedComparison)):
        changes["value"] = inlined(predicate.value)
    return dataclasses.replace(predicate, **changes)


def _outer_of(select: exp.Expression) -> set[str]:
    """Return the aliases a subquery reads from outside itself."""
    return {c.table for c in free_columns(select)} - defined_aliases(select) - {""}  # "": an output name


def _outermost_scalar_subqueries(tree: exp.Expression):
    """Yield ``tree``'s scalar subqueries outermost first (breadth-first), one at a time, each found after the caller
    replaced the one before: a subquery nested inside one just planned (a derived table in its FROM) went with it
    and is not a scalar subquery of this tree."""
    while (subquery := tree.find(exp.Subquery, bfs=True)) is not None:
        yield subquery


def filter_subquery_predicate(conjunct: exp.Expression, outer_aliases: set[str]):
    """Return ``(tree, negated)`` where a HAVING / QUALIFY conjunct is a ``[NOT] EXISTS`` or ``x [NOT] IN
    (SELECT …)`` that :func:`post_filter` types (a typed subquery predicate of the Filter above the aggregation,
    joined by the optimizer's decorrelation rule): uncorrelated, or correlated with a column equality to join on;
    else None (an EXISTS correlated otherwise is a count per outer value, :mod:`~gpu_engine.sql.subquery_values`).
    """
    from gpu_engine.sql.decorrelation import (
        correlation, is_uncorrelated_exists, split_correlated, subquery_predicate_of)

    tree, negated = subquery_predicate_of(conjunct)
    if isinstance(tree, exp.In) and tree.args.get("query") is not None:
        return None if isinstance(tree.this, exp.Tuple) or has_subquery(tree.this) else (tree, negated)
    if not isinstance(tree, exp.Exists) or is_uncorrelated_exists(tree):
        return (tree, negated) if isinstance(tree, exp.Exists) else None
    select = subquery_select(tree.this)
    if not isinstance(select, exp.Select):
        return None
    try:
        inner, _local, correlated = split_correlated(select, outer_aliases)
    except SqlError:
        return None
    keys, _others = correlation(correlated, inner)
    return (tree, negated) if keys else None


def post_filter(planner: QueryPlanner, relation: Relation, having: exp.Expression, columns, replacements,
                ctes, outer_aliases: set[str]) -> Relation:
    """Filter aggregated (or windowed) rows by HAVING or QUALIFY; each scalar subquery in it is a typed
    :class:`~gpu_engine.plans.subqueries.ScalarSubquery` of the Filter (:func:`typed_scalar_subqueries`:
    uncorrelated, or one aggregate correlated by column equalities on grouping keys, read after the aggregation),
    and each conjunct ``[NOT] EXISTS`` / ``x [NOT] IN (SELECT …)`` (:func:`filter_subquery_predicate`) a typed
    :class:`~gpu_engine.plans.subqueries.Exists` / ``InSubquery`` of a Filter above the others (an uncorrelated
    EXISTS a count compared with 0), which the optimizer rule
    :func:`~gpu_engine.optimizer.decorrelation.decorrelate_subqueries` joins, as in WHERE: semi, anti and
    null-aware anti joins of the groups. ``outer_aliases``: the FROM items of the query, which a correlated
    subquery may read (its grouping keys)."""
    from gpu_engine.sql.decorrelation import counted_exists, is_uncorrelated_exists, semi_join_of, subquery_filter
    from gpu_engine.sql.predicates import conjoined, conjuncts_of

    plain, predicates = [], []
    for conjunct in conjuncts_of(having):
        found = filter_subquery_predicate(conjunct, outer_aliases)
        if found is not None and is_uncorrelated_exists(found[0]):
            plain.append(counted_exists(*found)[0])
        elif found is not None:
            predicates.append((conjunct, *found))
        else:
            plain.append(conjunct)
    written, relation = relation, dataclasses.replace(relation, columns=dict(columns))
    try:
        if plain:
            predicate = typed_scalar_subqueries(planner, conjoined(plain), relation, columns, replacements, ctes,
                                                outer_aliases, "Filter")
            relation = dataclasses.replace(relation, node=planner._builder(relation.node).filter(predicate).plan())
    except PlanError as error:
        raise planner._plan_error(error, having) from None
    for conjunct, tree, negated in predicates:
        if isinstance(tree, exp.In) and not isinstance(tree.this, exp.Column):  # sum(v) IN (...): projected first
            relation, value = _projected_value(planner, relation, tree.this, replacements)
            tree = tree.copy()
            tree.set("this", value)
        relation = subquery_filter(planner, relation, semi_join_of(planner, tree, negated, outer_aliases, ctes,
                                                                   conjunct))
    rows = max(1.0, written.rows / 10)  # HAVING usually keeps few groups (Q18: 57 of 1.5 million)
    return dataclasses.replace(written, node=relation.node, rows=rows)


def _projected_value(planner: QueryPlanner, relation: Relation, value: exp.Expression, replacements):
    """Return ``relation`` with ``value`` (over its keys and aggregates) computed beside its columns, and the
    column that reads it."""
    name = planner._fresh("$in_value")
    passthrough = [quoted(n) for n in relation.node.output_schema.names]
    try:
        node = planner._builder(relation.node).project(
            passthrough + [aliased(planner._renamed(value, relation.columns, replacements), name)]).plan()
    except PlanError as error:
        raise planner._plan_error(error, value) from None
    return (dataclasses.replace(relation, node=node, columns={**relation.columns, ("$in_value", name): name}),
            exp.column(name, table="$in_value"))
