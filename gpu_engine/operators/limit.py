"""Skip ``offset`` rows and pass at most ``count`` (Velox's Limit)."""

from __future__ import annotations

from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.plans.nodes import LimitNode

__all__ = ["Limit"]


class Limit(Operator):
    """Slice batches by gather map (no copy); finish as soon as the limit is reached.

    Finishing early matters: the driver then stops pulling from upstream, so a
    ``LIMIT 10`` over a large scan reads little more than it needs.
    """

    def __init__(self, ctx: OperatorCtx, node: LimitNode):
        super().__init__(ctx, node)
        self._to_skip = node.offset
        self._remaining = node.count

    def needs_input(self) -> bool:
        return self._remaining > 0 and super().needs_input()

    def add_input(self, batch: Batch) -> None:
        rows = batch.num_rows
        if self._to_skip >= rows:
            self._to_skip -= rows
            return
        start, self._to_skip = self._to_skip, 0
        stop = min(rows, start + self._remaining)
        self._remaining -= stop - start
        self.input = batch.slice(start, stop)

    def get_output(self) -> Batch | None:
        batch, self.input = self.input, None
        return batch

    def is_finished(self) -> bool:
        return self.input is None and (self._remaining <= 0 or self.no_more_input_received)
