"""Sort all input by the sort keys (Velox's OrderBy); a pipeline barrier."""

from __future__ import annotations

from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.operator import BarrierOperator
from gpu_engine.kernels.sort import sort_indices
from gpu_engine.plans.nodes import OrderByNode

__all__ = ["OrderBy"]


class OrderBy(BarrierOperator):
    """Collect every batch, sort once on the device, emit the rows through a gather map.

    The sorted output is the concatenated input plus a permutation, sliced into
    scan-sized batches: no column is copied into sorted order until a consumer
    reads it. The buffered input, then the concatenated copy and the
    permutation, are reserved in the operator's memory pool until it closes.
    """

    node: OrderByNode

    def result(self, data: Batch) -> Batch:
        keys = self.node.keys
        order = sort_indices(self.device, [data.base_column(k.name) for k in keys],
                             [k.ascending for k in keys], [k.nulls_first for k in keys])
        self.set_memory_reservation(data.nbytes + int(order.nbytes))
        return data.with_gather_map(order)
