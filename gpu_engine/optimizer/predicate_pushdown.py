"""Move each conjunct of a Filter as far down the plan as it stays correct (DataFusion's ``PushDownFilter``).

Why: a filter evaluated below a join, a projection or an aggregation discards
rows before they are joined, computed or grouped, and a filter directly above
a scan or under a projection runs inside that pipeline's FilterProject (or a
fused aggregation's kernel). The SQL planner places the conjuncts it sees
(:mod:`gpu_engine.sql.predicates`), but plans built by hand, read from JSON, or
made by one SQL rule above another's output carry filters where they were
written. Where a conjunct goes, by the node below it:

* **Filter**: the two merge (the lower one's conjuncts first: it ran first).
* **Project**: the conjunct, with each column it reads replaced by the
  expression projected under that name, goes below; the project stays.
* **Hash or nested-loop join**: a conjunct reading one side's columns goes
  into that side when the join cannot make that side's rows NULL: both sides
  of an inner join, the probe of a left / semi / anti join, the build of a
  right / right semi / right anti join. Above an outer join's NULL-extended
  side it stays (it would keep the rows the NULLs replace). An OR in an inner
  join's own filter implies filters on its sides as one above it does.
* **Aggregation** (a single step over group keys, no grouping sets), **Window**,
  **TopNRowNumber**: a conjunct reading only group / partition keys goes below,
  since it keeps or drops whole groups.
* **OrderBy** and a one-input **LocalPartition**: everything goes below; a UNION
  ALL (a LocalPartition of several branches, every branch of one schema) gets
  the conjunct in each branch.
* Anything else (Limit, TopN, EnforceSingleRow, GroupId, scans, exchanges)
  keeps it above: the rows it sees depend on the rows above it.

Conjuncts keep their order. A conjunct that reads no column stays where it is
(:mod:`~gpu_engine.optimizer.empty_relations` handles one that is never true).
A filter that lands in one place keeps its id; a piece placed beside others
gets ``<id>.<n>``, unused in the plan. Output schemas never change.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from gpu_engine.optimizer.conjuncts import conjunction, conjuncts
from gpu_engine.optimizer.constant_folding import folded
from gpu_engine.optimizer.or_implied_filters import implied_filters
from gpu_engine.plans.expressions import BinaryOp, Expr, referenced_columns
from gpu_engine.plans.nodes import (
    AggregationNode, AggregationStep, FilterNode, HashJoinNode, LocalPartitionNode, NestedLoopJoinNode, OrderByNode,
    PlanNode, ProjectNode, TopNRowNumberNode, WindowNode, walk_plan,
)

__all__ = ["push_down_predicates"]

#: Join types whose probe (left) rows a filter on probe columns may remove before the join: the join never
#: outputs a probe row with NULLs in place of its columns.
_PROBE_SAFE = {"inner", "left", "left_semi", "anti", "null_aware_anti"}
#: Join types whose build (right) rows a filter on build columns may remove before the join.
_BUILD_SAFE = {"inner", "right", "right_semi", "right_anti"}


class _Ids:
    """Hand out node ids ``<base>.<n>`` that the plan does not use."""

    def __init__(self, plan: PlanNode):
        self._used = {node.id for node in walk_plan(plan)}

    def new(self, base: str) -> str:
        n = 1
        while f"{base}.{n}" in self._used:
            n += 1
        self._used.add(f"{base}.{n}")
        return f"{base}.{n}"


def push_down_predicates(plan: PlanNode) -> PlanNode:
    """Return ``plan`` with every filter's conjuncts as low as they stay correct (the same object if none moves)."""
    if not any(isinstance(node, FilterNode) or isinstance(node, HashJoinNode | NestedLoopJoinNode)
               and node.join_type == "inner" and node.filter is not None for node in walk_plan(plan)):
        return plan
    return _Pushdown(_Ids(plan)).rewrite(plan)


class _Pushdown:
    def __init__(self, ids: _Ids):
        self.ids = ids
        #: id -> the filters derived from an OR kept above (held so their ids stay theirs)
        self.implied: dict[int, Expr] = {}

    def rewrite(self, node: PlanNode) -> PlanNode:
        """Return ``node``'s subtree with the filters in it pushed down."""
        if isinstance(node, FilterNode):
            return self.place(node.source, conjuncts(node.predicate), node.id, node)
        new, kept = self.push(node, [], node.id)
        assert not kept
        return new

    def place(self, source: PlanNode, parts: list[Expr], filter_id: str, original: FilterNode | None = None
              ) -> PlanNode:
        """Return ``source`` with ``parts`` applied as low as they go; those that stay, in a filter on top."""
        new_source, kept = self.push(source, parts, filter_id)
        kept = self._without_repeated_implied(kept)
        if not kept:
            return new_source
        if original is not None and kept == conjuncts(original.predicate):  # nothing moved: its predicate as written
            return original if new_source is original.source else replace(original, sources=(new_source,))
        return FilterNode(id=filter_id, output_schema=new_source.output_schema, sources=(new_source,),
                          predicate=conjunction(kept))

    def _without_repeated_implied(self, parts: list[Expr]) -> list[Expr]:
        """Return ``parts`` without the implied filters that repeat one written there or derived before."""
        out = []
        for n, part in enumerate(parts):
            if id(part) in self.implied and (part in parts[:n] or any(
                    other == part and id(other) not in self.implied for other in parts[n + 1:])):
                continue
            out.append(part)
        return out

    def push(self, node: PlanNode, parts: list[Expr], filter_id: str) -> tuple[PlanNode, list[Expr]]:
        """Return ``node`` with what of ``parts`` can go below it gone below, and the parts that stay above it.

        An OR that stays above also sends each input the filter it implies there
        (:mod:`~gpu_engine.optimizer.or_implied_filters`); the OR itself stays.
        """
        if isinstance(node, FilterNode):  # merge: the lower filter's conjuncts ran first
            return self.place(node.source, conjuncts(node.predicate) + parts, node.id, node if not parts else None), []
        parts = self._refolded(parts)
        per_source, kept = self._split(node, parts)
        ors = list(kept)
        if isinstance(node, HashJoinNode | NestedLoopJoinNode) and node.join_type == "inner" and node.filter:
            ors += conjuncts(node.filter)  # an inner join's condition keeps pairs as a Filter above it would
        for part in ors:
            if isinstance(part, BinaryOp) and part.op == "or":
                implied = implied_filters(part, lambda branch: self._split(node, branch), len(node.sources))
                for below, filter_ in zip(per_source, implied):
                    if filter_ is not None and filter_ not in below:
                        self.implied[id(filter_)] = filter_
                        below.append(filter_)
        # (no filter came from above: what the join's own condition implies gets ids of its own)
        return self._into_sources(node, per_source, filter_id, bool(kept) or not parts), kept

    def _refolded(self, parts: list[Expr]) -> list[Expr]:
        """Return ``parts`` with each OR that now folds (a projection inlined its constants) as its conjuncts."""
        out = []
        for part in parts:
            new = folded(part) if isinstance(part, BinaryOp) and part.op == "or" else part
            if new is part:
                out.append(part)
                continue
            for piece in conjuncts(new):
                out.append(piece)
                if id(part) in self.implied:
                    self.implied[id(piece)] = piece
        return out

    def _split(self, node: PlanNode, parts: list[Expr]) -> tuple[list[list[Expr]], list[Expr]]:
        """Return the parts each of ``node``'s sources receives (rewritten over its columns) and those kept above."""
        if isinstance(node, ProjectNode):
            return self._through_project(node, parts)
        if isinstance(node, HashJoinNode | NestedLoopJoinNode):
            return self._into_join(node, parts)
        if isinstance(node, AggregationNode):
            keys = (set(node.grouping_keys) if node.step is AggregationStep.SINGLE and node.grouping_keys
                    and not node.global_grouping_sets and node.group_id_key is None else set())
            return self._below_keys(parts, keys)
        if isinstance(node, WindowNode | TopNRowNumberNode):
            return self._below_keys(parts, set(node.partition_keys))
        if isinstance(node, OrderByNode) and not node.is_partial:
            return [list(parts)], []
        if isinstance(node, LocalPartitionNode):
            return [list(parts) for _ in node.sources], []
        return [[] for _ in node.sources], list(parts)

    def _into_sources(self, node: PlanNode, per_source: Sequence[list[Expr]], filter_id: str,
                      id_stays_above: bool = False) -> PlanNode:
        """Return ``node`` over its sources, each rewritten with its own parts placed in it; the one source that
        receives parts reuses ``filter_id`` unless a filter keeps it above ``node`` (``id_stays_above``)."""
        receivers = 0 if id_stays_above else sum(1 for parts in per_source if parts)
        sources = []
        for source, parts in zip(node.sources, per_source):
            if not parts:
                sources.append(self.rewrite(source))
            else:
                sources.append(self.place(source, parts, filter_id if receivers == 1 else self.ids.new(filter_id)))
        if all(new is old for new, old in zip(sources, node.sources)):
            return node
        return replace(node, sources=tuple(sources))

    @staticmethod
    def _below_keys(parts: list[Expr], keys: set[str]) -> tuple[list[list[Expr]], list[Expr]]:
        below, kept = [], []
        for part in parts:
            columns = referenced_columns(part)
            (below if columns and set(columns) <= keys else kept).append(part)
        return [below], kept

    def _through_project(self, node: ProjectNode, parts: list[Expr]) -> tuple[list[list[Expr]], list[Expr]]:
        if not parts:
            return [[]], []
        from gpu_engine.planning.fusion import inline_columns

        from gpu_engine.plans.functions import is_volatile

        definitions = dict(zip(node.names, node.expressions))
        # a filter on random()'s column stays above: below, it would draw other values than the rows show
        drawn = {name for name, expr in definitions.items() if is_volatile(expr)}
        kept = [part for part in parts if drawn & set(referenced_columns(part))]
        below = []
        for part in parts:
            if not drawn & set(referenced_columns(part)):
                below.append(inline_columns(part, definitions))
                if id(part) in self.implied:  # still implied by an OR above, over the projection's inputs
                    self.implied[id(below[-1])] = below[-1]
        return [below], kept

    @staticmethod
    def _into_join(node: HashJoinNode | NestedLoopJoinNode, parts: list[Expr]
                   ) -> tuple[list[list[Expr]], list[Expr]]:
        probe_names = set(node.sources[0].output_schema.names)
        build_names = set(node.sources[1].output_schema.names)
        to_probe, to_build, kept = [], [], []
        for part in parts:
            columns = set(referenced_columns(part))
            if columns and columns <= probe_names and node.join_type in _PROBE_SAFE:
                to_probe.append(part)
            elif columns and columns <= build_names and node.join_type in _BUILD_SAFE:
                to_build.append(part)
            else:
                kept.append(part)
        return [to_probe, to_build], kept
