"""Optimizer rules over the typed plan: passes between planning (SQL or PlanBuilder) and physical preparation.

Why a layer of its own (issue 30 item 0, DataFusion's ``optimizer`` crate): a
rule written over the frozen, typed :class:`~gpu_engine.plans.nodes.PlanNode`
tree applies to every plan the engine runs — planned from SQL, built by hand
with :class:`~gpu_engine.plans.plan_builder.PlanBuilder`, read from JSON,
planned by ``SparkRunner.sql`` — where a rule over the sqlglot tree
(:mod:`gpu_engine.sql`) sees SQL only. Each rule is a free function in its own
module, ``plan -> plan``, that keeps every node's output schema and rebuilds
only what it changes (``dataclasses.replace``), so a plan no rule changes comes
back as the same object.

:func:`optimize_plan` runs :data:`RULES` in order; :func:`~gpu_engine.planning.prepare.prepare_plan`
calls it before its physical passes (local exchanges, fusion, placement), and
the distributed runners (``SparkRunner``, ``LocalCluster``) call it on the
whole plan before cutting it into stages. ``EngineConfig.optimize=False``
skips it, for comparison.

The callers hand it the statistics of the tables the plan scans (a session's
:class:`~gpu_engine.optimizer.statistics.RegisteredStatistics`; ``SparkRunner.sql``'s
``statistics``), which the rules that choose from estimates
(:data:`ESTIMATE_RULES`, after :data:`RULES`) read through
:mod:`~gpu_engine.optimizer.cardinality`; without them those rules do not run.

0. :func:`~gpu_engine.optimizer.decorrelation.decorrelate_subqueries`: each
   ``[NOT] EXISTS`` / ``x [NOT] IN (SELECT …)`` conjunct of a filter (typed
   subquery predicates, :mod:`gpu_engine.plans.subqueries`) becomes a semi,
   anti or null-aware anti join on its correlation's equalities, a conjunct
   reading an uncorrelated scalar subquery a nested-loop join with its one
   row, one reading a correlated scalar subquery a hash join on its
   correlation keys (inner, or left with the value over no rows: COUNT's 0);
   a scalar subquery in a projection's expressions the same joins under it
   (left where correlated).
   No operator
   evaluates a subquery, so it is also the one rule
   :func:`required_rewrites` applies where the optimizer is switched off.
1. :func:`~gpu_engine.optimizer.constant_folding.fold_constants`: boolean
   connectives and comparisons of constants in filter predicates; a filter
   that is always true goes.
2. :func:`~gpu_engine.optimizer.predicate_pushdown.push_down_predicates`:
   each conjunct of a Filter moves as low as it stays correct — through
   Projects (the projected expressions substituted), into the sides of joins
   whose rows it cannot add or remove wrongly, below aggregations and windows
   when it reads only their group / partition keys, into every branch of a
   UNION ALL; an OR that must stay above a node also filters each of its
   inputs by what the OR implies there
   (:mod:`~gpu_engine.optimizer.or_implied_filters`: ``(a.x = 1 AND b.y = 2)
   OR (a.x = 3 AND b.y = 4)`` above a join filters ``a`` by ``a.x = 1 OR a.x =
   3``).
3. :func:`~gpu_engine.optimizer.constant_folding.fold_constants` again: a
   projection's constants inlined into a pushed filter (a UNION ALL branch's
   ``'s' AS sale_type`` under ``sale_type = 'w'``) fold only once there.
4. :func:`~gpu_engine.optimizer.empty_relations.propagate_empty_relations`:
   a filter that is never true, ``LIMIT 0``, or an empty VALUES makes the
   nodes above it that can only output nothing an empty VALUES (a global
   aggregate keeps SQL's one row).
5. :func:`~gpu_engine.optimizer.projection_pruning.prune_projections`: the
   columns nobody above reads leave scans, projections, joins,
   aggregations and every branch of a union (LocalPartition).
6. :func:`~gpu_engine.optimizer.distinct_branches.drop_redundant_distincts`:
   a DISTINCT whose rows reach, through Projects, Filters and
   LocalPartitions, only a grouping that ignores copies (a distinct set
   operation's ``SELECT DISTINCT`` branch, the inner UNION of a UNION chain)
   goes.
7. :func:`~gpu_engine.optimizer.union_flattening.flatten_unions`: a UNION
   ALL of UNION ALLs (a set operation chain) is one LocalPartition with a
   source per branch.
8. :func:`~gpu_engine.optimizer.distinct_semi_joins.semi_joins_under_distinct`:
   an inner join under a DISTINCT that reads one side's columns only (after
   pruning, its output names them) becomes a semi join of that side.

With statistics (:data:`ESTIMATE_RULES`), after the filters are where they end up:
:func:`~gpu_engine.optimizer.join_order.order_joins` rebuilds each region of
inner joins as the join tree of least summed estimated rows (bushy or
left-deep, over :mod:`~gpu_engine.optimizer.join_graph`'s relations, keys and
classes of equal columns) where that saves a fifth of the written tree's;
:func:`~gpu_engine.optimizer.eager_aggregation.eager_aggregate` pre-aggregates
the relations an aggregation over inner joins reads below the joins where the
estimates say it pays (TPC-H q10's lineitem ⋈ orders per ``o_custkey``);
:func:`~gpu_engine.optimizer.build_sides.build_smaller_sides` swaps a hash
join whose build side is estimated larger than its probe side;
:func:`~gpu_engine.optimizer.partial_steps.choose_partial_steps` refuses a
GROUP BY its partial step where its input is proven unique on some of its keys
(:mod:`~gpu_engine.optimizer.unique_keys`) or a key is about as distinct as its
estimated input rows; :func:`~gpu_engine.optimizer.exchange_keys.choose_exchange_keys`
lets a GROUP BY with string keys repartition on one fixed-width key estimated to
have many distinct values (TPC-H q10's ``c_custkey``).

Still on the sqlglot tree (not moved yet): the SQL planner translates a
WHERE conjunct's ``[NOT] EXISTS`` / ``[NOT] IN (SELECT …)`` into the typed
predicates rule 0 decorrelates (binding their key types: an outer expression
key and numeric keys of two layouts are projected and cast there), and an
uncorrelated scalar subquery in WHERE / HAVING / QUALIFY, and a WHERE
comparison with a scalar aggregate correlated by column equalities (grouped
by them, its input restricted by magic sets), into a typed
``ScalarSubquery`` the same rule joins, but plans the other subquery forms as
joins itself (:mod:`gpu_engine.sql.decorrelation`: uncorrelated EXISTS as a count;
:mod:`gpu_engine.sql.subquery_values`
as values, but for scalar subqueries in the SELECT list and ORDER BY — uncorrelated, or one aggregate
correlated by column equalities —, which are typed ``ScalarSubquery`` expressions of the final Project),
and join ordering beside the typed rule (the estimate rules both planners call:
:mod:`~gpu_engine.optimizer.statistics`): the SQL planner orders FROM items
first and the typed rule moves only a region its estimates, with the pushed
filters counted, say is a fifth cheaper (5 of the 121 TPC-H/TPC-DS plans at
SF1, each as fast or faster). Planned in the written order instead
(``bench/ab.py sql-join-order``), the typed rule reaches the SQL rule's
estimated rows on all but TPC-DS q54 (a region no keys link: two scalar
subqueries' range on ``date_dim``) and the plans within its fifth (q7, q26,
q27), but q54, q67 and q72 run 12-42% slower: the SQL ordering stays
(bench/results/2026-11-28-joinorder-typed-join-order.md).
The SQL planner's copies of the pushdown are gone: the one for ORs over
several FROM items (``sql.predicates.implied_filters``) once build sides were
chosen here (TPC-H q19 keeps its plan;
bench/results/2026-11-28-buildside2-typed-build-sides.md), the one for a
derived table's / CTE reference's conditions (``sql/derived_pushdown.py``)
with the SQL planner's eager aggregation (``sql/eager_aggregation.py``), the
last rule that read its filtered estimates, once eager aggregation was a rule
here (bench/results/2026-11-28-eagermove.md).
"""

from __future__ import annotations

from typing import Callable, Mapping

from gpu_engine.optimizer.build_sides import build_smaller_sides
from gpu_engine.optimizer.constant_folding import fold_constants
from gpu_engine.optimizer.decorrelation import decorrelate_subqueries
from gpu_engine.optimizer.deferred_columns import defer_carried_columns
from gpu_engine.optimizer.distinct_branches import drop_redundant_distincts
from gpu_engine.optimizer.distinct_semi_joins import semi_joins_under_distinct
from gpu_engine.optimizer.eager_aggregation import eager_aggregate
from gpu_engine.optimizer.exchange_keys import choose_exchange_keys
from gpu_engine.optimizer.empty_relations import propagate_empty_relations
from gpu_engine.optimizer.join_order import order_joins
from gpu_engine.optimizer.partial_steps import choose_partial_steps
from gpu_engine.optimizer.predicate_pushdown import push_down_predicates
from gpu_engine.optimizer.projection_pruning import prune_projections
from gpu_engine.optimizer.statistics import TableStatistics
from gpu_engine.optimizer.union_flattening import flatten_unions
from gpu_engine.optimizer.unique_groupings import drop_unique_groupings
from gpu_engine.plans.nodes import PlanNode

__all__ = ["ESTIMATE_RULES", "RULES", "optimize_plan", "required_rewrites"]

#: The rules, in the order they run: decorrelation first (every later rule sees joins, not subquery predicates,
#: and may move the filters the correlation left), folding next (a folded TRUE/FALSE filter is then dropped or
#: made empty),
#: pushdown before empty relations (a FALSE conjunct pushed to a leaf empties the most), redundant DISTINCTs
#: dropped before pruning (the columns only a dropped DISTINCT's keys read then go) and before unions are
#: flattened (a UNION chain's inner grouping gone, its union joins the outer one), pruning last (a filter
#: moved below a projection no longer needs its columns above it), semi joins after pruning (a join's output
#: then names only the columns read above it).
RULES: tuple[Callable[[PlanNode], PlanNode], ...] = (
    decorrelate_subqueries,
    fold_constants,
    push_down_predicates,
    fold_constants,
    propagate_empty_relations,
    drop_redundant_distincts,
    flatten_unions,
    prune_projections,
    semi_joins_under_distinct,
)


#: The rules that choose from estimates (``plan, statistics -> plan``), run after :data:`RULES` when
#: :func:`optimize_plan` has statistics: the filters are where they end up, so the estimates count them.
#: :func:`~gpu_engine.optimizer.join_order.order_joins` first: each region of inner joins in the tree of least
#: estimated rows (``bench/ab.py typed-join-order``; bench/results/2026-11-28-joinorder-*.md), then
#: :func:`~gpu_engine.optimizer.build_sides.build_smaller_sides`: each hash join builds the side the typed
#: estimates say is smaller (``bench/ab.py typed-build-sides``; bench/results/2026-11-28-buildside2-*.md).
#: :func:`~gpu_engine.optimizer.partial_steps.choose_partial_steps`: no partial step for a GROUP BY whose key is
#: about as distinct as its estimated input rows (``bench/ab.py partial-steps``;
#: bench/results/2026-11-28-partialsteps-*.md).
#: :func:`~gpu_engine.optimizer.eager_aggregation.eager_aggregate` right after join ordering: an aggregation over
#: inner joins pre-aggregates the relations its aggregates read where the estimates say it pays (the region's
#: joins keep the order :func:`order_joins` gave them; ``bench/ab.py eager-aggregation``;
#: bench/results/2026-11-28-eager*.md), before build sides and partial steps, which then see the pre-aggregation.
#: :func:`~gpu_engine.optimizer.unique_groupings.drop_unique_groupings` after it: a GROUP BY whose input is proven
#: unique on its keys (the pre-aggregation's key joined to a column read and found unique in its table: TPC-H q10)
#: is a projection (bench/results/2026-11-29-q10-s53.md);
#: :func:`~gpu_engine.optimizer.deferred_columns.defer_carried_columns` then fetches a top N's carried strings
#: of a table after it, joined back on the table's key proven unique and never NULL (TPC-H q10's customer strings).
#: :func:`~gpu_engine.optimizer.exchange_keys.choose_exchange_keys` last: an aggregation over string keys hashes
#: one fixed-width key of many estimated distinct values at its exchange (bench/results/2026-11-29-q10agg-s52.md).
ESTIMATE_RULES: tuple[Callable[[PlanNode, Mapping[str, TableStatistics]], PlanNode], ...] = (
    order_joins,
    eager_aggregate,
    drop_unique_groupings,
    defer_carried_columns,
    build_smaller_sides,
    choose_partial_steps,
    choose_exchange_keys,
)


def optimize_plan(plan: PlanNode, statistics: Mapping[str, TableStatistics] | None = None) -> PlanNode:
    """Return ``plan`` with every rule of :data:`RULES` applied; the same object where none changes anything.

    ``statistics``: table name -> :class:`~gpu_engine.optimizer.statistics.TableStatistics` of the tables the
    plan scans (a session's :class:`~gpu_engine.optimizer.statistics.RegisteredStatistics`), for the rules that
    choose from :mod:`~gpu_engine.optimizer.cardinality`'s estimates; None (a plan without its tables) skips
    them.

    With statistics, :func:`~gpu_engine.optimizer.distinct_semi_joins.semi_joins_under_distinct` runs after
    :func:`~gpu_engine.optimizer.join_order.order_joins`, not among :data:`RULES`: it turns the top join of a
    region under a DISTINCT into a semi join, which ends the region there, so run first it let the written
    order choose which relation the join search could no longer move (TPC-DS q37 with the FROM items as written
    and shuffled: inventory or catalog_sales became the semi join's side, a cross product of item and date_dim
    below it in one of the orders). After ordering, the region is searched whole and the top join of the
    ordered tree is the one made a semi join where it may be.
    """
    if statistics is None:
        for rule in RULES:
            plan = rule(plan)
        return plan
    for rule in RULES:  # semi joins under a DISTINCT once the joins are ordered (see below)
        if rule is not semi_joins_under_distinct:
            plan = rule(plan)
    ordered = ESTIMATE_RULES.index(order_joins) + 1 if order_joins in ESTIMATE_RULES else 0
    for chooser in ESTIMATE_RULES[:ordered]:
        plan = chooser(plan, statistics)
    plan = semi_joins_under_distinct(plan)
    for chooser in ESTIMATE_RULES[ordered:]:
        plan = chooser(plan, statistics)
    return plan


def required_rewrites(plan: PlanNode) -> PlanNode:
    """Return ``plan`` with the rewrites it cannot run without (decorrelation: no operator evaluates a subquery
    predicate), for the callers that skip :func:`optimize_plan` (``EngineConfig.optimize=False``)."""
    return decorrelate_subqueries(plan)
