"""Receive pages from producer Tasks: the Exchange operator (Velox's Exchange).

An Exchange is a source operator. Its splits are
:class:`~gpu_engine.exec.split.RemoteSplit`\\ s, each naming a producer Task and
the destination of that Task's output buffer meant for this Task. All Exchange
drivers of a Task share one :class:`~gpu_engine.exec.exchange_queue.ExchangeQueue`
(Task state, in ``exec/``): whichever driver takes a
split from the Task adds an :class:`ExchangeSource` for it, and every driver
takes the next page from the queue, whatever source it came from.

An ExchangeSource asks the :class:`~gpu_engine.exec.output_buffer_manager.OutputBufferManager`
for pages with a future (in process, as Presto's ``PrestoExchangeSource`` asks
over HTTP), hands what arrives to the queue and acknowledges it at once, so the
producer frees it. The queue asks its sources for more only while it holds
fewer bytes than ``exchange_max_bytes``; taking pages out lets it ask again.
That is the back-pressure that reaches the producers: a slow consumer stops
acknowledging, the producer's buffer fills and its PartitionedOutput blocks.

Drivers with nothing to read wait on a future (``WAIT_FOR_PRODUCER``, or also
the Task's split future while splits may still come), never by sleeping. An
Exchange is at end when the Task said ``no_more_splits`` for its node, every
source sent its end marker and the queue is empty. Pages become device batches
here (``Batch.from_arrow``): host-to-device is the other end of the wire.
"""

from __future__ import annotations

import time
from concurrent.futures import Future

from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.exchange_queue import ExchangeQueue, first_of
from gpu_engine.exec.operator import BlockingReason, Operator, OperatorCtx
from gpu_engine.exec.serialized_page import SerializedPage, deserialize_page
from gpu_engine.plans.nodes import ExchangeNode

__all__ = ["Exchange"]


class Exchange(Operator):
    """Source: read the pages producer Tasks sent to this Task, as device batches."""

    def __init__(self, ctx: OperatorCtx, node: ExchangeNode):
        super().__init__(ctx, node)
        self.queue: ExchangeQueue = ctx.task.exchange_queues[node.id]
        self._split_future: Future | None = None
        self._at_end = False

    def needs_input(self) -> bool:
        return False

    def get_output(self) -> Batch | None:
        if self._at_end:
            return None
        split_future = self._take_splits()
        page, data_future, at_end = self.queue.next()
        if page is not None:
            return self._to_batch(page)
        if at_end:
            self._at_end = True
            return None
        if split_future is None:
            self.block_on(BlockingReason.WAIT_FOR_PRODUCER, data_future)
        else:
            self.block_on(BlockingReason.WAIT_FOR_SPLIT, first_of(data_future, split_future))
        return None

    def is_finished(self) -> bool:
        return self._at_end

    def _take_splits(self) -> Future | None:
        """Turn the Task's remote splits into sources; return the split future while more may come."""
        if self._split_future is not None:
            if not self._split_future.done():
                return self._split_future
            self._split_future = None
        added, self._split_future = self.queue.take_splits(self.ctx.task, self.node)
        if added:
            self.add_runtime_stat("remote_splits", added)
        return self._split_future

    def _to_batch(self, page: SerializedPage) -> Batch:
        start = time.perf_counter()
        table = deserialize_page(page)
        batch = Batch.from_arrow(table, self.device)
        self.add_runtime_stat("pages", 1)
        self.add_runtime_stat("page_bytes", page.size)
        self.add_runtime_stat("deserialize_seconds", time.perf_counter() - start)
        if self.device.is_gpu:
            self.add_runtime_stat("h2d_bytes", batch.nbytes)
        return batch
