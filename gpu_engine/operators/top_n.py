"""Keep the first N rows in key order (Velox's TopN), and optionally the rows tied with the N-th."""

from __future__ import annotations

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.concat import concat_batches
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.kernels.sort import top_n_indices
from gpu_engine.plans.nodes import TopNNode

__all__ = ["TopN"]


class TopN(Operator):
    """Hold at most N candidate rows, re-selecting whenever buffered input grows past a bound.

    Compacting only once the buffer passes ``max(4 * N, batch)`` rows keeps
    the number of sorts small while memory stays bounded by a few batches;
    the buffer is reserved in the operator's memory pool as it grows.

    ``WITH TIES`` keeps every row tied with the N-th too, at each compaction,
    so a partial TopN per driver passes on all candidates: a row tied with
    the global N-th is tied with or above its own driver's N-th.
    """

    def __init__(self, ctx: OperatorCtx, node: TopNNode):
        super().__init__(ctx, node)
        self.count = node.count
        self._buffer: list[Batch] = []
        self._buffered_rows = 0
        self._least_bound = max(4 * node.count, ctx.config.scan_batch_rows(ctx.device))
        self._bound = self._least_bound
        self._result: Batch | None = None

    def needs_input(self) -> bool:
        # ``LIMIT 0`` under an ORDER BY finishes at once, as Limit does: its input is never computed (DuckDB
        # answers such a subquery over expressions that would fail on its rows).
        return self.count > 0 and not self.no_more_input_received

    def add_input(self, batch: Batch) -> None:
        if self.count <= 0:
            return
        self._buffer.append(batch)
        self._buffered_rows += batch.num_rows
        self._reserve_buffer()
        if self._buffered_rows > self._bound:
            self._compact()
            self._reserve_buffer()

    def _reserve_buffer(self) -> None:
        self.set_memory_reservation(sum(b.nbytes for b in self._buffer))

    def _compact(self) -> None:
        data = concat_batches(self._buffer)
        keys = self.node.keys
        keep = top_n_indices(self.device, [data.base_column(k.name) for k in keys],
                             [k.ascending for k in keys], [k.nulls_first for k in keys], self.count,
                             with_ties=self.node.with_ties)
        top = data.with_gather_map(keep)
        self._buffer = [top.materialize()]
        self._buffered_rows = top.num_rows
        # Ties can keep many rows: compact again only once the buffer has doubled, not on every batch.
        self._bound = max(self._least_bound, 2 * top.num_rows)

    def no_more_input(self) -> None:
        super().no_more_input()
        if self._buffer:
            self._compact()
            self._result = self._buffer[0]
            self._buffer = []

    def get_output(self) -> Batch | None:
        result, self._result = self._result, None
        return result

    def is_finished(self) -> bool:
        return (self.no_more_input_received or self.count <= 0) and self._result is None

    def close(self) -> None:
        self._buffer, self._result = [], None
        super().close()
