"""Aggregate below a join (eager group-by) over the typed plan: pre-aggregate the many side, join, re-aggregate.

Why: a query such as TPC-H Q10 joins lineitem, orders, customer and nation
and groups the joined rows by seven customer columns, long strings among
them, so every joined lineitem row gathers and hashes those strings. Summing
lineitem ⋈ orders per ``o_custkey`` first leaves one row per customer to
join and to group by the strings (Yan and Larson's "eager group-by"; Hyper
and DuckDB's optimizers plan similar pushdowns). TPC-DS q4, q11 and q74's
``year_total`` (sales ⋈ customer ⋈ date_dim grouped by customer columns and
``d_year``) have the same shape.

Why a typed rule after the pushdown (issue 30 item 0): as a rule over the
sqlglot tree (``sql/eager_aggregation.py``, deleted) it estimated a derived
table's rows before the optimizer's pushdown placed the readers' filters
in it, so the SQL planner kept a copy of that pushdown
(``sql/derived_pushdown.py``, deleted with it) for it alone: without the copy
TPC-DS q11's web ``year_total`` branch was estimated over every year and not
pre-aggregated (+15-21% at SF1, bench/results/2026-11-28-partialsteps-move.md).
Here the filters are where they end up, the estimates are
:mod:`~gpu_engine.optimizer.cardinality`'s, and PlanBuilder, JSON and Spark
plans get the rule too.

The rule, over a SINGLE aggregation whose input is a region of inner joins
(:func:`~gpu_engine.optimizer.join_graph.join_graph`), through projections:

* every aggregate is decomposable — ``sum``, ``count`` (``count(*)`` too),
  ``min``, ``max``, ``avg`` (as a sum and a count), none DISTINCT — and the
  columns they read belong to a set ``S`` of the region's relations (the
  "many" side; ``S`` grows from the relations the aggregates read by joined
  neighbours when that groups better: lineitem alone would group by
  ``l_orderkey``, lineitem ⋈ orders by ``o_custkey``);
* ``S`` is joined and grouped by every column of ``S`` read outside the
  aggregates — the grouping keys' and the keys and conditions that join
  ``S`` to the other relations — computing each aggregate's partial
  (``sum``, ``count``, ``min``, ``max``);
* the other relations join that aggregation, and the original aggregation
  re-aggregates the partials: a sum of sums, a sum of counts, a min of mins,
  ``avg`` as the sum of sums over the sum of counts.

Why it is correct without knowing any key unique: rows of ``S`` that agree
on every column the rest of the query reads outside the aggregates join the
same rows of the other relations, pass the same conditions and fall into the
same final groups; merging them first changes only how often each partial
state is merged, which sum, count, min and max do not notice. NULLs: a group
of NULL keys is joined as each of its rows would be (an equality drops them
all); ``count`` over no rows is 0, so a count's re-aggregation is its sum or
0; an ``avg`` whose partial counts sum to 0 is NULL. Not applied: grouping
sets, outer joins between the aggregated relations and the others (an outer
join is a relation of the region, never split), other aggregates (holistic,
moments, ordered, DISTINCT), or when ``S`` would be every relation.

When: only where the estimates say it pays (:func:`_benefit`): the rows the
pre-aggregation saves the later joins and the final aggregation (whose
per-row cost grows with its keys, strings most, except a small build side's,
which the join hands on as dictionary codes) must outweigh the
pre-aggregation itself: its rows and the fixed cost of its added operators
(:data:`PRE_AGGREGATION_SETUP`, and a share of it per partial aggregate).
Unknown distinct counts (strings) count as no reduction. A column's distinct
count is its range's, not its Parquet dictionary's (as
:mod:`~gpu_engine.optimizer.partial_steps` reads them,
:class:`~gpu_engine.optimizer.partial_steps.RangeCounts`; the SQL rule read
the ranges too): TPC-H q18's ``l_orderkey`` spans 6M values and holds 1.5M,
and pre-aggregating lineitem's 6M rows into 1.5M groups below the orders join
cost +75% at SF1 (bench/results/2026-11-28-eagertyped-move.md). The re-aggregation
stays here (min/max statistics never prove a key unique); where the other side's
join key is proven unique by reading its rows, each joined row is a group of its own
and :mod:`~gpu_engine.optimizer.unique_groupings`, after this rule, makes the
re-aggregation a projection (TPC-H q10). The costs
and constants are the SQL rule's, measured there (their history:
bench/results/2026-11-28-q66-*.md, 2026-11-28-joincost-*.md).

Where it runs: in :data:`~gpu_engine.optimizer.ESTIMATE_RULES` right after
join ordering, the joins below the pre-aggregation and above it keeping the
order the region had (each restricted to its relations; left-deep by key where
that restriction would cross two unlinked sides), the pre-aggregation built
where its groups are fewer than the other side's rows (:func:`_built_smaller`);
build sides and partial steps, after it, see the pre-aggregation's estimated
rows. ``bench/ab.py eager-aggregation`` runs the plans without it.

Against the SQL rule it replaced (bench/results/2026-11-28-eagermove.md,
2026-11-28-eagertyped-move.md): over the 121 TPC-H/TPC-DS plans at SF1 it
pre-aggregates what the SQL rule did plus TPC-H q9, TPC-DS q70 and q86 (a
window above the aggregation: the SQL rule refused any SELECT with a window);
answers equal DuckDB's at SF 0.1 for all 121. TPC-DS q4, q11 and q74 ran
+10-17% slower until an OR of one column's constants pinned its distinct
values in the estimates: ``Session.sql`` computes their shared ``year_total``
CTE once, with its readers' filters OR-ed in (``d_year = 2002 OR d_year =
2001``), and with all 201 years left this rule did not pre-aggregate its web
(and catalog) branch; now all 23 shared TPC-DS CTEs get the SQL rule's
pre-aggregations (bench/results/2026-11-28-eager2-typed-eager-cause.md,
``python -m bench.shared_cte_pre_aggregations``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping

import pyarrow as pa

from gpu_engine.columnar.types import is_string
from gpu_engine.operators.hash_build import DICTIONARY_BUILD_MAX_ROWS
from gpu_engine.optimizer.cardinality import Estimate, estimate, measured_divisor
from gpu_engine.optimizer.conjuncts import conjunction
from gpu_engine.optimizer.partial_steps import RangeCounts
from gpu_engine.optimizer.unique_keys import unique_keys
from gpu_engine.optimizer.join_graph import JoinGraph, JoinTree, join_graph, joined_tree, tree_relations
from gpu_engine.optimizer.statistics import ColumnStatistics, TableStatistics, joined_rows
from gpu_engine.plans.aggregates import aggregation_output_schema, final_step_aggregates, result_type
from gpu_engine.plans.expressions import (AggregateCall, BinaryOp, Case, Cast, ColumnRef, Expr, Literal, UnaryOp,
                                         referenced_columns)
from gpu_engine.plans.nodes import (AggregationNode, AggregationStep, FilterNode, HashJoinNode, NestedLoopJoinNode,
                                    PlanNode, ProjectNode, walk_plan)

__all__ = ["PARTIAL_SETUP_SHARE", "PRE_AGGREGATION_SETUP", "eager_aggregate", "grouped_rows"]

#: The aggregates a partial state of which merges by another aggregate (count by sum, avg by two sums).
_DECOMPOSABLE = ("sum", "count", "count_star", "min", "max", "avg")
#: Per-row cost of a grouping key relative to a fixed-width key: a string is hashed, compared and gathered
#: byte by byte (TPC-H Q10's seven customer keys against one integer; see the module docstring's "When").
STRING_KEY_COST = 4.0
#: Per-row cost of probing one join and gathering its columns, in the same units.
_JOIN_COST = 1.0
#: The most groups per input row a pre-aggregation may be estimated to keep: estimates are rough (a join's
#: fan-out most), so a pre-aggregation must cut its input clearly to be planned at all.
_MAX_GROUP_SHARE = 0.75
#: What a pre-aggregation costs whatever its rows, in the same units: its partial and final operators on every
#: driver, the exchange between them, and the re-aggregation above the join that merges its groups again.
#: Measured on the SQL rule: where the rows are few the saved rows do not pay for those (TPC-DS SF1: q21 grouped
#: its ~25K inventory rows below a 5-row warehouse join, +14..+30% CPU; q26, q60, q66 and q56's
#: pre-aggregations over a few thousand rows 8-15% slower than none). A unit (a row probing a join or grouped by
#: a fixed-width key) measured ~150 ns of a TPC-DS SF1 query's CPU, the added aggregation ~5 ms: some 30K units,
#: of which this counts a third, as estimates of small inputs run low
#: (bench/results/2026-11-28-strndv-string-ndv-cpu-sf1.md, 2026-11-28-joincost-runtime-filter-costs-cpu-sf1.md).
#: The rule's tests on tiny tables set it to 0 (their savings are rows, never 10,000 units).
PRE_AGGREGATION_SETUP = 10_000.0
#: What each partial aggregate adds to the set-up, as a share of it: the pre-aggregation's final step and the
#: re-aggregation's partial step each merge every partial state per batch whatever the rows. Measured on TPC-DS
#: q66 (SF1, 2 drivers, 24 decimal sums a branch over ~5-11K joined rows): ~3.3K units a partial, counted 2.5K
#: (bench/results/2026-11-28-q66-eager-aggregation-cause.md, 2026-11-28-q66-estimates-cpu-sf1.md).
PARTIAL_SETUP_SHARE = 0.25


def grouped_rows(rows: float, distinct_counts: list[float]) -> float:
    """Return the estimated groups of ``rows`` rows grouped by keys of these distinct counts (0: unknown).

    Why not their product: keys are rarely independent (a customer buys in a few of date_dim's 201 years),
    so the counts are combined with exponential backoff (the largest, times the square root of the next, the
    fourth root of the third, ...), as SQL Server's estimator combines selectivities; and ``rows`` draws
    from ``d`` possible groups hit ``d * (1 - exp(-rows / d))`` of them (Cardenas). An unknown count is no
    reduction at all.
    """
    if not distinct_counts:
        return 1.0
    if any(not count for count in distinct_counts):
        return max(1.0, rows)
    combined = 1.0
    for power, count in enumerate(sorted(distinct_counts, reverse=True)):
        combined *= max(1.0, count) ** (0.5 ** power)
    return max(1.0, min(rows, combined * -math.expm1(-rows / combined)))


def eager_aggregate(plan: PlanNode, statistics: Mapping[str, TableStatistics]) -> PlanNode:
    """Return ``plan`` with each aggregation over inner joins pre-aggregated below them where the estimates say
    it pays (the same object where none changes)."""
    if not any(isinstance(node, AggregationNode) for node in walk_plan(plan)):
        return plan
    return _Rewriter(plan, RangeCounts(statistics)).visit(plan)


# --------------------------------------------------------------------------------------------------- estimates
@dataclass(frozen=True)
class _Estimate:
    """The estimated size of a set of joined relations (what :func:`joined_rows` reads)."""

    members: frozenset[int]
    rows: float
    stats: Mapping[str, ColumnStatistics]


@dataclass
class _Graph:
    """A region's graph with each relation's estimate (its own conditions applied) and the sets estimated."""

    graph: JoinGraph
    bases: list[Estimate]
    owner: dict[str, int]
    estimates: dict[frozenset[int], _Estimate] = field(default_factory=dict)
    unique: dict = field(default_factory=dict)  # unique_keys' memo
    statistics: Mapping[str, TableStatistics] | None = None  # (a key of several columns: measured_divisor)

    def neighbours(self, members: frozenset[int]) -> set[int]:
        return set().union(*(self.graph.neighbours(k) for k in members)) - members


def _joined(g: _Graph, left: _Estimate, right: _Estimate) -> _Estimate:
    """Return two joined sets' estimate: the equalities divide by the key set's distinct values (one key of
    two sides cut to shares of its values by its domain: ``shared_domains``), each other condition that
    becomes readable halves the rows."""
    pairs = []
    for e in g.graph.edges:
        if e.left in left.members and e.right in right.members:
            pairs.append((e.left_column, e.right_column))
        elif e.right in left.members and e.left in right.members:
            pairs.append((e.right_column, e.left_column))
    union = left.members | right.members
    rows = (joined_rows(left, right, pairs, shared_domains=True,
                        measured=measured_divisor(pairs, left.stats, right.stats, g.statistics))
            if pairs else left.rows * right.rows)
    filters = sum(1 for c in g.graph.conditions
                  if c.relations <= union and c.relations & left.members and c.relations & right.members)
    rows = max(1.0, rows * 0.5 ** filters)
    stats = {k: v.capped(rows) for k, v in {**left.stats, **right.stats}.items()}
    return _Estimate(union, rows, stats)


def _estimate_of(g: _Graph, members: frozenset[int]) -> _Estimate:
    """Return the estimate of joining ``members``, adding connected relations first (the fewest rows first)."""
    if members in g.estimates:
        return g.estimates[members]
    if len(members) == 1:
        [k] = members
        found = _Estimate(members, g.bases[k].rows, g.bases[k].columns)
        g.estimates[members] = found
        return found
    start = min(sorted(members), key=lambda k: g.bases[k].rows)
    found = _estimate_of(g, frozenset([start]))
    while found.members != members:
        left = sorted(members - found.members)
        connected = [k for k in left if g.graph.neighbours(k) & found.members]
        found = min((_joined(g, found, _estimate_of(g, frozenset([k]))) for k in connected or left),
                    key=lambda e: e.rows)
    g.estimates[members] = found
    return found


def _components(g: _Graph, members: frozenset[int]) -> list[frozenset[int]]:
    """Return ``members`` split into the sets their equalities connect."""
    parts = [frozenset([k]) for k in sorted(members)]
    for e in g.graph.edges:
        if e.left in members and e.right in members:
            one = next(p for p in parts if e.left in p)
            other = next(p for p in parts if e.right in p)
            if one is not other:
                parts = [p for p in parts if p is not one and p is not other] + [one | other]
    return sorted(parts, key=sorted)


def _fanout(g: _Graph, joined: _Estimate) -> float:
    """Return the rows out of joining ``joined`` to every other relation, per row of ``joined`` (each connected
    set of the others estimated on its own first, so a selective filter there reaches ``joined``)."""
    found = joined
    for part in _components(g, frozenset(range(len(g.bases))) - joined.members):
        found = _joined(g, found, _estimate_of(g, part))
    return found.rows / joined.rows


def _key_cost(dtype: pa.DataType, build_rows: float | None) -> float:
    """Return a grouping key's per-row cost (a fixed-width key's: 1): a string :data:`STRING_KEY_COST`, except
    from a build side of at most :data:`~gpu_engine.operators.hash_build.DICTIONARY_BUILD_MAX_ROWS` rows, whose
    strings the join hands on as dictionary codes (TPC-DS q66's five warehouse strings from a 5-row side)."""
    if not is_string(dtype):
        return 1.0
    if build_rows is not None and build_rows <= DICTIONARY_BUILD_MAX_ROWS:
        return _dictionary_key_cost()
    return STRING_KEY_COST


def _dictionary_key_cost() -> float:
    """The per-row cost of a string key kept as dictionary codes (``bench/ab.py eager-estimates`` restores 4)."""
    return 1.0


def _setup_cost(partials: int) -> float:
    """Return the fixed cost of a pre-aggregation of ``partials`` partial aggregates: the set-up, and
    :data:`PARTIAL_SETUP_SHARE` of it a partial (a set-up of 0 is 0 whatever the aggregates)."""
    return PRE_AGGREGATION_SETUP * (1.0 + PARTIAL_SETUP_SHARE * partials)


@dataclass(frozen=True)
class _Choice:
    """The relations to pre-aggregate and the columns to group them by."""

    members: frozenset[int]
    keys: tuple[str, ...]
    rows: float


def _benefit(g: _Graph, members: frozenset[int], outside: set[str], final_keys: list[set[str]], partials: int
             ) -> tuple[float, _Choice] | None:
    """Return the estimated saving of pre-aggregating ``members`` (cost units of a row grouped by one key).

    Lazy: the joined rows of ``members`` (``r``) probe the other relations' joins, and the rows out of those
    (``r * f``) are grouped by the final keys; where the others are selective (``f < 1``) the join order and the
    join-key filters at the scans cut ``r`` by ``f`` before its own joins. Eager: ``r`` rows are joined among
    themselves in full and grouped by the pre-aggregation's keys, and its ``g`` groups take their place. The
    saving is ``(r - g) * (joins + f * final key cost) - r * pre-aggregation key cost - r * (1 - f) * relations
    joined below - set-up``. None where the pre-aggregation would have no key (a global one gives a row even
    over no rows, which the join would keep) or keep more than :data:`_MAX_GROUP_SHARE` of its rows.
    """
    graph = g.graph
    keys = {c for c in outside if g.owner.get(c) in members}
    for e in graph.edges:
        if (e.left in members) != (e.right in members):
            keys.add(e.left_column if e.left in members else e.right_column)
    for c in graph.conditions:
        if c.relations & members and not c.relations <= members:
            keys.update(n for n in referenced_columns(c.predicate) if g.owner.get(n) in members)
    if not keys:
        return None
    if len(members) == 1 and unique_keys(graph.relations[next(iter(members))], g.unique).unique_on(keys):
        return None  # a group a row (an aggregation grouped by some of these keys: a plan this rule made before)
    joined = _estimate_of(g, members)
    ordered = sorted(keys)
    groups = grouped_rows(joined.rows, [joined.stats[k].ndv if k in joined.stats else 0.0 for k in ordered])
    if groups > _MAX_GROUP_SHARE * joined.rows:
        return None
    types = {f.name: f.type for r in graph.relations for f in r.output_schema}

    def cost(column: str) -> float:
        rows = g.bases[g.owner[column]].rows
        return _key_cost(types[column], rows if rows < joined.rows else None)

    pre_cost = 1.0 + sum(cost(k) for k in ordered)
    final_cost = 1.0
    for columns in final_keys:
        final_cost += sum(cost(c) for c in columns if c in g.owner) or 1.0
    others = len(g.bases) - len(members)
    fanout = _fanout(g, joined)
    uncut = joined.rows * (1.0 - min(1.0, fanout)) * len(members) * _JOIN_COST
    setup = _setup_cost(partials)
    saving = ((joined.rows - groups) * (others * _JOIN_COST + fanout * final_cost) - joined.rows * pre_cost
              - uncut - setup)
    return saving, _Choice(members, tuple(ordered), groups)


def _choose(g: _Graph, read: frozenset[int], outside: set[str], final_keys: list[set[str]], partials: int
            ) -> _Choice | None:
    """Return the relations to pre-aggregate: those the aggregates read, grown by the neighbour that saves most.

    Each step adds one relation joined to the set by an equality (TPC-DS q4: store_sales, then date_dim, whose
    ``d_year`` groups far better than ``ss_sold_date_sk``); the best saving along the way wins, none where no
    set saves anything. The other side always keeps a relation.
    """
    current = read
    scored = _benefit(g, current, outside, final_keys, partials)
    best: tuple[float, _Choice] | None = None
    n = len(g.bases)
    while len(current) < n:
        if scored is not None and scored[0] > 0 and (best is None or scored[0] > best[0]):
            best = scored
        neighbours = sorted(g.neighbours(current))
        if len(current) + 1 >= n or not neighbours:
            break
        steps = [(_benefit(g, current | {k}, outside, final_keys, partials), k) for k in neighbours]
        scored, chosen = max(steps, key=lambda step: -math.inf if step[0] is None else step[0][0])
        current = current | {chosen}
    return None if best is None else best[1]


# ------------------------------------------------------------------------------------------------------ rewrite
class _Rewriter:
    def __init__(self, plan: PlanNode, statistics: Mapping[str, TableStatistics]):
        self.statistics = statistics
        self.memo: dict[int, tuple[PlanNode, PlanNode]] = {}
        self.used_ids = set()
        self.used_names = set()
        for node in walk_plan(plan):
            self.used_ids.add(node.id)
            self.used_names.update(node.output_schema.names)

    def new_id(self) -> str:
        n = 1
        while f"eager.{n}" in self.used_ids:
            n += 1
        self.used_ids.add(f"eager.{n}")
        return f"eager.{n}"

    def new_name(self, prefix: str = "$eager") -> str:
        """Return a column name no node of the plan outputs: ``$eager<n>`` for a partial, ``$merged<n>`` for its
        re-aggregation."""
        n = 0
        while f"{prefix}{n}" in self.used_names:
            n += 1
        self.used_names.add(f"{prefix}{n}")
        return f"{prefix}{n}"

    def visit(self, node: PlanNode) -> PlanNode:
        key = id(node)
        if key in self.memo:  # a subtree shared by two parents (a CTE read twice) stays one object
            return self.memo[key][1]
        sources = tuple(self.visit(source) for source in node.sources)
        out = node
        if any(new is not old for new, old in zip(sources, node.sources)):
            out = replace(node, sources=sources)
        if isinstance(out, AggregationNode):
            out = self.rewritten(out) or out
        self.memo[key] = (node, out)  # the node kept: its id stays its own
        return out

    def rewritten(self, agg: AggregationNode) -> PlanNode | None:
        """Return ``agg`` over its pre-aggregated join region, or None where the rule does not apply or pay."""
        if (agg.step not in (AggregationStep.SINGLE, AggregationStep.PARTIAL) or agg.global_grouping_sets
                or agg.group_id_key is not None or not agg.aggregates):
            return None
        for call in agg.aggregates:
            if (call.function not in _DECOMPOSABLE or call.distinct or call.second is not None
                    or call.parameter is not None or call.then_by or call.null_typed
                    or (call.arg is None) != (call.function == "count_star")):
                return None
        # The projections between the aggregation and the region: each name the aggregation reads as an
        # expression over the region's columns.
        definitions: dict[str, Expr] | None = None
        below = agg.sources[0]
        while isinstance(below, ProjectNode):
            step = dict(zip(below.names, below.expressions))
            if definitions is not None:
                from gpu_engine.planning.fusion import inline_columns
                definitions = {n: inline_columns(e, step) for n, e in definitions.items()}
            else:
                definitions = step
            below = below.source
        graph = join_graph(below)
        if graph is None or len(graph.relations) < 2:
            return None

        def over_region(expression: Expr) -> Expr:
            if definitions is None:
                return expression
            from gpu_engine.planning.fusion import inline_columns
            return inline_columns(expression, definitions)

        region_columns = set(below.output_schema.names)
        types = {f.name: f.type for f in agg.sources[0].output_schema}
        key_expressions = [over_region(ColumnRef(k, types[k])) for k in agg.grouping_keys]
        arguments = [None if c.arg is None else over_region(c.arg) for c in agg.aggregates]
        owner = {name: k for k, r in enumerate(graph.relations) for name in r.output_schema.names}
        outside = {c for e in key_expressions for c in referenced_columns(e)}
        read_columns = {c for a in arguments if a is not None for c in referenced_columns(a)}
        if not (outside | read_columns) <= region_columns:
            return None
        read = frozenset(owner[c] for c in read_columns)
        if not read:  # count(*) alone: every relation is the many side
            return None
        bases = []
        for k, relation in enumerate(graph.relations):
            own = [c.predicate for c in graph.conditions if c.relations == {k}]
            base = relation if not own else FilterNode(id="estimate", output_schema=relation.output_schema,
                                                       sources=(relation,), predicate=conjunction(own))
            found = estimate(base, self.statistics)
            if found is None:
                return None
            bases.append(found)
        g = _Graph(graph, bases, owner, statistics=self.statistics)
        final_keys = [set(referenced_columns(e)) for e in key_expressions]
        partial_calls = _partials(agg.aggregates, arguments)
        choice = _choose(g, read, outside, final_keys, len(partial_calls))
        if choice is None:
            return None
        try:
            calls = tuple(replace(call, arg=argument) for call, argument in zip(agg.aggregates, arguments))
            if agg.step is AggregationStep.PARTIAL:
                return self.planned_states(agg, g, choice, definitions is not None, key_expressions, calls)
            return self.planned(agg, g, choice, definitions is not None, key_expressions, calls, partial_calls)
        except TypeError:  # a type a partial or its merge is not defined for: the plan stays as it was written
            return None

    def regions(self, g: _Graph, choice: _Choice, reads: set[str], aggregate) -> PlanNode:
        """Return the region rebuilt: the chosen relations joined (in the region's order) under the aggregation
        ``aggregate(joined) -> node`` makes, joined to the others, outputting what the region did of those and
        the aggregation's columns."""
        graph = g.graph
        members = sorted(choice.members)
        inner = _subgraph(graph, members, choice.keys + tuple(sorted(reads)))
        pre = aggregate(joined_tree(inner, _restricted(graph, members, inner), self.new_id))
        rest = [k for k in range(len(graph.relations)) if k not in choice.members]
        relations = [graph.relations[k] for k in rest] + [pre]
        position = {k: p for p, k in enumerate(rest)} | {k: len(rest) for k in members}
        states = [n for n in pre.output_schema.names if n not in choice.keys]
        kept = [n for n in graph.root.output_schema.names if n not in _owned(graph, choice.members)
                or n in choice.keys] + states
        outer = JoinGraph(_Output(pa.schema([f for r in relations for f in r.output_schema if f.name in kept])),
                          tuple(relations),
                          tuple(replace(e, left=position[e.left], right=position[e.right]) for e in graph.edges
                                if not (e.left in choice.members and e.right in choice.members)),
                          tuple(replace(c, relations=frozenset(position[r] for r in c.relations))
                                for c in graph.conditions if not (c.relations and c.relations <= choice.members)))
        tree = _built_smaller(_merged(graph, choice.members, position, outer), len(rest), choice.rows,
                              lambda part: _estimate_of(g, frozenset(rest[k] for k in part)).rows)
        return joined_tree(outer, tree, self.new_id)

    def planned_states(self, agg: AggregationNode, g: _Graph, choice: _Choice, projected: bool,
                       key_expressions: list[Expr], calls: tuple[AggregateCall, ...]) -> PlanNode:
        """Return a PARTIAL step (grouping sets: GroupId and the merges above it) as an INTERMEDIATE one over the
        chosen relations' PARTIAL step joined to the others: the states cross the joins and merge above, so the
        steps above keep their columns."""
        def aggregate(joined: PlanNode) -> PlanNode:
            fields = {f.name: f for f in joined.output_schema}
            schema = aggregation_output_schema(AggregationStep.PARTIAL, [fields[k] for k in choice.keys],
                                               agg.aggregate_names, calls)
            return AggregationNode(id=self.new_id(), output_schema=schema, sources=(joined,),
                                   step=AggregationStep.PARTIAL, grouping_keys=choice.keys,
                                   aggregate_names=agg.aggregate_names, aggregates=calls)

        region = self.regions(g, choice, {c for call in calls for c in _reads(call)}, aggregate)
        states = [f for f in region.output_schema if f.name in _state_names(agg)]
        source = region
        if projected:
            key_fields = [pa.field(k, e.dtype) for k, e in zip(agg.grouping_keys, key_expressions)]
            source = ProjectNode(id=self.new_id(), output_schema=pa.schema(key_fields + states), sources=(region,),
                                 names=tuple(agg.grouping_keys) + tuple(f.name for f in states),
                                 expressions=tuple(key_expressions) + tuple(ColumnRef(f.name, f.type) for f in states))
        merged = final_step_aggregates(calls, agg.aggregate_names)
        fields = {f.name: f for f in source.output_schema}
        schema = aggregation_output_schema(AggregationStep.INTERMEDIATE, [fields[k] for k in agg.grouping_keys],
                                           agg.aggregate_names, merged)
        if schema != agg.output_schema:
            raise TypeError(f"the merged states {schema} are not the partial step's {agg.output_schema}")
        return replace(agg, sources=(source,), step=AggregationStep.INTERMEDIATE, aggregates=merged)

    def planned(self, agg: AggregationNode, g: _Graph, choice: _Choice, projected: bool,
                key_expressions: list[Expr], calls: tuple[AggregateCall, ...], partial_calls: dict) -> PlanNode:
        """Return the aggregation re-aggregating the chosen relations' pre-aggregation joined to the others."""
        names = {text: self.new_name() for text in partial_calls}

        def aggregate(joined: PlanNode) -> PlanNode:
            fields = {f.name: f for f in joined.output_schema}
            schema = pa.schema([fields[k] for k in choice.keys] + [pa.field(names[t], c.dtype)
                                                                    for t, c in partial_calls.items()])
            return AggregationNode(id=self.new_id(), output_schema=schema, sources=(joined,),
                                   step=AggregationStep.SINGLE, grouping_keys=choice.keys,
                                   aggregate_names=tuple(names.values()), aggregates=tuple(partial_calls.values()))

        region = self.regions(g, choice, {c for call in partial_calls.values() for c in _reads(call)}, aggregate)
        # The aggregation: the same keys over the new region, each aggregate merging its partials.
        source = region
        if projected:
            key_fields = [pa.field(k, e.dtype) for k, e in zip(agg.grouping_keys, key_expressions)]
            partial_fields = [pa.field(names[t], c.dtype) for t, c in partial_calls.items()]
            source = ProjectNode(id=self.new_id(), output_schema=pa.schema(key_fields + partial_fields),
                                 sources=(region,), names=tuple(agg.grouping_keys) + tuple(names.values()),
                                 expressions=tuple(key_expressions) + tuple(
                                     ColumnRef(names[t], c.dtype) for t, c in partial_calls.items()))
        merges, merge_names, finals = [], [], []
        merged: dict[str, str] = {}  # a partial's name -> its merge's name
        merges_read: list[ColumnRef] = []
        for call in calls:
            parts = []
            for partial in _partials_of(call):
                text = repr(partial)
                name = names[text]
                if name not in merged:
                    merge = _merge(ColumnRef(name, partial_calls[text].dtype), partial.function)
                    merged[name] = self.new_name("$merged")
                    merges.append(merge)
                    merge_names.append(merged[name])
                parts.append(ColumnRef(merged[name], merges[merge_names.index(merged[name])].dtype))
            finals.append(_final(call, parts))
            merges_read.append(parts[0])
        key_fields = [next(f for f in source.output_schema if f.name == k) for k in agg.grouping_keys]
        if (all(final is part for final, part in zip(finals, merges_read))
                and len({f.name for f in merges_read}) == len(finals) == len(merges)):
            # each a sum, min or max of its own type alone: the merges are the aggregation's outputs, by its names
            return AggregationNode(id=agg.id, output_schema=agg.output_schema, sources=(source,),
                                   step=AggregationStep.SINGLE, grouping_keys=agg.grouping_keys,
                                   aggregate_names=agg.aggregate_names, aggregates=tuple(merges),
                                   partial_step=agg.partial_step)
        merge_schema = pa.schema(key_fields + [pa.field(n, m.dtype) for n, m in zip(merge_names, merges)])
        top = AggregationNode(id=agg.id, output_schema=merge_schema, sources=(source,), step=AggregationStep.SINGLE,
                              grouping_keys=agg.grouping_keys, aggregate_names=tuple(merge_names),
                              aggregates=tuple(merges), partial_step=agg.partial_step)
        return ProjectNode(id=self.new_id(), output_schema=agg.output_schema, sources=(top,),
                           names=tuple(agg.output_schema.names),
                           expressions=tuple(ColumnRef(k, f.type) for k, f in zip(agg.grouping_keys, key_fields))
                           + tuple(finals))


@dataclass(frozen=True)
class _Output:
    """The output a rebuilt region must give (all :func:`joined_tree` reads of its root)."""

    output_schema: pa.Schema


def _partials_of(call: AggregateCall) -> list[AggregateCall]:
    """Return the partial aggregates whose merge gives ``call`` (avg: a sum and a count), over the region's
    columns (``call.arg`` already rewritten so)."""
    if call.function == "avg":
        return [AggregateCall("sum", call.arg, result_type("sum", call.arg.dtype)),
                AggregateCall("count", call.arg, pa.int64())]
    if call.function in ("count", "count_star"):
        return [AggregateCall(call.function, call.arg, pa.int64())]
    return [AggregateCall(call.function, call.arg, result_type(call.function, call.arg.dtype))]


def _partials(calls, arguments) -> dict[str, AggregateCall]:
    """Return each distinct partial aggregate of ``calls`` (their arguments over the region), by its repr."""
    out: dict[str, AggregateCall] = {}
    for call, argument in zip(calls, arguments):
        for partial in _partials_of(replace(call, arg=argument)):
            out.setdefault(repr(partial), partial)
    return out


def _state_names(agg: AggregationNode) -> set[str]:
    return set(agg.output_schema.names) - set(agg.grouping_keys)


def _reads(call: AggregateCall) -> tuple[str, ...]:
    return () if call.arg is None else referenced_columns(call.arg)


def _merge(column: ColumnRef, function: str) -> AggregateCall:
    """Return the aggregate merging a partial's column: a sum of sums and of counts, a min of mins."""
    merging = "sum" if function in ("sum", "count", "count_star") else function
    return AggregateCall(merging, column, result_type(merging, column.dtype))


def _final(call: AggregateCall, parts: list[ColumnRef]) -> Expr:
    """Return ``call``'s value from its merged partials, of ``call``'s type (see the module docstring)."""
    if call.function in ("sum", "min", "max"):
        [part] = parts
        return part if part.dtype == call.dtype else Cast(part, call.dtype)
    if call.function in ("count", "count_star"):  # a count over no rows is 0, a sum over none NULL
        [part] = parts
        total = Cast(part, pa.int64())
        return Case(((UnaryOp("is_null", total, pa.bool_()), Literal(0, pa.int64())),), total, pa.int64())
    total, count = (Cast(p, pa.float64()) for p in parts)
    nonzero = Case(((BinaryOp("eq", count, Literal(0.0, pa.float64()), pa.bool_()), Literal(None, pa.float64())),),
                   count, pa.float64())
    value = BinaryOp("div", total, nonzero, pa.float64())
    return value if call.dtype == pa.float64() else Cast(value, call.dtype)


def _owned(graph: JoinGraph, members) -> set[str]:
    return {n for k in members for n in graph.relations[k].output_schema.names}


def _subgraph(graph: JoinGraph, members: list[int], output: tuple[str, ...]) -> JoinGraph:
    """Return the graph of ``members``' relations alone (their edges and conditions), outputting ``output``."""
    position = {k: p for p, k in enumerate(members)}
    fields = {f.name: f for k in members for f in graph.relations[k].output_schema}
    return JoinGraph(_Output(pa.schema([fields[n] for n in dict.fromkeys(output)])),
                     tuple(graph.relations[k] for k in members),
                     tuple(replace(e, left=position[e.left], right=position[e.right]) for e in graph.edges
                           if e.left in position and e.right in position),
                     tuple(replace(c, relations=frozenset(position[r] for r in c.relations)) for c in graph.conditions
                           if c.relations and c.relations <= set(members)))


def _written_tree(graph: JoinGraph) -> JoinTree:
    """Return the region's join tree as written (relations by position)."""
    position = {id(r): k for k, r in enumerate(graph.relations)}

    def walk(node: PlanNode) -> JoinTree:
        if id(node) in position:
            return position[id(node)]
        if isinstance(node, FilterNode):
            return walk(node.source)
        assert isinstance(node, HashJoinNode | NestedLoopJoinNode)
        return (walk(node.sources[0]), walk(node.sources[1]))

    return walk(graph.root)


def _mapped(tree: JoinTree, position: Mapping[int, int]) -> JoinTree | None:
    """Return ``tree`` with each relation renumbered by ``position`` (dropped where absent; a relation mapped
    twice kept once, at its first place)."""
    seen: set[int] = set()

    def walk(node: JoinTree) -> JoinTree | None:
        if isinstance(node, int):
            if node not in position or position[node] in seen:
                return None
            seen.add(position[node])
            return position[node]
        left, right = walk(node[0]), walk(node[1])
        return right if left is None else left if right is None else (left, right)

    return walk(tree)


def _linked_everywhere(graph: JoinGraph, tree: JoinTree) -> bool:
    """Return whether each join of ``tree`` has a key or a condition between its two sides."""
    if isinstance(tree, int):
        return True
    left, right = set(tree_relations(tree[0])), set(tree_relations(tree[1]))
    linked = any((e.left in left and e.right in right) or (e.left in right and e.right in left) for e in graph.edges)
    linked = linked or any(c.relations & left and c.relations & right for c in graph.conditions)
    return linked and _linked_everywhere(graph, tree[0]) and _linked_everywhere(graph, tree[1])


def _connected_order(graph: JoinGraph, order: list[int]) -> JoinTree:
    """Return a left-deep tree taking ``order``'s relations, each step the first one linked to those joined."""
    left = list(order)
    tree: JoinTree = left.pop(0)
    joined = {tree}
    while left:
        linked = [k for k in left if graph.neighbours(k) & joined
                  or any(k in c.relations and c.relations & joined for c in graph.conditions)]
        k = (linked or left)[0]
        left.remove(k)
        tree = (tree, k)
        joined.add(k)
    return tree


def _restricted(graph: JoinGraph, members: list[int], inner: JoinGraph) -> JoinTree:
    """Return the region's written tree restricted to ``members`` (numbered as in ``inner``), or a left-deep
    linked order of them where the restriction joins two unlinked sides."""
    tree = _mapped(_written_tree(graph), {k: p for p, k in enumerate(members)})
    if _linked_everywhere(inner, tree):
        return tree
    return _connected_order(inner, tree_relations(tree))


def _built_smaller(tree: JoinTree, pre: int, pre_rows: float, rows_of) -> JoinTree:
    """Return ``tree`` with the join that first meets the pre-aggregation (relation ``pre``) building it where its
    estimated groups (``pre_rows``) are no more than the other side's rows (``rows_of(relations)``), else probing.

    Why: the region's written tree had the aggregated relations on the side they were on (TPC-DS q11's store
    sales probing customer); their groups are often fewer than the other side's rows, which the SQL rule's greedy
    join built then, and the typed build-side rule, estimating an aggregation by its keys' distinct counts (a
    customer key: every customer), sees no smaller side (q11: +10% with customer's seven strings built).
    """
    if isinstance(tree, int):
        return tree
    left, right = tree
    if left == pre or right == pre:
        other = right if left == pre else left
        if pre_rows <= rows_of(tree_relations(other)):
            return (other, pre)
        return (pre, other)
    return (_built_smaller(left, pre, pre_rows, rows_of), _built_smaller(right, pre, pre_rows, rows_of))


def _merged(graph: JoinGraph, members, position: Mapping[int, int], outer: JoinGraph) -> JoinTree:
    """Return the region's written tree with the pre-aggregated relations one (where the first of them was),
    or a left-deep linked order where that joins two unlinked sides."""
    tree = _mapped(_written_tree(graph), position)
    if _linked_everywhere(outer, tree):
        return tree
    return _connected_order(outer, tree_relations(tree))
