"""Plan a GROUP BY without a partial step where one key alone is about as distinct as its input rows.

Why: with several drivers, a SINGLE aggregation runs as PARTIAL -> LocalPartition(keys) -> FINAL
(:mod:`gpu_engine.planning.local_exchanges`), so each driver's partial step shrinks its rows before they
cross the exchange. Where the groups are about as many as the rows, the partial step shrinks nothing: it
hashes every row into a table as large as its input, emits it, and the final step hashes every row again.
With string keys that is a second interning of every string (TPC-H Q10 groups the ~38K customers of its
joined rows by seven customer columns, four of them strings: the partial step cost ~20% of the query's
CPU). A running partial step abandons grouping when it sees this (``partial_aggregation_abandon_percent``
of its rows become groups), but only after ``partial_aggregation_abandon_rows`` rows, which such a join's
output per driver never reaches. Presto's ``partial_aggregation_strategy=AUTOMATIC`` makes the same
choice from its estimates.

Why here, after the filters are pushed down: the SQL planner made this choice from its own estimates before
:func:`~gpu_engine.optimizer.predicate_pushdown.push_down_predicates` ran, so a filter the pass moves below
an aggregation (a CTE reader's ``ss_sold_year = 2000`` reaching ``date_dim`` inside TPC-DS q78's CTEs) was
not in the rows it compared, and the SQL planner's copy of the pushdown (``sql/derived_pushdown.py``, since
deleted) was kept for it too (bench/results/2026-11-28-logical-sql-filter-copies.md: q78 +10% without it). Here
every plan gets the choice from :func:`~gpu_engine.optimizer.cardinality.estimate` after the filters are
where they end up: SQL, PlanBuilder, JSON and Spark plans alike.

The rule: a SINGLE aggregation with grouping keys whose input is estimated at :data:`MIN_ESTIMATED_ROWS`
rows or more, and one of whose keys has an estimated distinct count (a scan column's range, capped by the
rows after each filter and join) of at least :data:`GROUPS_PER_ROW` of those rows, gets
``partial_step=False``: the groups are at least that key's distinct values, so the partial step could keep
at most ``1 - GROUPS_PER_ROW`` of its rows out of the exchange. So does one whose two or more keys' counts
multiply to between :data:`JOINT_GROUPS_PER_ROW` of the rows and the rows (see :func:`_pays`). A key without a distinct count (a string
without a dictionary count, an expression) never refuses the partial step, nor does an input the estimates
do not cover (a window, grouping sets). The rule only refuses: an aggregation already marked
``partial_step=False`` keeps the mark. A wrong estimate costs time, never correctness: either plan computes
the same groups.

Before the estimates, proof: an aggregation whose input is proven unique on a subset of its grouping keys
(:func:`~gpu_engine.optimizer.unique_keys.unique_keys`: an earlier aggregation's keys carried through
filters, projections and joins that match a row to at most one row) makes exactly a group per row, so it
gets ``partial_step=False`` at any size: the plan depends on the plan's shape, never on a constant or a
statistic. It fires on none of the 121 TPC-H/TPC-DS plans (bench/results/2026-11-28-uniquekeys-*.md): their
regroupings (TPC-DS q4/q11/q74's year totals by the customer's id and names over rows unique per customer
surrogate key and year) need a fact about a scan's columns (``c_customer_id`` unique in ``customer``) that
no plan proves and no statistic counts yet.

The distinct counts are the ranges' (:attr:`~gpu_engine.optimizer.statistics.ColumnStatistics.ndv`), as the
SQL planner's rule read them, not the Parquet dictionary's counts the other typed estimates read
(``sampled_ndv``): the threshold was measured against the ranges, and the one plan the dictionary's count
changes measured slower. TPC-H q18 groups lineitem's 6M rows by ``l_orderkey``, whose range says 6M values
and whose dictionary 1.5M: with the range the partial step is refused (-11% when the rule came,
bench/results/2026-11-28-tpch-sql-partial-steps-cpu-sf1.md), with the dictionary's count it is kept and q18
takes +16% (bench/results/2026-11-28-partialsteps-move.md). So a partial step over ~4 rows per group of 1.5M
groups does not pay either; the threshold (or a rule on the groups' number) that says so from the true count
is not measured yet.

Only above :data:`MIN_ESTIMATED_ROWS`: below it a partial step costs a millisecond or two either way, and a
choice made from estimates would make the plan, and so its generated kernels, depend on a query's constants
(``WHERE v > 20`` against ``WHERE v > 99999``: a selective filter caps the key's distinct count at the few rows
it keeps), which the compilation issue forbids (``tests/codegen/test_kernel_parameters.py``: a new constant
generates no kernel). Above it a new constant may still flip the choice; each plan's kernels compile once.
"""

from __future__ import annotations

import math
from dataclasses import replace
from collections.abc import Mapping

from gpu_engine.optimizer.cardinality import estimate
from gpu_engine.optimizer.statistics import FEW_VALUES_SHARE, TableStatistics
from gpu_engine.optimizer.unique_keys import unique_keys
from gpu_engine.plans.nodes import AggregationNode, AggregationStep, PlanNode

__all__ = ["GROUPS_PER_ROW", "JOINT_GROUPS_PER_ROW", "MIN_ESTIMATED_ROWS", "RangeCounts", "WIDE_KEY_SAMPLE_MIN_ROWS",
           "choose_partial_steps"]

#: The share of its input rows a partial step keeps as groups at which it stops paying: the default of
#: ``QueryConfig.partial_aggregation_abandon_percent`` (80), the running step's own threshold.
GROUPS_PER_ROW = 0.8

#: The share of its input rows at which the keys' joint distinct count (the product of their estimated counts, where
#: it is at most the rows) refuses the partial step: see :func:`_pays`.
JOINT_GROUPS_PER_ROW = 0.4

#: The estimated input rows from which a key whose range is wider than its table's rows is sampled before its
#: range refuses the partial step (:func:`_count`): below it the rows the partial step would keep off the exchange
#: cost about what reading the sample does (a row group; 100 int64 keys of [0, 1e9): 70 ms of CPU saved at 10M
#: rows). Sampling at any size cost 156 ms of CPU over the 121 TPC-H/TPC-DS texts' first planning at SF1 for no
#: plan changed.
WIDE_KEY_SAMPLE_MIN_ROWS = 1_000_000

#: The estimated input rows below which the partial step is always kept (see the module docstring).
MIN_ESTIMATED_ROWS = 10_000


def choose_partial_steps(plan: PlanNode, statistics: Mapping[str, TableStatistics]) -> PlanNode:
    """Return ``plan`` with ``partial_step=False`` on each aggregation whose partial step would keep about a
    group per input row (the same object where none changes)."""
    return _chosen(plan, RangeCounts(statistics), {}, {})


class RangeCounts(Mapping):
    """``statistics`` with each column's distinct count its range's (``sampled_ndv`` dropped: see the module
    docstring) but where the sampled count is at most :data:`~gpu_engine.optimizer.statistics.FEW_VALUES_SHARE`
    of the table's rows; each table converted once. Eager aggregation reads its estimates so too
    (:mod:`~gpu_engine.optimizer.eager_aggregation`: TPC-H q18).

    Why the few values are kept: a key whose range spans past the rows (100 int64 ids drawn from [0, 1e9) over
    10M rows) reads from its range as a value a row, and lost its partial step: every row repartitioned, 2.0x
    the CPU of the plan with one (bench/results/2026-11-29-intgroups-s54.md). q18's ``l_orderkey`` (a quarter
    of its rows) stays above the line, so its plan is the range's as measured.
    """

    def __init__(self, statistics: Mapping[str, TableStatistics]):
        self._statistics = statistics
        self._converted: dict[str, TableStatistics] = {}

    def __getitem__(self, name: str) -> TableStatistics:
        if name not in self._converted:
            table = self._statistics[name]
            self._converted[name] = TableStatistics(table.rows, {
                column: replace(stats, sampled_ndv=0.0)
                if stats.sampled_ndv and stats.sampled_ndv > FEW_VALUES_SHARE * table.rows else stats
                for column, stats in table.columns.items()})
        return self._converted[name]

    def key_match_divisor(self, *args) -> float | None:
        """The tables' measured key matches (:meth:`~gpu_engine.optimizer.statistics.RegisteredStatistics.
        key_match_divisor`), where the statistics read rows."""
        measure = getattr(self._statistics, "key_match_divisor", None)
        return None if measure is None else measure(*args)

    def wide_key_count(self, table: str, column: str) -> float | None:
        """The tables' sampled count of a key whose range is wider than its table's rows
        (:meth:`~gpu_engine.optimizer.statistics.RegisteredStatistics.wide_key_count`), where the statistics
        read rows."""
        measure = getattr(self._statistics, "wide_key_count", None)
        return None if measure is None else measure(table, column)

    def __iter__(self):
        return iter(self._statistics)

    def __len__(self) -> int:
        return len(self._statistics)


def _chosen(plan: PlanNode, statistics: Mapping[str, TableStatistics], memo: dict, unique: dict) -> PlanNode:
    key = id(plan)
    if key in memo:  # a subtree shared by two parents (a CTE read twice) stays one object
        return memo[key][1]
    sources = tuple(_chosen(source, statistics, memo, unique) for source in plan.sources)
    out = plan
    if any(new is not old for new, old in zip(sources, plan.sources)):
        out = replace(plan, sources=sources)
    if (isinstance(out, AggregationNode) and out.partial_step and out.step is AggregationStep.SINGLE
            and (_one_group_per_row(out, unique) or not _pays(out, statistics))):
        out = replace(out, partial_step=False)
    memo[key] = (plan, out)  # the node kept: its id stays its own
    return out


def _one_group_per_row(node: AggregationNode, unique: dict) -> bool:
    """Return True when ``node``'s input is proven unique on a subset of its grouping keys (a GROUP BY only: a
    global aggregation's partial step over at most one row costs nothing to keep)."""
    return bool(node.grouping_keys) and unique_keys(node.sources[0], unique).unique_on(node.grouping_keys)


def _pays(node: AggregationNode, statistics: Mapping[str, TableStatistics]) -> bool:
    """Return False when a grouping key of ``node`` is estimated to have about a distinct value per input row, or
    when its keys together are estimated at :data:`JOINT_GROUPS_PER_ROW` of the rows or more.

    The joint count is the product of two or more keys' counts (those with one), taken only where it is at most
    the rows: a product past the rows (keys that repeat each other's values, as an item's key and its brand) says
    nothing of the groups; one key's count alone keeps the 80% line (TPC-DS q49's item keys at 43-76% of ~23K
    rows ran 1.05x CPU without their partial steps). Why: a partial step hashes every row to shrink them by
    the rows a group, then the final step hashes what is left again, where one step behind the repartition
    hashes each row once, on every driver. Over 400K rows of two integer keys the single step took 0.47-0.79x
    the partial and final steps' CPU at 0.05-0.6 groups a row; the line sits at 0.4 because the product
    overstates the groups of correlated keys. TPC-DS q39's four keys over inventory (~4 rows a group, the one
    row group its date filter leaves scanned, joined and partially aggregated by one driver alone): 0.82x CPU
    (bench/results/2026-11-29-q39-s54.md).
    A global aggregation (one row), grouping sets and an input without an estimate keep their partial step.
    """
    if not node.grouping_keys or node.global_grouping_sets or node.group_id_key is not None:
        return True
    below = estimate(node.sources[0], statistics)
    if below is None or below.rows < max(1, MIN_ESTIMATED_ROWS):
        return True
    known = [_count(below.columns[k], below.rows, statistics) for k in node.grouping_keys
             if k in below.columns and below.columns[k].ndv > 0]
    if not known or max(known) >= GROUPS_PER_ROW * below.rows:
        return not known
    if len(known) < 2:  # one key's count is its groups' estimate: judged above
        return True
    joint = math.prod(known)
    return not JOINT_GROUPS_PER_ROW * below.rows <= joint <= below.rows


def _count(column, rows: float, statistics: Mapping[str, TableStatistics]) -> float:
    """Return ``column``'s estimated distinct count, or where that refuses the partial step alone and comes from a
    scanned column whose range is wider than its table's rows, the count of a sample of the column's rows when
    that is smaller (:meth:`RangeCounts.wide_key_count`: read only here, where the choice hangs on it, over
    :data:`WIDE_KEY_SAMPLE_MIN_ROWS` input rows or more)."""
    if column.ndv < GROUPS_PER_ROW * rows or len(column.origin) != 2 or rows < WIDE_KEY_SAMPLE_MIN_ROWS:
        return column.ndv
    measure = getattr(statistics, "wide_key_count", None)
    sampled = None if measure is None else measure(*column.origin)
    return column.ndv if sampled is None else min(column.ndv, sampled)
