"""Split WHERE and ON conditions into conjuncts and place each one: on a FROM item, at a join, or after the joins.

Why a module of its own: where a predicate runs decides how many rows every
later operator sees, and the rules for moving one are easy to get wrong
around outer joins and ORs. A conjunct over one relation filters its scan; an
equality of two relations' columns is a join edge
(:mod:`~gpu_engine.sql.join_ordering`); the rest are join filters applied as
soon as their relations are joined. Common conjuncts of an OR are pulled out
first, and an OR whose every branch restricts one table also filters that
table, as TPC-H Q19 needs. A constant conjunct (no column) keeps every row or
none: TRUE is dropped, any other filters every input not NULL-extended by an
outer join (FALSE or NULL empties them; one that fails, such as
``CAST('x' AS INTEGER) = 1``, fails on their first row). Conditions on a
NULL-extended side stay above the outer join.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.sql.filtered_statistics import pinned_statistics
from gpu_engine.sql.planning_context import Relation, conjunct_key
from gpu_engine.sql.renaming import conjunction
from gpu_engine.sql import statistics
from gpu_engine.sql.statistics import ColumnStatistics, selectivity

if TYPE_CHECKING:
    from gpu_engine.sql.planning_context import PlanningContext

__all__ = ["conjuncts_of", "disjuncts_of", "conjoined", "disjoined", "factor_or", "constant_truth", "defined_aliases",
           "free_columns", "has_subquery", "where_conjuncts", "pushed_down", "filter_estimate",
           "filtered", "reached_through_and_or", "own_scope_nodes"]


def conjuncts_of(tree: exp.Expression | None) -> list[exp.Expression]:
    """Return the operands of a chain of ANDs (parentheses looked through); none for no tree."""
    if tree is None:
        return []
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if isinstance(tree, exp.And):
        return conjuncts_of(tree.this) + conjuncts_of(tree.expression)
    return [tree]


def disjuncts_of(tree: exp.Expression) -> list[exp.Expression]:
    """Return the branches of a chain of ORs (parentheses looked through)."""
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if isinstance(tree, exp.Or):
        return disjuncts_of(tree.this) + disjuncts_of(tree.expression)
    return [tree]


def conjoined(parts: list[exp.Expression]) -> exp.Expression:
    """Return copies of ``parts`` joined by AND (one part: its copy)."""
    return exp.and_(*[p.copy() for p in parts]) if len(parts) > 1 else parts[0].copy()


def disjoined(parts: list[exp.Expression]) -> exp.Expression:
    """Return copies of ``parts``, each parenthesized, joined by OR (one part: its copy)."""
    return exp.or_(*[exp.paren(p.copy()) for p in parts]) if len(parts) > 1 else parts[0].copy()


def factor_or(tree: exp.Expression) -> list[exp.Expression]:
    """Pull the conjuncts every branch of an OR shares out of it: (a AND b) OR (a AND c) is a AND (b OR c)."""
    branches = disjuncts_of(tree)
    if len(branches) < 2:
        return [tree]
    parts = [conjuncts_of(b) for b in branches]
    # Conjuncts alike by conjunct_key (``t."a" = u.c`` is ``u.c = t.a``), each keyed once, and no further branch
    # once nothing is common. (Their SQL text told those apart, and generating it deep-copied each conjunct.)
    keys = [[conjunct_key(p) for p in parts[0]]]
    shared = set(keys[0])
    for branch in parts[1:]:
        keys.append([conjunct_key(p) for p in branch])
        shared &= set(keys[-1])
        if not shared:
            return [tree]
    common = [p for p, key in zip(parts[0], keys[0]) if key in shared]
    rests = [[p for p, key in zip(branch, branch_keys) if key not in shared]
             for branch, branch_keys in zip(parts, keys)]
    if any(not rest for rest in rests):  # one branch is only the common part: the OR is true
        return common
    return common + [disjoined([conjoined(rest) for rest in rests])]


def own_scope_nodes(tree: exp.Expression, kinds: tuple[type, ...]) -> list[exp.Expression]:
    """Return the nodes of ``kinds`` in ``tree``'s own scope: not inside the SELECTs, set operations and
    subqueries nested in it (``tree`` itself may be one), nor inside a node already found."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, kinds):
            found.append(node)
            continue
        if isinstance(node, (exp.Select, exp.SetOperation, exp.Subquery)) and node is not tree:
            continue
        stack.extend(node.iter_expressions())
    return found


def in_nested_query(node: exp.Expression, scope: exp.Expression) -> bool:
    """Return whether ``node`` sits inside a SELECT or subquery nested in ``scope`` (its own scope, not ``scope``'s)."""
    parent = node.parent
    while parent is not None and parent is not scope:
        if isinstance(parent, (exp.Select, exp.Subquery)):
            return True
        parent = parent.parent
    return False


def reached_through_and_or(conjunct: exp.Expression, node: exp.Expression) -> bool:
    """Return whether ``node`` is reached from WHERE conjunct ``conjunct`` through AND, OR and parentheses alone.

    There a NULL and a FALSE lead to the same rows (no NOT turns either into TRUE), so a subquery predicate there
    may be planned as a semi or mark join without NULL-aware handling.
    """
    tree = node
    while tree is not conjunct:
        parent = tree.parent
        if not isinstance(parent, (exp.And, exp.Or, exp.Paren)):
            return False
        tree = parent
    return True


def constant_truth(tree: exp.Expression) -> bool | None:
    """Return True for a literal TRUE, False for FALSE or NULL (a filter keeps no row for either), else None."""
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if isinstance(tree, exp.Boolean):
        return bool(tree.this)
    if isinstance(tree, exp.Null):
        return False
    return None


def defined_aliases(select: exp.Select) -> set[str]:
    """Return the aliases a SELECT's FROM and JOIN items define."""
    items = []
    from_ = select.args.get("from_")
    if from_ is not None:
        items.append(from_.this)
    items += [join.this for join in select.args.get("joins") or []]
    return {item.alias_or_name for item in items}


def free_columns(tree: exp.Expression, bound: frozenset[str] = frozenset()) -> list[exp.Column]:
    """Return the columns of ``tree`` not bound by a SELECT nested inside it (correlated references included)."""
    out: list[exp.Column] = []
    stack = [(tree, bound)]
    while stack:
        node, scope = stack.pop()
        if isinstance(node, exp.Select):
            scope = scope | frozenset(defined_aliases(node))
        if isinstance(node, exp.Column):
            if node.table not in scope:
                out.append(node)
            continue
        for child in node.iter_expressions():
            stack.append((child, scope))
    return out


def has_subquery(tree: exp.Expression) -> bool:
    """Return whether ``tree`` holds a subquery, an EXISTS, an IN (SELECT ...) or an ANY / ALL (SELECT ...)
    anywhere."""
    return any(isinstance(node, (exp.Subquery, exp.Exists)) or (isinstance(node, exp.In) and node.args.get("query"))
               or isinstance(node, (exp.Any, exp.All)) and isinstance(node.this, (exp.Select, exp.SetOperation))
               for node in tree.walk())


def where_conjuncts(select: exp.Select, items: list[tuple[exp.Expression, exp.Join | None]],
                    outer_joins: bool) -> list[exp.Expression]:
    """Return the conjuncts of a SELECT's WHERE (and, without outer joins, its ON conditions), ORs factored.

    An inner join's ON condition is a WHERE conjunct like any other; with an
    outer join among the FROM items, ON conditions stay with their joins
    (:func:`~gpu_engine.sql.join_ordering.join_in_order`).
    """
    where = conjuncts_of(select.args.get("where").this) if select.args.get("where") else []
    pool: list[exp.Expression] = []
    for conjunct in where:
        pool.extend(factor_or(conjunct))
    if not outer_joins:
        for _, join in items[1:]:
            if join.args.get("on") is not None:
                for conjunct in conjuncts_of(join.args["on"]):
                    pool.extend(factor_or(conjunct))
    return pool


def pushed_down(conjuncts: list[exp.Expression], local_aliases: set[str], null_supplying: set[str]
                ) -> tuple[dict[str, list[exp.Expression]], list[exp.Expression]]:
    """Return the conjuncts that filter each FROM item (by alias) and those that wait for a join.

    A conjunct over one item that no outer join NULL-extends filters that
    item; a constant one filters every such item (TRUE is dropped); the rest
    wait. An OR among them also filters each item every branch restricts, but
    that filter is the optimizer's (:mod:`gpu_engine.optimizer.or_implied_filters`):
    the build side it changes is chosen after it
    (:mod:`gpu_engine.optimizer.build_sides`; the SQL copy that was here went,
    bench/results/2026-11-28-buildside2-typed-build-sides.md).
    """
    pushed: dict[str, list[exp.Expression]] = {alias: [] for alias in local_aliases}
    pending: list[exp.Expression] = []
    for conjunct in conjuncts:
        aliases = {c.table for c in free_columns(conjunct)}
        truth = None if aliases else constant_truth(conjunct)
        if truth is True:
            continue
        preserved = sorted(local_aliases - null_supplying)
        if not aliases and preserved:  # a constant keeps all rows or none: it filters each preserved input
            for alias in preserved:
                pushed[alias].append(exp.false() if truth is False else conjunct)
            continue
        if len(aliases) == 1 and next(iter(aliases)) in local_aliases and not (aliases & null_supplying):
            pushed[next(iter(aliases))].append(conjunct)
        else:
            pending.append(conjunct)
    return pushed, pending


def filter_estimate(relation: Relation, conjuncts: list[exp.Expression]) -> float:
    """Return the rows of ``relation`` estimated to pass ``conjuncts`` (see :func:`selectivity`)."""
    def column_stats(column: exp.Column) -> ColumnStatistics | None:
        return relation.stats.get(relation.columns.get((column.table, column.name), ""))

    fraction, conjuncts = statistics.intersected_value_sets(conjuncts, column_stats)
    bounds: dict[tuple[str, str], list[float]] = {}
    for conjunct in conjuncts:
        keeps = selectivity(conjunct, column_stats)
        if isinstance(conjunct, (exp.LT, exp.LTE, exp.GT, exp.GTE)) and isinstance(conjunct.this, exp.Column):
            bounds.setdefault((conjunct.this.table, conjunct.this.name), []).append(keeps)
            continue
        fraction *= keeps
    for kept in bounds.values():  # a lower and an upper bound of one column keep the range between them
        fraction *= max(0.001, sum(kept) - (len(kept) - 1)) if len(kept) == 2 else min(kept)
    return max(1.0, relation.rows * fraction)


def filtered(planner: PlanningContext, relation: Relation, conjuncts: list[exp.Expression]) -> Relation:
    """Return ``relation`` filtered by ``conjuncts`` (a Filter node over it), with its estimate lowered."""
    if not conjuncts:
        return relation
    predicate = conjunction([planner._renamed(c, relation.columns) for c in conjuncts])
    try:
        node = planner._builder(relation.node).filter(predicate).plan()
    except PlanError as error:
        raise planner._plan_error(error, conjuncts[0]) from None
    rows = filter_estimate(relation, conjuncts)
    return dataclasses.replace(relation, node=node, rows=rows, stats=pinned_statistics(relation, conjuncts, rows))
