"""Send a Task's rows to other Tasks as serialized pages (Velox's ``PartitionedOutput``).

A sink. For each input batch it decides the destination of every row:

* ``partitioned`` hashes the keys on the device
  (:func:`~gpu_engine.kernels.hash.hash_columns`) and splits rows into
  ``num_partitions`` gather maps with a counting sort
  (:func:`~gpu_engine.kernels.partition.partition_gather_maps`);
* ``broadcast`` sends every row to every destination (the buffer shares pages);
* ``arbitrary`` sends whole batches to destinations in turn (round-robin).

Rows cross to the host here, and only here: the batch is gathered once in
destination order and copied to Arrow (``Batch.to_arrow``), then each
destination's rows are a zero-copy slice. Slices accumulate per destination
until they pass ``shuffle_page_bytes``; then they are written into one Arrow IPC
page (optionally compressed) and handed to the Task's output buffer in the
:class:`~gpu_engine.exec.output_buffer_manager.OutputBufferManager`. Pages go
over one at a time: when the buffer says it is over its cap, the operator holds
its remaining pages, takes no input and blocks on ``WAIT_FOR_CONSUMER``, which
keeps the buffer within a page of its cap. ``no_more_input`` flushes every
destination; once all pages are handed over the driver tells the buffer it has
no more data, and the operator is finished.

The remote partition of a row is taken from the hash rotated by 32 bits, so it
is independent of the low bits a LocalPartition downstream uses to spread the
rows of one remote partition over its drivers.
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future

import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.transfers import batch_to_arrow
from gpu_engine.exec.operator import NOT_BLOCKED, BlockingReason, Operator, OperatorCtx
from gpu_engine.exec.serialized_page import SerializedPage, serialize_page
from gpu_engine.plans.nodes import PartitionedOutputNode

__all__ = ["PartitionedOutput"]


class PartitionedOutput(Operator):
    """Sink: partition, serialize and queue rows for consumer Tasks."""

    def __init__(self, ctx: OperatorCtx, node: PartitionedOutputNode):
        super().__init__(ctx, node)
        self.manager = ctx.task.query_ctx.output_buffer_manager
        self.task_id = ctx.task.task_id
        self.kind = node.partition_kind
        self.keys = tuple(node.keys)
        self.num_destinations = 1 if self.kind == "broadcast" else node.num_partitions
        self.page_bytes = ctx.config.shuffle_page_bytes
        self.compression = ctx.config.shuffle_compression
        self._pending: list[list[pa.RecordBatch]] = [[] for _ in range(self.num_destinations)]
        self._pending_bytes = [0] * self.num_destinations
        self._ready: deque[tuple[int, SerializedPage]] = deque()
        self._blocked: Future | None = None
        self._next_destination = ctx.driver_id % self.num_destinations
        self._signalled_end = False

    # -------------------------------------------------------------- contract
    def needs_input(self) -> bool:
        return not self.no_more_input_received and not self._ready and self._blocked is None

    def add_input(self, batch: Batch) -> None:
        for destination, record_batch in self._split(batch):
            self._pending[destination].append(record_batch)
            self._pending_bytes[destination] += record_batch.nbytes
            if self._pending_bytes[destination] >= self.page_bytes:
                self._flush(destination)

    def get_output(self) -> Batch | None:
        return None

    def no_more_input(self) -> None:
        super().no_more_input()
        for destination in range(self.num_destinations):
            self._flush(destination)
        self._hand_over()

    def is_blocked(self):
        self._hand_over()
        if self._blocked is not None:
            return BlockingReason.WAIT_FOR_CONSUMER, self._blocked
        return NOT_BLOCKED

    def is_finished(self) -> bool:
        return self._signalled_end

    def close(self) -> None:
        self._pending = [[] for _ in range(self.num_destinations)]
        self._ready.clear()
        super().close()

    # ------------------------------------------------------------- internals
    def _split(self, batch: Batch) -> list[tuple[int, pa.RecordBatch]]:
        """Return (destination, host rows) pairs for one batch: one device-to-host copy per batch."""
        if self.kind != "partitioned" or self.num_destinations == 1:
            if self.kind == "arbitrary":
                destination = self._next_destination
                self._next_destination = (destination + 1) % self.num_destinations
            else:
                destination = 0
            return [(destination, self._to_host(batch))]
        from gpu_engine.kernels.hash import hash_columns
        from gpu_engine.kernels.partition import partition_gather_maps

        device = self.device
        xp = device.xp
        hashes = hash_columns(device, [batch.column(k) for k in self.keys])
        shift = xp.uint64(32)
        rotated = (hashes >> shift) | (hashes << shift)
        indices, offsets = partition_gather_maps(device, rotated, self.num_destinations)
        bounds = device.to_host(offsets).tolist()
        ordered = self._to_host(batch.with_gather_map(indices))
        return [(p, ordered.slice(bounds[p], bounds[p + 1] - bounds[p]))
                for p in range(self.num_destinations) if bounds[p + 1] > bounds[p]]

    def _to_host(self, batch: Batch) -> pa.RecordBatch:
        start = time.perf_counter()
        record_batch, transfer = batch_to_arrow(batch)
        self.add_runtime_stat("to_arrow_seconds", time.perf_counter() - start)
        if transfer is not None:  # on a GPU: the copy alone, queued kernels drained first
            self.add_runtime_stat("d2h_bytes", transfer.nbytes)
            self.add_runtime_stat("d2h_seconds", transfer.seconds)
        return record_batch

    def _flush(self, destination: int) -> None:
        """Serialize a destination's pending rows into pages, one per run of batches with one schema."""
        pending = self._pending[destination]
        if not pending:
            return
        self._pending[destination] = []
        self._pending_bytes[destination] = 0
        start = time.perf_counter()
        run: list[pa.RecordBatch] = []
        for record_batch in pending:
            if run and not record_batch.schema.equals(run[0].schema):
                self._ready.append((destination, serialize_page(run, self.compression)))
                run = []
            run.append(record_batch)
        self._ready.append((destination, serialize_page(run, self.compression)))
        self.add_runtime_stat("serialize_seconds", time.perf_counter() - start)

    def _hand_over(self) -> None:
        """Give ready pages to the output buffer one at a time until it says wait; then say end once."""
        if self._blocked is not None:
            if not self._blocked.done():
                return
            self._blocked = None
        while self._ready:
            space = self.manager.wait_for_space(self.task_id)  # another driver may have filled it
            if space is not None and not space.done():
                self._blocked = space
                return
            destination, page = self._ready.popleft()
            self._blocked = self.manager.enqueue(self.task_id, destination, page)
            self.add_runtime_stat("pages", 1)
            self.add_runtime_stat("page_bytes", page.size)
            self.add_runtime_stat("page_rows", page.num_rows)
            if self._blocked is not None:
                if not self._blocked.done():
                    return
                self._blocked = None
        if self.no_more_input_received and not self._signalled_end:
            self._signalled_end = True
            self.manager.no_more_data(self.task_id)
