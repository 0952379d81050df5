"""Move batches between the host and a device in large, counted copies.

Host to device. A TableScan on a GPU gathers the Arrow record batches of a
split until it has ``batch_rows`` rows (Parquet hands out one row group at a
time, often far fewer rows than a GPU batch should have), converts each column
to the engine's layout on the host, and copies the batch to the device with a
:class:`HostToDeviceCopier`. The copier packs every buffer of the batch into
one reusable pinned (page-locked) host buffer and queues one asynchronous copy
per buffer on the current CUDA stream (the driver's), so the copy engine reads
pinned memory directly instead of bouncing through a driver-owned staging
buffer, and a batch's copies overlap the kernels of earlier batches. Two
pinned buffers alternate: the next batch is packed into one while the other
is still being read by the GPU; a buffer is reused only after the CUDA event
recorded behind its copies has completed. Packing also concatenates the
record batches, so no separate host concatenation is made.

Device to host. Results leave the device once, where the Session turns them
into Arrow (:func:`batch_to_arrow`); inside a pipeline nothing comes back.

The copy is made in two steps, so the first can leave the driver's thread:
:func:`prepare_run` converts a run's Arrow columns to the engine's layout on
the host (decimals to scaled ``int64``, one dictionary for the run, string
offsets) and plans the packed buffers; it is thread-safe, and a scan's
prefetch threads run it (:mod:`gpu_engine.connectors.split_prefetcher`).
:meth:`HostToDeviceCopier.upload` then packs the planned buffers into pinned
memory and queues the copies on the driver's stream.

Both directions are counted in operator runtime stats, only on a GPU:
``h2d_bytes``, ``h2d_seconds`` (the copies' time on the device, from CUDA
events), ``h2d_pack_seconds`` (the host time spent packing into pinned
memory), ``d2h_bytes`` and ``d2h_seconds``.

On a host device the copier does the same packing into plain NumPy arrays
(that is what tests exercise on ``cpu`` and ``cuda-sim``); a buffer made of a
single host array (a run of one record batch) is then used without any copy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.device import Device, get_device

__all__ = ["Transfer", "HostRun", "HostToDeviceCopier", "prepare_run", "coalesce_record_batches",
           "rechunk_record_batches", "batch_to_arrow", "array_buffer"]

_ALIGNMENT = 256  # bytes between buffers in the pinned staging area
_GROWTH = 1.25  # headroom when a staging buffer must grow


@dataclass(frozen=True)
class Transfer:
    """Bytes copied between host and device, and the seconds the copy took."""

    nbytes: int
    seconds: float


# ------------------------------------------------------------------ batching
def coalesce_record_batches(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[list[pa.RecordBatch]]:
    """Yield runs of consecutive record batches holding at least ``rows`` rows each (the last may hold fewer).

    Empty record batches are dropped. A run is a list, so its batches can be
    packed straight into the device copy without concatenating them first.
    """
    run: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        run.append(batch)
        held += batch.num_rows
        if held >= rows:
            yield run
            run, held = [], 0
    if run:
        yield run


def rechunk_record_batches(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[list[pa.RecordBatch]]:
    """Yield runs of exactly ``rows`` rows (the last may hold fewer), slicing a record batch where a run ends.

    Why: a cached table must hold ``batch_rows``-row batches whatever the
    Parquet row groups or the Arrow chunks were; slicing Arrow is zero-copy,
    so only the packing copies.
    """
    if rows < 1:
        raise ValueError(f"rows must be at least 1, got {rows}")
    run: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        start = 0
        while start < batch.num_rows:
            take = min(rows - held, batch.num_rows - start)
            run.append(batch.slice(start, take) if take < batch.num_rows else batch)
            held += take
            start += take
            if held == rows:
                yield run
                run, held = [], 0
    if run:
        yield run


# ------------------------------------------------------------ packing plans
@dataclass
class _Buffer:
    """One array of the batch to be: its dtype, its length and how to write its values into a host view.

    ``only`` is the host array holding exactly these values, when there is one
    (a run of a single record batch): packing on the host then uses it as is.
    """

    dtype: np.dtype
    length: int
    write: Callable[[np.ndarray], None]
    only: np.ndarray | None = None
    #: Trailing dimensions of a row (``(2,)`` for the two words of a 128-bit decimal), else ``()``.
    tail: tuple[int, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.length, *self.tail)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclass
class _ColumnPlan:
    """A column whose buffers are still to be written: the Column layout with :class:`_Buffer` in place of arrays."""

    dtype: pa.DataType
    data: _Buffer
    validity: _Buffer | None
    offsets: _Buffer | None
    dictionary: "_ColumnPlan | None"
    fingerprint: str | None = None

    def buffers(self) -> list[_Buffer]:
        """Return the buffers in the order :meth:`build` consumes them."""
        own = [b for b in (self.data, self.validity, self.offsets) if b is not None]
        return own + (self.dictionary.buffers() if self.dictionary is not None else [])

    def build(self, arrays: Iterator[Any]) -> Column:
        """Return the Column made of the next arrays (written in :meth:`buffers` order)."""
        data = next(arrays)
        validity = next(arrays) if self.validity is not None else None
        offsets = next(arrays) if self.offsets is not None else None
        dictionary = self.dictionary.build(arrays) if self.dictionary is not None else None
        return Column(self.dtype, data, validity, offsets, dictionary, self.fingerprint)


def _concatenation(arrays: Sequence[np.ndarray], dtype: np.dtype) -> _Buffer:
    def write(out: np.ndarray) -> None:
        position = 0
        for array in arrays:
            out[position:position + array.shape[0]] = array
            position += array.shape[0]

    only = arrays[0] if len(arrays) == 1 and arrays[0].dtype == np.dtype(dtype) else None
    tail = tuple(int(d) for d in arrays[0].shape[1:]) if arrays else ()
    return _Buffer(np.dtype(dtype), sum(int(a.shape[0]) for a in arrays), write, only, tail)


def _validity(pieces: Sequence[Column]) -> _Buffer | None:
    if all(piece.validity is None for piece in pieces):
        return None

    def write(out: np.ndarray) -> None:
        position = 0
        for piece in pieces:
            rows = len(piece)
            out[position:position + rows] = True if piece.validity is None else piece.validity
            position += rows

    only = pieces[0].validity if len(pieces) == 1 else None
    return _Buffer(np.dtype(np.bool_), sum(len(p) for p in pieces), write, only)


def _string_offsets(pieces: Sequence[Column]) -> _Buffer:
    """Return offsets of the concatenated strings: each piece's offsets rebased onto the chars before it."""
    def write(out: np.ndarray) -> None:
        out[0] = 0
        position, base = 0, 0
        for piece in pieces:
            rows = len(piece)
            first = int(piece.offsets[0])
            np.add(piece.offsets[1:], base - first, out=out[position + 1:position + rows + 1])
            position += rows
            base += int(piece.offsets[-1]) - first

    single = pieces[0].offsets if len(pieces) == 1 else None
    only = single if single is not None and single.dtype == np.int64 and int(single[0]) == 0 else None
    return _Buffer(np.dtype(np.int64), sum(len(p) for p in pieces) + 1, write, only)


def _plan_column(pieces: Sequence[Column]) -> _ColumnPlan:
    """Plan one column from host pieces of one type (dictionary pieces share one dictionary)."""
    first = pieces[0]
    validity = _validity(pieces)
    if first.dictionary is not None:
        codes = _concatenation([p.data for p in pieces], np.int32)
        return _ColumnPlan(first.dtype, codes, validity, None, _plan_column([first.dictionary]))
    if first.offsets is not None:
        chars = _concatenation([p.data[int(p.offsets[0]):int(p.offsets[-1])] for p in pieces], np.uint8)
        fingerprint = first.fingerprint if len(pieces) == 1 else None  # a dictionary's values are one piece
        return _ColumnPlan(first.dtype, chars, validity, _string_offsets(pieces), None, fingerprint)
    return _ColumnPlan(first.dtype, _concatenation([p.data for p in pieces], first.data.dtype), validity, None, None)


def _host_pieces(chunks: Sequence[pa.Array], host: Device) -> list[Column]:
    """Convert one column's chunks to host Columns; dictionary chunks are first given one shared dictionary."""
    if len(chunks) > 1 and pa.types.is_dictionary(chunks[0].type):
        chunks = pa.chunked_array(chunks).unify_dictionaries().chunks
    pieces = [Column.from_arrow(chunk, host) for chunk in chunks]
    if pieces and pieces[0].dictionary is not None:
        shared = pieces[0].dictionary
        pieces = [Column(p.dtype, p.data, p.validity, None, shared) for p in pieces]
    return pieces


@dataclass
class HostRun:
    """A run of record batches converted to the engine's layout on the host, its packed buffers planned, not written.

    Made by :func:`prepare_run` on any thread; :meth:`HostToDeviceCopier.upload`
    (or :meth:`to_host_batch` on a host device) turns it into a Batch.
    """

    names: tuple[str, ...]
    rows: int
    plans: tuple[_ColumnPlan, ...]

    def buffers(self) -> list[_Buffer]:
        """Return every buffer of the run, column by column, in the order :meth:`build` consumes them."""
        return [buffer for plan in self.plans for buffer in plan.buffers()]

    def build(self, arrays: Iterable[Any], device: Device) -> Batch:
        """Return the batch whose buffers are ``arrays`` (written in :meth:`buffers` order) on ``device``."""
        arrays = iter(arrays)
        return Batch(self.names, tuple(plan.build(arrays) for plan in self.plans), device, None, self.rows)

    def to_host_batch(self, device: Device) -> Batch:
        """Return the run packed into NumPy arrays, a batch of the host device ``device``; thread-safe."""
        if device.is_gpu:
            raise ValueError("to_host_batch makes host batches; use HostToDeviceCopier.upload on a GPU")
        arrays = []
        for buffer in self.buffers():
            if buffer.only is not None:
                arrays.append(buffer.only)
                continue
            array = np.empty(buffer.shape, dtype=buffer.dtype)
            buffer.write(array)
            arrays.append(array)
        return self.build(arrays, device)


def array_buffer(array: np.ndarray) -> _Buffer:
    """Plan a buffer holding a host array as it is, for :meth:`HostToDeviceCopier.upload_buffers`.

    Why: the device Parquet decoder (:mod:`gpu_engine.connectors.parquet_device_columns`) copies
    compressed column chunks and page tables, not Arrow columns, and they should go through the
    same pinned, asynchronous copies as a run's buffers, in the same packing.
    """
    array = np.ascontiguousarray(array)
    return _Buffer(array.dtype, array.shape[0], lambda out: np.copyto(out, array), array, array.shape[1:])


def prepare_run(record_batches: Sequence[pa.RecordBatch]) -> HostRun:
    """Convert a run of record batches (one schema) to host columns and plan their packed buffers; thread-safe."""
    if not record_batches:
        raise ValueError("copy needs at least one record batch")
    rows = sum(b.num_rows for b in record_batches)
    names = tuple(record_batches[0].schema.names)
    host = get_device("cpu")
    plans = tuple(_plan_column(_host_pieces([b.column(i) for b in record_batches], host)) for i in range(len(names)))
    return HostRun(names, rows, plans)


# ------------------------------------------------------------------- copier
class _StagingSlot:
    """One pinned staging buffer and the CUDA events recorded around the copies that read it."""

    def __init__(self, xp: Any):
        self.xp = xp
        self.buffer: np.ndarray | None = None
        self.started = xp.cuda.Event()
        self.finished = xp.cuda.Event()
        self.pending = False

    def reserve(self, nbytes: int) -> np.ndarray:
        if self.buffer is None or self.buffer.shape[0] < nbytes:
            import cupyx

            self.buffer = None  # free the smaller one first (its copies are done: the slot was retired)
            self.buffer = cupyx.empty_pinned(max(_ALIGNMENT, int(nbytes * _GROWTH)), dtype=np.uint8)
        return self.buffer

    def retire(self) -> float:
        """Wait for this slot's copies; return their device time in seconds (0 when none were pending)."""
        if not self.pending:
            return 0.0
        self.finished.synchronize()
        self.pending = False
        return self.xp.cuda.get_elapsed_time(self.started, self.finished) / 1000.0


class HostToDeviceCopier:
    """Pack runs of Arrow record batches into device batches, through pinned memory on a GPU.

    One copier belongs to one operator of one driver (it is not thread-safe).

    Parameters
    ----------
    device
        The destination. On a GPU, copies go through two alternating pinned
        buffers on the current CUDA stream; elsewhere the pieces are packed
        into NumPy arrays.
    report
        ``report(name, value)`` adds to a runtime stat (``Operator.add_runtime_stat``);
        called on a GPU only.
    """

    def __init__(self, device: Device, report: Callable[[str, float], None] | None = None):
        self.device = device
        self._report = report or (lambda name, value: None)
        self._slots: list[_StagingSlot] | None = None
        self._turn = 0

    def copy(self, record_batches: Sequence[pa.RecordBatch]) -> Batch:
        """Return one device batch holding the rows of ``record_batches`` (one schema), in order."""
        return self.upload(prepare_run(record_batches))

    def upload(self, run: HostRun) -> Batch:
        """Return the device batch of a prepared run: packed through pinned memory on a GPU, into NumPy elsewhere."""
        if not run.names:
            return Batch((), (), self.device, None, run.rows)
        if not self.device.is_gpu:
            return run.to_host_batch(self.device)
        return run.build(self._upload(run.buffers()), self.device)

    def upload_buffers(self, buffers: Sequence[_Buffer]) -> list[Any]:
        """Return device arrays holding ``buffers`` (a run's, or :func:`array_buffer` s), in one packing.

        On a GPU they go through a pinned slot, copied asynchronously on the current stream as
        :meth:`upload` copies a run; elsewhere each is its host array (or written into a new one).
        """
        if self.device.is_gpu:
            return self._upload(buffers)
        arrays = []
        for buffer in buffers:
            if buffer.only is None:
                array = np.empty(buffer.shape, dtype=buffer.dtype)
                buffer.write(array)
                arrays.append(array)
            else:
                arrays.append(buffer.only)
        return arrays

    def _upload(self, buffers: Sequence[_Buffer]) -> list[Any]:
        """Pack ``buffers`` into a pinned slot, then queue their copies on the current stream."""
        xp = self.device.xp
        if self._slots is None:
            self._slots = [_StagingSlot(xp), _StagingSlot(xp)]
        slot = self._slots[self._turn]
        self._turn = 1 - self._turn
        self._report_seconds(slot.retire())  # its last copies must be done before it is overwritten
        starts, total = [], 0
        for buffer in buffers:
            starts.append(total)
            total += -(-buffer.nbytes // _ALIGNMENT) * _ALIGNMENT
        staging = slot.reserve(total)
        began = time.perf_counter()
        views = []
        for buffer, start in zip(buffers, starts):
            view = staging[start:start + buffer.nbytes].view(buffer.dtype).reshape(buffer.shape)
            buffer.write(view)
            views.append(view)
        self._report("h2d_pack_seconds", time.perf_counter() - began)
        stream = xp.cuda.get_current_stream()
        slot.started.record(stream)
        arrays = []
        for buffer, view in zip(buffers, views):
            array = xp.empty(buffer.shape, dtype=buffer.dtype)
            if buffer.length:
                array.set(view, stream=stream)  # asynchronous: the source is pinned
            arrays.append(array)
        slot.finished.record(stream)
        slot.pending = True
        self._report("h2d_bytes", sum(buffer.nbytes for buffer in buffers))
        return arrays

    def close(self) -> None:
        """Wait for the copies still in flight, count their time and free the pinned buffers."""
        if self._slots is None:
            return
        for slot in self._slots:
            self._report_seconds(slot.retire())
        self._slots = None

    def _report_seconds(self, seconds: float) -> None:
        if seconds:
            self._report("h2d_seconds", seconds)


# ------------------------------------------------------------ device to host
def batch_to_arrow(batch: Batch) -> tuple[pa.RecordBatch, Transfer | None]:
    """Copy a batch's rows to the host as Arrow; on a GPU also return the copy's bytes and seconds.

    The gather map is applied on the device first and the current stream is
    drained before the clock starts, so the seconds are the copy's, not the
    kernels' still queued ahead of it.
    """
    if not batch.device.is_gpu:
        return batch.to_arrow(), None
    flat = batch.materialize()
    batch.device.synchronize()
    began = time.perf_counter()
    record_batch = flat.to_arrow()
    return record_batch, Transfer(flat.nbytes, time.perf_counter() - began)
