"""Read a table's splits and hand them on as device batches (Velox's TableScan)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Iterator

import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.concat import concat_batches
from gpu_engine.columnar.transfers import HostRun, HostToDeviceCopier, StagedRun, prepare_run, rechunk_record_batches
from gpu_engine.connectors.cudf_interop import resolve_parquet_reader
from gpu_engine.connectors.data_source import SplitPiece, is_host_split, split_pieces
from gpu_engine.connectors.device_table import DeviceSplit
from gpu_engine.connectors.late_materialization import LATE_CUT_SHARE, read_filtered_piece
from gpu_engine.connectors.parquet_device_columns import DevicePiece, prepare_device_piece
from gpu_engine.connectors.runtime_filters import CUT_BELOW_SHARE, cut_record_batches, prune_row_groups, select_rows
from gpu_engine.connectors.split_prefetcher import SplitPrefetcher
from gpu_engine.connectors.table_cache import CachedSplit
from gpu_engine.exec.dynamic_filters import JoinKeyFilter
from gpu_engine.exec.operator import BlockingReason, Operator, OperatorCtx
from gpu_engine.exec.split import ConnectorSplit, ParquetSplit
from gpu_engine.plans.nodes import TableScanNode

__all__ = ["TableScan", "ADAPTIVE_FILTER_ROWS", "ADAPTIVE_FILTER_MIN_DROPPED"]

#: After its join-key filters have tested this many rows, a scan stops testing rows (it still skips row groups)
#: when they dropped less than this share of them: a filter that drops little costs more than the probe it saves.
ADAPTIVE_FILTER_ROWS = 1 << 17
ADAPTIVE_FILTER_MIN_DROPPED = 0.1


@dataclass
class _DecodedPiece:
    """What a prefetch thread hands the driver: a piece's items and the seconds spent making them."""

    items: list[Any]
    decode_seconds: float
    convert_seconds: float
    filtered_rows: int = 0  # rows the join-key filters dropped
    filter_seconds: float = 0.0  # and the seconds they took
    tested_rows: int = 0  # rows the join-key filters tested


@dataclass(frozen=True)
class _Survivors:
    """Rows its join-key filters kept, gathered with the next ones into a batch: a record batch cut to them, or a
    device-decoded piece that keeps them (its batch is made on the device, then gathered)."""

    part: pa.RecordBatch | DevicePiece


class TableScan(Operator):
    """Source operator: asks the Task for splits, reads each in batches, copies them to the device.

    With no split at hand and more to come, it blocks on ``WAIT_FOR_SPLIT``
    with the Task's future; it is finished once the Task said no more splits
    will come and the last one is read. How a split becomes device batches:

    * Parquet or Arrow (decoded on the host): the split is cut into pieces of
      at least ``batch_rows`` rows (:func:`~gpu_engine.connectors.data_source.split_pieces`),
      which a :class:`~gpu_engine.connectors.split_prefetcher.SplitPrefetcher`
      decodes and converts to the engine's layout ``scan_prefetch_depth``
      pieces ahead, on threads of its own (on the driver's thread at depth 0).
      While pieces are in flight and room is left, the scan takes the Task's
      next split at once, if one is queued, so decoding runs on across split
      boundaries. ``decode_seconds`` and ``arrow_to_batch_seconds`` count that
      work wherever it ran. Then, on a GPU
      (``EngineConfig.packs_scan_batches``), a piece becomes one batch packed
      into a pinned staging slot by its prefetch thread and copied by the
      driver in one asynchronous copy (:class:`~gpu_engine.columnar.transfers.HostToDeviceCopier`;
      ``h2d_bytes``, ``h2d_copies``, ``h2d_seconds``, ``h2d_pack_seconds`` and
      ``h2d_staging_waits`` count the copies; ``cuda-sim`` runs the same steps);
      otherwise each Arrow record batch of at most ``batch_rows`` rows is one;
    * Parquet with the engine's device decoder (``parquet_reader`` ``"device"``,
      the default on ``cuda`` without cuDF): a prefetch thread plans a piece's
      pages and stages its fixed-width columns' compressed chunks
      (:func:`~gpu_engine.connectors.parquet_device_columns.prepare_device_piece`;
      its other columns are decoded on the host as above), and the driver copies
      them and decodes them on the device (:class:`~gpu_engine.connectors.parquet_device_columns.DevicePiece`);
    * Parquet with cuDF's reader on a GPU (``parquet_reader`` ``"cudf"``, or
      ``"auto"`` with cuDF installed): cuDF's reader fills device memory
      directly (:mod:`gpu_engine.connectors.cudf_interop`);
    * a device-resident table (:class:`~gpu_engine.connectors.device_table.DeviceSplit`):
      views of its buffers, no copy; a table ``Session.cache`` keeps on the
      device is one (:class:`~gpu_engine.connectors.table_cache.CachedSplit`
      per cached batch, counted in ``cached_batches``).

    Join-key filters (:mod:`gpu_engine.exec.dynamic_filters`): when a hash
    join's finished build side has pushed filters on this scan's columns, a
    Parquet split first loses the row groups whose statistics rule every row
    out (``dynamic_filter_row_groups_skipped``), and a host-decoded piece's
    rows no build key can match are dropped before conversion and copy
    (``dynamic_filter_rows_dropped``, ``dynamic_filter_seconds``). A host-decoded
    Parquet piece decodes the columns its filters test first and the others only
    for the rows kept, when they are few
    (:mod:`~gpu_engine.connectors.late_materialization`:
    ``late_materialized_rows_skipped``, ``late_materialized_row_groups_skipped``). A host batch
    keeps the rest as its gather map (or is cut to them when they are few:
    :data:`~gpu_engine.connectors.runtime_filters.CUT_BELOW_SHARE`), a batch bound for a GPU is cut. Unless
    the piece is packed, what is cut is gathered across record batches, pieces and splits into batches of up to
    ``batch_rows`` rows (:meth:`_gather`, ``gathered_batches``). A piece
    decoded on the device reads the columns its filters test on the host and
    tests them there the same way: its host columns are cut before the copy,
    its device columns decoded whole and gathered to the rows kept, and its
    survivors gathered on the device with the next pieces' (a piece no row of
    which is kept is neither copied nor decoded). Once the
    filters have dropped under :data:`ADAPTIVE_FILTER_MIN_DROPPED` of
    :data:`ADAPTIVE_FILTER_ROWS` rows, the scan stops testing rows.

    A Filter's single-column conjuncts right above the scan (comparisons, IN
    lists, BETWEEN on integers, dates, decimals and strings:
    :mod:`~gpu_engine.connectors.scan_predicates`) are such filters too, set
    when the Task starts: they skip row groups and, in host-decoded Parquet
    pieces, rows, before the other columns are decoded; the Filter still
    tests the rows handed on.
    """

    def __init__(self, ctx: OperatorCtx, node: TableScanNode):
        super().__init__(ctx, node)
        config = ctx.config
        self.columns = tuple(node.columns)
        self.batch_rows = config.scan_batch_rows(ctx.device)
        self._parquet_reader = resolve_parquet_reader(config.parquet_reader, ctx.device)
        self._packs = config.packs_scan_batches(ctx.device)
        prefetch = config.scan_prefetch(ctx.device, ctx.num_drivers)
        # Packed batches are staged in pinned slots on the prefetch threads: one slot a piece in flight, plus one.
        self._copier = (HostToDeviceCopier(ctx.device, self.add_runtime_stat, slots=prefetch + 1)
                        if self._packs and HostToDeviceCopier.stages(ctx.device) else None)
        # Parquet pieces whose fixed-width columns are decoded on the device (parquet_reader "device"): their compressed
        # chunks and host-read columns go through a copier of their own.
        self._device_pieces = (HostToDeviceCopier(ctx.device, self.add_runtime_stat)
                               if self._parquet_reader == "device" else None)
        self._prefetcher: SplitPrefetcher[_DecodedPiece] = SplitPrefetcher(prefetch)
        self._decode_threads = self._prefetcher.depth > 0  # prefetching is for spare cores: let pyarrow use them too
        self._decode_pool_threads = config.scan_decode_pool_threads(ctx.device, ctx.num_drivers)  # chunks in parallel
        self._decoded: deque[Any] = deque()  # items of the last piece handed back, not yet output
        self._reader: Iterator[Batch] | None = None  # batches of a device-resident or cuDF-read split
        self._held_split: ConnectorSplit | None = None  # taken early, to read once the pieces in flight are done
        self._finished = False
        self._filters_ready = False  # no join's table still awaited (gpu_engine.exec.dynamic_filters.DynamicFilters.expect)
        self._filtered_rows = [0, 0]  # rows the join-key filters tested, and dropped (see _reads)
        self._filter_shares: dict[str, float] = {}  # per column, the share of rows its filters kept last
        self._gathered: list[pa.RecordBatch] = []  # survivors not yet output: fewer than batch_rows rows in all
        self._gathered_rows = 0
        self._ready: deque[Any] = deque()  # batches of gathered rows, to output before any decoded item

    def needs_input(self) -> bool:
        return False

    def get_output(self) -> Batch | None:
        if not self._filters_ready:  # joins this scan feeds through a local exchange: their filters come first
            future = self.ctx.task.dynamic_filters.pending(self.node.id)
            if future is not None:
                self.block_on(BlockingReason.WAIT_FOR_JOIN_BUILD, future)
                return None
            self._filters_ready = True
        while not self._finished:
            if self._ready:
                return self._finish(self._ready.popleft())
            if self._decoded:
                item = self._decoded.popleft()
                if isinstance(item, _Survivors):
                    part = item.part
                    self._gather(self._decoded_on_device(part) if isinstance(part, DevicePiece) else part)
                    continue
                if self._gathered:  # the rows gathered so far go first: a driver keeps its splits' row order
                    self._decoded.appendleft(item)
                    self._flush_gathered()
                    continue
                batch = self._finish(item)
                if batch.num_rows:
                    return batch
                continue
            if self._reader is not None:
                batch = next(self._reader, None)
                if batch is None:
                    self._reader = None
                elif batch.num_rows:
                    return batch
                continue
            if self._prefetcher.pending:
                self._take_queued_splits()
                piece, future = self._prefetcher.next_result()
                if future is not None:
                    self.block_on(BlockingReason.WAIT_FOR_SPLIT, future)
                    return None
                self._take(piece)
                continue
            if self._held_split is not None:
                split, self._held_split = self._held_split, None
            else:
                split, future = self.ctx.task.get_split_or_future(self.node.id)
                if self._gathered and split is None:  # hand the rest on before waiting for a split, or finishing
                    self._flush_gathered()
                    continue
                if future is not None:
                    self.block_on(BlockingReason.WAIT_FOR_SPLIT, future)
                    return None
                if split is None:
                    self._finished = True
                    return None
                self.add_runtime_stat("splits", 1)
            if self._gathered and not self._decodes_on_host(split):  # its batches come after the rows gathered
                self._held_split = split
                self._flush_gathered()
                continue
            self._start(split)
        return None

    # ------------------------------------------------------------ splits
    def _decodes_on_host(self, split: ConnectorSplit) -> bool:
        if isinstance(split, ParquetSplit) and self._parquet_reader == "cudf" and self.columns:
            return False
        return is_host_split(split)

    def _start(self, split: ConnectorSplit) -> None:
        """Queue a host split's pieces on the prefetcher, or open a device split's batches."""
        if self._decodes_on_host(split):
            self._prefetcher.add(self._reads(split))
        else:
            self._reader = self._open_on_device(split)

    def _take_queued_splits(self) -> None:
        """Take the Task's next splits while the prefetcher has room, only those already queued (never wait)."""
        task = self.ctx.task
        while self._held_split is None and self._prefetcher.has_room and task.pending_splits(self.node.id):
            split, _ = task.get_split_or_future(self.node.id)
            if split is None:  # another driver took the last one meanwhile
                return
            self.add_runtime_stat("splits", 1)
            if self._decodes_on_host(split):
                self._prefetcher.add(self._reads(split))
            else:
                self._held_split = split

    def _open_on_device(self, split: ConnectorSplit) -> Iterator[Batch]:
        if isinstance(split, DeviceSplit):
            if isinstance(split, CachedSplit):  # a batch Session.cache kept on the device
                self.add_runtime_stat("cached_batches", 1)
            return split.read(self.columns, self.batch_rows)
        if isinstance(split, ParquetSplit):
            from gpu_engine.connectors.cudf_interop import read_parquet_split

            return iter([read_parquet_split(split, self.columns, self.node.output_schema, self.device)])
        raise TypeError(f"TableScan cannot read {type(split).__name__}")

    # ------------------------------------------------------------ pieces
    def _reads(self, split: ConnectorSplit) -> list[Callable[[], _DecodedPiece]]:
        # Join-key filters of finished build sides (gpu_engine.exec.dynamic_filters): all there before the first
        # split, since a probe pipeline's scan reads nothing while its probes wait for their tables.
        filters = tuple(f for f in self.ctx.task.dynamic_filters.for_scan(self.node.id) if f.column in self.columns)
        if not isinstance(split, ParquetSplit):  # a filter's own conjuncts save decoding only (scan_predicates)
            filters = tuple(f for f in filters if not f.static)
        if self._copier is not None:
            self._copier.attach()  # on the driver's thread: the prefetch threads stage for its GPU
        if filters:
            split, skipped = prune_row_groups(split, filters)
            if skipped:
                self.add_runtime_stat("dynamic_filter_row_groups_skipped", skipped)
            if split is None:
                return []
            tested, dropped = self._filtered_rows
            if tested >= ADAPTIVE_FILTER_ROWS and dropped < tested * ADAPTIVE_FILTER_MIN_DROPPED:
                filters = ()  # dropping too few rows to pay for testing them: row groups only (Velox adapts too)
            elif any(not f.static for f in filters):  # a filter's own conjuncts only skip row groups beside a join's
                filters = tuple(f for f in filters if not f.static)
            else:  # and those that keep many rows too (ScanPredicate.worth_testing_rows)
                filters = tuple(f for f in filters if f.worth_testing_rows(split, self._filter_shares))
        return [partial(self._decode, piece, filters) for piece in split_pieces(split, self.columns, self.batch_rows)]

    def _decode(self, piece: SplitPiece, filters: tuple[JoinKeyFilter, ...] = ()) -> _DecodedPiece:
        """Decode a piece and convert it as far as the host can (runs on a prefetch thread: no device work)."""
        began = time.perf_counter()
        if self._device_pieces is not None and isinstance(piece.split, ParquetSplit) and piece.columns:
            # Page headers planned, compressed chunks staged and the filters' columns tested here; pages decoded on
            # the device in _finish, rows kept by the filters gathered across pieces (_gather). A filter's own
            # conjuncts are left to it (their columns would be decoded on the host: work per piece the device does).
            filters = tuple(f for f in filters if not f.static)
            prepared = prepare_device_piece(piece, filters)
            items = [] if not prepared.kept_rows else \
                [prepared if prepared.selection is None else _Survivors(prepared)]
            return _DecodedPiece(items, time.perf_counter() - began - prepared.filter_seconds, 0.0,
                                 prepared.rows - prepared.kept_rows, prepared.filter_seconds, piece.rows if filters else 0)
        # Cut before the copy; a host batch keeps them as its gather map unless few (cut before converting).
        share = 1.0 if self._packs or self.device.is_gpu else CUT_BELOW_SHARE
        # The filters' columns first, the others only for the rows kept (gpu_engine.connectors.late_materialization).
        late = read_filtered_piece(piece, filters, max(share, LATE_CUT_SHARE), self._decode_threads,
                                   self._decode_pool_threads, self._filter_shares) if filters else None
        if late is not None:
            record_batches, selections = late.batches, late.selections
            dropped, tested, filtering = late.dropped, piece.rows, late.filter_seconds
            self.add_runtime_stat("late_materialized_rows_skipped", late.rows_skipped)
            self.add_runtime_stat("late_materialized_row_groups_skipped", late.row_groups_skipped)
        else:
            record_batches = [b for b in piece.read(self._decode_threads, self._decode_pool_threads) if b.num_rows]
            selections = [None] * len(record_batches)
            dropped, tested, filtering = 0, 0, 0.0
        cut: list[bool] | None = None  # per record batch, when filtered and not packed: cut to the rows kept
        if late is not None and late.cut:  # only the rows kept were read
            cut = None if self._packs else [True] * len(record_batches)
        elif filters and record_batches:  # rows no build key can match go before they are converted or copied
            began_cut = time.perf_counter()
            if late is None:
                selections = [select_rows(b, filters) for b in record_batches]
                dropped = sum(b.num_rows - len(rows) for b, rows in zip(record_batches, selections) if rows is not None)
                tested = sum(b.num_rows for b in record_batches)
            if self._packs:  # the piece stays one packed batch
                record_batches, selections = cut_record_batches(record_batches, selections, share)
            else:  # what is cut is gathered with the rows kept of the next record batches and pieces (see _gather)
                record_batches, selections, cut = _cut_each(record_batches, selections, share)
            filtering += time.perf_counter() - began_cut
        decoded = time.perf_counter()
        items: list[Any]
        if not record_batches:
            items = []
        elif cut is not None:
            items = [item for b, rows, survivors in zip(record_batches, selections, cut)
                     for item in ([_Survivors(b)] if survivors else self._selected(b, rows))]
        elif self._packs:  # one batch per piece; a piece of one row group over batch_rows rows is cut
            if any(b.num_rows > self.batch_rows for b in record_batches):
                record_runs = list(rechunk_record_batches(record_batches, self.batch_rows))
            else:
                record_runs = [record_batches]
            runs = [prepare_run(run) for run in record_runs]
            if self._copier is None:
                items = [run.to_host_batch(self.device) for run in runs]
            elif len(runs) == 1:  # packed into a pinned slot here, off the driver; a longer piece packs as it is copied
                items = [self._copier.stage(runs[0])]
            else:
                items = runs
        elif self.device.is_gpu:
            items = [b.slice(start, self.batch_rows) for b in record_batches
                     for start in range(0, b.num_rows, self.batch_rows)]
        else:
            items = [batch for b in record_batches for batch in _host_slices(b, self.batch_rows, self.device)]
        return _DecodedPiece(items, decoded - began - filtering, time.perf_counter() - decoded, dropped, filtering,
                             tested)

    def _selected(self, record_batch: pa.RecordBatch, rows) -> list[Any]:
        """Return a host batch of a record batch's selected rows (None: all), ``batch_rows`` rows a batch, uncopied
        (on a GPU, None only: slices of it, copied in :meth:`_finish`)."""
        if rows is None:
            if not self.device.is_gpu:
                return _host_slices(record_batch, self.batch_rows, self.device)
            return [record_batch.slice(start, self.batch_rows) for start in range(0, record_batch.num_rows,
                                                                                 self.batch_rows)]
        if len(rows) == 0:
            return []
        batch = Batch.from_arrow(record_batch, self.device)
        return [batch.with_gather_map(rows[start:start + self.batch_rows]) for start in range(0, len(rows), self.batch_rows)]

    def _gather(self, part: pa.RecordBatch | Batch) -> None:
        """Add survivors to the rows gathered, and queue ``batch_rows`` of them at a time as a batch.

        Why: a join-key filter that drops most rows leaves a few thousand of each record batch; as batches of their
        own, every operator above pays its per-batch cost (launches and syncs on a GPU, interpreter overhead on
        the host) on each. Gathered, a driver hands on ``ceil(kept / batch_rows)`` batches, holding fewer than
        ``batch_rows`` rows meanwhile; the survivors were cut already, so only they are copied once more. Batches
        of device-decoded pieces are gathered on the device (:func:`~gpu_engine.columnar.concat.concat_batches`),
        record batches on the host.
        """
        if self._gathered and not _same_layout(part, self._gathered[0]):
            self._flush_gathered()  # files of a table may differ in types: no concatenation
        self._gathered.append(part)
        self._gathered_rows += part.num_rows
        if self._gathered_rows >= self.batch_rows:
            self._flush_gathered(keep_rest=True)

    def _flush_gathered(self, keep_rest: bool = False) -> None:
        """Queue the gathered rows, ``batch_rows`` a batch, for output before the decoded items (``keep_rest``: the full
        batches; the rest stays gathered)."""
        began = time.perf_counter()
        on_device = isinstance(self._gathered[0], Batch)
        if on_device:  # one flat batch (device columns read through the rows kept)
            gathered = concat_batches(self._gathered)
        else:
            gathered = self._gathered[0] if len(self._gathered) == 1 else pa.concat_batches(self._gathered)
        rows = gathered.num_rows
        handed = rows - rows % self.batch_rows if keep_rest else rows
        parts = [_rows_of(gathered, start, min(start + self.batch_rows, handed))
                 for start in range(0, handed, self.batch_rows)]
        self._gathered = [_rows_of(gathered, handed, rows)] if handed < rows else []
        self._gathered_rows = rows - handed
        items = parts if on_device or self.device.is_gpu else [Batch.from_arrow(part, self.device) for part in parts]
        self._ready.extend(items)
        self.add_runtime_stat("gathered_batches", len(items))
        self.add_runtime_stat("arrow_to_batch_seconds", time.perf_counter() - began)

    def _take(self, piece: _DecodedPiece) -> None:
        if piece.tested_rows:
            self._filtered_rows[0] += piece.tested_rows
            self._filtered_rows[1] += piece.filtered_rows
            self.add_runtime_stat("dynamic_filter_rows_dropped", piece.filtered_rows)
            self.add_runtime_stat("dynamic_filter_seconds", piece.filter_seconds)
        self.add_runtime_stat("decode_seconds", piece.decode_seconds)
        self.add_runtime_stat("arrow_to_batch_seconds", piece.convert_seconds)
        self._decoded.extend(piece.items)

    def _finish(self, item: Any) -> Batch:
        """Return the device batch of a decoded item: copy it on a GPU (on this driver's stream), else it is one."""
        if isinstance(item, (HostRun, StagedRun)):
            return self._copier.upload(item)
        if isinstance(item, DevicePiece):
            batch = self._decoded_on_device(item)
            # A piece is one batch, as a packed host piece is, unless it holds a row group over batch_rows rows.
            if item.largest_group_rows > self.batch_rows and batch.num_rows > self.batch_rows:
                rest = [batch.slice(start, start + self.batch_rows)
                        for start in range(self.batch_rows, batch.num_rows, self.batch_rows)]
                self._decoded.extendleft(reversed(rest))
                batch = batch.slice(0, self.batch_rows)
            return batch
        if isinstance(item, pa.RecordBatch):
            start = time.perf_counter()
            batch = Batch.from_arrow(item, self.device)
            self.add_runtime_stat("h2d_bytes", batch.nbytes)
            self.add_runtime_stat("arrow_to_batch_seconds", time.perf_counter() - start)
            return batch
        return item

    def _decoded_on_device(self, piece: DevicePiece) -> Batch:
        """Return a device-decoded piece's batch: copied and decoded on this driver's stream, counted."""
        batch = piece.to_batch(self.device, self._device_pieces)
        self.add_runtime_stat("device_decoded_pieces", 1)
        self.add_runtime_stat("device_decoded_columns", len(piece.planned))
        return batch

    def is_finished(self) -> bool:
        return self._finished

    def close(self) -> None:
        self._gathered = []
        self._ready.clear()
        if self._copier is not None:
            self._copier.close()  # first: a prefetch thread waiting for a staging slot stops
        self._prefetcher.close()  # waits for pieces being decoded: no thread outlives the Task
        self._decoded.clear()
        self._reader = None
        if self._device_pieces is not None:
            self._device_pieces.close()
        super().close()


def _same_layout(part: pa.RecordBatch | Batch, other: pa.RecordBatch | Batch) -> bool:
    """Say whether two parts of gathered rows can be concatenated: both on the host or both on the device, with the
    same names and types."""
    if isinstance(part, Batch) != isinstance(other, Batch):
        return False
    return part.schema.equals(other.schema)


def _rows_of(part: pa.RecordBatch | Batch, start: int, stop: int) -> pa.RecordBatch | Batch:
    """Return rows ``[start, stop)`` of a record batch or a batch, uncopied."""
    return part.slice(start, stop) if isinstance(part, Batch) else part.slice(start, stop - start)


def _cut_each(batches: list[pa.RecordBatch], selections: list[Any], share: float
              ) -> tuple[list[pa.RecordBatch], list[Any], list[bool]]:
    """Return :func:`~gpu_engine.connectors.runtime_filters.cut_record_batches`' batches and selections, and for
    each batch whether it was cut to the rows its filters kept (those are gathered: :meth:`TableScan._gather`)."""
    kept: list[pa.RecordBatch] = []
    left: list[Any] = []
    cut: list[bool] = []
    for batch, rows in zip(batches, selections):
        one, rest = cut_record_batches([batch], [rows], share)
        kept += one
        left += rest
        cut += [rows is not None and rest[0] is None for _ in one]  # no row kept: neither list has the batch
    return kept, left, cut


def _host_slices(record_batch: pa.RecordBatch, batch_rows: int, device) -> list[Batch]:
    """Return host batches of ``batch_rows`` rows of a record batch, its dictionary columns sharing one dictionary.

    Why: the slices of one Parquet row group share its dictionary, but each slice converted on its own got a
    dictionary Column of its own, and work kept per dictionary (a grouping key's ids, a lifted expression's
    values: :class:`~gpu_engine.codegen.kernel_inputs.KernelInputs` caches a dictionary of over 1 MiB by the
    object, too large to fingerprint) was redone for every slice: a GROUP BY over 100K string keys from
    dictionary-encoded Parquet interned the row group's 100K values once per 262,144-row slice (16 times in 4M
    rows, 67 ms of 450 ms CPU). Slices stay physical slices (no gather map), as before.
    """
    batches = [Batch.from_arrow(record_batch.slice(start, batch_rows), device)
               for start in range(0, record_batch.num_rows, batch_rows)]
    if len(batches) < 2:
        return batches
    first = batches[0].columns
    shared = [i for i, column in enumerate(first) if column.dictionary is not None]
    if not shared:
        return batches
    return [batches[0]] + [replace(batch, columns=tuple(
        replace(column, dictionary=first[i].dictionary) if i in shared and column.dictionary is not None else column
        for i, column in enumerate(batch.columns))) for batch in batches[1:]]
