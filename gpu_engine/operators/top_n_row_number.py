"""Keep the first rows of each partition in key order (Velox's TopNRowNumber), numbering them when asked.

Why not a Window and a filter: a Window sorts every row it holds and numbers each one, then the filter
drops all but a few per partition. This operator drops them as it goes. Partition keys get dense ids
from a hash table kept across batches (hash aggregation's, :class:`~gpu_engine.kernels.group_by.GroupByHashTable`);
whenever the buffer grows past a bound it is sorted by partition id and sort keys, each row is ranked
within its partition and only the rows ranked ``<= limit`` stay. That cut also records, per partition,
whether it is full (``limit`` rows, or ranks, kept) and the sort key of its last kept row: a later row of
a full partition that sorts after that row (at or after it, for ``row_number``) can never be kept, so it
is dropped on arrival with one comparison, before any sort. On data in no particular order nearly every
row after the first cut is dropped that way.

A ``row_number`` cut on the CPU does not sort: :func:`~gpu_engine.kernels.partition_top.partition_first_rows`
slides each buffered row into its partition's ``limit`` slots in one pass (the two sorts of each cut were
about half of db-benchmark q8's CPU at 10M rows); rank and dense_rank, and other devices, sort.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from gpu_engine.columnar.batch import Batch, BatchSlices
from gpu_engine.columnar.column import Column
from gpu_engine.columnar.concat import concat_batches, concat_columns
from gpu_engine.exec.operator import Operator, OperatorCtx
from gpu_engine.kernels.filter import selection_from_mask
from gpu_engine.kernels.gather import gather_column
from gpu_engine.kernels.group_by import GroupByHashTable, normalize_keys
from gpu_engine.kernels.partition_top import partition_first_rows
from gpu_engine.kernels.sort import key_changes, sort_key_words
from gpu_engine.kernels.window import segment_bounds
from gpu_engine.plans.nodes import TopNRowNumberNode

__all__ = ["TopNRowNumber", "partition_ranks"]


def partition_ranks(device, partition_ids: Any, words: Any, function: str, partitioned: bool = True,
                    partitions: int | None = None) -> tuple[Any, Any, Any]:
    """Return the rows' order by partition id then sort words, each sorted row's ``function`` value and row number.

    ``words`` are :func:`~gpu_engine.kernels.sort.sort_key_words` (primary last; ``(0, n)`` without sort
    keys): equal keys have equal words, so NULLs tie with NULLs and peers are exact; without ``partitioned``
    every id is 0 and only the words are sorted. Everything stays on the
    device; ``rank`` and ``dense_rank`` find peer groups as a Window does.

    Why two sorts and not one ``lexsort`` over the words and the ids: rows sort by their words, then
    stably by partition id narrowed to 16 bits when ``partitions`` (more than any id) allows, which NumPy
    radix-sorts (CuPy's sorts are radix sorts anyway); a two-key lexsort of 64-bit words was half of
    db-benchmark's top-2 per group. Rows of equal words are peers, so their order among themselves is free.
    """
    xp = device.xp
    n = int(partition_ids.shape[0])
    if words.shape[0] == 0:
        order = xp.arange(n, dtype=xp.int64)
    else:
        order = (xp.argsort(words[0]) if words.shape[0] == 1 else xp.lexsort(words)).astype(xp.int64)
    if partitioned:
        narrow = xp.int16 if partitions is not None and partitions <= 1 << 15 else xp.int64
        order = order[xp.argsort(partition_ids[order].astype(narrow), kind="stable")]
    new_partition = xp.ones(n, dtype=xp.bool_)
    ordered_ids = partition_ids[order]
    new_partition[1:] = ordered_ids[1:] != ordered_ids[:-1]
    _, part_start, _ = segment_bounds(device, new_partition)
    numbers = xp.arange(1, n + 1, dtype=xp.int64) - part_start
    if function == "row_number":
        return order, numbers, numbers
    new_peer = new_partition.copy()
    if words.shape[0]:
        new_peer[1:] |= key_changes(device, words, order)
    peer_segment, peer_start, _ = segment_bounds(device, new_peer)
    if function == "rank":
        return order, peer_start - part_start + 1, numbers
    return order, peer_segment - peer_segment[part_start] + 1, numbers  # dense_rank


def _sorts_before(device, words: Any, bounds: Any, or_equal: bool) -> Any:
    """Return, per column, whether ``words`` sort before ``bounds`` (or equal to them, ``or_equal``): primary last."""
    xp = device.xp
    before = xp.zeros(words.shape[1], dtype=xp.bool_)
    equal = xp.ones(words.shape[1], dtype=xp.bool_)
    for row in range(words.shape[0] - 1, -1, -1):
        before |= equal & (words[row] < bounds[row])
        equal &= words[row] == bounds[row]
    return before | equal if or_equal else before


#: The fewest buffered rows that start a cut (fewer on small batches): the first cut comes early, so the
#: partitions' bounds drop rows from the next batch on; later cuts wait for twice the rows kept.
LEAST_BOUND_ROWS = 1 << 14


class TopNRowNumber(Operator):
    """Buffer the rows that may still be kept; cut the buffer down past a bound; emit the kept rows at the end.

    The bound is ``max(min(batch rows, LEAST_BOUND_ROWS), 2 * rows kept last time)``: each cut at least
    halves the buffer, so the rows sorted over the whole input stay a small multiple of the rows that pass
    the partitions' bounds, and when most rows are kept (partitions smaller than ``limit``) the bound
    doubles. The buffer and the partition table are reserved in the operator's memory pool. Per batch the
    operator reads the device twice (the table's new-partition count, the rows that pass the bounds), plus
    once per string column of the rows it keeps (their size); a cut as often again. The output presents
    the kept rows through a gather map; the numbers are a column beside them.
    """

    def __init__(self, ctx: OperatorCtx, node: TopNRowNumberNode):
        super().__init__(ctx, node)
        self._batches: list[Batch] = []
        self._partition_ids: list[Any] = []
        self._buffered_rows = 0
        self._batch_rows = ctx.config.scan_batch_rows(ctx.device)
        self._least_bound = min(self._batch_rows, LEAST_BOUND_ROWS)
        self._bound = self._least_bound
        self._table: GroupByHashTable | None = None
        self._widths: tuple[int, ...] | None = None
        self._full: Any = None  # per partition id: `limit` rows (ranks) kept at the last cut
        self._bounds: Batch | None = None  # the sort keys of each partition's last kept row at the last cut
        self._bound_rows: Any = None  # per partition id: its row in _bounds
        self._output: BatchSlices | None = None

    def needs_input(self) -> bool:
        return not self.no_more_input_received

    # ------------------------------------------------------------------- input
    def add_input(self, batch: Batch) -> None:
        if self.node.limit <= 0 or batch.num_rows == 0:
            return
        partition_ids = self._partition_ids_of(batch)
        if self._full is not None:  # drop the rows a full partition can no longer take
            rows = selection_from_mask(self.device, self._passes(batch, partition_ids))
            if rows.shape[0] == 0:
                return
            if rows.shape[0] < batch.num_rows:
                batch = batch.with_gather_map(rows).materialize()
                partition_ids = partition_ids[rows]
        self._batches.append(batch)
        self._partition_ids.append(partition_ids)
        self._buffered_rows += batch.num_rows
        self._reserve()
        if self._buffered_rows > self._bound:
            self._cut(final=False)

    def _passes(self, batch: Batch, partition_ids: Any) -> Any:
        """Return which rows may still be kept: those of partitions not full, and those sorting before the bound.

        The rows' sort keys and their partitions' bound rows are encoded as one column each, so both halves
        of the words share one layout (a batch without NULLs or with shorter strings encodes in fewer words).
        """
        xp = self.device.xp
        node = self.node
        n = batch.num_rows
        known = partition_ids < self._full.shape[0]
        slot = xp.where(known, partition_ids, 0)
        closed = known & self._full[slot]
        keys = node.sort_keys
        if not keys:  # every row is a peer of the bound: rank and dense_rank keep it, row_number does not
            return ~closed if node.function == "row_number" else xp.ones(n, dtype=xp.bool_)
        at = xp.where(closed, self._bound_rows[slot], 0)
        columns = [concat_columns(self.device, [batch.column(k.name), gather_column(self.device,
                                                                                   self._bounds.column(k.name), at)])
                   for k in keys]
        words = sort_key_words(self.device, columns, [k.ascending for k in keys], [k.nulls_first for k in keys])
        return ~closed | _sorts_before(self.device, words[:, :n], words[:, n:], node.function != "row_number")

    def _partition_ids_of(self, batch: Batch) -> Any:
        """Return each row's partition id (dense, kept across batches; all 0 without partition keys)."""
        xp = self.device.xp
        if not self.node.partition_keys:
            return xp.zeros(batch.num_rows, dtype=xp.int32)
        words, widths = normalize_keys(self.device, [batch.column(k) for k in self.node.partition_keys],
                                       self._widths)
        if self._table is None:
            self._table = GroupByHashTable(self.device, widths)
        elif widths != self._widths:
            self._table.widen(widths)
        self._widths = widths
        return self._table.insert(words)[0]

    def _reserve(self) -> None:
        table = 0 if self._table is None else self._table.nbytes
        bounds = 0 if self._full is None else 5 * int(self._full.shape[0]) + (
            self._bounds.nbytes if self._bounds is not None else 0)
        self.set_memory_reservation(sum(b.nbytes for b in self._batches) + 4 * self._buffered_rows + table + bounds)

    # ------------------------------------------------------------------ the cut
    def _cut(self, final: bool) -> tuple[Batch, Any, Any]:
        """Keep the buffered rows ranked ``<= limit``; return the buffer, the kept rows' positions in it and ranks.

        Also records each partition's bound for the rows still to come, and, unless ``final``, makes the
        kept rows the new buffer (copied, unless every row was kept).
        """
        xp = self.device.xp
        node = self.node
        data = concat_batches(self._batches)
        partition_ids = self._partition_ids[0] if len(self._partition_ids) == 1 else xp.concatenate(self._partition_ids)
        keys = node.sort_keys
        if keys:
            words = sort_key_words(self.device, [data.column(k.name) for k in keys], [k.ascending for k in keys],
                                   [k.nulls_first for k in keys])
        else:
            words = xp.zeros((0, data.num_rows), dtype=xp.uint64)
        partitions = 1 if self._table is None else max(self._table.num_groups, 1)
        first = partition_first_rows(self.device, partition_ids, words, node.limit, partitions) if (
            node.function == "row_number") else None
        if first is not None:  # kept and numbered without sorting the buffer (kernels.partition_top)
            kept, numbers = first
            ranks, positions = numbers, slice(None)
        else:
            order, ranks, numbers = partition_ranks(self.device, partition_ids, words, node.function,
                                                    bool(node.partition_keys),
                                                    None if self._table is None else self._table.num_groups)
            positions = selection_from_mask(self.device, ranks <= node.limit)
            kept = order[positions]
        if not final:
            groups = max(self._table.num_groups if self._table is not None else 1, 1)
            kept_ids = partition_ids[kept]
            last = xp.ones(kept.shape[0], dtype=xp.bool_)  # the last kept row of its partition
            last[:-1] = kept_ids[1:] != kept_ids[:-1]
            last_ids = kept_ids[last]
            counted = (numbers if node.function != "dense_rank" else ranks)[positions]
            self._full = xp.zeros(groups, dtype=xp.bool_)
            self._full[last_ids] = counted[last] >= node.limit
            if keys:
                self._bounds = data.select([k.name for k in keys]).with_gather_map(kept[last]).materialize()
                self._bound_rows = xp.zeros(groups, dtype=xp.int64)
                self._bound_rows[last_ids] = xp.arange(last_ids.shape[0], dtype=xp.int64)
            if kept.shape[0] < data.num_rows:
                data = data.with_gather_map(kept).materialize()
                partition_ids = kept_ids
            self._batches, self._partition_ids = [data], [partition_ids]
            self._buffered_rows = data.num_rows
            self._bound = max(self._least_bound, 2 * data.num_rows)
            self._reserve()
        return data, kept, ranks[positions]

    def no_more_input(self) -> None:
        super().no_more_input()
        if not self._batches:
            return
        data, kept, ranks = self._cut(final=True)
        self._batches, self._partition_ids = [], []
        if self.node.row_number_name is None:
            output = data.with_gather_map(kept)
        else:  # the numbers in base-row order, so they sit beside the columns under the same gather map
            xp = self.device.xp
            numbers = xp.zeros(data.num_rows, dtype=xp.int64)
            numbers[kept] = ranks
            output = Batch(data.names + (self.node.row_number_name,), data.columns + (Column(pa.int64(), numbers),),
                           self.device, kept.astype(xp.int32), data.num_rows)
        self._output = BatchSlices(output, self._batch_rows)
        self.set_memory_reservation(output.nbytes + (0 if self._table is None else self._table.nbytes))

    # ------------------------------------------------------------------ output
    def get_output(self) -> Batch | None:
        return None if self._output is None else self._output.next()

    def is_finished(self) -> bool:
        return self.no_more_input_received and (self._output is None or self._output.exhausted)

    def close(self) -> None:
        self._batches, self._partition_ids, self._output = [], [], None
        self._table = self._full = self._bounds = self._bound_rows = None
        super().close()
