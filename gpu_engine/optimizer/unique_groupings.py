"""Replace a GROUP BY whose input is proven unique on its grouping keys by a projection: one group per row.

Why: TPC-H Q10 groups customer ⋈ nation ⋈ (lineitem ⋈ orders summed per ``o_custkey``: the eager
pre-aggregation, :mod:`~gpu_engine.optimizer.eager_aggregation`) by ``c_custkey`` and six more customer and
nation columns, four of them long strings. Each customer row meets at most one pre-aggregated row (its groups
are unique on ``o_custkey``), so where ``c_custkey`` is unique in customer every joined row is a group of its
own, and the aggregation only interned ~38K rows of four new strings each to give every row back (37.5 ms of
CPU at SF1 against 4.6 ms grouped by ``c_custkey`` alone: bench/results/2026-11-29-q10agg-s52.md; the hand plan
groups by the integer key). Grouping rows that are already unique on the keys changes nothing but their order,
so a projection gives the same rows: each key passed on, each aggregate its value over one row.

What "proven unique" is: :mod:`~gpu_engine.optimizer.unique_keys`' facts of the plan (an aggregation's keys, a
join that matches each row to at most one row), and, with a session's statistics, a scanned table's integer or
date column read whole and found to hold no value twice
(:meth:`~gpu_engine.optimizer.statistics.RegisteredStatistics.unique_column`; only for columns the estimates
already call about unique: a range or count equal to the rows). An estimate is never a proof here: a column
whose statistics say "unique" but which holds a value twice keeps its aggregation (a wrong proof would merge
nothing and give two rows where SQL gives one).

An aggregate over one row, of value ``x``: ``sum``, ``min``, ``max``, ``any_value`` (DISTINCT or not) are ``x``
in the aggregate's type (``sum`` of an int32 an int64; NULL stays NULL), ``avg`` of a floating result ``x`` as a
double, ``count(*)`` 1, ``count(x)`` 1 where ``x`` is not NULL, else 0. Any other aggregate (holistic, moments,
ordered, NULL-typed) keeps the aggregation, as do grouping sets, a global aggregation (one row even over no rows)
and steps other than SINGLE.

Where it runs: in :data:`~gpu_engine.optimizer.ESTIMATE_RULES` right after eager aggregation (whose
pre-aggregation makes the joined rows unique on the key) and before partial steps and exchange keys, which then
see no aggregation to choose for.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import pyarrow as pa

from gpu_engine.optimizer.statistics import TableStatistics
from gpu_engine.optimizer.unique_keys import unique_keys
from gpu_engine.plans.expressions import AggregateCall, Case, Cast, ColumnRef, Expr, Literal, UnaryOp
from gpu_engine.plans.nodes import AggregationNode, AggregationStep, PlanNode, ProjectNode

__all__ = ["drop_unique_groupings", "one_row_value"]

#: Aggregates whose value over one row is that row's argument (in the aggregate's type).
_ARGUMENT_AGGREGATES = frozenset({"sum", "min", "max", "any_value"})


def drop_unique_groupings(plan: PlanNode, statistics: Mapping[str, TableStatistics]) -> PlanNode:
    """Return ``plan`` with each SINGLE GROUP BY whose input is proven unique on its grouping keys made a
    projection (the same object where none is)."""
    return _dropped(plan, _proof(statistics), {})


def _proof(statistics: Mapping[str, TableStatistics]):
    """Return ``(estimated, proven)``: two ``(table, column) -> bool``, the first True for a scanned column the
    estimates call unique (a range or count of at least the table's rows), the second True where such a column
    is proven unique by reading it; (None, None) without a session's statistics. Why both: a column is read
    only where an aggregation would be unique on its keys if the estimates were right (TPC-H q3's grouping by
    ``l_orderkey`` over lineitem is not, whatever orders' and customer's keys hold: nothing read)."""
    prove = getattr(statistics, "unique_column", None)
    if prove is None:
        return None, None

    def estimated(table: str, column: str) -> bool:
        try:
            stats = statistics[table]
        except KeyError:
            return False
        column_stats = stats.columns.get(column)
        return column_stats is not None and bool(stats.rows) and column_stats.ndv >= stats.rows

    return estimated, lambda table, column: estimated(table, column) and prove(table, column)


def _dropped(plan: PlanNode, scans, memo: dict) -> PlanNode:
    key = id(plan)
    if key in memo:  # a subtree shared by two parents (a CTE read twice) stays one object
        return memo[key][1]
    sources = tuple(_dropped(source, scans, memo) for source in plan.sources)
    out = plan
    if any(new is not old for new, old in zip(sources, plan.sources)):
        out = replace(plan, sources=sources)
    if isinstance(out, AggregationNode):
        projected = _as_projection(out, scans)
        if projected is not None:
            out = projected
    memo[key] = (plan, out)  # the node kept: its id stays its own
    return out


def _as_projection(node: AggregationNode, scans) -> ProjectNode | None:
    """Return the projection giving ``node``'s rows where its input is proven unique on its grouping keys."""
    if (node.step is not AggregationStep.SINGLE or not node.grouping_keys or node.global_grouping_sets
            or node.group_id_key is not None):
        return None
    values = [one_row_value(call) for call in node.aggregates]
    if any(value is None for value in values):
        return None
    source = node.sources[0]
    if not unique_keys(source).unique_on(node.grouping_keys):
        estimated, proven = scans
        if estimated is None or not unique_keys(source, {}, estimated).unique_on(node.grouping_keys):
            return None
        if not unique_keys(source, {}, proven).unique_on(node.grouping_keys):
            return None
    keys = []
    for name in node.grouping_keys:
        column = ColumnRef(name, source.output_schema.field(name).type)
        keys.append(_typed(column, node.output_schema.field(name).type))
    return ProjectNode(id=node.id, output_schema=node.output_schema, sources=(source,),
                       names=tuple(node.grouping_keys) + tuple(node.aggregate_names),
                       expressions=tuple(keys) + tuple(values))


def one_row_value(call: AggregateCall) -> Expr | None:
    """Return the value of aggregate ``call`` over one row, as an expression of that row, or None where it has
    none here (see the module docstring)."""
    if call.null_typed or call.second is not None or call.then_by or call.parameter is not None:
        return None
    if call.function == "count_star":
        return Literal(1, call.dtype)
    if call.arg is None:
        return None
    if call.function == "count":
        return Case(((UnaryOp("is_not_null", call.arg, pa.bool_()), Literal(1, call.dtype)),),
                    Literal(0, call.dtype), call.dtype)
    if call.function in _ARGUMENT_AGGREGATES or (call.function == "avg" and pa.types.is_floating(call.dtype)):
        return _typed(call.arg, call.dtype)
    return None


def _typed(expr: Expr, dtype: pa.DataType) -> Expr:
    return expr if expr.dtype == dtype else Cast(expr, dtype)
