"""Collect a nested loop join's build side into one batch that every probe driver shares (Velox's NestedLoopJoinBuild).

The build side of a NestedLoopJoinNode runs as its own pipeline ending in this
sink. Each build driver keeps only the build columns the probe reads (those in
the output, those the filter reads); when its input ends it hands them to the
Task's :class:`~gpu_engine.exec.join_bridge.HashJoinBridge`, the same
hand-over a HashJoin uses. The last build driver to finish concatenates every
driver's batches into one flat batch and publishes it, so the build rows are
broadcast to all probe drivers and the probe side may be distributed
arbitrarily. There is no table to build: the probe pairs rows by position.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.concat import concat_batches
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.exec.join_bridge import HashJoinBridge
from gpu_engine.operators.hash_build import build_side_columns
from gpu_engine.kernels.filter import selection_from_mask
from gpu_engine.kernels.gather import dictionary_row_validity
from gpu_engine.optimizer.conjuncts import conjuncts
from gpu_engine.plans.expressions import BinaryOp, Cast, ColumnRef, Expr
from gpu_engine.plans.nodes import NestedLoopJoinNode

__all__ = ["NestedLoopJoinBuild"]

_NULL_REJECTING = ("eq", "ne", "lt", "le", "gt", "ge")


def _compared_columns(predicate: Expr) -> list[str]:
    """Return the columns a top-level conjunct of ``predicate`` compares directly (through casts): the conjunct is
    NULL, so the pair is not kept, wherever such a column is NULL."""
    names = []
    for part in conjuncts(predicate):
        if isinstance(part, BinaryOp) and part.op in _NULL_REJECTING:
            for side in (part.left, part.right):
                while isinstance(side, Cast):
                    side = side.operand
                if isinstance(side, ColumnRef):
                    names.append(side.name)
    return names


class NestedLoopJoinBuild(Operator):
    """Sink of the build pipeline: keep the needed build columns; the last driver publishes them as one batch."""

    def __init__(self, ctx: OperatorCtx, node: NestedLoopJoinNode):
        super().__init__(ctx, node)
        self.bridge: HashJoinBridge = ctx.task.bridges[node.id]
        self._columns = build_side_columns(node)
        self._batches: list[Batch] = []
        self._held_bytes = 0

    def add_input(self, batch: Batch) -> None:
        # Copy just the needed columns now, so the upstream batches (whole scans) can be freed.
        self._batches.append(batch.materialize(self._columns))
        self._held_bytes += self._batches[-1].nbytes
        self.set_memory_reservation(self._held_bytes)  # against the query's memory cap

    def get_output(self) -> Batch | None:
        return None

    def no_more_input(self) -> None:
        super().no_more_input()
        batches, self._batches = self._batches, []
        build_pool = self.bridge.hold_memory_of(self.memory_pool)  # the bridge holds the batches from here on
        everything = self.bridge.add_build_batches(batches)
        if everything is None:
            return
        if everything:
            build_pool.reserve(sum(b.nbytes for b in everything))  # the concatenated copy, while the batches live
            build = concat_batches(everything)
            build_pool.set_reservation(build.nbytes)
            self.stats.peak_memory_bytes = max(self.stats.peak_memory_bytes, build_pool.peak_bytes)
        else:
            schema = self.node.build.output_schema
            build = Batch.empty(pa.schema([schema.field(name) for name in self._columns]), self.device)
        build = self._matchable_rows(build)
        self.add_runtime_stat("build_rows", build.num_rows)
        self.bridge.publish(build)

    def _matchable_rows(self, build: Batch) -> Batch:
        """Return ``build`` without the rows no pair can match where no unmatched build row is emitted: those with
        a NULL in a build column the filter compares (``probe_expr = d`` is NULL, never true, for a NULL ``d``), as
        a hash join drops NULL keys. A build side of NULLs only is then empty, so the probe evaluates nothing, as
        DuckDB skips probing an empty build: ``CAST(s AS DATE) = d`` raised "Could not convert 'abc'" where
        DuckDB answers."""
        if self.node.join_type in ("right", "full") or self.node.filter is None or build.num_rows == 0:
            return build
        compared = [name for name in _compared_columns(self.node.filter) if name in self._columns]
        valid = None
        for name in dict.fromkeys(compared):
            column = build.column(name)
            rows = dictionary_row_validity(self.device, column) if column.is_dictionary else column.validity
            if rows is not None:
                valid = rows if valid is None else valid & rows
        if valid is None or bool(valid.all()):
            return build
        return build.with_gather_map(selection_from_mask(self.device, valid)).materialize()

    def is_finished(self) -> bool:
        return self.no_more_input_received

    def close(self) -> None:
        super().close()
        self._batches = []
