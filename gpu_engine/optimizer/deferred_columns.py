"""Fetch a table's carried string columns after a top N, by its key proven unique: late materialization.

Why: TPC-H Q10 joins customer to ~38K pre-aggregated customers and their nation and keeps the top 20 by revenue;
customer's four long strings (name, address, phone, comment) are only carried to the output, yet the scan decoded
them for every joined customer and both joins gathered them (scan 46.7 ms against 33.7 for 20 rows, probes 8.8 +
8.4 ms against ~0.7: bench/results/2026-11-29-q10-s53.md). The hand plan takes the top 20 before joining customer,
which SQL allows only with a foreign key (a customer missing from customer leaves fewer than 20 rows). What needs
no foreign key: keep the joins, narrowed to the key, take the top N, then join the table again on a key proven
unique and never NULL in it (:func:`~gpu_engine.optimizer.statistics.unique_column`, read from the rows): each of
the N rows came from one row of the table, and the key finds that row and no other, so its carried columns are
the ones the row had. The N-row build side filters the second scan by key: its strings are decoded for N rows.

The rule, at a TopN (not partial, without ties) whose input is a region of projections, filters and inner hash
joins: the output columns that are a scanned table's string columns passed on unchanged (plain column references,
renamed or not), read by nothing in the region (no filter, join key or condition, computed expression or sort key
reads them), where the same scan's proven key is an output column too. Those columns leave the region (pruned
from the scan up: :func:`~gpu_engine.optimizer.projection_pruning.prune_projections`); above the TopN, a scan of
the key and those columns joins it on the key, a projection restores the names and order, and a TopN of the same
keys orders the N rows again (a join keeps no order).

Where it runs: in :data:`~gpu_engine.optimizer.ESTIMATE_RULES` after the aggregations are settled
(:mod:`~gpu_engine.optimizer.unique_groupings`, which leaves q10's joined rows under its TopN) and before build
sides (the new join builds the N rows).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import pyarrow as pa

from gpu_engine.optimizer.projection_pruning import prune_projections
from gpu_engine.optimizer.statistics import TableStatistics
from gpu_engine.plans.expressions import ColumnRef, referenced_columns
from gpu_engine.plans.nodes import FilterNode, HashJoinNode, PlanNode, ProjectNode, TableScanNode, TopNNode

__all__ = ["MAX_DEFERRED_ROWS", "MIN_TABLE_ROWS", "defer_carried_columns"]

#: The largest top N whose columns are fetched after it (its rows are the new join's build side).
MAX_DEFERRED_ROWS = 10_000
#: The fewest rows (by its statistics) a table needs, and at least 10 per row of the top N, for its columns to be
#: fetched later: a second scan and a join cost more than the strings of a small table (a nation's 25 names).
MIN_TABLE_ROWS = 4096


def defer_carried_columns(plan: PlanNode, statistics: Mapping[str, TableStatistics]) -> PlanNode:
    """Return ``plan`` with each TopN's carried string columns of a table fetched after it by the table's proven
    key (the same object where none is)."""
    prove = getattr(statistics, "unique_column", None)
    if prove is None:
        return plan

    def rows(table: str) -> float:
        try:
            return statistics[table].rows
        except KeyError:
            return 0.0

    return _deferred(plan, prove, rows, {})


def _deferred(plan: PlanNode, prove, rows, memo: dict) -> PlanNode:
    key = id(plan)
    if key in memo:  # a subtree shared by two parents stays one object
        return memo[key][1]
    sources = tuple(_deferred(source, prove, rows, memo) for source in plan.sources)
    out = plan
    if any(new is not old for new, old in zip(sources, plan.sources)):
        out = replace(plan, sources=sources)
    if isinstance(out, TopNNode) and not out.is_partial and not out.with_ties and out.count <= MAX_DEFERRED_ROWS:
        out = _fetched_after(out, prove, rows) or out
    memo[key] = (plan, out)
    return out


def _origin(node: PlanNode, name: str):
    """Return ``(scan node, column)`` where ``node``'s output column ``name`` is a scanned column passed on unchanged
    through projections, filters and inner hash joins, else None."""
    while True:
        if isinstance(node, TableScanNode):
            return (node, name) if name in node.columns else None
        if isinstance(node, ProjectNode):
            expr = node.expressions[node.names.index(name)] if name in node.names else None
            if not isinstance(expr, ColumnRef):
                return None
            node, name = node.sources[0], expr.name
        elif isinstance(node, FilterNode):
            node = node.sources[0]
        elif isinstance(node, HashJoinNode) and node.join_type == "inner":
            node = node.probe if name in node.probe.output_schema.names else node.build
        else:
            return None


def _region_reads(node: PlanNode, reads: list) -> None:
    """Append ``(node, column name)`` for every column a node of the region reads other than to pass it on."""
    if isinstance(node, ProjectNode):
        for expr in node.expressions:
            if not isinstance(expr, ColumnRef):
                reads.extend((node.sources[0], c) for c in referenced_columns(expr))
    elif isinstance(node, FilterNode):
        reads.extend((node.sources[0], c) for c in referenced_columns(node.predicate))
    elif isinstance(node, HashJoinNode) and node.join_type == "inner":
        reads.extend((node.probe, c) for c in node.left_keys)
        reads.extend((node.build, c) for c in node.right_keys)
        if node.filter is not None:
            for c in referenced_columns(node.filter):
                reads.append((node.probe if c in node.probe.output_schema.names else node.build, c))
    else:
        return
    for source in node.sources:
        _region_reads(source, reads)


def _is_string(dtype: pa.DataType) -> bool:
    return (pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_binary(dtype)
            or pa.types.is_large_binary(dtype))


def _fetched_after(top: TopNNode, prove, rows) -> PlanNode | None:
    below = top.sources[0]
    names = top.output_schema.names
    origins = {name: _origin(below, name) for name in names}
    by_scan: dict[int, list[str]] = {}
    for name, origin in origins.items():
        if origin is not None:
            by_scan.setdefault(id(origin[0]), []).append(name)
    if not by_scan:
        return None
    reads: list = []
    _region_reads(below, reads)
    read = {(id(o[0]), o[1]) for o in (_origin(n, c) for n, c in reads) if o is not None}
    read |= {(id(origins[k.name][0]), origins[k.name][1]) for k in top.keys if origins.get(k.name)}
    for scan_names in by_scan.values():
        scan = origins[scan_names[0]][0]
        if rows(scan.table_name) < max(MIN_TABLE_ROWS, 10 * top.count):
            continue
        carried = [n for n in scan_names if _is_string(top.output_schema.field(n).type)
                   and (id(scan), origins[n][1]) not in read]
        keys = [n for n in scan_names if not _is_string(top.output_schema.field(n).type)]
        key = next((n for n in keys if prove(scan.table_name, origins[n][1], False)), None)
        if carried and key is not None:
            return _rebuilt(top, scan, key, carried, origins)
    return None


def _rebuilt(top: TopNNode, scan: TableScanNode, key: str, carried: list[str], origins: dict) -> PlanNode:
    names = top.output_schema.names
    kept = [n for n in names if n not in carried]
    below = top.sources[0]
    narrow = ProjectNode(id=f"{top.id}.narrow", sources=(below,),
                         output_schema=pa.schema([below.output_schema.field(n) for n in kept]),
                         names=tuple(kept), expressions=tuple(ColumnRef(n, below.output_schema.field(n).type)
                                                              for n in kept))
    early = prune_projections(replace(top, id=f"{top.id}.early", sources=(narrow,), output_schema=narrow.output_schema))
    columns = [origins[key][1]] + [origins[n][1] for n in carried]
    columns = list(dict.fromkeys(columns))
    fetch = TableScanNode(id=f"{top.id}.fetch", table_name=scan.table_name, columns=tuple(columns),
                          output_schema=pa.schema([scan.output_schema.field(c) for c in columns]))
    taken = set(names)
    fresh = {}
    for c in columns:
        new = f"{c}$fetched"
        while new in taken:
            new += "_"
        taken.add(new)
        fresh[c] = new
    renamed = ProjectNode(id=f"{top.id}.fetched", sources=(fetch,),
                          output_schema=pa.schema([fetch.output_schema.field(c).with_name(fresh[c]) for c in columns]),
                          names=tuple(fresh[c] for c in columns),
                          expressions=tuple(ColumnRef(c, fetch.output_schema.field(c).type) for c in columns))
    joined_names = tuple(kept) + tuple(fresh[c] for c in columns)
    joined_schema = pa.schema([early.output_schema.field(n) for n in kept]
                              + [renamed.output_schema.field(fresh[c]) for c in columns])
    join = HashJoinNode(id=f"{top.id}.join", sources=(renamed, early), output_schema=joined_schema,
                        join_type="inner", left_keys=(fresh[origins[key][1]],), right_keys=(key,),
                        output_columns=joined_names)
    restored = ProjectNode(id=f"{top.id}.restore", sources=(join,), output_schema=top.output_schema, names=names,
                           expressions=tuple(ColumnRef(fresh[origins[n][1]] if n in carried else n,
                                                       top.output_schema.field(n).type) for n in names))
    return replace(top, sources=(restored,))
