"""Aggregate below a join (eager group-by): pre-aggregate the relations the aggregates read, join, re-aggregate.

Why: a query such as TPC-H Q10 joins lineitem, orders, customer and nation
and groups the joined rows by seven customer columns, long strings among
them, so every joined lineitem row gathers and hashes those strings. Summing
lineitem ⋈ orders per ``o_custkey`` first leaves one row per customer to
join and to group by the strings (Yan and Larson's "eager group-by"; Hyper
and DuckDB's optimizers plan similar pushdowns). TPC-DS q4, q11 and q74's
``year_total`` (sales ⋈ customer ⋈ date_dim grouped by customer columns and
``d_year``) have the same shape.

The rule, over a SELECT whose FROM items are inner-joined only:

* every aggregate is decomposable — ``sum``, ``count`` (``count(*)`` too),
  ``min``, ``max``, ``avg`` (as a sum and a count), none DISTINCT — and the
  columns they read belong to a set ``S`` of the FROM items (the "many"
  side; ``S`` grows from the items the aggregates read by joined neighbours
  when that groups better: lineitem alone would group by ``l_orderkey``,
  lineitem ⋈ orders by ``o_custkey``);
* ``S`` is joined and grouped by every column of ``S`` read outside the
  aggregates — the GROUP BY's, the SELECT's, HAVING's, ORDER BY's, and the
  conditions that join ``S`` to the other items — computing each
  aggregate's partial (``sum``, ``count``, ``min``, ``max``);
* the other items join that relation, and the original GROUP BY
  re-aggregates the partials: a sum of sums, a sum of counts, a min of mins,
  ``avg`` as the sum of sums over the sum of counts.

Why it is correct without knowing any key unique: rows of ``S`` that agree
on every column the rest of the query reads outside the aggregates join the
same rows of the other items, pass the same conditions and fall into the
same final groups; merging them first changes only how often each partial
state is merged, which sum, count, min and max do not notice. NULLs: a
group of NULL keys is joined as each of its rows would be (an equality
drops them all); ``count`` over no rows is 0, so a count's re-aggregation
is ``coalesce(sum, 0)``; an ``avg`` whose partial counts sum to 0 is NULL.
Grouping sets (ROLLUP, CUBE, GROUPING SETS, ``grouping()``) re-aggregate
the partials per set as they would the rows: every set's keys are among the
columns ``S`` is grouped by or come from the other items (TPC-DS q22 sums
2.3M inventory rows per item before joining item and rolling up its four
strings). Not applied: over outer joins, with DISTINCT or other aggregates
(holistic, moments, ordered), windows, subqueries left to join after the
FROM items, or when ``S`` would be every FROM item.

When: only where the estimates (:mod:`gpu_engine.sql.statistics`) say it
pays (:func:`_benefit`): the rows the pre-aggregation saves the later joins
and the final aggregation (whose per-row cost grows with its keys, strings
most, except a small build side's, which the join hands on as dictionary
codes) must outweigh the pre-aggregation itself: its rows and the fixed cost
of its added operators (:data:`_PRE_AGGREGATION_SETUP`, and a share of it per
partial aggregate: :func:`_setup_cost`).
Unknown distinct counts (strings) count as no reduction.
The re-aggregation always stays: a key is never proven unique by min/max
statistics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.columnar.types import is_string
from gpu_engine.errors import PlanError
from gpu_engine.operators.hash_build import DICTIONARY_BUILD_MAX_ROWS
from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.aggregate_planning import aggregates_of
from gpu_engine.optimizer.statistics import joined_rows
from gpu_engine.sql.join_ordering import covered, join_greedy
from gpu_engine.sql.planning_context import Relation, quoted
from gpu_engine.sql.predicates import filtered, free_columns, has_subquery
from gpu_engine.sql.renaming import aliased, renamed_copy
from gpu_engine.sql.statistics import ColumnStatistics

if TYPE_CHECKING:
    from gpu_engine.sql.planning_context import PlanningContext

__all__ = ["eager_aggregated", "grouped_rows"]

#: The aggregates a partial state of which merges by another aggregate (count by sum, avg by two sums).
_DECOMPOSABLE = (exp.Sum, exp.Count, exp.Min, exp.Max, exp.Avg)
#: Per-row cost of a grouping key relative to a fixed-width key: a string is hashed, compared and gathered
#: byte by byte (TPC-H Q10's seven customer keys against one integer; see the module docstring's "When").
_STRING_KEY_COST = 4.0
#: Per-row cost of probing one join and gathering its columns, in the same units.
_JOIN_COST = 1.0
#: The most groups per input row a pre-aggregation may be estimated to keep: estimates are rough (a join's
#: fan-out most), so a pre-aggregation must cut its input clearly to be planned at all.
_MAX_GROUP_SHARE = 0.75
#: What a pre-aggregation costs whatever its rows, in the same units: its partial and final operators on every
#: driver, the exchange between them, and the re-aggregation above the join that merges its groups again.
#: Measured: where the rows are few the saved rows do not pay for those (TPC-DS SF1: with string distinct
#: counts known, q21 grouped its ~25K inventory rows below a 5-row warehouse join, +14..+30% CPU; q26, q60,
#: q66 and q56's pre-aggregations over a few thousand rows 8-15% slower than none). A unit here (a row
#: probing a join or grouped by a fixed-width key) measured ~150 ns of a TPC-DS SF1 query's CPU on this
#: engine's CPU path, the added aggregation ~5 ms: some 30K units, of which this counts a third, as
#: estimates of small inputs run low (q21's 25K rows were estimated at 2.4K).
PRE_AGGREGATION_SETUP_MEASURED = 10_000.0
#: The set-up :func:`_benefit` counts: the measured one. Off at first: with it q74 was 17% slower while two
#: conjuncts on ``d_year`` multiplied in its estimates; since they intersect
#: (:func:`~gpu_engine.sql.statistics.intersected_value_sets`) the plans it changes ran faster: 8 of TPC-DS SF1
#: -9.7% (bench/results/2026-11-28-strndv-string-ndv-cpu-sf1.md), then 7 (q7 q14 q26 q56 q60 q77 q85) -2.7%,
#: none slower beyond 3.4% (bench/results/2026-11-28-joincost-runtime-filter-costs-cpu-sf1.md); TPC-H's plans
#: are the same. The rule's tests on tiny tables plan without it (their savings are rows, never 10,000 units).
_PRE_AGGREGATION_SETUP = PRE_AGGREGATION_SETUP_MEASURED
#: What each partial aggregate adds to the set-up, as a share of it: the pre-aggregation's final step and the
#: re-aggregation's partial step each merge every partial state per batch whatever the rows (the lowest tier
#: one pass of Python per aggregate, the generated tier a kernel growing with them). Measured on TPC-DS q66
#: (SF1, 2 drivers, 24 decimal sums a branch over ~5-11K joined rows): the two added steps ~12 ms CPU a branch,
#: ~80K units, ~3.3K a partial; counted 2.5K (a quarter of the set-up), as the fixed part counts less than
#: measured (bench/results/2026-11-28-q66-eager-aggregation-cause.md, 2026-11-28-q66-estimates-cpu-sf1.md).
#: A share, so a set-up of 0 (the rule's tests on tiny tables) is 0 whatever the aggregates.
PARTIAL_SETUP_SHARE_MEASURED = 0.25
_PARTIAL_SETUP_SHARE = PARTIAL_SETUP_SHARE_MEASURED


@dataclass(frozen=True)
class _Edge:
    """An equality of two FROM items' columns (internal names), a join key pair."""

    left: str
    left_column: str
    right: str
    right_column: str


@dataclass(frozen=True)
class _Estimate:
    """The estimated size of a set of joined FROM items: what :func:`joined_rows` reads."""

    aliases: frozenset[str]
    rows: float
    stats: dict[str, ColumnStatistics]


@dataclass
class _Graph:
    """One SELECT's inner-joined FROM items, their equalities and other conditions, and the estimates made.

    ``conditions`` holds each pending condition's (alias, column) pairs, its aliases and whether it is an edge;
    ``relevant`` names the columns whose statistics an estimate reads (join keys, grouping candidates), so
    an estimate carries those alone; ``estimates`` keeps each set of items estimated once.
    """

    items: dict[str, Relation]
    edges: list[_Edge]
    conditions: list[tuple[frozenset[tuple[str, str]], frozenset[str], bool]]
    relevant: set[str]
    estimates: dict[frozenset[str], _Estimate] = field(default_factory=dict)
    neighbours: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self):
        for e in self.edges:
            self.neighbours.setdefault(e.left, set()).add(e.right)
            self.neighbours.setdefault(e.right, set()).add(e.left)


@dataclass(frozen=True)
class _Choice:
    """The items to pre-aggregate and the columns (alias, column) to group them by."""

    aliases: frozenset[str]
    keys: tuple[tuple[str, str], ...]
    rows: float


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


def eager_aggregated(planner: PlanningContext, select: exp.Select, relations: list[Relation],
                     pending: list[exp.Expression], needed: set[tuple[str, str]]
                     ) -> tuple[list[Relation], exp.Select]:
    """Return the relations to join and the SELECT to finish, with the aggregates pushed below the joins.

    ``relations`` are the inner-joined FROM items (one alias each), ``pending`` the conditions between them
    (those the pre-aggregated items alone read are taken out), ``needed`` the columns read after the joins
    (the partials' columns are added). Where the rule does not apply or pay, the arguments come back as they are.
    """
    items = {next(iter(r.aliases)): r for r in relations if len(r.aliases) == 1}
    if len(items) != len(relations) or len(relations) < 2:
        return relations, select
    aggregates = _decomposable_aggregates(select)
    if not aggregates:
        return relations, select
    read = {(c.table, c.name) for a in aggregates for c in free_columns(a)}
    outside = _columns_outside_aggregates(select)
    if not all(alias in items for alias, _ in read | outside):
        return relations, select
    graph = _join_graph(pending, items, outside)
    if graph is None:
        return relations, select
    partials = len({p.sql() for a in aggregates for p in _partials(a)})
    choice = _choose(select, graph, frozenset(alias for alias, _ in read), outside, partials)
    if choice is None:
        return relations, select
    taken = [c for c in pending if covered(c, choice.aliases)]
    try:
        pre, finals = _pre_aggregate(planner, choice, items, taken, aggregates, read)
    except PlanError:  # a type the partial cannot take (sum of strings): the query's own plan says so by name
        return relations, select
    for c in taken:
        pending.remove(c)
    alias = next(iter(a for a in pre.aliases if a not in choice.aliases))
    needed.update((alias, name) for (table, name) in pre.columns if table == alias)
    rest = [r for a, r in items.items() if a not in choice.aliases]
    return rest + [pre], _with_aggregates_replaced(select, finals)


# ------------------------------------------------------------------------------------------------ applicability
def _clause_trees(select: exp.Select) -> list[exp.Expression]:
    """Return the trees of the clauses read after the joins: SELECT, HAVING, ORDER BY."""
    trees = list(select.expressions)
    if select.args.get("having") is not None:
        trees.append(select.args["having"])
    if select.args.get("order") is not None:
        trees.extend(select.args["order"].expressions)
    return trees


def _group_keys(select: exp.Select) -> list[exp.Expression]:
    group = list(select.args["group"].expressions) if select.args.get("group") else []
    return [key for key in group if not (isinstance(key, exp.Tuple) and not key.expressions)]


def _decomposable_aggregates(select: exp.Select) -> list[exp.Expression]:
    """Return the SELECT's aggregate calls when every one is decomposable, else none (the rule does not apply)."""
    if select.args.get("qualify") is not None:
        return []
    trees = _clause_trees(select)
    aggregates = []
    for tree in trees:
        found = aggregates_of(tree)
        if any(a is tree for a in found):  # a projection without its name: no parent to take the re-aggregation
            return []
        aggregates += found
    if not aggregates or any(tree.find(exp.Window) is not None for tree in trees):
        return []
    for a in aggregates:
        if type(a) not in _DECOMPOSABLE or any(v for k, v in a.args.items() if k not in ("this", "big_int")):
            return []
        argument = a.this
        if argument is None or isinstance(argument, (exp.Distinct, exp.Order)) or has_subquery(argument):
            return []
        if isinstance(argument, exp.Star) and not isinstance(a, exp.Count):
            return []
        if any(isinstance(node, exp.AggFunc) for node in argument.walk()):
            return []
    return aggregates


def _columns_outside_aggregates(select: exp.Select) -> set[tuple[str, str]]:
    """Return the (alias, column) pairs the GROUP BY and the later clauses read outside aggregate calls."""
    out: set[tuple[str, str]] = set()
    stack = _group_keys(select) + _clause_trees(select)
    while stack:
        node = stack.pop()
        if isinstance(node, SQL_AGGREGATES):
            continue
        if isinstance(node, (exp.Subquery, exp.Exists, exp.Select)):
            out.update((c.table, c.name) for c in free_columns(node))
            continue
        if isinstance(node, exp.Column):
            if node.table:  # an unqualified name is an output name (ORDER BY revenue)
                out.add((node.table, node.name))
            continue
        stack.extend(node.iter_expressions())
    return out


def _join_graph(pending: list[exp.Expression], items: dict[str, Relation], outside) -> _Graph | None:
    """Return the FROM items' join graph: equalities as edges, every pending condition with its aliases.

    None when a condition reads something that is no FROM item here (an outer query's column) or holds a
    subquery: the rule then leaves the SELECT alone.
    """
    edges: list[_Edge] = []
    conditions: list[tuple[frozenset[tuple[str, str]], frozenset[str], bool]] = []
    relevant = {items[a].columns[(a, n)] for a, n in outside if (a, n) in items[a].columns}
    for c in pending:
        columns = free_columns(c)
        aliases = frozenset(col.table for col in columns)
        if not aliases <= items.keys() or has_subquery(c):
            return None
        relevant.update(items[col.table].columns.get((col.table, col.name), "") for col in columns)
        is_edge = False
        if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column) \
                and len(aliases) == 2:
            left, right = c.this, c.expression
            left_name = items[left.table].columns.get((left.table, left.name))
            right_name = items[right.table].columns.get((right.table, right.name))
            if left_name is not None and right_name is not None:
                edges.append(_Edge(left.table, left_name, right.table, right_name))
                is_edge = True
        conditions.append((frozenset((col.table, col.name) for col in columns), aliases, is_edge))
    return _Graph(items, edges, conditions, relevant)


# ---------------------------------------------------------------------------------------------------- estimates
def _joined(graph: _Graph, left: _Estimate, right: _Estimate) -> _Estimate:
    """Return the estimate of two sets of joined items joined (as join ordering estimates a join: its
    equalities divide by the larger distinct count, each other condition it applies halves the rows; one
    key of two sides cut to shares of its values divides by its domain, which join ordering does not count
    yet: :func:`~gpu_engine.optimizer.statistics.key_set_divisor`)."""
    pairs = [(e.left_column, e.right_column) if e.left in left.aliases else (e.right_column, e.left_column)
             for e in graph.edges if (e.left in left.aliases and e.right in right.aliases)
             or (e.right in left.aliases and e.left in right.aliases)]
    union = left.aliases | right.aliases
    rows = joined_rows(left, right, pairs, shared_domains=True) if pairs else left.rows * right.rows
    filters = sum(1 for _, aliases, is_edge in graph.conditions
                  if not is_edge and aliases <= union and aliases & left.aliases and aliases & right.aliases)
    rows = max(1.0, rows * 0.5 ** filters)
    stats = {k: v.capped(rows) for k, v in {**left.stats, **right.stats}.items()}
    return _Estimate(union, rows, stats)


def _estimate_of(graph: _Graph, aliases: frozenset[str]) -> _Estimate:
    """Return the estimated rows of joining ``aliases``' items, adding connected ones first (smallest first)."""
    if aliases in graph.estimates:
        return graph.estimates[aliases]
    if len(aliases) == 1:
        [alias] = aliases
        item = graph.items[alias]
        estimate = _Estimate(aliases, item.rows, {k: v for k, v in item.stats.items() if k in graph.relevant})
        graph.estimates[aliases] = estimate
        return estimate
    start = min(sorted(aliases), key=lambda a: graph.items[a].rows)  # ties by name: the same however written
    estimate = _estimate_of(graph, frozenset([start]))
    while estimate.aliases != aliases:
        left = sorted(aliases - estimate.aliases)
        connected = [a for a in left if graph.neighbours.get(a, set()) & estimate.aliases]
        estimate = min((_joined(graph, estimate, _estimate_of(graph, frozenset([a]))) for a in connected or left),
                       key=lambda e: e.rows)
    graph.estimates[aliases] = estimate
    return estimate


def _components(graph: _Graph, aliases: frozenset[str]) -> list[frozenset[str]]:
    """Return ``aliases`` split into the sets their equalities connect."""
    parts = [frozenset([a]) for a in sorted(aliases)]
    for e in graph.edges:
        if e.left in aliases and e.right in aliases:
            one = next(p for p in parts if e.left in p)
            other = next(p for p in parts if e.right in p)
            if one is not other:
                parts = [p for p in parts if p is not one and p is not other] + [one | other]
    return sorted(parts, key=sorted)


def _fanout(graph: _Graph, joined: _Estimate) -> float:
    """Return the rows out of joining ``joined`` to every other item, per row of ``joined``.

    Each connected set of the other items is estimated on its own first, so a selective filter there
    (TPC-H Q5's region, through nation) reaches ``joined`` as the share of keys it keeps.
    """
    estimate = joined
    for part in _components(graph, frozenset(graph.items) - joined.aliases):
        estimate = _joined(graph, estimate, _estimate_of(graph, part))
    return estimate.rows / joined.rows


def _key_cost(dtype, build_rows: float | None = None) -> float:
    """Return a grouping key's per-row cost (a fixed-width key's: 1) of type ``dtype`` from an item of
    ``build_rows`` estimated rows joined as a build side (None: not known to be one).

    A string costs :data:`_STRING_KEY_COST`, except from a build side of at most
    :data:`~gpu_engine.operators.hash_build.DICTIONARY_BUILD_MAX_ROWS` rows: the join keeps its strings as a
    dictionary, and the probe rows carry fixed-width codes the grouping hashes as integers (TPC-DS q66's five
    warehouse strings from a 5-row build side were costed 4 each: 23 units a final row for ~7).
    """
    if not is_string(dtype):
        return 1.0
    if build_rows is not None and build_rows <= DICTIONARY_BUILD_MAX_ROWS:
        return _dictionary_key_cost()
    return _STRING_KEY_COST


def _dictionary_key_cost() -> float:
    """The per-row cost of a string key kept as dictionary codes (a switch of ``bench/ab.py`` restores 4)."""
    return 1.0


def _setup_cost(partials: int) -> float:
    """Return the fixed cost of a pre-aggregation of ``partials`` partial aggregates: the set-up, and
    :data:`_PARTIAL_SETUP_SHARE` of it a partial."""
    return _PRE_AGGREGATION_SETUP * (1.0 + _PARTIAL_SETUP_SHARE * partials)


def _column_type(items: dict[str, Relation], alias: str, name: str):
    """Return the type of a FROM item's column, None for a name no item here has (an output name)."""
    relation = items.get(alias)
    internal = relation.columns.get((alias, name)) if relation is not None else None
    return None if internal is None else relation.node.output_schema.field(internal).type


def _keyed_cost(items: dict[str, Relation], alias: str, name: str, joined_rows: float) -> float | None:
    """Return :func:`_key_cost` of a FROM item's column (None for an output name): the item a build side where
    it has fewer estimated rows than ``joined_rows``, the rows it joins (the build-side pass builds the smaller)."""
    dtype = _column_type(items, alias, name)
    if dtype is None:
        return None
    rows = items[alias].rows
    return _key_cost(dtype, rows if rows < joined_rows else None)


def _benefit(select: exp.Select, graph: _Graph, aliases: frozenset[str], outside, partials: int = 1
             ) -> tuple[float, _Choice] | None:
    """Return the estimated saving of pre-aggregating ``aliases`` (cost units of a row grouped by one key).

    Lazy: the joined rows of ``aliases`` (``r``) probe the other items' joins, and the rows out of those
    (``r * f``) are grouped by the final keys; where the other items are selective (``f < 1``: TPC-H Q5's
    region, Q11's nation) the join order and the join-key filters at the scans cut the rows of ``aliases``
    by ``f`` before their own joins. Eager: ``r`` rows are joined among themselves in full and grouped by
    the pre-aggregation's keys, and its ``g`` groups take their place. The saving is ``(r - g) * (joins +
    f * final key cost) - r * pre-aggregation key cost - r * (1 - f) * items joined below - set-up``, the
    set-up (:func:`_setup_cost` of its ``partials`` partial aggregates) being the added operators' cost
    whatever the rows. None where
    the pre-aggregation would have no key (a global one gives a row even over no rows, which the join would
    keep) or keep more than :data:`_MAX_GROUP_SHARE` of its rows.
    """
    items = graph.items
    keys = set((a, n) for a, n in outside if a in aliases)
    for columns, read, _ in graph.conditions:
        if not read <= aliases and read & aliases:
            keys.update(pair for pair in columns if pair[0] in aliases)
    if not keys or any((a, n) not in items[a].columns for a, n in keys):
        return None
    joined = _estimate_of(graph, aliases)
    internal = [items[a].columns[(a, n)] for a, n in sorted(keys)]
    groups = grouped_rows(joined.rows, [joined.stats[k].ndv if k in joined.stats else 0.0 for k in internal])
    if groups > _MAX_GROUP_SHARE * joined.rows:
        return None
    pre_cost = 1.0 + sum(_keyed_cost(items, a, n, joined.rows) for a, n in keys)
    final_cost = 1.0
    for key in _group_keys(select):
        costs = [k for c in free_columns(key) if (k := _keyed_cost(items, c.table, c.name, joined.rows)) is not None]
        final_cost += sum(costs) or 1.0
    others = len(items) - len(aliases)
    fanout = _fanout(graph, joined)
    uncut = joined.rows * (1.0 - min(1.0, fanout)) * len(aliases) * _JOIN_COST
    saving = ((joined.rows - groups) * (others * _JOIN_COST + fanout * final_cost) - joined.rows * pre_cost - uncut
              - _setup_cost(partials))
    return saving, _Choice(aliases, tuple(sorted(keys)), groups)


def _choose(select: exp.Select, graph: _Graph, read: frozenset[str], outside, partials: int = 1
            ) -> _Choice | None:
    """Return the items to pre-aggregate: those the aggregates read, grown by the neighbour that saves most.

    Each step adds one item joined to the set by an equality (TPC-DS q4: store_sales, then date_dim, whose
    ``d_year`` groups far better than ``ss_sold_date_sk``); the best saving along the way wins, none where no
    set saves anything. The other side always keeps an item.
    """
    current = read
    scored = _benefit(select, graph, current, outside, partials)
    best: tuple[float, _Choice] | None = None
    while len(current) < len(graph.items):
        if scored is not None and scored[0] > 0 and (best is None or scored[0] > best[0]):
            best = scored
        neighbours = sorted(set().union(*(graph.neighbours.get(a, set()) for a in current)) - current)
        if len(current) + 1 >= len(graph.items) or not neighbours:
            break
        steps = [(_benefit(select, graph, current | {a}, outside, partials), a) for a in neighbours]
        scored, chosen = max(steps, key=lambda step: -math.inf if step[0] is None else step[0][0])
        current = current | {chosen}
    return None if best is None else best[1]


# ------------------------------------------------------------------------------------------------------ planning
def _partials(aggregate: exp.Expression) -> list[exp.Expression]:
    """Return the partial aggregates whose merge gives ``aggregate`` (avg: a sum and a count)."""
    argument = aggregate.this.copy()
    if isinstance(aggregate, exp.Avg):
        return [exp.Sum(this=argument), exp.Count(this=argument.copy())]
    return [type(aggregate)(this=argument)]


def _final(aggregate: exp.Expression, columns: list[exp.Column]) -> exp.Expression:
    """Return the re-aggregation of ``aggregate`` over its partials' columns (see the module docstring)."""
    if isinstance(aggregate, (exp.Sum, exp.Min, exp.Max)):
        return type(aggregate)(this=columns[0])
    if isinstance(aggregate, exp.Count):  # a count over no rows is 0, a sum over none NULL; counts are BIGINT
        total = exp.Sum(this=columns[0])
        zero_if_null = exp.Case(ifs=[exp.If(this=exp.Is(this=total.copy(), expression=exp.Null()),
                                            true=exp.Literal.number(0))], default=total)
        return exp.Cast(this=zero_if_null, to=exp.DataType.build("BIGINT"))
    total = exp.Cast(this=exp.Sum(this=columns[0]), to=exp.DataType.build("DOUBLE"))
    count = exp.Cast(this=exp.Sum(this=columns[1]), to=exp.DataType.build("DOUBLE"))
    nonzero = exp.Case(ifs=[exp.If(this=exp.EQ(this=count.copy(), expression=exp.Literal.number(0)),
                                   true=exp.Null())], default=count)
    return exp.Paren(this=exp.Div(this=total, expression=nonzero))


def _pre_aggregate(planner: PlanningContext, choice: _Choice, items: dict[str, Relation],
                   taken: list[exp.Expression], aggregates: list[exp.Expression], read: set[tuple[str, str]]):
    """Plan the chosen items joined and pre-aggregated; return the relation and each aggregate's re-aggregation.

    The relation answers to the items' aliases for its keys and to a new alias for the partials' columns.
    """
    conditions = list(taken)
    joined = join_greedy(planner, [items[a] for a in sorted(choice.aliases)], conditions,
                         set(choice.keys) | {pair for pair in read if pair[0] in choice.aliases})
    if conditions:
        joined = filtered(planner, joined, conditions)
    alias = planner._synthetic_alias()
    keys = list(dict.fromkeys(joined.columns[pair] for pair in choice.keys))
    calls, partial_columns, finals = [], {}, {}
    texts = [aggregate.sql() for aggregate in aggregates]
    for aggregate, text in zip(aggregates, texts):
        if text in finals:
            continue
        columns = []
        for partial in _partials(aggregate):
            partial_text = partial.sql()
            if partial_text not in partial_columns:
                name = planner._fresh(f"$eager{len(partial_columns)}")
                partial_columns[partial_text] = name
                calls.append(aliased(planner._renamed(partial, joined.columns), name))
            columns.append(exp.column(exp.to_identifier(partial_columns[partial_text], quoted=True),
                                      table=exp.to_identifier(alias, quoted=True)))
        finals[text] = _final(aggregate, columns)
    by_call = {id(aggregate): finals[text] for aggregate, text in zip(aggregates, texts)}
    node = planner._builder(joined.node).aggregation([quoted(k) for k in keys], calls).plan()
    columns = {pair: name for pair, name in joined.columns.items() if name in keys}
    columns.update({(alias, name): name for name in partial_columns.values()})
    stats = {k: joined.stats[k].capped(choice.rows) for k in keys if k in joined.stats}
    return Relation(node, columns, choice.aliases | {alias}, choice.rows, stats), by_call


def _with_aggregates_replaced(select: exp.Select, finals: dict[int, exp.Expression]) -> exp.Select:
    """Return ``select`` with its aggregate calls re-aggregating the partials (``finals``, by the call's id).

    Only the clauses read after the joins are copied (the FROM, WHERE and GROUP BY are shared with the
    original, which stays as it is: a deep copy of a TPC-DS SELECT cost more than the rest of this rule).
    """
    def replace(node: exp.Expression) -> exp.Expression:
        final = finals.get(id(node))
        return node if final is None else final.copy()

    copy = exp.Select()
    for key, value in select.args.items():
        copy.args[key] = value  # shared, not re-parented: the original keeps its tree
    copy.set("expressions", [renamed_copy(p, replace) for p in select.expressions])
    if select.args.get("having") is not None:
        copy.set("having", renamed_copy(select.args["having"], replace))
    if select.args.get("order") is not None:
        copy.set("order", renamed_copy(select.args["order"], replace))
    copy.meta.update(select.meta)
    return copy

