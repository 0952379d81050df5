"""Order each region of inner joins by the typed estimates: the join order as a pass over the typed plan.

Why here: the SQL planner orders joins over the sqlglot tree
(:mod:`gpu_engine.sql.join_ordering`) before the optimizer's pushdown places
the filters it did not see, and a plan built with
:class:`~gpu_engine.plans.plan_builder.PlanBuilder`, read from JSON or planned
by Spark is joined in whatever order it was written. This rule (issue 30
item 0; DuckDB's join order optimizer) takes each maximal region of inner
joins apart (:func:`~gpu_engine.optimizer.join_graph.join_graph`: relations,
key edges, other conditions), searches its join trees for the least summed
estimated intermediate rows — the SQL rule's cost — from
:mod:`~gpu_engine.optimizer.cardinality`'s estimates, and rebuilds the region
as that tree (:func:`~gpu_engine.optimizer.join_graph.joined_tree`).

The search: up to :data:`EXHAUSTIVE_LIMIT` relations, every tree, bushy or
left-deep, whose each join has a key between its sides (dynamic programming
over the splits of each set of relations, ``3^n``, as the SQL rule's
``cheapest_tree``: TPC-H q7 joins each nation to its supplier or customer
side before the two sides meet, which no left-deep order does); beyond it,
greedily (the smallest joined pair first, then each time the relation whose
join leaves the fewest rows). Each join's rows are the estimate of the join
:func:`~gpu_engine.optimizer.join_graph.joined_tree` builds: the product of
the inputs' rows over the key set's distinct values
(:func:`~gpu_engine.optimizer.statistics.key_set_divisor`), halved by each
condition beside the keys that becomes readable there, as
:func:`~gpu_engine.optimizer.cardinality.estimate` counts a join. Equal
columns form classes (:func:`_closed`): ``c.nation = s.nation AND s.nation =
n.nation`` keys customer to nation too.

The written order stays unless the found one is estimated to cost under
:data:`ORDER_GAIN` of it (both costed by :func:`~gpu_engine.optimizer.cardinality.estimate`
over the plans themselves, the written one as its joins really nest, bushy
or not): the estimates are rough, and the SQL rule's plans that a small
estimated gain would reorder gain nothing to be seen (its ``COSTED_TREE_GAIN``).
Regions of two relations (the build side is
:mod:`~gpu_engine.optimizer.build_sides`' choice, which runs after this) and
regions with a relation not estimated (a window, a table without statistics)
stay as they are, and so does a region whose relations no keys link all
together: allowed to pair relations without a key at the product of their
rows, TPC-DS q54's two one-row scalar subqueries met the store first and its
month range moved off ``date_dim`` to the top join (estimated 127K -> 72K
rows, +14.6% CPU at SF1; bench/results/2026-11-28-joinorder-typed-join-order.md).

Outer, semi and anti joins are never crossed: they are relations of the
regions around them (:mod:`~gpu_engine.optimizer.join_graph`), and the
inner-join regions inside them are ordered on their own.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from gpu_engine.optimizer.cardinality import Estimate, estimate
from gpu_engine.optimizer.conjuncts import conjunction
from gpu_engine.optimizer.join_graph import JoinEdge, JoinGraph, JoinTree, join_graph, joined_tree
from gpu_engine.optimizer.statistics import ColumnStatistics, TableStatistics, key_set_divisor
from gpu_engine.plans.nodes import FilterNode, HashJoinNode, NestedLoopJoinNode, PlanNode, walk_plan

__all__ = ["EXHAUSTIVE_LIMIT", "ORDER_GAIN", "order_joins"]

#: The most relations whose join trees are all costed (3^n splits); a larger region is ordered greedily.
EXHAUSTIVE_LIMIT = 10

#: The share of the written order's estimated rows the found order must stay under to replace it (the SQL
#: rule's ``COSTED_TREE_GAIN``: the estimates are rough, and smaller gains changed plans for nothing seen).
ORDER_GAIN = 0.8


def order_joins(plan: PlanNode, statistics: Mapping[str, TableStatistics]) -> PlanNode:
    """Return ``plan`` with each region of inner joins in the order of least estimated intermediate rows (the
    same object where no region moves)."""
    if not any(isinstance(node, HashJoinNode | NestedLoopJoinNode) for node in walk_plan(plan)):
        return plan
    return _Orderer(plan, statistics).visit(plan)


@dataclass(frozen=True)
class _Side:
    """What :func:`key_set_divisor` reads of a join input."""

    rows: float
    stats: Mapping[str, ColumnStatistics]


class _Orderer:
    def __init__(self, plan: PlanNode, statistics: Mapping[str, TableStatistics]):
        self.statistics = statistics
        self.used = {node.id for node in walk_plan(plan)}

    def new_id(self) -> str:
        n = 1
        while f"order.{n}" in self.used:
            n += 1
        self.used.add(f"order.{n}")
        return f"order.{n}"

    def visit(self, node: PlanNode) -> PlanNode:
        graph = join_graph(node)
        if graph is None:
            sources = tuple(self.visit(source) for source in node.sources)
            if any(new is not old for new, old in zip(sources, node.sources)):
                return replace(node, sources=sources)
            return node
        relations = [self.visit(relation) for relation in graph.relations]
        if any(new is not old for new, old in zip(relations, graph.relations)):
            node = _substituted(node, {id(old): new for old, new in zip(graph.relations, relations)})
            graph = join_graph(node)
        return self.ordered(graph)

    def ordered(self, graph: JoinGraph) -> PlanNode:
        """Return the region in the order of least estimated rows, or its root where the gain is too small."""
        n = len(graph.relations)
        if n < 3 or not graph.is_connected():
            return graph.root
        written = _summed_rows(graph.root, self.statistics, set(map(id, graph.relations)))
        if written is None:
            return graph.root
        bases = []
        for position, relation in enumerate(graph.relations):
            own = [c for c in graph.conditions if c.relations == {position}]
            base = relation if not own else FilterNode(
                id="estimate", output_schema=relation.output_schema, sources=(relation,),
                predicate=conjunction([c.predicate for c in own]))
            found = estimate(base, self.statistics)
            if found is None:
                return graph.root
            bases.append(found)
        graph, classes = _closed(graph)
        tree = (_cheapest_tree if n <= EXHAUSTIVE_LIMIT else _greedy_tree)(graph, bases, classes)
        if tree is None:
            return graph.root
        candidate = joined_tree(graph, tree, self.new_id)
        cost = _summed_rows(candidate, self.statistics, set(map(id, graph.relations)))
        if cost is None or cost >= written * ORDER_GAIN:
            return graph.root
        return candidate


def _substituted(node: PlanNode, new: dict[int, PlanNode]) -> PlanNode:
    """Return the region rooted at ``node`` with its relations replaced (by identity) as ``new`` says."""
    if id(node) in new:
        return new[id(node)]
    if not isinstance(node, FilterNode | HashJoinNode | NestedLoopJoinNode):
        return node
    sources = tuple(_substituted(source, new) for source in node.sources)
    return replace(node, sources=sources) if any(a is not b for a, b in zip(sources, node.sources)) else node


def _closed(graph: JoinGraph) -> tuple[JoinGraph, dict[str, int]]:
    """Return ``graph`` with an edge between every two columns of a class of equal columns (of one type), and
    each key column's class.

    Why: ``c.nation = s.nation AND s.nation = n.nation`` (TPC-H q5) links customer to nation too; without the
    derived edge, no order joins the customers to the one region's nations before the suppliers (the SQL
    rule's :mod:`gpu_engine.sql.join_equivalences`). :func:`joined_tree` leaves out an edge the keys applied
    before imply, so each join keys on one column per class.
    """
    parent: dict[str, str] = {}

    def find(column: str) -> str:
        while column in parent:
            column = parent[column]
        return column

    owner, types = {}, {}
    for edge in graph.edges:
        owner[edge.left_column], owner[edge.right_column] = edge.left, edge.right
        if find(edge.left_column) != find(edge.right_column):
            parent[find(edge.left_column)] = find(edge.right_column)
    for relation in graph.relations:
        for field in relation.output_schema:
            types[field.name] = field.type
    members: dict[str, list[str]] = {}
    for column in owner:
        members.setdefault(find(column), []).append(column)
    classes = {column: k for k, group in enumerate(members.values()) for column in group}
    edges = list(graph.edges)
    linked = {(e.left_column, e.right_column) for e in edges} | {(e.right_column, e.left_column) for e in edges}
    for group in members.values():
        for a, b in itertools.combinations(group, 2):
            if owner[a] != owner[b] and (a, b) not in linked and types[a] == types[b]:
                edges.append(JoinEdge(owner[a], a, owner[b], b))
    return replace(graph, edges=tuple(edges)), classes


def _summed_rows(root: PlanNode, statistics: Mapping[str, TableStatistics], relations: set[int]) -> float | None:
    """Return the estimated rows of every join of the region rooted at ``root`` summed (None: one not estimated)."""
    total = 0.0
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in relations:
            continue
        if isinstance(node, HashJoinNode | NestedLoopJoinNode):
            found = estimate(node, statistics)
            if found is None:
                return None
            total += found.rows
        stack.extend(node.sources)
    return total


@dataclass(frozen=True)
class _Joined:
    """Relations joined as ``tree``: the summed rows of its joins, its rows, its columns' statistics, and its
    relations (a bit each)."""

    cost: float
    rows: float
    columns: Mapping[str, ColumnStatistics]
    tree: JoinTree
    members: int


def _join(graph: JoinGraph, left: _Joined, right: _Joined, classes: Mapping[str, int]) -> _Joined | None:
    """Return ``left`` joined to ``right`` as :func:`joined_tree` builds it: one key per class of equal columns
    (the others are implied), each condition that becomes readable here halving the rows (None: no key links
    them)."""
    pairs, used = [], set()
    for edge in graph.edges:
        if left.members >> edge.left & 1 and right.members >> edge.right & 1:
            pair = (edge.left_column, edge.right_column)
        elif left.members >> edge.right & 1 and right.members >> edge.left & 1:
            pair = (edge.right_column, edge.left_column)
        else:
            continue
        if classes[pair[1]] not in used:
            used.add(classes[pair[1]])
            pairs.append(pair)
    if not pairs:
        return None
    both = left.members | right.members
    extra = 0
    for condition in graph.conditions:
        bits = sum(1 << r for r in condition.relations)
        if bits & ~both == 0 and bits & ~left.members and bits & ~right.members:
            extra += 1
    if not left.rows or not right.rows:
        rows = 0.0
    else:
        divisor = key_set_divisor(_Side(left.rows, left.columns), _Side(right.rows, right.columns), pairs)
        rows = max(1.0, left.rows * right.rows / divisor)
        if extra:
            rows = max(1.0, rows * 0.5 ** extra)
    columns = {name: stats.capped(rows) for name, stats in {**right.columns, **left.columns}.items()}
    return _Joined(left.cost + right.cost + rows, rows, columns, (left.tree, right.tree), both)


def _start(bases: Sequence[Estimate], relation: int) -> _Joined:
    return _Joined(0.0, bases[relation].rows, bases[relation].columns, relation, 1 << relation)


def _cheapest_tree(graph: JoinGraph, bases: Sequence[Estimate], classes: Mapping[str, int]) -> JoinTree | None:
    """Return the join tree of least summed rows, bushy or not, each join on a key (None: no tree joins them
    all): dynamic programming over the splits of each set of relations (3^n)."""
    n = len(bases)
    best: dict[int, _Joined] = {1 << k: _start(bases, k) for k in range(n)}
    for mask in range(1, 1 << n):
        low = mask & -mask
        if mask == low:
            continue
        choice = None
        part = (mask - 1) & mask
        while part:
            if part & low and part in best and (mask ^ part) in best:
                found = _join(graph, best[part], best[mask ^ part], classes)
                if found is not None and (choice is None or found.cost < choice.cost):
                    choice = found
            part = (part - 1) & mask
        if choice is not None:
            best[mask] = choice
    whole = best.get((1 << n) - 1)
    return None if whole is None else whole.tree


def _greedy_tree(graph: JoinGraph, bases: Sequence[Estimate], classes: Mapping[str, int]) -> JoinTree | None:
    """Return a left-deep tree that starts with the pair joined to the fewest rows and adds, each step, the
    relation whose join leaves the fewest rows (None: a step finds no key)."""
    n = len(bases)
    current = None
    for a in range(n):
        for b in range(n):
            if a != b:
                found = _join(graph, _start(bases, a), _start(bases, b), classes)
                if found is not None and (current is None or found.rows < current.rows):
                    current = found
    while current is not None and current.members != (1 << n) - 1:
        steps = [_join(graph, current, _start(bases, r), classes) for r in range(n)
                 if not current.members >> r & 1]
        steps = [s for s in steps if s is not None]
        current = min(steps, key=lambda s: s.rows) if steps else None
    return None if current is None else current.tree
