"""Order each region of inner joins by the typed estimates: the join order as a pass over the typed plan.

Why here: over the sqlglot tree a join order runs before the optimizer's
pushdown places the filters it did not see, and a plan built with
:class:`~gpu_engine.plans.plan_builder.PlanBuilder`, read from JSON or planned
by Spark is joined in whatever order it was written. It is the one join order
since stop 51: the SQL planner joins FROM items as written
(:func:`gpu_engine.sql.join_ordering.join_written`). This rule (issue 30
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

The search joins two sides only where a key or a condition links them (a
condition alone: a nested-loop join filtered by it), never as a cross product,
as DuckDB's enumerates connected pairs only. A relation of at most one row (a
scalar subquery) that only conditions link to one other relation is joined to
that relation before the search (:func:`_absorbed`: the conditions are its
filter; TPC-DS q54's ``d_month_seq`` between two scalar subqueries filters
``date_dim`` before its join, as the SQL planner places it).

The written order stays unless the found one is estimated to cost under
:data:`ORDER_GAIN` of it (both costed by :func:`~gpu_engine.optimizer.cardinality.estimate`
over the plans themselves, the written one as its joins really nest, bushy
or not): the estimates are rough, and the SQL rule's plans that a small
estimated gain would reorder gain nothing to be seen (its ``COSTED_TREE_GAIN``).
A written tree with a cross product (:func:`_crosses`) is replaced whatever
the estimates: summed output rows rank a product of two small tables too well
(TPC-DS q67). Regions of two relations (the build side is
:mod:`~gpu_engine.optimizer.build_sides`' choice, which runs after this),
regions with a relation not estimated (a window, a table without statistics)
and regions that neither keys nor conditions link all together stay as they
are (bench/results/2026-11-28-joinorder-typed-join-order.md,
2026-11-28-joinorder2-*.md).

Outer, semi and anti joins are never crossed: they are relations of the
regions around them (:mod:`~gpu_engine.optimizer.join_graph`), and the
inner-join regions inside them are ordered on their own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import pyarrow as pa

from gpu_engine.optimizer.cardinality import Estimate, estimate, implies, measured_divisor
from gpu_engine.optimizer.conjuncts import conjunction, conjuncts
from gpu_engine.optimizer.join_graph import JoinEdge, JoinGraph, JoinTree, join_graph, joined_tree
from gpu_engine.optimizer.statistics import ColumnStatistics, TableStatistics, key_set_divisor
from gpu_engine.plans.expressions import ColumnRef, Expr, referenced_columns
from gpu_engine.plans.nodes import (AggregationNode, EnforceSingleRowNode, FilterNode, HashJoinNode, LimitNode,
                                    LocalPartitionNode, NestedLoopJoinNode, PlanNode, ProjectNode, walk_plan)

__all__ = ["EXHAUSTIVE_LIMIT", "ORDER_GAIN", "order_joins"]

#: The most relations whose join trees are all costed (3^n splits); a larger region is ordered greedily.
EXHAUSTIVE_LIMIT = 10

#: Whether a tree's cost counts the rows each relation brings into its join beside the joins' output rows:
#: a relation built into a hash table (the smaller side) all of its rows, a probed one the share of them whose
#: keys the build side has (the engine filters a probe scan by the build's keys before decoding its rows:
#: :func:`_input_rows`). **On** since this rule alone orders joins (stop 51), with correlated keys
#: (:data:`~gpu_engine.optimizer.statistics.KEY_LIKE_ROWS`): TPC-DS q25 and q72 no longer lose (-3% and -12% at
#: SF1); q17's loss (+36%) was its date filters' estimate, fixed since (``d_quarter_name IN (...)``: 21,915
#: rows for 274 before :data:`~gpu_engine.optimizer.cardinality.STRING_DICTIONARY_COUNTS`)
#: (bench/results/2026-11-28-joinorder3-correlated-keys.md, 2026-11-29-joinorder2.md,
#: 2026-11-29-joinorder3-s51.md; ``bench/ab.py correlated-keys``).
COUNT_INPUT_ROWS = True

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
        if len(graph.relations) < 3 or not _linked(graph):
            return graph.root
        originals = set(map(id, graph.relations))
        written = _summed_rows(graph.root, self.statistics, originals)
        if written is None:
            return graph.root
        graph = _absorbed(_without_implied(graph), self.new_id)
        if CANONICAL:
            graph = _canonical(graph)
        n = len(graph.relations)
        if n < 2:
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
        tree = (_cheapest_tree if n <= EXHAUSTIVE_LIMIT else _greedy_tree)(graph, bases, classes, self.statistics)
        if tree is None:
            return graph.root
        candidate = joined_tree(graph, tree, self.new_id)
        cost = _summed_rows(candidate, self.statistics, originals)
        if cost is None:
            return graph.root
        if WRITTEN_ORDER_FREE:  # the search's tree (the written one itself: the same object back)
            return graph.root if _fingerprint(candidate) == _fingerprint(graph.root) else candidate
        if cost >= written * ORDER_GAIN and not _crosses(graph.root, originals):
            return graph.root
        return candidate


#: Whether the found order replaces the written one always (equal costs too: the search's tie-break, not the
#: text's), whatever :data:`ORDER_GAIN` says. It matters
#: once the FROM items reach this rule as written (so since stop 51), where the written order
#: is the text's and keeping it makes the plan depend on how the query is written. With the SQL ordering off,
#: TPC-H 22 + TPC-DS 99 at SF 0.01 shuffled twice (FROM lists and WHERE conjuncts): 32 optimized plans change
#: shape; this and :data:`CANONICAL` on, 13 (1 since: TPC-DS q13); either alone, 35 and 32. Timed with
#: the typed estimates' dictionary counts and correlated keys: TPC-DS -4.2% CPU over the 43 plans it changes,
#: TPC-H -12% over 2 (bench/results/2026-11-29-joinorder.md, 2026-11-29-joinorder2.md;
#: ``bench/join_order_invariance.py``, ``bench/ab.py typed-join-order-alone``). **On** since the SQL planner
#: joins FROM items as written (stop 51: :func:`gpu_engine.sql.join_ordering.join_written`): this rule is the
#: one join order, and the text's order must not choose among equal costs.
WRITTEN_ORDER_FREE = True

#: Whether a region's relations are searched in the order of their labels (:func:`_canonical`: what each
#: relation is and what it joins), not their positions in the plan (which follow the text's FROM list).
#: Shuffled texts (TPC-H 22 + TPC-DS 99, SF 0.01): with the SQL ordering on and this on, 0 of 121 optimized
#: plans change shape (2 before the labels were unqualified and refined by neighbours); with the SQL ordering
#: off and :data:`WRITTEN_ORDER_FREE` on, 1 (bench/results/2026-11-29-joinorder2.md), 0 since the filters
#: an OR implies are derived for the tree chosen (:func:`_without_implied`). **On** with
#: :data:`WRITTEN_ORDER_FREE` (stop 51).
CANONICAL = True


def _fingerprint(node: PlanNode) -> str:
    """Return what a relation is, independent of where its query lists it: each node's kind and fields but ids
    and sources (ids count positions), every column name as written in its table (:func:`_unqualified`), and
    projections that only rename left out. Why not its output columns: the read of a table the SQL planner
    meets first keeps its filter's columns where later reads are renamed and pruned (TPC-DS q17's three
    ``date_dim`` reads), and which read is first is the text's order."""
    parts = []
    for below in walk_plan(node):
        fields = [f"{f.name}={_field_text(getattr(below, f.name))}" for f in dataclasses.fields(below)
                  if f.name not in ("id", "sources", "output_schema")]
        if isinstance(below, ProjectNode):  # its columns in any order; one that only renames says nothing
            if all(isinstance(e, ColumnRef) for e in below.expressions):
                continue
            fields = sorted(f"{_unqualified(name)}:{_unqualified_text(repr(e))}"
                            for name, e in zip(below.names, below.expressions))
        parts.append(type(below).__name__ + "(" + ",".join(fields) + ")")
    return _unqualified_text("|".join(parts))


def _field_text(value: object) -> str:
    """Return a node field's text as the query's order does not move it: a predicate's conjuncts and a list of
    names sorted (a shuffled WHERE clause lists them otherwise)."""
    if isinstance(value, Expr):
        return " AND ".join(sorted(_unqualified_text(repr(c)) for c in conjuncts(value)))
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return repr(sorted(map(_unqualified, value)))
    return repr(value)


def _unqualified_text(text: str) -> str:
    return _QUOTED_NAME.sub(lambda m: repr(_unqualified(m.group(1))), text)


#: A quoted name in a node's fields (``name='d1.d_date_sk'``, ``'i_item_sk#2'``, an aggregate's ``'$sum0#6'``:
#: TPC-DS q11's CTE reads, whose ``#n`` follows the text's order).
_QUOTED_NAME = re.compile(r"'([A-Za-z_$][\w.#$]*)'")


def _unqualified(name: str) -> str:
    """Return a column's name without the alias or ``#n`` the SQL planner adds to tell repeated names apart
    (``d1.d_date_sk``, ``i_item_sk#2``): which read of a table gets them depends on where the query lists it."""
    return name.split("#", 1)[0].rsplit(".", 1)[-1]


#: Rounds of :func:`_canonical`'s refinement: each adds the labels of the relations one more key away.
_REFINE_ROUNDS = 3


def _canonical(graph: JoinGraph) -> JoinGraph:
    """Return ``graph`` with its relations in the order of their labels, its edges and conditions renumbered and
    sorted: the search breaks ties between equal costs by position, and the position must not be where the
    query happened to list a table.

    A relation's label is its fingerprint (:func:`_fingerprint`), refined :data:`_REFINE_ROUNDS` times by its
    neighbours' labels through each key (the key columns unqualified) and the conditions it shares (colour
    refinement, as a graph's canonical form is found). Why the neighbours: two reads of one table with one
    filter (TPC-DS q17's ``d2``/``d3``, q64's ``ad1``/``ad2``) have one fingerprint, and kept in the text's
    order they moved with a shuffled FROM list; what tells them apart is what they join (store_returns' date,
    catalog_sales' date). Relations still alike after that are alike in the whole graph: either order gives
    the same plan shape."""
    labels = [_fingerprint(relation) for relation in graph.relations]
    conditions = [_field_text(c.predicate) for c in graph.conditions]
    for _ in range(_REFINE_ROUNDS):
        links: list[list[str]] = [[] for _ in graph.relations]
        for e in graph.edges:
            links[e.left].append(f"{_unqualified(e.left_column)}={_unqualified(e.right_column)}:{labels[e.right]}")
            links[e.right].append(f"{_unqualified(e.right_column)}={_unqualified(e.left_column)}:{labels[e.left]}")
        for c, text in zip(graph.conditions, conditions):
            for k in c.relations:
                links[k].append(text + ":" + ",".join(sorted(labels[r] for r in c.relations if r != k)))
        labels = [hashlib.sha1("\n".join([labels[k]] + sorted(links[k])).encode()).hexdigest()
                  for k in range(len(labels))]
    order = sorted(range(len(graph.relations)), key=lambda k: labels[k])
    position = {old: new for new, old in enumerate(order)}
    edges = []
    for e in graph.edges:
        a, b = (position[e.left], e.left_column), (position[e.right], e.right_column)
        (a, b) = sorted((a, b))
        edges.append(JoinEdge(a[0], a[1], b[0], b[1]))
    renumbered = sorted(((replace(c, relations=frozenset(position[r] for r in c.relations)), text)
                         for c, text in zip(graph.conditions, conditions)),
                        key=lambda pair: (sorted(pair[0].relations), pair[1]))
    return JoinGraph(graph.root, tuple(graph.relations[k] for k in order),
                     tuple(sorted(set(edges), key=lambda e: (e.left, _unqualified(e.left_column), e.right,
                                                             _unqualified(e.right_column)))),
                     tuple(c for c, _ in renumbered))


def _without_implied(graph: JoinGraph) -> JoinGraph:
    """Return ``graph`` without each condition over several relations that another condition over more of them
    implies (:func:`~gpu_engine.optimizer.cardinality.implies`): the filters the pushdown derived from an OR for
    the sides of the written tree's joins (:mod:`~gpu_engine.optimizer.or_implied_filters`).

    Why: which ones it derived depends on how the text paired the relations (TPC-DS q13: over store_sales and
    customer_demographics, or over customer_demographics and household_demographics, as the FROM list was
    ordered), so the search would cost, tie-break and label another graph for each text. Left out, they repeat
    what the OR above them checks; :func:`~gpu_engine.optimizer.join_graph.joined_tree` derives them again for
    the tree the search chose."""
    dropped = [c for c in graph.conditions if len(c.relations) >= 2 and any(
        c.relations < other.relations and implies(other.predicate, c.predicate) for other in graph.conditions)]
    if not dropped:
        return graph
    return replace(graph, conditions=tuple(c for c in graph.conditions if not any(c is d for d in dropped)))


def _linked(graph: JoinGraph) -> bool:
    """Return whether keys and conditions link every relation of ``graph`` to every other: a condition reading
    several relations (``d_month_seq <= (SELECT ...)``: date_dim and a one-row scalar subquery) links them, as
    DuckDB's join graph counts a non-equi condition as an edge, so the search can join them (a nested-loop join
    filtered by it) where no key can."""
    parent = list(range(len(graph.relations)))

    def find(k: int) -> int:
        while parent[k] != k:
            k = parent[k]
        return k

    links = [(e.left, e.right) for e in graph.edges]
    links += [(a, b) for c in graph.conditions for a, b in itertools.pairwise(sorted(c.relations))]
    for a, b in links:
        parent[find(a)] = find(b)
    return len({find(k) for k in range(len(graph.relations))}) == 1


def _at_most_one_row(node: PlanNode) -> bool:
    """Return whether ``node`` gives at most one row whatever its input: a scalar subquery's EnforceSingleRow,
    an aggregation without grouping keys, a LIMIT 1, under projections and filters."""
    while isinstance(node, ProjectNode | FilterNode | LocalPartitionNode):
        node = node.sources[0]
    return (isinstance(node, EnforceSingleRowNode) or (isinstance(node, LimitNode) and node.count <= 1)
            or (isinstance(node, AggregationNode) and not node.grouping_keys and not node.global_grouping_sets))


def _absorbed(graph: JoinGraph, new_id) -> JoinGraph:
    """Return ``graph`` with each relation of at most one row that no key links, and whose conditions all read
    one other relation, joined to that relation first (a nested-loop join filtered by those conditions): one
    relation fewer for the search.

    Why: joined to a row of at most one, a relation keeps at most its own rows, so the conditions are its
    filter, and a filter belongs as low as it can go (the SQL planner filters ``date_dim`` by ``d_month_seq
    BETWEEN (SELECT ...) AND (SELECT ...)`` before its join). Left to the search, each condition only halves
    the estimate: TPC-DS q54's month range (3 of 2,400 months) was estimated to keep a quarter of
    ``date_dim``, so the search joined store_sales to the customers first and the range last, above the
    date join (estimated 127K -> 73K rows; +14.6% CPU at SF1 in an earlier version that paired them so).
    """
    one_row = {k for k, relation in enumerate(graph.relations) if _at_most_one_row(relation)
               and not any(k in (e.left, e.right) for e in graph.edges)}
    into: dict[int, int] = {}
    for k in sorted(one_row):
        partners = set().union(*(c.relations - {k} for c in graph.conditions if k in c.relations))
        if len(partners) == 1 and not partners & one_row:
            into[k] = partners.pop()
    if not into:
        return graph
    relations = list(graph.relations)
    absorbed = []
    for k, partner in into.items():
        conditions = [c for c in graph.conditions if c.relations == {k, partner}]
        absorbed += conditions
        left, right = relations[partner], graph.relations[k]
        fields = list(left.output_schema) + list(right.output_schema)
        relations[partner] = NestedLoopJoinNode(
            id=new_id(), output_schema=pa.schema(fields), sources=(left, right), join_type="inner",
            output_columns=tuple(f.name for f in fields), filter=conjunction([c.predicate for c in conditions]))
    position = {}
    for k in range(len(relations)):
        if k not in into:
            position[k] = len(position)
    edges = tuple(replace(e, left=position[e.left], right=position[e.right]) for e in graph.edges)
    conditions = tuple(replace(c, relations=frozenset(position[into.get(r, r)] for r in c.relations))
                       for c in graph.conditions if not any(c is a for a in absorbed))
    return JoinGraph(graph.root, tuple(relations[k] for k in position), edges, conditions)


def _crosses(root: PlanNode, relations: set[int]) -> bool:
    """Return whether the region rooted at ``root`` holds a cross product: an inner nested-loop join that no
    conjunct of its filter links across its two sides.

    Why such a written tree is replaced by the search's however they are estimated: the search joins only
    sides a key or condition links (DuckDB's enumerates connected pairs only), and the summed output rows rank a
    product of two small tables too well: TPC-DS q67 written as ``(store_sales x date_dim) JOIN (item x
    store)`` pairs 18,000 items with 12 stores (216,000 rows, built into a hash table on two keys), estimated
    1.27M rows against 1.58M for every keyed tree, and ran 16% slower (bench/results/
    2026-11-28-joinorder-typed-join-order.md). Counting build-side rows does not reorder it either (1.49M
    against 1.60M)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in relations:
            continue
        if isinstance(node, NestedLoopJoinNode) and node.join_type == "inner":
            left, right = (set(source.output_schema.names) for source in node.sources)
            read = [set(referenced_columns(c)) for c in (conjuncts(node.filter) if node.filter is not None else [])]
            if not any(columns & left and columns & right for columns in read):
                return True
        stack.extend(node.sources)
    return False


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
    derived edge, no order joins the customers to the one region's nations before the suppliers.
    :func:`joined_tree` leaves out an edge the keys applied
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
            if COUNT_INPUT_ROWS and any(id(source) in relations for source in node.sources):
                sides = [estimate(source, statistics) for source in node.sources]
                if None in sides:
                    return None
                pairs = list(zip(node.left_keys, node.right_keys)) if isinstance(node, HashJoinNode) else []
                for k, source in enumerate(node.sources):
                    if id(source) in relations:
                        total += _input_rows(sides[k], sides[1 - k], [p[::-1] for p in pairs] if k else pairs)
        stack.extend(node.sources)
    return total


def _input_rows(side, other, pairs: Sequence[tuple[str, str]]) -> float:
    """Return the rows a relation brings into its join with ``other`` on ``pairs`` (its column, the other's):
    all of them where it is the smaller side (built into the hash table), else the share whose keys the other
    side has (each key column the ratio of distinct counts, at most 1): the engine filters a probe scan by
    the build's keys (a runtime filter) before its rows are decoded, so a fact table probing a filtered
    dimension costs the rows the dimension keeps, one probing a large build nearly all its rows."""
    if side.rows <= other.rows:
        return side.rows
    share = 1.0
    for mine, theirs in pairs:
        own, kept = side.columns.get(mine), other.columns.get(theirs)
        if own is not None and kept is not None and own.ndv and kept.ndv:
            share *= min(1.0, kept.ndv / own.ndv)
    return side.rows * share


@dataclass(frozen=True)
class _Joined:
    """Relations joined as ``tree``: the summed rows of its joins, its rows, its columns' statistics, and its
    relations (a bit each)."""

    cost: float
    rows: float
    columns: Mapping[str, ColumnStatistics]
    tree: JoinTree
    members: int


def _join(graph: JoinGraph, left: _Joined, right: _Joined, classes: Mapping[str, int], statistics=None
          ) -> _Joined | None:
    """Return ``left`` joined to ``right`` as :func:`joined_tree` builds it: one key per class of equal columns
    (the others are implied), each condition that becomes readable here halving the rows (None: neither a key
    nor a condition links them; a condition alone makes a nested-loop join)."""
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
    both = left.members | right.members
    extra = 0
    for condition in graph.conditions:
        bits = sum(1 << r for r in condition.relations)
        if bits & ~both == 0 and bits & ~left.members and bits & ~right.members:
            extra += 1
    if not pairs and not extra:
        return None
    if not left.rows or not right.rows:
        rows = 0.0
    else:
        divisor = key_set_divisor(_Side(left.rows, left.columns), _Side(right.rows, right.columns), pairs,
                                  measured=measured_divisor(pairs, left.columns, right.columns, statistics))
        rows = max(1.0, left.rows * right.rows / divisor)
        if extra:
            rows = max(1.0, rows * 0.5 ** extra)
    columns = {name: stats.capped(rows) for name, stats in {**right.columns, **left.columns}.items()}
    cost = left.cost + right.cost + rows
    if COUNT_INPUT_ROWS:
        for side, other, keys in ((left, right, pairs), (right, left, [p[::-1] for p in pairs])):
            if side.members & (side.members - 1) == 0:  # one relation: its rows enter here
                cost += _input_rows(side, other, keys)
    return _Joined(cost, rows, columns, (left.tree, right.tree), both)


def _start(bases: Sequence[Estimate], relation: int) -> _Joined:
    return _Joined(0.0, bases[relation].rows, bases[relation].columns, relation, 1 << relation)


def _cheapest_tree(graph: JoinGraph, bases: Sequence[Estimate], classes: Mapping[str, int], statistics=None
                   ) -> JoinTree | None:
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
                found = _join(graph, best[part], best[mask ^ part], classes, statistics)
                if found is not None and (choice is None or found.cost < choice.cost):
                    choice = found
            part = (part - 1) & mask
        if choice is not None:
            best[mask] = choice
    whole = best.get((1 << n) - 1)
    return None if whole is None else whole.tree


def _greedy_tree(graph: JoinGraph, bases: Sequence[Estimate], classes: Mapping[str, int], statistics=None
                 ) -> JoinTree | None:
    """Return a left-deep tree that starts with the pair joined to the fewest rows and adds, each step, the
    relation whose join leaves the fewest rows (None: a step finds no key)."""
    n = len(bases)
    current = None
    for a in range(n):
        for b in range(n):
            if a != b:
                found = _join(graph, _start(bases, a), _start(bases, b), classes, statistics)
                if found is not None and (current is None or found.rows < current.rows):
                    current = found
    while current is not None and current.members != (1 << n) - 1:
        steps = [_join(graph, current, _start(bases, r), classes, statistics) for r in range(n)
                 if not current.members >> r & 1]
        steps = [s for s in steps if s is not None]
        current = min(steps, key=lambda s: s.rows) if steps else None
    return None if current is None else current.tree
