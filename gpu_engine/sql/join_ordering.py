"""Join a SELECT's FROM items: as written, each step the first item an equality links to those joined.

Why no estimates here: the join order is one rule,
:func:`gpu_engine.optimizer.join_order.order_joins`, which orders each region
of inner joins of the typed plan after the pushdown has placed every filter,
by the typed estimates (dictionary counts of strings, correlated keys, rows
each relation brings into its join), its ties broken by what each relation is
and joins, not by where the text lists it. Until stop 51 this module ordered
FROM items too (greedy operator ordering and the cheapest tree over the SQL
side's estimates, with classes of equal columns); the typed rule then kept or
replaced that order, and the two disagreed where their estimates did (TPC-DS
q17's date filters). The typed order alone was measured against that
(bench/results/2026-11-29-joinorder2.md, 2026-11-29-joinorder3-s51.md).

Queries with outer joins keep the written order, except for their leading run
of inner joins, which commute, and (without RIGHT or FULL joins) the later
inner joins that read no LEFT-joined item, which commute with the LEFT joins:
those form one inner-join region for the typed rule. WHERE conditions on a
NULL-extended side are applied after the joins, never pushed below them (a
LEFT JOIN whose NULL-extended rows a condition rejects is an inner join:
:mod:`gpu_engine.sql.outer_joins`). Each join builds its smaller input by the
SQL side's estimates (:func:`join_pair`); the typed build-side pass
(:mod:`gpu_engine.optimizer.build_sides`) decides again after the join order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.optimizer.statistics import key_set_divisor
from gpu_engine.plans.plan_builder import join_key_layout
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.planning_context import Relation
from gpu_engine.sql.predicates import conjuncts_of, factor_or, filtered, free_columns, has_subquery
from gpu_engine.sql.renaming import conjunction

if TYPE_CHECKING:
    from gpu_engine.sql.planning_context import PlanningContext

__all__ = ["covered", "edge_keys", "join_estimate", "join_in_order", "join_inner_run", "join_pair", "join_written",
           "key_set_divisor", "name_order"]

#: Join types whose sides may trade places so that the smaller one is built, and what they become: an outer
#: join keeps the rows of the same table whichever side it is on (TPC-H Q13's LEFT JOIN of 150K customers to
#: 1.5M orders builds the customers, as a RIGHT join, instead of the orders).
_BUILD_SMALLER_SIDE = {"inner": "inner", "left": "right", "right": "left", "full": "full"}


def edge_keys(a: Relation, b: Relation, conjunct: exp.Expression):
    """Return (a's column, b's column) when ``conjunct`` is an equality of one column of each, else None."""
    if not isinstance(conjunct, exp.EQ):
        return None
    left, right = conjunct.this, conjunct.expression
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
        return None
    for x, y in ((left, right), (right, left)):
        ax, by = a.columns.get((x.table, x.name)), b.columns.get((y.table, y.name))
        if ax is not None and by is not None and x.table in a.aliases and y.table in b.aliases:
            ta, tb = a.node.output_schema.field(ax).type, b.node.output_schema.field(by).type
            if join_key_layout(ta) == join_key_layout(tb):
                return ax, by
    return None


def covered(conjunct: exp.Expression, aliases: frozenset[str]) -> bool:
    """Return whether every column ``conjunct`` reads belongs to one of ``aliases``."""
    return {c.table for c in free_columns(conjunct)} <= aliases


def join_estimate(a: Relation, b: Relation, pairs: list[tuple[str, str]]) -> float:
    """Return the estimated rows of joining ``a`` and ``b`` on key ``pairs`` (:func:`key_set_divisor` divides;
    :mod:`gpu_engine.optimizer.statistics`'s, which the typed plan's estimates call too)."""
    return max(1.0, a.rows * b.rows / key_set_divisor(a, b, pairs))


def join_written(planner: PlanningContext, relations: list[Relation], pending: list[exp.Expression],
                 needed: set[tuple[str, str]]) -> Relation:
    """Join all relations left-deep in the order written, each step the first relation a pending equality
    links to those joined so far (the next one written, a cross product, where none is linked).

    Why no estimates here: the typed join order (:func:`gpu_engine.optimizer.join_order.order_joins`) orders
    each region of inner joins after the pushdown has placed every filter, by the typed estimates, and its
    order does not depend on the text (:data:`~gpu_engine.optimizer.join_order.CANONICAL`); ordering here too
    was a second rule over rougher estimates (no pushed filters, no dictionary counts) whose order the typed
    rule then kept or replaced. Why linked first: a region the typed rule cannot estimate (a table without
    statistics) keeps the tree built here, and a cross product of two relations a later one links (``FROM a,
    b, c WHERE a.x = c.x AND b.y = c.y``) would then stay.
    """
    remaining = list(relations)
    current = remaining.pop(0)
    while remaining:
        position, pairs = 0, []
        for k, relation in enumerate(remaining):
            union = current.aliases | relation.aliases
            pairs = [p for c in pending if covered(c, union) and (p := edge_keys(current, relation, c)) is not None]
            if pairs:
                position = k
                break
        relation = remaining.pop(position)
        rows = join_estimate(current, relation, pairs) if pairs else current.rows * relation.rows
        current = join_pair(planner, current, relation, pending, needed, rows)
    return current


def name_order(relation: Relation) -> tuple[str, ...]:
    """Return a key that orders relations by their alias names, not by where the query lists them.

    Why: ties between equal estimates (dimension tables of one size, joins that keep the fact table's rows)
    were broken by position in the FROM list, so permuting a FROM list or reordering WHERE conjuncts
    changed the join order and build sides. Issue 31 asks that plans not depend on how a query is written.
    """
    return tuple(sorted(relation.aliases))


def join_pair(planner: PlanningContext, a: Relation, b: Relation, pending: list[exp.Expression],
              needed: set[tuple[str, str]], estimate: float, join_type: str = "inner",
              on: list[exp.Expression] | None = None) -> Relation:
    """Join two relations on the pending conjuncts they cover (removed from ``pending``)."""
    union = a.aliases | b.aliases
    if on is None:
        conditions = [c for c in pending if covered(c, union)]
        for c in conditions:
            pending.remove(c)
    else:
        conditions = on
    if join_type in _BUILD_SMALLER_SIDE and (b.rows, name_order(a)) > (a.rows, name_order(b)):
        a, b = b, a  # build (right) the smaller side; equal sizes by name, not by where the query wrote them
        join_type = _BUILD_SMALLER_SIDE[join_type]
    keys, filters = [], []
    for c in conditions:
        pair = edge_keys(a, b, c)
        if pair is not None and pair[0] not in [k for k, _ in keys] and pair[1] not in [k for _, k in keys]:
            keys.append(pair)
        else:
            filters.append(c)
    columns = {**a.columns, **b.columns}
    still_needed = set(needed)
    for c in pending:
        still_needed.update((col.table, col.name) for col in free_columns(c))
    keep = list(dict.fromkeys(i for (al, n), i in columns.items() if (al, n) in still_needed))
    keep = keep or [a.node.output_schema.names[0]]
    join_filter = conjunction([planner._renamed(c, columns) for c in filters]) if filters else None
    try:
        builder = planner._builder(a.node)
        if keys:
            node = builder.hash_join([k for k, _ in keys], [k for _, k in keys], b.node, keep,
                                     join_type=join_type, filter=join_filter).plan()
        else:
            node = builder.nested_loop_join(b.node, keep, filter=join_filter, join_type=join_type).plan()
    except PlanError as error:
        raise planner._plan_error(error, conditions[0] if conditions else None) from None
    if filters and join_type == "inner":
        estimate = max(1.0, estimate * 0.5 ** len(filters))
    stats = {k: v.capped(estimate) for k, v in {**a.stats, **b.stats}.items() if k in keep}
    kept = {k: v for k, v in columns.items() if v in keep}
    return Relation(node, kept, union, estimate, stats)


def join_in_order(planner: PlanningContext, items, relations: dict[str, Relation], pending: list[exp.Expression],
                  needed: set[tuple[str, str]]) -> Relation:
    """Join FROM items in the written order (queries with outer joins); ON conditions stay with their join.

    The leading run of inner joins is the exception: those joins commute, so they are joined first
    (:func:`join_inner_run`) on their ON conditions (and the WHERE conjuncts over them alone, unless a later
    RIGHT or FULL join NULL-extends their rows), as one region the typed join order orders; without RIGHT or
    FULL joins, so are the later inner joins whose ON condition reads no LEFT-joined item (:func:`_inner_run`).
    Written in order, ``a JOIN b ON … JOIN c ON … LEFT JOIN d`` would join ``a`` and ``b`` first whatever
    their sizes (TPC-DS q72 joined inventory to catalog_sales on the item alone, ~10^9 pairs at SF1, before the
    selective dimensions).
    """
    # A later RIGHT or FULL join NULL-extends every row joined so far: a WHERE conjunct over them waits for it.
    extended_later = [any((j.side or "").upper() in ("RIGHT", "FULL") for _, j in items[n + 1:])
                      for n in range(len(items))]
    run = _inner_run(items, any(extended_later))
    current = join_inner_run(planner, [items[position] for position in run], relations, pending, needed,
                             use_where=not extended_later[run[-1]])
    for position, (item, join) in enumerate(items[1:], start=1):
        if position in run:
            continue
        right = relations[item.alias_or_name]
        side = (join.side or "").upper()
        join_type = {"LEFT": "left", "RIGHT": "right", "FULL": "full"}.get(side, "inner")
        on = [c for conjunct in conjuncts_of(join.args.get("on")) for c in factor_or(conjunct)]
        if any(has_subquery(c) for c in on):
            raise unsupported("a subquery in a JOIN's ON condition", join)
        if join_type in ("left", "inner"):  # conditions on the build side alone filter it first
            own = [c for c in on if covered(c, right.aliases)]
            right = filtered(planner, right, own)
            on = [c for c in on if c not in own]
        if join_type == "inner" and not extended_later[position]:
            on += [c for c in pending if covered(c, current.aliases | right.aliases)]
            for c in on:
                if c in pending:
                    pending.remove(c)
        pairs = [p for c in on if (p := edge_keys(current, right, c)) is not None]
        estimate = join_estimate(current, right, pairs) if pairs else current.rows * right.rows
        if join_type == "left":
            estimate = max(estimate, current.rows)
        current = join_pair(planner, current, right, pending, needed, estimate, join_type, on)
    return current


def _is_inner(join: exp.Join) -> bool:
    """Return whether a FROM item's join is an inner or cross join (a comma's join too)."""
    return not (join.side or "") and (join.kind or "").upper() in ("", "INNER", "CROSS")


def _inner_run(items, right_or_full: bool) -> list[int]:
    """Return the positions of the FROM items joined first, by estimates: the leading inner joins and, without
    RIGHT or FULL joins, every later inner join whose ON condition reads no LEFT-joined item.

    Why the later ones: ``(a LEFT JOIN b) JOIN c ON p(a, c)`` is ``(a JOIN c) LEFT JOIN b`` when ``p`` does not
    read ``b`` (an inner join commutes with a LEFT join on the preserved side). TPC-DS q40 and q80 write
    ``sales LEFT JOIN returns, date_dim, item ...`` with every dimension joined to the sales: in the written
    order every sale probed the returns before the selective dimensions dropped most of them.
    """
    run = [0]
    while len(run) < len(items) and _is_inner(items[len(run)][1]):
        run.append(len(run))
    if right_or_full:
        return run
    left_joined: set[str] = set()
    for position, (item, join) in enumerate(items[1:], start=1):
        if position in run:
            continue
        if (join.side or "").upper() == "LEFT":
            left_joined.add(item.alias_or_name)
        elif _is_inner(join) and not {c.table for c in free_columns(join.args.get("on") or exp.true())} & left_joined:
            run.append(position)
    return run


def join_inner_run(planner: PlanningContext, items, relations: dict[str, Relation], pending: list[exp.Expression],
                   needed: set[tuple[str, str]], use_where: bool) -> Relation:
    """Join a run of FROM items linked by inner joins (:func:`join_written`; the typed join order orders them).

    Their ON conditions are conjuncts of the run (an inner join's ON is its WHERE); a condition over one
    item filters that item first. ``use_where``: WHERE conjuncts over the run's items alone join it too
    (taken out of ``pending``).
    """
    if len(items) == 1:
        return relations[items[0][0].alias_or_name]
    aliases = frozenset(item.alias_or_name for item, _ in items)
    conditions: list[exp.Expression] = []
    for _, join in items[1:]:
        on = [c for conjunct in conjuncts_of(join.args.get("on")) for c in factor_or(conjunct)]
        if any(has_subquery(c) for c in on):
            raise unsupported("a subquery in a JOIN's ON condition", join)
        conditions += on
    if use_where:
        taken = [c for c in pending if covered(c, aliases)]
        for c in taken:
            pending.remove(c)
        conditions += taken
    members = {}
    for item, _ in items:
        alias = item.alias_or_name
        own = [c for c in conditions if {col.table for col in free_columns(c)} == {alias}]
        conditions = [c for c in conditions if not any(c is o for o in own)]
        members[alias] = filtered(planner, relations[alias], own)
    joined = join_written(planner, list(members.values()), conditions, needed | {
        (col.table, col.name) for c in pending for col in free_columns(c)})
    return filtered(planner, joined, conditions) if conditions else joined
