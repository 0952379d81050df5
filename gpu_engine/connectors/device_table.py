"""Register a table whose columns already live on the device, and hand it to scans as zero-copy slices.

Why: a table that arrives in device memory (a cuDF DataFrame, a pylibcudf
Table, see :mod:`gpu_engine.connectors.cudf_interop`) should reach the
operators without a trip through the host. Its rows are cut into
:class:`DeviceSplit` s, each a view of the same buffers; the TableScan slices a
split into ``batch_rows`` batches, again as views. String offsets are absolute
into the chars buffer, so slicing a string column copies nothing either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.connectors.registered_table import DEFAULT_SPLIT_ROWS, RegisteredTable
from gpu_engine.exec.split import ConnectorSplit

__all__ = ["DeviceSplit", "DeviceTable", "slice_column", "slice_batch"]


def slice_column(column: Column, start: int, stop: int) -> Column:
    """Return rows ``[start, stop)`` of a flat column as views of its buffers."""
    validity = None if column.validity is None else column.validity[start:stop]
    if column.dictionary is None and column.offsets is not None:
        return Column(column.dtype, column.data, validity, column.offsets[start:stop + 1], None)
    return Column(column.dtype, column.data[start:stop], validity, None, column.dictionary)


def slice_batch(batch: Batch, start: int, stop: int) -> Batch:
    """Return rows ``[start, stop)`` of a batch without a gather map, as views."""
    if batch.gather_map is not None:
        raise ValueError("slice_batch needs a batch without a gather map")
    stop = min(stop, batch.num_rows)
    return Batch(batch.names, tuple(slice_column(c, start, stop) for c in batch.columns), batch.device, None,
                 max(0, stop - start))


@dataclass(frozen=True)
class DeviceSplit(ConnectorSplit):
    """A run of rows of a device-resident table (never serialized: it names device memory of this process)."""

    batch: Batch = field(compare=False, repr=False)

    def describe(self) -> str:
        return f"device {self.batch.num_rows} rows"

    def read(self, columns: Sequence[str], batch_rows: int) -> Iterator[Batch]:
        """Yield the split's ``columns`` in batches of at most ``batch_rows`` rows, as views."""
        selected = self.batch.select(list(columns))
        step = max(1, batch_rows)
        for start in range(0, selected.num_rows, step):
            yield slice_batch(selected, start, start + step)


@dataclass(frozen=True)
class DeviceTable(RegisteredTable):
    """A registered table held as one flat device batch; its splits are views of it."""

    batch: Batch | None = field(default=None, compare=False, repr=False)

    def splits(self) -> list[ConnectorSplit]:
        rows = self.batch.num_rows
        step = max(1, self.split_rows or DEFAULT_SPLIT_ROWS)
        return [DeviceSplit(slice_batch(self.batch, start, start + step)) for start in range(0, rows, step)] or [
            DeviceSplit(slice_batch(self.batch, 0, 0))]
