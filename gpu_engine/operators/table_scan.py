"""Read a table's splits and hand them on as device batches (Velox's TableScan)."""

from __future__ import annotations

import time
from typing import Iterator

import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.transfers import HostToDeviceCopier, coalesce_record_batches
from gpu_engine.connectors.data_source import read_split
from gpu_engine.connectors.device_table import DeviceSplit
from gpu_engine.connectors.table_cache import CachedSplit
from gpu_engine.exec.operator import BlockingReason, Operator, OperatorCtx
from gpu_engine.exec.split import ParquetSplit
from gpu_engine.plans.nodes import TableScanNode

__all__ = ["TableScan"]


class TableScan(Operator):
    """Source operator: asks the Task for splits, reads each in batches, copies them to the device.

    With no split at hand and more to come, it blocks on ``WAIT_FOR_SPLIT``
    with the Task's future; it is finished once the Task said no more splits
    will come and the last one is read. How a split becomes device batches:

    * Parquet or Arrow, on a GPU (``EngineConfig.packs_scan_batches``): record
      batches are gathered into ``batch_rows``-row runs and packed through
      pinned memory (:class:`~gpu_engine.columnar.transfers.HostToDeviceCopier`);
      ``h2d_bytes``, ``h2d_seconds`` and ``h2d_pack_seconds`` count the copies;
    * Parquet with ``parquet_reader="cudf"`` on a GPU: cuDF's reader fills
      device memory directly (:mod:`gpu_engine.connectors.cudf_interop`);
    * a device-resident table (:class:`~gpu_engine.connectors.device_table.DeviceSplit`):
      views of its buffers, no copy; a table ``Session.cache`` keeps on the
      device is one (:class:`~gpu_engine.connectors.table_cache.CachedSplit`
      per cached batch, counted in ``cached_batches``);
    * otherwise each Arrow record batch is converted as it comes.
    """

    def __init__(self, ctx: OperatorCtx, node: TableScanNode):
        super().__init__(ctx, node)
        self.columns = tuple(node.columns)
        self.batch_rows = ctx.config.scan_batch_rows(ctx.device)
        self._reader: Iterator[Batch] | None = None
        self._finished = False
        self._copier = HostToDeviceCopier(ctx.device, self.add_runtime_stat) if ctx.config.packs_scan_batches(ctx.device) else None

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
                self._reader = self._open(split)
                self.add_runtime_stat("splits", 1)
            batch = next(self._reader, None)
            if batch is None:
                self._reader = None
                continue
            if batch.num_rows == 0:
                continue
            return batch
        return None

    def _open(self, split) -> Iterator[Batch]:
        """Return the device batches of one split (see the class docstring for the ways)."""
        if isinstance(split, DeviceSplit):
            if isinstance(split, CachedSplit):  # a batch Session.cache kept on the device
                self.add_runtime_stat("cached_batches", 1)
            return split.read(self.columns, self.batch_rows)
        config = self.ctx.config
        if isinstance(split, ParquetSplit) and config.parquet_reader == "cudf" and self.device.is_gpu and self.columns:
            from gpu_engine.connectors.cudf_interop import read_parquet_split

            return iter([read_parquet_split(split, self.columns, self.node.output_schema, self.device)])
        record_batches = read_split(split, self.columns, self.batch_rows)
        if self._copier is not None:
            return (self._packed(run) for run in coalesce_record_batches(record_batches, self.batch_rows))
        return (self._converted(record_batch) for record_batch in record_batches)

    def _packed(self, record_batches: list[pa.RecordBatch]) -> Batch:
        start = time.perf_counter()
        batch = self._copier.copy(record_batches)
        self.add_runtime_stat("arrow_to_batch_seconds", time.perf_counter() - start)
        return batch

    def _converted(self, record_batch: pa.RecordBatch) -> Batch:
        start = time.perf_counter()
        batch = Batch.from_arrow(record_batch, self.device)
        if self.device.is_gpu:
            self.add_runtime_stat("h2d_bytes", batch.nbytes)
        self.add_runtime_stat("arrow_to_batch_seconds", time.perf_counter() - start)
        return batch

    def is_finished(self) -> bool:
        return self._finished

    def close(self) -> None:
        self._reader = None
        if self._copier is not None:
            self._copier.close()
        super().close()
