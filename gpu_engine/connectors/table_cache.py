"""Keep a registered table's rows on the device, so repeated queries skip Parquet decode and the host->device copy.

:meth:`Session.cache <gpu_engine.session.Session.cache>` reads every split of
a registered table once, all columns, into device batches of exactly the scan
batch size, the last one holding the rest (:func:`load_cached_table`): the
record batches of all splits are cut and packed into ``batch_rows``-row
batches, whatever the Parquet row groups were, because on a GPU every batch
pays a fixed host cost (an SF10 lineitem cached one batch per ~114k-row row
group made 524 batches, and hot queries slower than cold ones). Pieces of the
splits are decoded ahead on threads (``scan_prefetch_depth``), as a scan
does. The Session keeps the batches until
:meth:`~gpu_engine.session.Session.uncache` or until the name is registered
again. While a table is cached the Session hands its scans one
:class:`CachedSplit` per cached batch instead of its Parquet or Arrow splits,
so drivers share the cached batches as they share splits. A TableScan serves
the requested columns of the batch as views (``Batch.select``: no copy, no
decode) and counts them in its ``cached_batches`` runtime stat, which
explain-analyze prints.

A cached split names device memory of this process, so it never goes on the
wire: it is a :class:`~gpu_engine.connectors.device_table.DeviceSplit`, which
split serialization does not know.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.transfers import HostToDeviceCopier, rechunk_record_batches
from gpu_engine.connectors.data_source import split_pieces
from gpu_engine.connectors.device_table import DeviceSplit
from gpu_engine.connectors.registered_table import RegisteredTable, supported_columns
from gpu_engine.connectors.split_prefetcher import SplitPrefetcher
from gpu_engine.device import Device
from gpu_engine.errors import DeviceError
from gpu_engine.exec.memory_pool import format_bytes, is_device_out_of_memory

__all__ = ["CachedSplit", "CachedTable", "load_cached_table"]


@dataclass(frozen=True)
class CachedSplit(DeviceSplit):
    """One cached batch of a table: a split whose rows are already on the device."""

    table_name: str = ""
    index: int = 0

    def describe(self) -> str:
        return f"cached {self.table_name} batch {self.index} ({self.batch.num_rows} rows)"


@dataclass(frozen=True)
class CachedTable:
    """A table's rows held on one device as batches of at most ``batch_rows`` rows."""

    name: str
    device: Device = field(repr=False)
    batch_rows: int
    batches: tuple[Batch, ...] = field(repr=False)

    @property
    def num_rows(self) -> int:
        """Return the rows cached."""
        return sum(batch.num_rows for batch in self.batches)

    @property
    def nbytes(self) -> int:
        """Return the bytes the cached batches hold on the device."""
        return sum(batch.nbytes for batch in self.batches)

    def splits(self) -> list[CachedSplit]:
        """Return one split per cached batch (none for an empty table: its scans finish at once)."""
        return [CachedSplit(batch, self.name, index) for index, batch in enumerate(self.batches)]


def load_cached_table(table: RegisteredTable, device: Device, batch_rows: int, prefetch_depth: int = 0,
                      decode_threads: int | None = None) -> CachedTable:
    """Read every split of ``table`` once, all columns, into device batches of ``batch_rows`` rows (the last: the rest).

    ``prefetch_depth`` pieces of the splits are decoded ahead on threads
    (:class:`~gpu_engine.connectors.split_prefetcher.SplitPrefetcher`), each
    piece's column chunks on the decode pool of ``decode_threads`` threads
    (:mod:`gpu_engine.connectors.decode_pool`; None: its default); the
    batches are packed and copied on the calling thread, on its current stream
    (a GPU copy goes through pinned memory, as a scan's does).

    Raises
    ------
    DeviceError
        When the device runs out of memory on the way (nothing stays cached).
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    columns = supported_columns(table.schema)  # a column no plan can read is not worth device memory
    batches: list[Batch] = []
    prefetcher: SplitPrefetcher[list] = SplitPrefetcher(prefetch_depth)
    copier = HostToDeviceCopier(device)
    try:
        for split in table.splits():
            prefetcher.add(partial(piece.read, prefetch_depth > 0, decode_threads)
                           for piece in split_pieces(split, columns, batch_rows))
        for run in rechunk_record_batches(_decoded_record_batches(prefetcher), batch_rows):
            batches.append(copier.copy(run))
        copier.close()  # the last copies are done before the batches are handed out
    except Exception as error:
        if not is_device_out_of_memory(error):
            raise
        held = format_bytes(sum(batch.nbytes for batch in batches))
        raise DeviceError(f"caching table {table.name!r} ran out of {device.name} memory after {held}: {error}; "
                          f"uncache other tables or leave this one uncached") from error
    finally:
        prefetcher.close()
    return CachedTable(table.name, device, batch_rows, tuple(batches))


def _decoded_record_batches(prefetcher: SplitPrefetcher[list]):
    """Yield the non-empty record batches of every queued piece, in order, waiting for each piece's thread."""
    while True:
        record_batches, future = prefetcher.next_result()
        if future is not None:
            future.result()  # wait: this runs on the Session's thread, not a driver's
            continue
        if record_batches is None:
            return
        yield from (b for b in record_batches if b.num_rows)
