"""The inner joins of a typed plan as a graph, and a plan that joins the graph's relations in a given order.

Why: a join order over the sqlglot tree runs before the optimizer's
predicate pushdown and sees neither the filters pushed into derived queries
afterwards nor any plan built by hand, read from JSON or planned by Spark.
Ordering joins as a pass over the typed plan (issue 30 item 0, DataFusion's
``join_selection`` / DuckDB's join order optimizer) starts from what this
module gives: a maximal region of inner joins — hash joins and nested-loop
joins of type ``inner``, with the Filters between and above them — taken
apart into

* its **relations**: the subtrees below the region (scans, outer joins,
  aggregations, anything that is no inner join or filter over one);
* its **edges**: equalities of one column of each of two relations (a hash
  join's key pairs, and a conjunct ``x = y`` of a join filter or a Filter);
* its **conditions**: every other conjunct, with the relations it reads.

:func:`joined_tree` rebuilds the region as another join tree (bushy or,
:func:`joined`, left-deep), each join on every edge between its two sides,
each condition at the lowest join that has all its relations, outputting the
region's columns in the region's order. Every join order of a region gives
the same rows (inner joins commute and associate, and a condition over rows
that are all present keeps the same ones wherever it is applied); the estimates that choose one are
:mod:`~gpu_engine.optimizer.cardinality`'s (the search over them:
:mod:`~gpu_engine.optimizer.join_order`).

A region whose relations share a column name is not taken apart (None): an
edge could not say which relation a key belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import pyarrow as pa

from gpu_engine.optimizer.conjuncts import conjunction, conjuncts
from gpu_engine.optimizer.or_implied_filters import implied_filters
from gpu_engine.plans.expressions import BinaryOp, ColumnRef, Expr, referenced_columns
from gpu_engine.plans.nodes import FilterNode, HashJoinNode, NestedLoopJoinNode, PlanNode

__all__ = ["JoinCondition", "JoinEdge", "JoinGraph", "JoinTree", "join_graph", "join_graphs", "joined", "joined_tree",
           "tree_relations"]


@dataclass(frozen=True)
class JoinEdge:
    """``relations[left].left_column = relations[right].right_column``."""

    left: int
    left_column: str
    right: int
    right_column: str


@dataclass(frozen=True)
class JoinCondition:
    """A conjunct that is no edge, and the relations whose columns it reads."""

    predicate: Expr
    relations: frozenset[int]


@dataclass(frozen=True)
class JoinGraph:
    """A region of inner joins rooted at ``root``: its relations, edges and conditions."""

    root: PlanNode
    relations: tuple[PlanNode, ...]
    edges: tuple[JoinEdge, ...]
    conditions: tuple[JoinCondition, ...]

    def neighbours(self, relation: int) -> frozenset[int]:
        """Return the relations an edge links to ``relation``."""
        out = set()
        for edge in self.edges:
            if edge.left == relation:
                out.add(edge.right)
            elif edge.right == relation:
                out.add(edge.left)
        return frozenset(out)

    def is_connected(self) -> bool:
        """Return whether edges link every relation to every other (no cross join is needed)."""
        seen, stack = {0}, [0]
        while stack:
            for other in self.neighbours(stack.pop()) - seen:
                seen.add(other)
                stack.append(other)
        return len(seen) == len(self.relations)


def _is_inner_join(node: PlanNode) -> bool:
    return isinstance(node, HashJoinNode | NestedLoopJoinNode) and node.join_type == "inner"


def _region_top(node: PlanNode) -> bool:
    """Return whether ``node`` is an inner join, or Filters over one."""
    while isinstance(node, FilterNode):
        node = node.source
    return _is_inner_join(node)


def join_graph(root: PlanNode) -> JoinGraph | None:
    """Return the graph of the inner-join region rooted at ``root`` (an inner join or Filters over one), or None
    when ``root`` is none or its relations share a column name."""
    if not _region_top(root):
        return None
    relations: list[PlanNode] = []
    predicates: list[Expr] = []
    keys: list[tuple[str, str]] = []

    def visit(node: PlanNode) -> None:
        if isinstance(node, FilterNode) and _region_top(node):
            predicates.extend(conjuncts(node.predicate))
            visit(node.source)
        elif _is_inner_join(node):
            if isinstance(node, HashJoinNode):
                keys.extend(zip(node.left_keys, node.right_keys))
            if node.filter is not None:
                predicates.extend(conjuncts(node.filter))
            for source in node.sources:
                visit(source)
        else:
            relations.append(node)

    visit(root)
    owner: dict[str, int] = {}
    for position, relation in enumerate(relations):
        for name in relation.output_schema.names:
            if name in owner:
                return None
            owner[name] = position
    edges = [JoinEdge(owner[left], left, owner[right], right) for left, right in keys]
    conditions = []
    for predicate in predicates:
        if (isinstance(predicate, BinaryOp) and predicate.op == "eq" and isinstance(predicate.left, ColumnRef)
                and isinstance(predicate.right, ColumnRef) and predicate.left.dtype == predicate.right.dtype
                and owner[predicate.left.name] != owner[predicate.right.name]):
            edges.append(JoinEdge(owner[predicate.left.name], predicate.left.name, owner[predicate.right.name],
                                  predicate.right.name))
        else:
            conditions.append(JoinCondition(predicate, frozenset(owner[c] for c in referenced_columns(predicate))))
    return JoinGraph(root, tuple(relations), tuple(edges), tuple(conditions))


def join_graphs(plan: PlanNode) -> list[JoinGraph]:
    """Return the graph of every maximal inner-join region of ``plan``, outer regions before those below them."""
    out: list[JoinGraph] = []

    def visit(node: PlanNode) -> None:
        graph = join_graph(node)
        if graph is not None:
            out.append(graph)
            below: Iterator[PlanNode] = iter(graph.relations)
        else:
            below = iter(node.sources)
        for source in below:
            visit(source)

    visit(plan)
    return out


def joined(graph: JoinGraph, order: Sequence[int], new_id: Callable[[], str]) -> PlanNode:
    """Return the region's relations joined left-deep in ``order`` (a permutation of their positions): the
    tree ``(((order[0], order[1]), order[2]), ...)`` of :func:`joined_tree`, each join building the next
    relation."""
    if sorted(order) != list(range(len(graph.relations))):
        raise ValueError(f"order {list(order)} is no permutation of the {len(graph.relations)} relations")
    tree: JoinTree = order[0]
    for relation in order[1:]:
        tree = (tree, relation)
    return joined_tree(graph, tree, new_id)


#: A join tree over a graph's relations: a relation's position, or a join of a left (probe) and a right (build)
#: tree.
JoinTree = int | tuple["JoinTree", "JoinTree"]


def tree_relations(tree: JoinTree) -> list[int]:
    """Return the relations of ``tree``, left to right."""
    return [tree] if isinstance(tree, int) else tree_relations(tree[0]) + tree_relations(tree[1])


def joined_tree(graph: JoinGraph, tree: JoinTree, new_id: Callable[[], str]) -> PlanNode:
    """Return the region's relations joined as ``tree`` says (every relation once; bushy trees too).

    Each join builds its right subtree, on every edge between its two subtrees (a hash join), or pairs them (a
    nested-loop join) where none links them; an edge the keys applied before imply (``x = y`` and ``y = z``
    make ``x = z``: rows an inner join keeps hold equal, non-NULL values) is left out, so a graph may carry
    every edge of a class of equal columns (:mod:`~gpu_engine.optimizer.join_order`); a condition filters the
    lowest join that has all its relations (a join's filter), or its relation alone when it reads one (the
    leftmost relation when it reads none). Each join keeps the columns a later edge, condition or the region's
    output reads; the top one outputs the root's columns in the root's order. ``new_id`` names each new node.
    """
    if sorted(tree_relations(tree)) != list(range(len(graph.relations))):
        raise ValueError(f"tree {tree} does not hold each of the {len(graph.relations)} relations once")
    output = list(graph.root.output_schema.names)
    pending = _with_implied(graph, tree)
    equal: dict[str, str] = {}  # column -> a column the keys applied so far made it equal to (union-find)
    leftmost = tree_relations(tree)[0]
    everything = frozenset(range(len(graph.relations)))

    def build(node: JoinTree) -> tuple[PlanNode, frozenset[int]]:
        nonlocal pending
        if isinstance(node, int):
            own = [c for c in pending if c.relations == {node} or (node == leftmost and not c.relations)]
            pending = [c for c in pending if not any(c is o for o in own)]
            return _filtered(graph.relations[node], own, new_id), frozenset([node])
        (left, on_left), (right, on_right) = build(node[0]), build(node[1])
        present = on_left | on_right
        pairs, equalities = [], []
        for edge in graph.edges:
            if edge.left in on_right and edge.right in on_left:
                pair = (edge.right_column, edge.left_column)
            elif edge.right in on_right and edge.left in on_left:
                pair = (edge.left_column, edge.right_column)
            else:
                continue
            if _find(equal, pair[0]) == _find(equal, pair[1]):  # implied by the keys applied: x = y, y = z: x = z
                continue
            equal[_find(equal, pair[0])] = _find(equal, pair[1])
            if any(pair[0] == a or pair[1] == b for a, b in pairs):  # a key once a side: a filter
                fields = {f.name: f for f in list(left.output_schema) + list(right.output_schema)}
                equalities.append(BinaryOp("eq", ColumnRef(pair[0], fields[pair[0]].type),
                                           ColumnRef(pair[1], fields[pair[1]].type), pa.bool_()))
            else:
                pairs.append(pair)
        applied = [c for c in pending if c.relations <= present]
        pending = [c for c in pending if not c.relations <= present]
        later = set(output)
        for edge in graph.edges:
            if edge.left not in present or edge.right not in present:
                later.update((edge.left_column, edge.right_column))
        for condition in pending:
            later.update(referenced_columns(condition.predicate))
        names = left.output_schema.names + right.output_schema.names
        kept = output if present == everything else [name for name in names if name in later]
        fields = {f.name: f for f in list(left.output_schema) + list(right.output_schema)}
        schema = pa.schema([fields[name] for name in kept])
        condition = conjunction(equalities + [c.predicate for c in applied]) if equalities or applied else None
        if pairs:
            return HashJoinNode(id=new_id(), output_schema=schema, sources=(left, right), join_type="inner",
                                left_keys=tuple(a for a, _ in pairs), right_keys=tuple(b for _, b in pairs),
                                output_columns=tuple(kept), filter=condition), present
        return NestedLoopJoinNode(id=new_id(), output_schema=schema, sources=(left, right), join_type="inner",
                                  output_columns=tuple(kept), filter=condition), present

    return build(tree)[0]


def _with_implied(graph: JoinGraph, tree: JoinTree) -> list[JoinCondition]:
    """Return the graph's conditions and, for each OR that ``tree`` applies at a join, the filter it implies on
    each side that holds two or more of the OR's relations (:func:`~gpu_engine.optimizer.or_implied_filters.
    implied_filters`), top down so that one implied in turn implies further below.

    Why: the pushdown derives these for the tree it is given, and the tree it was given is the written one: TPC-DS
    q13's OR over store_sales, customer_demographics and household_demographics implied a filter over
    (store_sales, customer_demographics) or over (customer_demographics, household_demographics) as the FROM
    list happened to pair them, so the region searched held other conditions and its plan changed with the
    text. The join order leaves out the implied filters it finds (they repeat the OR above them:
    :mod:`~gpu_engine.optimizer.join_order`) and gets them back here for the tree it chose: those that read one
    relation were pushed into it whatever the tree, those over several filter the join below the OR that has
    their relations."""
    owner = {name: k for k, relation in enumerate(graph.relations) for name in relation.output_schema.names}
    conditions = list(graph.conditions)

    def readers(part: Expr) -> frozenset[int]:
        return frozenset(owner[name] for name in referenced_columns(part))

    def visit(node: JoinTree) -> None:
        if isinstance(node, int):
            return
        sides = [frozenset(tree_relations(node[0])), frozenset(tree_relations(node[1]))]

        def split(parts: list[Expr]) -> tuple[list[list[Expr]], list[Expr]]:
            return [[p for p in parts if referenced_columns(p) and readers(p) <= side] for side in sides], []

        for condition in list(conditions):
            if (not isinstance(condition.predicate, BinaryOp) or condition.predicate.op != "or"
                    or not condition.relations <= sides[0] | sides[1]
                    or condition.relations <= sides[0] or condition.relations <= sides[1]):
                continue  # not an OR applied at this join
            for implied in implied_filters(condition.predicate, split, 2):
                if (implied is not None and len(readers(implied)) >= 2
                        and not any(implied == c.predicate for c in conditions)):
                    conditions.append(JoinCondition(implied, readers(implied)))
        visit(node[0])
        visit(node[1])

    visit(tree)
    return conditions


def _find(equal: dict[str, str], column: str) -> str:
    while column in equal:
        column = equal[column]
    return column


def _filtered(node: PlanNode, conditions: list[JoinCondition], new_id: Callable[[], str]) -> PlanNode:
    """Return ``node`` under a Filter of ``conditions`` (those that read only it), or as it is without any."""
    if not conditions:
        return node
    return FilterNode(id=new_id(), output_schema=node.output_schema, sources=(node,),
                      predicate=conjunction([c.predicate for c in conditions]))
