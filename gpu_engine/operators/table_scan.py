"""Read a table's splits and hand them on as device batches (Velox's TableScan)."""

from __future__ import annotations

import time
from typing import Iterator

import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.connectors.data_source import read_split
from gpu_engine.exec.operator import BlockingReason, Operator, OperatorCtx
from gpu_engine.plans.nodes import TableScanNode

__all__ = ["TableScan"]


class TableScan(Operator):
    """Source operator: asks the Task for splits, reads each in batches, copies them to the device.

    With no split at hand and more to come, it blocks on ``WAIT_FOR_SPLIT``
    with the Task's future; it is finished once the Task said no more splits
    will come and the last one is read. Host-to-device bytes and seconds are
    counted in its runtime stats.
    """

    def __init__(self, ctx: OperatorCtx, node: TableScanNode):
        super().__init__(ctx, node)
        self.columns = tuple(node.columns)
        self.batch_rows = ctx.config.scan_batch_rows(ctx.device)
        self._reader: Iterator[pa.RecordBatch] | None = None
        self._finished = False

    def needs_input(self) -> bool:
        return False

    def get_output(self) -> Batch | None:
        while not self._finished:
            if self._reader is None:
                split, future = self.ctx.task.get_split_or_future(self.node.id)
                if future is not None:
                    self.block_on(BlockingReason.WAIT_FOR_SPLIT, future)
                    return None
                if split is None:
                    self._finished = True
                    return None
                self._reader = read_split(split, self.columns, self.batch_rows)
                self.add_runtime_stat("splits", 1)
            record_batch = next(self._reader, None)
            if record_batch is None:
                self._reader = None
                continue
            if record_batch.num_rows == 0:
                continue
            start = time.perf_counter()
            batch = Batch.from_arrow(record_batch, self.device)
            if self.device.is_gpu:
                self.add_runtime_stat("host_to_device_bytes", batch.nbytes)
            self.add_runtime_stat("arrow_to_batch_seconds", time.perf_counter() - start)
            return batch
        return None

    def is_finished(self) -> bool:
        return self._finished

    def close(self) -> None:
        self._reader = None
        super().close()
