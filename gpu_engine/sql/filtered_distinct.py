"""Compute DISTINCT aggregates of one value under different FILTERs in one two-level aggregation.

Why: without GROUP BY, each DISTINCT argument is its own aggregation over its
own evaluation of the input (:func:`gpu_engine.sql.aggregate_planning.plan_aggregation`:
the aggregation operator groups by one DISTINCT argument at a time). A FILTER
makes the argument ``CASE WHEN p THEN x END``, so ``count(DISTINCT x) FILTER
(WHERE p1)`` and ``... FILTER (WHERE p2)`` (TPC-DS q28 once its six sibling
subqueries are merged, :mod:`gpu_engine.sql.one_row_aggregates`) read the input
twice although they count the same values. Grouping by ``x`` first, with one
flag per FILTER (``max(CASE WHEN p THEN 1 ELSE 0 END)``: some row of the value
passes it), leaves one row per distinct value; each DISTINCT aggregate is then
the plain aggregate of ``x`` over the rows whose flag is set (DataFusion's
single-distinct-to-group-by, with FILTERs). NULL values form a group that every
aggregate skips, as DISTINCT aggregates skip NULL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.plans.nodes import PlanNode
from gpu_engine.sql.planning_context import TreeKey, conjunct_key, quoted
from gpu_engine.sql.renaming import aliased

if TYPE_CHECKING:
    from gpu_engine.sql.planning_context import PlanningContext

__all__ = ["distinct_value", "plan_filtered_distinct", "plan_global_distinct", "with_filtered_distinct_merged"]

#: DISTINCT aggregates that are the plain aggregate over the distinct values.
_OVER_VALUES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


def _filtered_value(argument: exp.Expression) -> tuple[exp.Expression | None, exp.Expression]:
    """Return (condition, value) of ``CASE WHEN condition THEN value END``; (None, argument) for another argument."""
    if isinstance(argument, exp.Case) and not argument.args.get("default") and argument.this is None \
            and len(argument.args.get("ifs") or []) == 1:
        branch = argument.args["ifs"][0]
        return branch.this, branch.args["true"]
    return None, argument


def distinct_value(call: exp.Expression) -> TreeKey | None:
    """Return the value a ``name: agg(DISTINCT [CASE WHEN p THEN] x [END])`` call aggregates, else None.

    As a :class:`TreeKey`: ``"P"`` and ``p`` are one value (their SQL text told them apart, and two FILTERs of
    one value written apart were two aggregations over the input).
    """
    aggregate = call.this if isinstance(call, exp.Alias) else call
    if not isinstance(aggregate, _OVER_VALUES) or not isinstance(aggregate.this, exp.Distinct):
        return None
    if any(value for key, value in aggregate.args.items() if key not in ("this", "big_int")):
        return None
    if len(aggregate.this.expressions) != 1:
        return None
    _, value = _filtered_value(aggregate.this.expressions[0])
    return TreeKey(value)


def plan_filtered_distinct(planner: PlanningContext, source: PlanNode, calls: list[exp.Alias],
                           per_value: list[exp.Alias] = (), combined: list[exp.Alias] = ()) -> PlanNode:
    """Return one row of ``calls`` (DISTINCT aggregates of one value, see :func:`distinct_value`) over ``source``;
    ``per_value`` aggregates are computed per distinct value too, and ``combined`` over those results."""
    _, value = _filtered_value(calls[0].this.this.expressions[0])
    key = planner._fresh("$distinct_value")
    flags: dict = {}  # condition (conjunct_key: alike however written) -> its flag column
    flag_calls, outer = list(per_value), list(combined)
    for call in calls:
        aggregate = call.this
        condition, _ = _filtered_value(aggregate.this.expressions[0])
        over = exp.column(key, quoted=True)
        if condition is not None:
            identity = conjunct_key(condition)
            if identity not in flags:
                flags[identity] = planner._fresh(f"$distinct_flag{len(flags)}")
                passed = exp.Case(ifs=[exp.If(this=condition.copy(), true=exp.Literal.number(1))],
                                  default=exp.Literal.number(0))
                flag_calls.append(aliased(exp.Max(this=passed), flags[identity]))
            over = exp.Case(ifs=[exp.If(this=exp.EQ(this=exp.column(flags[identity], quoted=True),
                                                    expression=exp.Literal.number(1)), true=over)])
        plain = aggregate.copy()
        plain.set("this", over)
        outer.append(aliased(plain, call.alias))
    passthrough = [quoted(n) for n in source.output_schema.names]
    builder = planner._builder(source).project(passthrough + [aliased(value.copy(), key)])
    builder = builder.aggregation([quoted(key)], flag_calls)
    return builder.aggregation([], outer).plan()


def with_filtered_distinct_merged(call_groups: list[list[exp.Alias]]) -> list[tuple[list[exp.Alias], bool]]:
    """Return ``call_groups`` (one per DISTINCT argument, and the plain calls) with the groups of DISTINCT
    aggregates of one value under different FILTERs made one, each flagged True when it is such a merge."""
    by_value: dict[TreeKey, list[int]] = {}
    for index, calls in enumerate(call_groups):
        values = {distinct_value(call) for call in calls}
        if len(values) == 1 and None not in values:
            by_value.setdefault(values.pop(), []).append(index)
    merged = {indexes[0]: indexes for indexes in by_value.values() if len(indexes) >= 2}
    absorbed = {i for indexes in merged.values() for i in indexes[1:]}
    out = []
    for index, calls in enumerate(call_groups):
        if index in merged:
            out.append(([call for i in merged[index] for call in call_groups[i]], True))
        elif index not in absorbed:
            out.append((calls, False))
    return out


#: Plain aggregates whose value over all rows follows from their values per distinct value (the inner groups).
_DECOMPOSABLE = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)


def _plain_parts(planner: PlanningContext, call: exp.Alias, inner: list, outer: list):
    """Add a plain call's per-group and combining aggregates; return the final expression over the combined ones."""
    aggregate = call.this

    def part(tree: exp.Expression, combine: type) -> exp.Column:
        per_group = planner._fresh(f"{call.alias}$part")
        combined = planner._fresh(f"{call.alias}$all")
        inner.append(aliased(tree, per_group))
        outer.append(aliased(combine(this=exp.column(per_group, quoted=True)), combined))
        return exp.column(combined, quoted=True)

    if isinstance(aggregate, exp.Avg):
        total = part(exp.Sum(this=aggregate.this.copy()), exp.Sum)
        count = part(exp.Count(this=aggregate.this.copy()), exp.Sum)
        return exp.Div(this=exp.Cast(this=total, to=exp.DataType.build("DOUBLE")),
                       expression=exp.Cast(this=count, to=exp.DataType.build("DOUBLE")))
    if isinstance(aggregate, exp.Count):  # sums of counts, 0 (not NULL) over no group
        summed = part(aggregate.copy(), exp.Sum)
        return exp.Cast(this=exp.Case(ifs=[exp.If(this=exp.Is(this=summed.copy(), expression=exp.Null()),
                                                  true=exp.Literal.number(0))], default=summed),
                        to=exp.DataType.build("BIGINT"))
    return part(aggregate.copy(), type(aggregate))


def plan_global_distinct(planner: PlanningContext, source: PlanNode, calls: list[exp.Alias]) -> PlanNode | None:
    """Return one row of ``calls`` without GROUP BY, their DISTINCT ones all of one value, in one pass; None when
    the calls do not fit (another DISTINCT value, an aggregate that does not combine, a type that would change).

    The DISTINCT calls are those of :func:`plan_filtered_distinct`; each plain one is computed per distinct value
    first and combined after: sums of sums, of counts, min of mins, max of maxes, an average from its sum and
    count (DataFusion's single-distinct-to-group-by). The input (often a whole join: TPC-DS q94, q95, q16's
    ``count(DISTINCT order), sum(cost)``) is read once, where each kind of call read its own copy.
    """
    distinct = [call for call in calls if distinct_value(call) is not None]
    plain = [call for call in calls if distinct_value(call) is None]
    if not distinct or len({distinct_value(call) for call in distinct}) != 1:
        return None
    for call in plain:
        aggregate = call.this
        if not isinstance(aggregate, _DECOMPOSABLE) or isinstance(aggregate.this, exp.Distinct) \
                or any(value for key, value in aggregate.args.items() if key not in ("this", "big_int")):
            return None
        if isinstance(aggregate.this, exp.Star) and not isinstance(aggregate, exp.Count):
            return None
    expected = {call.alias: planner._builder(source).aggregation([], [call]).plan().output_schema.field(0).type
                for call in calls}
    inner, outer, finals = [], [], []
    for call in plain:
        finals.append(aliased(_plain_parts(planner, call, inner, outer), call.alias))
    combined = plan_filtered_distinct(planner, source, distinct, inner, outer)
    passthrough = [quoted(call.alias) for call in distinct]
    node = planner._builder(combined).project(passthrough + finals).plan()
    if any(node.output_schema.field(name).type != dtype for name, dtype in expected.items()):
        return None
    return node
