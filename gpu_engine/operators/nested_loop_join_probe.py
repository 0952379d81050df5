"""Pair each probe batch with every build row, keeping the pairs the filter accepts (Velox's NestedLoopJoinProbe).

The probe waits (``WAIT_FOR_JOIN_BUILD``) until the build side publishes its
rows, one batch, on the Task's :class:`~gpu_engine.exec.join_bridge.HashJoinBridge`.
Then it walks each input batch's ``n x m`` pairs in blocks of probe rows x build
rows sized so one block stays under the scan batch size, however large
``n * m`` is: a block's gather maps are ``repeat(arange(probe rows), build
rows)`` and ``tile(arange(build rows), probe rows)`` (device array ops, no
kernel), the filter runs on the pairs, and the kept pairs are gathered. Output
is produced lazily, one block per :meth:`get_output`, so a cross product never
sits in memory whole.

Outer joins are Velox's: left/full add each probe row no pair matched once its
batch is done, with NULL build columns; right/full mark the build rows matched,
and the last probe driver to finish emits the unmatched ones with NULL probe
columns (the bridge merges every driver's marks, as for a HashJoin).
"""

from __future__ import annotations

from collections import deque

from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.operator import NOT_BLOCKED, BlockingReason, Operator, OperatorCtx
from gpu_engine.expressions import evaluate_predicate
from gpu_engine.kernels.filter import selection_from_mask
from gpu_engine.kernels.gather import gather, gather_column
from gpu_engine.exec.join_bridge import HashJoinBridge
from gpu_engine.operators.hash_build import null_column
from gpu_engine.plans.expressions import referenced_columns
from gpu_engine.plans.nodes import NestedLoopJoinNode

__all__ = ["NestedLoopJoinProbe"]

_EMITS_UNMATCHED_PROBE = ("left", "full")
_EMITS_UNMATCHED_BUILD = ("right", "full")


class NestedLoopJoinProbe(Operator):
    """Join each input batch with the build rows block by block; outer joins add their unmatched rows."""

    def __init__(self, ctx: OperatorCtx, node: NestedLoopJoinNode):
        super().__init__(ctx, node)
        self.bridge: HashJoinBridge = ctx.task.bridges[node.id]
        self.join_type = node.join_type
        self._probe_names = frozenset(node.probe.output_schema.names)
        self._output_names = tuple(node.output_columns)
        self._only_probe_output = all(name in self._probe_names for name in self._output_names)
        self._filter_names = tuple(referenced_columns(node.filter)) if node.filter is not None else ()
        self._block_rows = ctx.config.scan_batch_rows(ctx.device)
        self._build: Batch | None = None
        self._probe_start = 0  # the next block of the held input batch
        self._build_start = 0
        self._probe_matched = None  # per row of the held input batch (left/full)
        self._build_matched = None  # per build row, over all input (right/full)
        self._output: deque[Batch] = deque()
        self._finished_early = False

    # ------------------------------------------------------------- blocking
    def is_blocked(self):
        if self._build is None:
            build, future = self.bridge.table_or_future()
            if build is None:
                return BlockingReason.WAIT_FOR_JOIN_BUILD, future
            self._start_probing(build)
        return NOT_BLOCKED

    def _start_probing(self, build: Batch) -> None:
        xp = self.device.xp
        self._build = build
        if self.join_type in _EMITS_UNMATCHED_BUILD:
            self._build_matched = xp.zeros(build.num_rows, dtype=xp.bool_)
        # Nothing can pair with an empty build side, and there are no build rows to emit.
        self._finished_early = build.num_rows == 0 and self.join_type in ("inner", "right")

    # ---------------------------------------------------------------- input
    def needs_input(self) -> bool:
        return (self._build is not None and not self._finished_early and not self.no_more_input_received
                and self.input is None and not self._output)

    def add_input(self, batch: Batch) -> None:
        self.input = batch
        self._probe_start = self._build_start = 0
        if self.join_type in _EMITS_UNMATCHED_PROBE:
            self._probe_matched = self.device.xp.zeros(batch.num_rows, dtype=self.device.xp.bool_)

    # --------------------------------------------------------------- output
    def get_output(self) -> Batch | None:
        while not self._output and self.input is not None:
            block = self._next_block()
            if block is not None:
                return block
        if self.no_more_input_received and self.input is None:
            self._report_build_matches()
        return self._output.popleft() if self._output else None

    def _next_block(self) -> Batch | None:
        """Return the kept pairs of the held batch's next block (None when none kept), or end the batch."""
        batch, xp, device = self.input, self.device.xp, self.device
        build_rows_total = self._build.num_rows
        if self._probe_start >= batch.num_rows or build_rows_total == 0:
            self._finish_input(batch)
            return None
        if build_rows_total == 1 and self.node.filter is None:
            return self._beside_the_build_row(batch)
        build_step = min(build_rows_total, self._block_rows)
        probe_step = max(1, self._block_rows // build_step)
        probe_stop = min(batch.num_rows, self._probe_start + probe_step)
        build_stop = min(build_rows_total, self._build_start + build_step)
        probe_rows = xp.repeat(xp.arange(self._probe_start, probe_stop, dtype=xp.int32), build_stop - self._build_start)
        build_rows = xp.tile(xp.arange(self._build_start, build_stop, dtype=xp.int32), probe_stop - self._probe_start)
        self._build_start = build_stop
        if build_stop == build_rows_total:
            self._probe_start, self._build_start = probe_stop, 0
        if self.node.filter is not None:
            pairs = self._pair_columns(batch, probe_rows, build_rows, self._filter_names)
            kept = selection_from_mask(device, evaluate_predicate(self.node.filter, pairs))
            probe_rows, build_rows = gather(device, probe_rows, kept), gather(device, build_rows, kept)
        if probe_rows.shape[0] == 0:
            return None
        if self._probe_matched is not None:
            self._probe_matched[probe_rows] = True
        if self._build_matched is not None:
            self._build_matched[build_rows] = True
        if self._only_probe_output:
            return batch.select(self._output_names).with_gather_map(probe_rows)
        return self._pair_columns(batch, probe_rows, build_rows, self._output_names)

    def _beside_the_build_row(self, batch: Batch) -> Batch:
        """Return the whole batch with the one build row beside every row (a scalar subquery's shape).

        Every probe row matches, so the probe columns keep their base buffers
        and gather map (no copy); only the build columns are repeated, over the base rows.
        """
        xp = self.device.xp
        self._probe_start = batch.num_rows
        if self._probe_matched is not None:
            self._probe_matched[:] = True
        if self._build_matched is not None:
            self._build_matched[:] = True
        if self._only_probe_output:
            return batch.select(self._output_names)
        zeros = xp.zeros(batch.base_rows, dtype=xp.int32)
        columns = tuple(batch.base_column(name) if name in self._probe_names
                        else gather_column(self.device, self._build.column(name), zeros) for name in self._output_names)
        return Batch(self._output_names, columns, self.device, batch.gather_map, batch.base_rows)

    def _pair_columns(self, batch: Batch, probe_rows, build_rows, names) -> Batch:
        """Return a flat batch of ``names`` over the pairs: probe columns by probe row, build columns by build row."""
        mapped = batch.with_gather_map(probe_rows)
        columns = tuple(mapped.column(name) if name in self._probe_names
                        else gather_column(self.device, self._build.column(name), build_rows) for name in names)
        return Batch(tuple(names), columns, self.device, None, int(probe_rows.shape[0]))

    def _finish_input(self, batch: Batch) -> None:
        """Release the held batch; a left/full join queues its unmatched probe rows with NULL build columns."""
        self.input, matched, self._probe_matched = None, self._probe_matched, None
        if matched is None:
            return
        rows = selection_from_mask(self.device, ~matched)
        count = int(rows.shape[0])
        if count == 0:
            return
        if self._only_probe_output:
            self._output.append(batch.select(self._output_names).with_gather_map(rows))
            return
        mapped, schema = batch.with_gather_map(rows), self.node.output_schema
        columns = tuple(mapped.column(name) if name in self._probe_names
                        else null_column(self.device, schema.field(name).type, count) for name in self._output_names)
        self._output.append(Batch(self._output_names, columns, self.device, None, count))

    def _report_build_matches(self) -> None:
        """Count this driver out on the bridge; the last probe driver queues the build rows nobody matched."""
        if self._build_matched is None:
            return
        matched, self._build_matched = self.bridge.probe_finished(self._build_matched), None
        if matched is None:
            return
        rows = selection_from_mask(self.device, ~matched)
        count = int(rows.shape[0])
        if count == 0:
            return
        schema = self.node.output_schema
        columns = tuple(null_column(self.device, schema.field(name).type, count) if name in self._probe_names
                        else gather_column(self.device, self._build.column(name), rows) for name in self._output_names)
        self._output.append(Batch(self._output_names, columns, self.device, None, count))

    def no_more_input(self) -> None:
        super().no_more_input()
        if self.input is None and not self._finished_early:
            self._report_build_matches()

    def is_finished(self) -> bool:
        if self._finished_early:
            return True
        return (self.no_more_input_received and self.input is None and not self._output
                and self._build_matched is None)

    def close(self) -> None:
        super().close()
        if self._build_matched is not None and not self._finished_early:
            # Ended before its input did (a Limit downstream was satisfied): count this driver out, so a
            # later probe driver can still be the last one and emit the unmatched build rows.
            self.bridge.probe_finished(self._build_matched)
            self._build_matched = None
        self._build = None
        self._output.clear()
