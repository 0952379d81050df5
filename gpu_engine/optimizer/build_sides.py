"""Build the smaller input of each hash join, chosen from the typed estimates after the filters are pushed down.

Why after pushdown: the SQL join ordering (:mod:`gpu_engine.sql.join_ordering`)
picks each join's build side from its own estimates before
:func:`~gpu_engine.optimizer.predicate_pushdown.push_down_predicates` runs, so
a filter the pass places later (an OR's implied filter on one FROM item, a
derived table's condition moved into it) is not in the rows it compared:
TPC-H q19 without the SQL planner's copy of the OR-implied filters (since
deleted) built 6M-row ``lineitem`` against an unfiltered ``part``
(bench/results/2026-11-28-logical-sql-filter-copies.md: +40%). Here each :class:`~gpu_engine.plans.nodes.HashJoinNode` whose build side
:func:`~gpu_engine.optimizer.cardinality.estimate` says is larger than its
probe side trades places (DataFusion's ``join_selection``), bottom-up, so a
join above sees its inputs' final shapes. A plan built by hand, read from JSON
or planned by Spark gets the same choice.

Which joins may trade places, and what they become (:data:`SWAPPED`): inner
and full stay; LEFT becomes RIGHT and back (the preserved table is the same
whichever side it is on); a semi or anti join keeps or drops rows of the same
input as the other kind (``left_semi`` <-> ``right_semi``, ``anti`` <->
``right_anti``). ``null_aware_anti`` (NOT IN) has no build-side twin: it stays.
Keys, the extra condition and the output columns are kept; only the sources and
the key lists swap, so the output schema is the same.

Ties and unknowns keep the SQL planner's choice (its tie-break by names: issue
31's plans that do not depend on how a query is written): only a build side
estimated larger than the probe side moves, and a join with either side not
estimated (a window, grouping sets, no statistics for a table) stays.

In :data:`~gpu_engine.optimizer.ESTIMATE_RULES` (bench/results/2026-11-28-buildside2-*.md). It was left out
at first (bench/results/2026-11-28-buildside-build-sides.md: TPC-H q19 given back without the SQL copy of the
OR-implied filters, 290 -> 201 ms, but TPC-H q18 +28% and TPC-DS q13 +12%) until two estimates it read were
fixed at their cause: an OR above the filters it implied below is no longer counted twice
(:func:`~gpu_engine.optimizer.cardinality.filter_selectivity`: q13's 57K rows had read as 568), and a sorted
sparse key's distinct values come from its Parquet dictionary, not its range
(:mod:`~gpu_engine.optimizer.statistics`: ``l_orderkey``'s 1.5M values had read as 6M, q18's HAVING as 2M
groups against ``orders``' 1.5M).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from gpu_engine.optimizer.cardinality import Estimate, estimate
from gpu_engine.optimizer.statistics import TableStatistics
from gpu_engine.plans.nodes import HashJoinNode, PlanNode

__all__ = ["SWAP_RATIO", "SWAPPED", "build_smaller_sides"]

#: How many times its probe side's estimated rows a build side must be to swap (1: any larger build side; 2 was
#: tried while the typed estimates of TPC-H q18 and TPC-DS q13 were wrong, ``bench/ab.py build-sides-2x``).
SWAP_RATIO = 1.0

#: Join type -> the type of the same join with its sides swapped (a type missing here never swaps).
SWAPPED = {"inner": "inner", "full": "full", "left": "right", "right": "left", "left_semi": "right_semi",
           "right_semi": "left_semi", "anti": "right_anti", "right_anti": "anti"}


def build_smaller_sides(plan: PlanNode, statistics: Mapping[str, TableStatistics]) -> PlanNode:
    """Return ``plan`` with each hash join whose build side is estimated larger than its probe side swapped
    (the same object where none is)."""
    return _swapped(plan, statistics, {})


def _swapped(plan: PlanNode, statistics: Mapping[str, TableStatistics], memo: dict) -> PlanNode:
    sources = tuple(_swapped(source, statistics, memo) for source in plan.sources)
    if any(new is not old for new, old in zip(sources, plan.sources)):
        plan = replace(plan, sources=sources)
    if not isinstance(plan, HashJoinNode) or plan.join_type not in SWAPPED:
        return plan
    probe, build = _rows(plan.probe, statistics, memo), _rows(plan.build, statistics, memo)
    if probe is None or build is None or build <= probe * SWAP_RATIO:
        return plan
    return replace(plan, sources=(plan.build, plan.probe), join_type=SWAPPED[plan.join_type],
                   left_keys=plan.right_keys, right_keys=plan.left_keys)


def _rows(node: PlanNode, statistics: Mapping[str, TableStatistics], memo: dict) -> float | None:
    key = id(node)
    if key not in memo:
        found: Estimate | None = estimate(node, statistics)
        memo[key] = (node, None if found is None else found.rows)  # the node kept: its id stays its own
    return memo[key][1]
