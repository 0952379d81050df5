"""Produce the rows of an in-memory table (Velox's Values)."""

from __future__ import annotations

from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.plans.nodes import ValuesNode

__all__ = ["Values"]


class Values(Operator):
    """Source operator: copies the node's Arrow table to the device in scan-sized batches."""

    def __init__(self, ctx: OperatorCtx, node: ValuesNode):
        super().__init__(ctx, node)
        rows = ctx.config.scan_batch_rows(ctx.device)
        self._pending = list(node.data.to_batches(max_chunksize=rows))

    def needs_input(self) -> bool:
        return False

    def get_output(self) -> Batch | None:
        while self._pending:
            record_batch = self._pending.pop(0)
            if record_batch.num_rows:
                return Batch.from_arrow(record_batch, self.device)
        return None

    def is_finished(self) -> bool:
        return not self._pending
