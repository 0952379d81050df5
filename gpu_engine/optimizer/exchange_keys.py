"""Repartition a GROUP BY over string keys on one fixed-width key of many distinct values.

Why: with several drivers, a final aggregation gets a LocalPartition that hashes its grouping keys
(:mod:`gpu_engine.planning.local_exchanges`), so each group's rows meet on one driver. Hashing a string key
reads all its bytes, per row, before the aggregation hashes them again to group. Any subset of the grouping
keys partitions just as correctly: the rows of one group agree on every key, so on the subset too. TPC-H
q10 groups the ~38K customers of its joined rows by seven customer columns, four of them long strings
(``c_name``, ``c_address``, ``c_phone``, ``c_comment``): repartitioned on ``c_custkey`` alone its CPU time
fell to 0.90x (bench/results/2026-11-29-tpchsql-s51.md).

The cost is balance: a subset with few values spreads the rows over the drivers unevenly (TPC-H q16's
``p_size``, 8 values after its IN list, made q16 1.04x slower on 2 drivers). So a key is chosen only where its
estimated distinct count (:func:`~gpu_engine.optimizer.cardinality.estimate`: a scan column's range, or the
Parquet dictionary's count where lower, capped by the rows after each filter and join) is at least
:data:`MIN_PARTITION_GROUPS`, many times any driver count a Task runs (64 groups a driver at 32 drivers), and
only where the aggregation has a key that is not fixed-width: over integer keys alone there is little hashing
to save and balance to lose.

The rule: a grouping aggregation (not grouping sets) whose input is estimated at
:data:`~gpu_engine.optimizer.partial_steps.MIN_ESTIMATED_ROWS` rows or more (below it the choice would make
the plan depend on a query's constants, as :mod:`~gpu_engine.optimizer.partial_steps` explains), with a
string or binary key, gets ``exchange_keys`` = its fixed-width key of the largest estimated distinct count
(the first such in key order on a tie) where that count reaches :data:`MIN_PARTITION_GROUPS`. Floating-point
keys are not chosen (the exchange's hash of ``-0.0`` and ``0.0`` differs where grouping makes them one key).
A wrong estimate costs time, never correctness: every subset of the keys partitions correctly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pyarrow as pa

from gpu_engine.optimizer.cardinality import estimate
from gpu_engine.optimizer import partial_steps
from gpu_engine.optimizer.statistics import TableStatistics
from gpu_engine.plans.nodes import AggregationNode, AggregationStep, PlanNode

__all__ = ["MIN_PARTITION_GROUPS", "choose_exchange_keys"]

#: The estimated distinct values a fixed-width key needs to carry an aggregation's exchange alone.
MIN_PARTITION_GROUPS = 2048


def choose_exchange_keys(plan: PlanNode, statistics: Mapping[str, TableStatistics]) -> PlanNode:
    """Return ``plan`` with ``exchange_keys`` set on each aggregation whose exchange may hash one
    fixed-width key of many distinct values instead of all its keys (the same object where none changes)."""
    return _chosen(plan, statistics, {}, False)


def _chosen(plan: PlanNode, statistics: Mapping[str, TableStatistics], memo: dict, dictated: bool) -> PlanNode:
    """``dictated``: ``plan`` is the DISTINCT whose exchange the aggregation above chooses
    (:func:`~gpu_engine.planning.local_exchanges.distinct_partition_keys`), so it gets no choice here."""
    from gpu_engine.planning.local_exchanges import distinct_partition_keys

    key = (id(plan), dictated)
    if key in memo:  # a subtree shared by two parents (a CTE read twice) stays one object
        return memo[key][1]
    below = isinstance(plan, AggregationNode) and bool(distinct_partition_keys(plan))
    sources = tuple(_chosen(source, statistics, memo, below) for source in plan.sources)
    out = plan
    if any(new is not old for new, old in zip(sources, plan.sources)):
        out = replace(plan, sources=sources)
    if isinstance(out, AggregationNode) and not out.exchange_keys and not dictated:
        chosen = _partition_key(out, statistics)
        if chosen is not None:
            out = replace(out, exchange_keys=(chosen,))
    memo[key] = (plan, out)  # the node kept: its id stays its own
    return out


def _fixed_width(dtype: pa.DataType) -> bool:
    return (pa.types.is_integer(dtype) or pa.types.is_date(dtype) or pa.types.is_timestamp(dtype)
            or pa.types.is_decimal(dtype) or pa.types.is_time(dtype) or pa.types.is_duration(dtype))


def _variable_width(dtype: pa.DataType) -> bool:
    return (pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_binary(dtype)
            or pa.types.is_large_binary(dtype))


def _partition_key(node: AggregationNode, statistics: Mapping[str, TableStatistics]) -> str | None:
    """Return the fixed-width grouping key of ``node`` its exchange should hash alone, or None."""
    if (len(node.grouping_keys) < 2 or node.global_grouping_sets or node.group_id_key is not None
            or node.step in (AggregationStep.PARTIAL, AggregationStep.INTERMEDIATE)):
        return None
    types = {key: node.output_schema.field(key).type for key in node.grouping_keys}
    if not any(_variable_width(dtype) for dtype in types.values()):
        return None
    candidates = [key for key in node.grouping_keys if _fixed_width(types[key])]
    if not candidates:
        return None
    below = estimate(node.sources[0], statistics)
    if below is None or below.rows < max(1, partial_steps.MIN_ESTIMATED_ROWS):
        return None
    counts = [(below.columns[key].ndv if key in below.columns else 0.0, -i, key) for i, key in enumerate(candidates)]
    ndv, _, key = max(counts)
    return key if ndv >= MIN_PARTITION_GROUPS else None
