"""Order each region of inner joins by the typed estimates: the join order as a pass over the typed plan.

Why here: the SQL planner orders joins over the sqlglot tree
(:mod:`gpu_engine.sql.join_ordering`) before the optimizer's pushdown places
the filters it did not see, and a plan built with
:class:`~gpu_engine.plans.plan_builder.PlanBuilder`, read from JSON or planned
by Spark is joined in whatever order it was written. This rule (issue 30
item 0; DuckDB's join order optimizer) takes each maximal region of inner
joins apart (:func:`~gpu_engine.optimizer.join_graph.join_graph`: relations,
key edges, other conditions), searches the left-deep orders of its relations
for the least summed estimated intermediate rows — the SQL rule's cost — from
:mod:`~gpu_engine.optimizer.cardinality`'s estimates, and rebuilds the region
in that order (:func:`~gpu_engine.optimizer.join_graph.joined`).

The search: up to :data:`EXHAUSTIVE_LIMIT` relations, every left-deep order
whose each join has a key to what is joined before it (dynamic programming
over subsets, ``n * 2^n`` steps); beyond it, greedily (the smallest joined
pair first, then each time the relation whose join leaves the fewest rows).
Each step's rows are the estimate of the join :func:`joined` builds: the
product of the inputs' rows over the key set's distinct values
(:func:`~gpu_engine.optimizer.statistics.key_set_divisor`), halved by each
condition beside the keys that becomes readable there, as
:func:`~gpu_engine.optimizer.cardinality.estimate` counts a join.

The written order stays unless the found one is estimated to cost under
:data:`ORDER_GAIN` of it (both costed by :func:`~gpu_engine.optimizer.cardinality.estimate`
over the plans themselves, the written one as its joins really nest, bushy
or not): the estimates are rough, and the SQL rule's plans that a small
estimated gain would reorder gain nothing to be seen (its ``COSTED_TREE_GAIN``).
Regions of two relations (the build side is
:mod:`~gpu_engine.optimizer.build_sides`' choice, which runs after this) and
regions with a relation not estimated (a window, a table without statistics)
stay as they are. A region whose relations no keys link all together (TPC-DS
q54's month range between two scalar subqueries) may pair relations without
a key anywhere in its order, at the product of their rows; one that keys
link never does (an estimate of one row that is wrong would pair millions).

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
from gpu_engine.optimizer.join_graph import JoinEdge, JoinGraph, join_graph, joined
from gpu_engine.optimizer.statistics import ColumnStatistics, TableStatistics, key_set_divisor
from gpu_engine.plans.nodes import FilterNode, HashJoinNode, NestedLoopJoinNode, PlanNode, walk_plan

__all__ = ["EXHAUSTIVE_LIMIT", "ORDER_GAIN", "order_joins"]

#: The most relations whose left-deep orders are all costed; a larger region is ordered greedily.
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
        if n < 3:
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
        cross = not graph.is_connected()
        graph, classes = _closed(graph)
        order = (_cheapest_order if n <= EXHAUSTIVE_LIMIT else _greedy_order)(graph, bases, classes, cross)
        if order is None:
            return graph.root
        candidate = joined(graph, order, self.new_id)
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
    rule's :mod:`gpu_engine.sql.join_equivalences`). :func:`joined` leaves out an edge the keys applied
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
    """Relations joined left-deep: their summed join rows, rows, columns' statistics and order."""

    cost: float
    rows: float
    columns: Mapping[str, ColumnStatistics]
    order: tuple[int, ...]


def _step(graph: JoinGraph, bases: Sequence[Estimate], current: _Joined, relation: int,
          classes: Mapping[str, int], cross: bool) -> _Joined | None:
    """Return ``current`` joined to ``relation`` as :func:`joined` builds it: one key per class of equal columns
    (the others are implied); no key links them: paired (``cross``: the rows multiplied) or None."""
    present = set(current.order)
    pairs, extra, used = [], 0, set()
    for edge in graph.edges:
        if edge.left == relation and edge.right in present:
            pair = (edge.right_column, edge.left_column)
        elif edge.right == relation and edge.left in present:
            pair = (edge.left_column, edge.right_column)
        else:
            continue
        if classes[pair[1]] in used:
            continue
        used.add(classes[pair[1]])
        pairs.append(pair)
    if not pairs and not cross:
        return None
    extra += sum(1 for c in graph.conditions
                 if c.relations <= present | {relation} and not c.relations <= present and c.relations != {relation})
    base = bases[relation]
    if not current.rows or not base.rows:
        rows = 0.0
    else:
        divisor = key_set_divisor(_Side(current.rows, current.columns), _Side(base.rows, base.columns), pairs)
        rows = max(1.0, current.rows * base.rows / divisor)
        if extra:
            rows = max(1.0, rows * 0.5 ** extra)
    columns = {name: stats.capped(rows) for name, stats in {**base.columns, **current.columns}.items()}
    return _Joined(current.cost + rows, rows, columns, current.order + (relation,))


def _start(bases: Sequence[Estimate], relation: int) -> _Joined:
    return _Joined(0.0, bases[relation].rows, bases[relation].columns, (relation,))


def _cheapest_order(graph: JoinGraph, bases: Sequence[Estimate], classes: Mapping[str, int], cross: bool
                    ) -> tuple[int, ...] | None:
    """Return the left-deep order of least summed rows, each join on a key (None: none is)."""
    n = len(bases)
    best: dict[int, _Joined] = {1 << k: _start(bases, k) for k in range(n)}
    for mask in range(1, 1 << n):
        if mask & (mask - 1) == 0:
            continue
        choice = None
        for relation in range(n):
            bit = 1 << relation
            if not mask & bit or (mask ^ bit) not in best:
                continue
            found = _step(graph, bases, best[mask ^ bit], relation, classes, cross)
            if found is not None and (choice is None or found.cost < choice.cost):
                choice = found
        if choice is not None:
            best[mask] = choice
    whole = best.get((1 << n) - 1)
    return None if whole is None else whole.order


def _greedy_order(graph: JoinGraph, bases: Sequence[Estimate], classes: Mapping[str, int], cross: bool
                  ) -> tuple[int, ...] | None:
    """Return a left-deep order that starts with the pair joined to the fewest rows and adds, each step, the
    relation whose join leaves the fewest rows (None: a step finds no key)."""
    n = len(bases)
    current = None
    for a in range(n):
        for b in range(n):
            if a != b:
                found = _step(graph, bases, _start(bases, a), b, classes, cross)
                if found is not None and (current is None or found.rows < current.rows):
                    current = found
    while current is not None and len(current.order) < n:
        steps = [_step(graph, bases, current, r, classes, cross) for r in range(n) if r not in current.order]
        steps = [s for s in steps if s is not None]
        current = min(steps, key=lambda s: s.rows) if steps else None
    return None if current is None else current.order
