"""Keep the first rows of each partition in key order (Velox's TopNRowNumber), numbering them when asked.

Why not a Window and a filter: a Window sorts every row it holds and numbers each one, then the filter
drops all but a few per partition. This operator drops them as it goes: whenever its buffer grows past a
bound it sorts what it holds by partition and sort keys, ranks each row within its partition and keeps
only the rows ranked ``<= limit``, so it holds at most ``limit`` rows per partition (more only for ties
under ``rank``/``dense_rank``) plus one buffer's worth, and the rows it finally numbers are those few.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.concat import concat_batches
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.kernels.sort import sort_key_words
from gpu_engine.kernels.window import segment_bounds
from gpu_engine.plans.nodes import TopNRowNumberNode

__all__ = ["TopNRowNumber", "partition_ranks"]


def partition_ranks(device, partition: list[Column], ordering: list[Column], ascending: list[bool],
                    nulls_first: list[bool], function: str) -> tuple[Any, Any]:
    """Return the rows' order sorted by partition then sort keys, and each sorted row's ``function`` value.

    Keys are compared by their sort words, so NULL keys are equal to each other (SQL's PARTITION BY) and
    peers (rows of equal sort keys) are exact. Partition words sort ascending: only grouping matters.
    Everything stays on the device; ``rank`` and ``dense_rank`` find peer groups as a Window does.
    """
    xp = device.xp
    n = len(partition[0]) if partition else len(ordering[0]) if ordering else 0
    words = []
    if partition:
        words.append(sort_key_words(device, partition, [True] * len(partition), [False] * len(partition)))
    if ordering:
        words.append(sort_key_words(device, ordering, ascending, nulls_first))
    if not words:
        order = xp.arange(n, dtype=xp.int64)
    else:
        order = xp.lexsort(xp.concatenate(words[::-1], axis=0)).astype(xp.int64)
    new_partition = xp.zeros(n, dtype=xp.bool_)
    new_partition[0] = True
    if partition:
        ordered = words[0][:, order]
        new_partition[1:] = xp.any(ordered[:, 1:] != ordered[:, :-1], axis=0)
    _, part_start, _ = segment_bounds(device, new_partition)
    if function == "row_number":
        return order, xp.arange(1, n + 1, dtype=xp.int64) - part_start
    new_peer = new_partition.copy()
    if ordering:
        ordered = words[-1][:, order]
        new_peer[1:] |= xp.any(ordered[:, 1:] != ordered[:, :-1], axis=0)
    peer_segment, peer_start, _ = segment_bounds(device, new_peer)
    if function == "rank":
        return order, peer_start - part_start + 1
    return order, peer_segment - peer_segment[part_start] + 1  # dense_rank


class TopNRowNumber(Operator):
    """Buffer input, keep only each partition's top rows whenever the buffer passes a bound, emit them at the end.

    The bound is ``max(batch rows, 2 * rows kept last time)``: one sort per batch's worth of input while
    few rows survive, and when most do (partitions smaller than ``limit``) the bound doubles, so the rows
    sorted over the whole input stay a small multiple of its size. The buffer is reserved in the
    operator's memory pool. Each selection reads one count back from the device (the rows kept): once per
    bound's worth of input, not per batch. The output presents the kept rows through a gather map over
    the last buffer; the row numbers are a column beside it.
    """

    def __init__(self, ctx: OperatorCtx, node: TopNRowNumberNode):
        super().__init__(ctx, node)
        self._batches: list[Batch] = []
        self._buffered_rows = 0
        self._least_bound = ctx.config.scan_batch_rows(ctx.device)
        self._bound = self._least_bound
        self._output: Batch | None = None
        self._position = 0
        self._batch_rows = self._least_bound

    def needs_input(self) -> bool:
        return not self.no_more_input_received

    def add_input(self, batch: Batch) -> None:
        if self.node.limit <= 0 or batch.num_rows == 0:
            return
        self._batches.append(batch)
        self._buffered_rows += batch.num_rows
        self.set_memory_reservation(sum(b.nbytes for b in self._batches))
        if self._buffered_rows > self._bound:
            data = concat_batches(self._batches)
            kept, _ = self._select(data)
            kept = data if kept.num_rows == data.num_rows else kept.materialize()  # nothing dropped: no copy
            self._batches = [kept]
            self._buffered_rows = kept.num_rows
            self._bound = max(self._least_bound, 2 * kept.num_rows)
            self.set_memory_reservation(kept.nbytes)

    def _select(self, data: Batch) -> tuple[Batch, Any]:
        """Return the rows of ``data`` ranked ``<= limit`` in their partition (a gather map over it) and their ranks."""
        xp = self.device.xp
        node = self.node
        order, ranks = partition_ranks(self.device, [data.column(k) for k in node.partition_keys],
                                       [data.column(k.name) for k in node.sort_keys],
                                       [k.ascending for k in node.sort_keys], [k.nulls_first for k in node.sort_keys],
                                       node.function)
        positions = xp.flatnonzero(ranks <= node.limit)
        return data.with_gather_map(order[positions]), ranks[positions]

    def no_more_input(self) -> None:
        super().no_more_input()
        if not self._batches:
            return
        data = concat_batches(self._batches)
        self._batches = []
        kept, ranks = self._select(data)
        if self.node.row_number_name is None:
            self._output = kept
        else:  # the numbers in base-row order, so they sit beside the columns under the same gather map
            xp = self.device.xp
            numbers = xp.zeros(data.num_rows, dtype=xp.int64)
            numbers[kept.gather_map] = ranks
            self._output = Batch(data.names + (self.node.row_number_name,),
                                 data.columns + (Column(pa.int64(), numbers),), self.device, kept.gather_map,
                                 data.num_rows)
        self.set_memory_reservation(self._output.nbytes)

    def get_output(self) -> Batch | None:
        if self._output is None or self._position >= self._output.num_rows:
            return None
        start = self._position
        self._position = min(self._output.num_rows, start + self._batch_rows)
        return self._output.slice(start, self._position)

    def is_finished(self) -> bool:
        return self.no_more_input_received and (self._output is None or self._position >= self._output.num_rows)

    def close(self) -> None:
        self._batches, self._output = [], None
        super().close()
