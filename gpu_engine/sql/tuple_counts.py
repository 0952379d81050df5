"""Plan counts of rows, ``count(DISTINCT (a, b))`` and ``count((a, b))``, as counts of one column.

DuckDB reads ``(a, b)`` (and ``row(a, b)``) as a struct, which is never NULL even where its fields are:
``count(DISTINCT (a, b))`` counts the distinct tuples, ``(NULL, NULL)`` one of them, and ``count((a, b))``
counts rows. The engine has no struct columns, so before the aggregation each tuple a count reads is
replaced by one column that is equal exactly where the tuples are equal and never NULL:

* under DISTINCT, the tuple's ``dense_rank() OVER (ORDER BY a, b)``, one Window node over the rows the
  aggregation reads (NULLs are peers in an ORDER BY, as NULL fields are equal in a struct);
* without it, the constant 1 (only NULL-ness matters to count).

The count then runs on any aggregation path (GROUP BY, grouping sets, DISTINCT mixed with plain aggregates,
FILTER, which the rewrite pass made a CASE around the tuple). ``count(DISTINCT a, b)`` (two arguments) is
DuckDB's binder error, refused by name.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.planning_context import TreeKey, quoted
from gpu_engine.sql.renaming import aliased

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.sql.planner import QueryPlanner, Relation

__all__ = ["is_tuple", "with_tuple_counts"]


def is_tuple(node: exp.Expression) -> bool:
    """Return True for ``(a, b)`` and ``row(a, b)``: a struct value to DuckDB."""
    return isinstance(node, exp.Tuple) or (isinstance(node, exp.Anonymous) and node.name.lower() == "row")


def _tuples(aggregate: exp.Expression) -> list[exp.Expression]:
    return [node for node in aggregate.walk() if is_tuple(node)]


def _counts_arguments(aggregate: exp.Expression) -> bool:
    """Return True for ``count(DISTINCT a, b)``: DISTINCT over several arguments of a one-argument count."""
    return isinstance(aggregate, exp.Count) and isinstance(aggregate.this, exp.Distinct) \
        and len(aggregate.this.expressions) > 1


def with_tuple_counts(planner: "QueryPlanner", relation: "Relation", aggregates: list[exp.Expression]
                      ) -> tuple["Relation", list[exp.Expression], dict[TreeKey, TreeKey]]:
    """Return the relation with a tuple id column per distinct counted tuple, and the aggregates reading them.

    Also returns, for each aggregate rewritten, its key -> its original's key (a
    :class:`~gpu_engine.sql.planning_context.TreeKey`), so the caller maps the
    original (which the SELECT list, HAVING and ORDER BY spell) to the rewritten aggregate's result.
    """
    if not any(_tuples(aggregate) or _counts_arguments(aggregate) for aggregate in aggregates):
        return relation, aggregates, {}
    ids: dict[TreeKey, str] = {}  # a counted tuple -> the column of its dense rank
    pre, windows = [], []
    rewritten, originals = [], {}
    for aggregate in aggregates:
        tuples = _tuples(aggregate)
        if _counts_arguments(aggregate):
            raise unsupported("count(DISTINCT a, b) (count takes one argument; write count(DISTINCT (a, b)) for "
                              "the distinct pairs)", aggregate)
        if not tuples:
            rewritten.append(aggregate)
            continue
        argument = aggregate.this
        distinct = isinstance(argument, exp.Distinct)
        if not isinstance(aggregate, exp.Count):
            raise unsupported(f"{aggregate.sql_name().lower()} of a tuple (a struct value; count(DISTINCT (a, b)) "
                              "and count((a, b)) are planned)", tuples[0])
        new = aggregate.copy()
        for node in _tuples(new):
            if any(is_tuple(inner) for inner in node.walk() if inner is not node):
                raise unsupported("a tuple inside a tuple", node)
            if not distinct:
                node.replace(exp.Literal.number(1))
                continue
            counted = TreeKey(node)
            if counted not in ids:
                ids[counted] = planner._fresh(f"$tuple{len(ids)}")
                keys = []
                for number, element in enumerate(node.expressions):
                    name = planner._fresh(f"{ids[counted]}_key{number}")
                    pre.append(aliased(planner._renamed(element, relation.columns), name))
                    keys.append(f"{quoted(name)} ASC NULLS LAST")
                windows.append((keys, aliased(exp.DenseRank(), ids[counted])))  # a tree: not parsed again
            node.replace(exp.column(exp.to_identifier(ids[counted], quoted=True)))
        rewritten.append(new)
        originals[TreeKey(new)] = TreeKey(aggregate)
    node = relation.node
    if windows:
        try:
            builder = planner._builder(node)
            builder = builder.project([quoted(name) for name in node.output_schema.names] + pre)
            for keys, call in windows:
                builder = builder.window([], keys, [call])
            node = builder.plan()
        except PlanError as error:
            raise planner._plan_error(error, aggregates[0]) from None
    columns = {**relation.columns, **{("", name): name for name in ids.values()}}
    return replace(relation, node=node, columns=columns), rewritten, originals
