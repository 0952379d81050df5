"""Sort all input by the sort keys (Velox's OrderBy); a pipeline barrier."""

from __future__ import annotations

from gpu_engine.columnar.batch import Batch, BatchSlices
from gpu_engine.columnar.concat import concat_batches
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.kernels.sort import sort_indices
from gpu_engine.plans.nodes import OrderByNode

__all__ = ["OrderBy"]


class OrderBy(Operator):
    """Collect every batch, sort once on the device, emit the rows through a gather map.

    The sorted output is the concatenated input plus a permutation, sliced into
    scan-sized batches: no column is copied into sorted order until a consumer
    reads it. The buffered input, then the concatenated copy and the
    permutation, are reserved in the operator's memory pool until it closes.
    """

    def __init__(self, ctx: OperatorCtx, node: OrderByNode):
        super().__init__(ctx, node)
        self._batches: list[Batch] = []
        self._buffered_bytes = 0
        self._sorted: BatchSlices | None = None
        self._batch_rows = ctx.config.scan_batch_rows(ctx.device)

    def needs_input(self) -> bool:
        return not self.no_more_input_received

    def add_input(self, batch: Batch) -> None:
        self._batches.append(batch)
        self._buffered_bytes += batch.nbytes
        self.set_memory_reservation(self._buffered_bytes)

    def no_more_input(self) -> None:
        super().no_more_input()
        if not self._batches:
            return
        self.set_memory_reservation(2 * self._buffered_bytes)  # the batches and their concatenated copy
        data = concat_batches(self._batches)
        self._batches = []
        keys = self.node.keys
        order = sort_indices(self.device, [data.base_column(k.name) for k in keys],
                             [k.ascending for k in keys], [k.nulls_first for k in keys])
        self._sorted = BatchSlices(data.with_gather_map(order), self._batch_rows)
        self.set_memory_reservation(data.nbytes + int(order.nbytes))

    def get_output(self) -> Batch | None:
        return None if self._sorted is None else self._sorted.next()

    def is_finished(self) -> bool:
        return self.no_more_input_received and (self._sorted is None or self._sorted.exhausted)

    def close(self) -> None:
        self._batches, self._sorted = [], None
        super().close()
