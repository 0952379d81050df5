"""Order a SELECT's joins by estimated rows, each join building its smaller input.

Why a module of its own: the join order decides how many rows every join
builds and probes, by orders of magnitude (TPC-H Q5, TPC-DS q72). Greedy
operator ordering: repeatedly join the two connected relations whose
estimated result is smallest (estimates: :mod:`gpu_engine.sql.statistics`),
building the smaller side; relations nothing connects are cross joined,
smallest first. Up to :data:`EXHAUSTIVE_LIMIT` connected relations, the join
tree of least summed estimated rows (:func:`cheapest_tree`, which may also
join on equalities derived from classes of equal columns:
:mod:`gpu_engine.sql.join_equivalences`) replaces the greedy order where it
saves at least a fifth of the greedy order's estimated rows. Queries with outer joins keep the written order, except for
their leading run of inner joins, which commute, and (without RIGHT or FULL
joins) the later inner joins that read no LEFT-joined item, which commute
with the LEFT joins; WHERE conditions on a NULL-extended side are applied
after the joins, never pushed below them (a LEFT JOIN whose NULL-extended
rows a condition rejects is an inner join: :mod:`gpu_engine.sql.outer_joins`).

After pushdown, :func:`gpu_engine.optimizer.join_order.order_joins` orders each
inner-join region of the typed plan again, with the same cost, where its
estimates (the pushed filters counted) save a fifth. This rule stays first:
without it (FROM items joined as written, ``bench/ab.py sql-join-order`` off)
the typed rule alone runs TPC-DS q17 67% and q25 ~40% slower (both estimate
``catalog_sales x store_returns`` on customer and item at every return, 39,272
rows in q17 for 8 real, and choose another tree; q54 and q67 no longer lose:
bench/results/2026-11-28-joinorder-typed-join-order.md,
2026-11-28-joinorder2-keyless-regions-and-cross-products.md). This rule's q17
plan is a tie, not a better estimate: every pair it costs first, that join
among them, is estimated at 287,514 rows and :func:`name_order` picks it
(bench/results/2026-11-28-joinorder3-correlated-keys.md: what the typed rule
still needs, its correlated-key estimate and input-row cost off by default).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.optimizer.statistics import ColumnStatistics, key_set_divisor
from gpu_engine.plans.plan_builder import join_key_layout
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.join_equivalences import (
    EquivalenceClass, class_conditions, class_members_kept, distinct_count, equivalence_classes,
)
from gpu_engine.sql.planning_context import Relation
from gpu_engine.sql.predicates import conjuncts_of, factor_or, filtered, free_columns, has_subquery
from gpu_engine.sql.renaming import conjunction

if TYPE_CHECKING:
    from gpu_engine.sql.planning_context import PlanningContext

__all__ = ["COSTED_TREE_GAIN", "EXHAUSTIVE_LIMIT", "JoinTree", "cheapest_tree", "edge_keys", "covered", "join_estimate", "join_greedy", "join_written", "key_set_divisor",
           "join_pair", "join_in_order", "join_inner_run", "name_order"]

#: The most relations whose join trees :func:`cheapest_tree` costs all (3^n splits); more are joined greedily.
EXHAUSTIVE_LIMIT = 10

#: The share of the greedy order's estimated work that the cheapest tree must stay under to replace it: the
#: estimates are rough (independent columns, containment of keys), and a tree that saves less than a fifth of
#: them changed plans (TPC-DS q7, q26, q27, q66: 0.90-0.94) for no gain to be seen.
COSTED_TREE_GAIN = 0.8

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


def join_greedy(planner: PlanningContext, relations: list[Relation], pending: list[exp.Expression],
                needed: set[tuple[str, str]]) -> Relation:
    """Join all relations, each join building its smaller input, in the cheapest tree's order or greedily.

    The cheapest tree (:func:`cheapest_tree`) joins on classes of equal columns where equalities chain three
    or more relations (:mod:`gpu_engine.sql.join_equivalences`). Without one (more than
    :data:`EXHAUSTIVE_LIMIT` relations, relations nothing connects, or a saving under
    :data:`COSTED_TREE_GAIN`), the smallest estimated result of two connected relations is joined first, on
    the equalities as written, else the two smallest are cross joined.
    """
    written = list(pending)
    classes = equivalence_classes(relations, pending)
    tree = cheapest_tree(relations, pending, classes)
    if tree is not None:
        return _join_tree(planner, tree, relations, pending, needed, classes)
    pending[:] = written  # the greedy order joins on the equalities as written
    components = list(relations)
    while len(components) > 1:
        best = None
        # each conjunct's tables once a step, not once per candidate pair (join_pair changes ``pending``)
        tables = [(c, {column.table for column in free_columns(c)}) for c in pending]
        for i, j in itertools.combinations(range(len(components)), 2):
            a, b = components[i], components[j]
            union = a.aliases | b.aliases
            pairs = [p for c, read in tables if read <= union
                     and (p := edge_keys(a, b, c)) is not None]
            if not pairs:
                continue
            candidate = (join_estimate(a, b, pairs), sorted((name_order(a), name_order(b))), i, j)
            if best is None or candidate[:2] < best[:2]:
                best = candidate
        if best is None:  # nothing connected: cross join the two smallest
            order = sorted(range(len(components)), key=lambda k: (components[k].rows, name_order(components[k])))
            i, j = sorted(order[:2])
            estimate = components[i].rows * components[j].rows
        else:
            estimate, _, i, j = best
        a, b = components[i], components[j]
        joined = join_pair(planner, a, b, pending, needed, estimate)
        components = [c for k, c in enumerate(components) if k not in (i, j)] + [joined]
    return components[0]


def _join_on_classes(planner: PlanningContext, a: Relation, b: Relation, pending: list[exp.Expression],
                     needed: set[tuple[str, str]], classes: list[EquivalenceClass], estimate: float) -> Relation:
    """Join two relations on their pending conjuncts and one equality per class they share (:func:`join_pair`)."""
    kept = class_members_kept(classes, a, b)
    pending.extend(class_conditions(classes, a, b))
    return join_pair(planner, a, b, pending, needed | kept if kept else needed, estimate)


@dataclass(frozen=True)
class JoinTree:
    """A join of two subtrees (or of :func:`join_greedy`'s relations, by position); ``estimate``: its rows
    before its non-key conditions (what :func:`join_pair` is handed)."""

    left: JoinTree | int
    right: JoinTree | int
    estimate: float


@dataclass(frozen=True)
class _Estimate:
    """The estimated size of joined relations: what :func:`join_estimate` reads."""

    aliases: frozenset[str]
    columns: dict[tuple[str, str], str]
    rows: float
    stats: dict[str, ColumnStatistics]


def cheapest_tree(relations: list[Relation], pending: list[exp.Expression],
                  classes: list[EquivalenceClass]) -> JoinTree | None:
    """Return the join tree of least summed estimated intermediate rows, or None (too many, or unconnected).

    Why: the greedy order commits to the smallest first join and can spend a small relation where it cuts
    little (TPC-H Q5 joined ASIA's nations to the suppliers, 2K rows, and left the 150K customers to meet a
    year's orders uncut); DuckDB costs join trees the same way (the sum of their joins' cardinalities),
    enumerating splits of connected sets (dynamic programming over subsets, 3^n splits for n relations).
    Relations are numbered by their alias names, so the tree does not depend on the written order.
    """
    n = len(relations)
    if not 3 <= n <= EXHAUSTIVE_LIMIT:
        return None
    order = sorted(range(n), key=lambda i: name_order(relations[i]))
    bits = {alias: 1 << k for k, i in enumerate(order) for alias in relations[i].aliases}
    edges, adjacent = _edges([relations[i] for i in order], bits, pending)
    members = []
    for cls in classes:
        held = [(bits[alias], (alias, name)) for alias, name in cls.members]
        members.append(held)
        for bit, _ in held:
            adjacent[bit.bit_length() - 1] |= sum(other for other, _ in held if other != bit)
    best: dict[int, tuple[float, _Estimate, JoinTree | int]] = {}
    neighbours = [0] * (1 << n)
    for k, i in enumerate(order):
        r = relations[i]
        best[1 << k] = (0.0, _Estimate(r.aliases, r.columns, r.rows, r.stats), i)
        neighbours[1 << k] = adjacent[k]
    for mask in range(3, 1 << n):
        low = mask & -mask
        if mask == low:
            continue
        neighbours[mask] = neighbours[mask ^ low] | neighbours[low]
        choice = None
        part = (mask - 1) & mask
        while part:
            if part & low and part in best and (mask ^ part) in best and neighbours[part] & (mask ^ part):
                left, right = best[part], best[mask ^ part]
                before, after = _joined_rows(left[1], right[1], part, mask, edges, members)
                cost = left[0] + right[0] + after
                if choice is None or cost < choice[0]:
                    choice = (cost, before, after, left, right)
            part = (part - 1) & mask
        if choice is not None:
            cost, before, after, left, right = choice
            stats = {k: v.capped(after) for k, v in {**left[1].stats, **right[1].stats}.items()}
            joined = _Estimate(left[1].aliases | right[1].aliases, {**left[1].columns, **right[1].columns},
                               after, stats)
            best[mask] = (cost, joined, JoinTree(left[2], right[2], before))
    whole = best.get((1 << n) - 1)
    if whole is None:
        return None
    written, _ = _edges([relations[i] for i in order], bits, pending + [c for cls in classes for c in cls.conjuncts])
    greedy = _greedy_cost(best, n, written, [])
    if whole[0] >= greedy * COSTED_TREE_GAIN:
        return None
    return whole[2]


def _edges(relations: list[Relation], bits: dict[str, int], conjuncts: list[exp.Expression]):
    """Return each conjunct's relations (a bit each) and its equality key where it is one, and each relation's
    neighbours by such keys."""
    edges, adjacent = [], [0] * len(relations)
    for conjunct in conjuncts:
        tables = {column.table for column in free_columns(conjunct)}
        if not tables or not tables <= bits.keys():
            continue
        mask = sum(set(bits[t] for t in tables))
        key = None
        if mask.bit_count() == 2:
            low, high = mask & -mask, mask & (mask - 1)
            pair = edge_keys(relations[low.bit_length() - 1], relations[high.bit_length() - 1], conjunct)
            if pair is not None:
                key = (low, pair)
                adjacent[low.bit_length() - 1] |= high
                adjacent[high.bit_length() - 1] |= low
        edges.append((mask, key))
    return edges, adjacent


def _greedy_cost(best, n: int, edges, members) -> float:
    """Return the summed estimated rows of the greedy order (:func:`join_greedy`'s loop) over the same estimates."""
    components = [(1 << k, best[1 << k][1]) for k in range(n)]
    cost = 0.0
    while len(components) > 1:
        choice = None
        for (m1, e1), (m2, e2) in itertools.combinations(components, 2):
            if not _connected(m1, m2, edges, members):
                continue
            before, after = _joined_rows(e1, e2, m1, m1 | m2, edges, members)
            candidate = (before, sorted((tuple(sorted(e1.aliases)), tuple(sorted(e2.aliases)))), m1, m2, e1, e2, after)
            if choice is None or candidate[:2] < choice[:2]:
                choice = candidate
        if choice is None:
            return float("inf")
        _, _, m1, m2, e1, e2, after = choice
        stats = {k: v.capped(after) for k, v in {**e1.stats, **e2.stats}.items()}
        joined = _Estimate(e1.aliases | e2.aliases, {**e1.columns, **e2.columns}, after, stats)
        components = [c for c in components if c[0] not in (m1, m2)] + [(m1 | m2, joined)]
        cost += after
    return cost


def _connected(m1: int, m2: int, edges, members) -> bool:
    """Return whether an equality key or a class links relations ``m1`` to relations ``m2``."""
    if any(key is not None and mask & m1 and mask & m2 and not mask & ~(m1 | m2) for mask, key in edges):
        return True
    return any(any(bit & m1 for bit, _ in held) and any(bit & m2 for bit, _ in held) for held in members)


def _joined_rows(left: _Estimate, right: _Estimate, part: int, mask: int, edges, members) -> tuple[float, float]:
    """Return the estimated rows of joining ``left`` (relations ``part``) and ``right`` (the rest of ``mask``):
    before and after the conditions that are no equality key (each keeps half, as :func:`join_pair` says)."""
    pairs, filters = [], 0
    for condition_mask, key in edges:
        if condition_mask & ~mask or not condition_mask & part or not condition_mask & ~part:
            continue
        if key is None:
            filters += 1
        else:
            low, (x, y) = key
            pairs.append((x, y) if low & part else (y, x))
    for held in members:
        in_left = [m for bit, m in held if bit & part]
        in_right = [m for bit, m in held if bit & mask & ~part]
        if in_left and in_right:
            x = min(in_left, key=lambda m: (distinct_count(left, m), m))
            y = min(in_right, key=lambda m: (distinct_count(right, m), m))
            pairs.append((left.columns[x], right.columns[y]))
    before = join_estimate(left, right, pairs) if pairs else left.rows * right.rows
    return before, max(1.0, before * 0.5 ** filters) if filters else before


def _join_tree(planner: PlanningContext, tree: JoinTree | int, relations: list[Relation],
               pending: list[exp.Expression], needed: set[tuple[str, str]],
               classes: list[EquivalenceClass]) -> Relation:
    """Build the joins of ``tree`` bottom up (left subtree first)."""
    if isinstance(tree, int):
        return relations[tree]
    left = _join_tree(planner, tree.left, relations, pending, needed, classes)
    right = _join_tree(planner, tree.right, relations, pending, needed, classes)
    return _join_on_classes(planner, left, right, pending, needed, classes, tree.estimate)


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

    The leading run of inner joins is the exception: those joins commute, so they are ordered by
    :func:`join_greedy` on their ON conditions (and the WHERE conjuncts over them alone, unless a later
    RIGHT or FULL join NULL-extends their rows); without RIGHT or FULL joins, so are the later inner joins
    whose ON condition reads no LEFT-joined item (:func:`_inner_run`). Written in order,
    ``a JOIN b ON … JOIN c ON … LEFT JOIN d`` would join ``a`` and ``b`` first whatever their sizes (TPC-DS
    q72 joined inventory to catalog_sales on the item alone, ~10^9 pairs at SF1, before the selective
    dimensions).
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
    """Join a run of FROM items linked by inner joins in the order :func:`join_greedy` picks.

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
