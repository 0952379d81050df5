"""Read a one-row FROM item's columns after the GROUP BY, not through ``max``/``min`` of every input row.

Why: a grouped query may cross join a one-row relation and read its column
through an aggregate, since a grouped SELECT may not read it bare: TPC-DS
q23's ``best_ss_customer`` is ``FROM store_sales, customer, max_store_sales
... GROUP BY c_customer_sk HAVING sum(...) > 0.5 * max(tpcds_cmax)``. Planned
as written, every one of the 2.88M store_sales rows (SF1) is widened by the
one-row side's decimal and ``max`` folds it per group, and eager aggregation
(:mod:`~gpu_engine.optimizer.eager_aggregation`) pre-aggregates store_sales *cross
joined with* the one row (the aggregates read both), so its partial step is
the unfused hash aggregation over the widened rows. Here the one-row item
leaves the FROM list and each ``max(r.c)`` becomes the scalar subquery
``(SELECT r.c FROM <item> AS r)``, which the planner cross joins after the
aggregation (a typed ScalarSubquery of the final Project,
:func:`~gpu_engine.sql.aggregate_planning.typed_scalar_subqueries`, which the decorrelation rule joins):
one row joined to the groups instead of to every input row.

Why it is the same answer: the item yields exactly one row (a SELECT that
aggregates without GROUP BY, HAVING, QUALIFY, LIMIT or OFFSET), so crossing
it keeps the other items' rows and their groups, and in every group ``max``,
``min`` and ``any_value`` of the one value are that value (NULL too). Applied
only where a group exists only if rows do: a plain, non-empty GROUP BY (no
grouping sets: ROLLUP's grand total over no rows would read NULL where the
subquery reads the value), the item an inner comma or CROSS join without a
condition, and its columns read nowhere but as the whole argument of
``max``/``min``/``any_value`` in the SELECT list or HAVING (no FILTER, no
window: a FILTER can leave a group's call over no rows, NULL).
"""

from __future__ import annotations

from typing import Mapping

from sqlglot import exp

from gpu_engine.sql.decorrelation import own_aggregates

__all__ = ["with_one_row_extremes_lifted"]

_EXTREMES = (exp.Max, exp.Min, exp.AnyValue)
_NOT_ONE_ROW = ("group", "having", "qualify", "limit", "offset", "fetch", "distinct")


def _one_row_query(item: exp.Expression, ctes: Mapping[str, exp.Expression]) -> bool:
    """Return whether FROM item ``item`` (a CTE reference or a derived table) yields exactly one row."""
    if isinstance(item, exp.Table) and not item.args.get("db") and item.name in ctes:
        query = ctes[item.name]
    elif isinstance(item, exp.Subquery):
        query = item.this
    else:
        return False
    return (isinstance(query, exp.Select) and not any(query.args.get(key) for key in _NOT_ONE_ROW)
            and own_aggregates(query))


def _plainly_grouped(select: exp.Select) -> bool:
    group = select.args.get("group")
    return (group is not None and bool(group.expressions)
            and not any(group.args.get(key) for key in ("grouping_sets", "cube", "rollup", "totals", "all"))
            and group.find(exp.Rollup, exp.Cube, exp.GroupingSets) is None)


def _lifted_call(column: exp.Column, select: exp.Select) -> exp.Expression | None:
    """Return the ``max``/``min``/``any_value`` call ``column`` is the whole argument of, in the SELECT list or HAVING."""
    call = column.parent
    if not isinstance(call, _EXTREMES) or call.this is not column or len(list(call.iter_expressions())) != 1:
        return None
    node = call
    while node.parent is not select:
        node = node.parent
        if node is None or isinstance(node, (exp.Window, exp.Filter, exp.Select, exp.Subquery)):
            return None
    return call if node.arg_key in ("expressions", "having") else None


def with_one_row_extremes_lifted(select: exp.Select, ctes: Mapping[str, exp.Expression]) -> exp.Select:
    """Return ``select`` with each one-row FROM item read only through extremes turned into scalar subqueries."""
    if not _plainly_grouped(select) or select.args.get("from_") is None:
        return select
    joins = select.args.get("joins") or []
    items = [select.args["from_"].this] + [join.this for join in joins]
    if len(items) < 2 or any(join.side or join.kind not in ("", "CROSS", "INNER") or join.args.get("on")
                             or join.args.get("using") for join in joins):
        return select
    for index, item in enumerate(items):
        alias = item.alias_or_name
        if not _one_row_query(item, ctes) or sum(other.alias_or_name == alias for other in items) != 1:
            continue
        columns = [c for c in select.find_all(exp.Column) if c.table == alias]
        calls = [_lifted_call(c, select) for c in columns]
        if not columns or any(call is None for call in calls):
            continue
        select = select.copy()
        for column in [c for c in select.find_all(exp.Column) if c.table == alias]:
            scalar = exp.select(exp.column(column.name, table=alias)).from_(item.copy())
            column.parent.replace(exp.Subquery(this=scalar))
        joins = select.args.get("joins")
        if index == 0:
            select.args["from_"].set("this", joins[0].this)
            joins.pop(0)
        else:
            joins.pop(index - 1)
        select.set("joins", joins or None)
        return with_one_row_extremes_lifted(select, ctes)
    return select
