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
from gpu_engine.plans.nodes import NestedLoopJoinNode

__all__ = ["NestedLoopJoinBuild"]


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
        self.add_runtime_stat("build_rows", build.num_rows)
        self.bridge.publish(build)

    def is_finished(self) -> bool:
        return self.no_more_input_received

    def close(self) -> None:
        super().close()
        self._batches = []
