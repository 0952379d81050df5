"""Move batches between the host and a device in large, counted copies.

Host to device. A TableScan on a GPU gathers the Arrow record batches of a
split until it has ``batch_rows`` rows (Parquet hands out one row group at a
time, often far fewer rows than a GPU batch should have), converts each column
to the engine's layout on the host, and copies the batch to the device with a
:class:`HostToDeviceCopier`. The copier packs every buffer of the batch into
one reusable pinned (page-locked) host buffer, a *staging slot*, and queues
one asynchronous copy of the whole packed area on the current CUDA stream (the
driver's); the batch's device arrays are views of the one block it fills. So
the copy engine reads pinned memory directly instead of bouncing through a
driver-owned staging buffer, a batch costs one ``cudaMemcpyAsync`` however many
columns it has, and its copy overlaps the kernels of earlier batches. Slots
alternate: the next batch is packed into one while another is still being
read by the GPU; a slot is reused only after the CUDA event recorded behind
its copy has completed. A scan's prefetch threads pack (*stage*) the next
batches into free slots while the driver computes on the current one
(:meth:`HostToDeviceCopier.stage`): the slots bound the pinned memory, and a
stager waits while every slot holds a batch not yet copied. Packing also
concatenates the record batches, so no separate host concatenation is made.
On ``cuda-sim`` the same steps run on NumPy arrays (slots, one copy a batch,
events that complete at once), so tests count copies and waits without a GPU.

Device to host. Results leave the device once, where the Session turns them
into Arrow (:func:`batch_to_arrow`); inside a pipeline nothing comes back.

The copy is made in two steps, so the first can leave the driver's thread:
:func:`prepare_run` converts a run's Arrow columns to the engine's layout on
the host (decimals to scaled ``int64``, one dictionary for the run, string
offsets) and plans the packed buffers; it is thread-safe, and a scan's
prefetch threads run it (:mod:`gpu_engine.connectors.split_prefetcher`).
:meth:`HostToDeviceCopier.stage` packs the planned buffers into a pinned slot
(on a prefetch thread, or inside ``upload``) and
:meth:`HostToDeviceCopier.upload` queues the copy on the driver's stream.

Both directions are counted in operator runtime stats where the copier
stages (``cuda``, ``cuda-sim``): ``h2d_bytes``, ``h2d_copies`` (one a batch),
``h2d_seconds`` (the copies' time on the device, from CUDA events; 0 on the
simulator), ``h2d_pack_seconds`` (the host time spent packing into pinned
memory, wherever it ran), ``h2d_staging_waits`` (stagings that found their
slot's last copy still pending and waited for it), and on a GPU ``d2h_bytes``
and ``d2h_seconds``.

On ``cpu`` the copier packs into plain NumPy arrays; a buffer made of a
single host array (a run of one record batch) is then used without any copy.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.columnar.column import Column
from gpu_engine.device import Device, get_device

__all__ = ["Transfer", "HostRun", "StagedRun", "HostToDeviceCopier", "prepare_run", "coalesce_record_batches",
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
class _CupyCopies:
    """The GPU's side of staging, through CuPy: pinned host buffers, CUDA events, one asynchronous copy.

    ``device_id`` is the GPU current where the copier was made (the driver's): a prefetch thread
    that stages makes it current first, so its events and pinned buffers belong to that GPU's context.
    """

    simulated = False

    def __init__(self, xp: Any):
        self.xp = xp
        self.device_id = xp.cuda.Device().id

    def use_device(self) -> None:
        self.xp.cuda.Device(self.device_id).use()

    def pinned(self, nbytes: int) -> np.ndarray:
        import cupyx

        return cupyx.empty_pinned(nbytes, dtype=np.uint8)

    def event(self) -> Any:
        return self.xp.cuda.Event()

    def copy(self, staging: np.ndarray, started: Any, finished: Any) -> Any:
        """Return a device block holding ``staging``, copied asynchronously on the current stream between the events."""
        stream = self.xp.cuda.get_current_stream()
        block = self.xp.empty(staging.shape[0], dtype=np.uint8)
        started.record(stream)
        block.set(staging, stream=stream)  # asynchronous: the source is pinned
        finished.record(stream)
        return block

    def elapsed(self, started: Any, finished: Any) -> float:
        return self.xp.cuda.get_elapsed_time(started, finished) / 1000.0


class _HostEvent:
    """A CUDA event's stand-in on the simulator: recorded and waited on at once (its copies are synchronous)."""

    done = True

    def record(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass


class _SimulatedCopies:
    """``cuda-sim``'s side of staging: the GPU's sequence of steps (slots, events, one copy) on NumPy arrays.

    Why: the simulator runs the exact CUDA kernels; the copier's staging, slot reuse and copy counts
    should run the same way, so tests bound them without a GPU.
    """

    simulated = True

    def use_device(self) -> None:
        pass

    def pinned(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, dtype=np.uint8)

    def event(self) -> _HostEvent:
        return _HostEvent()

    def copy(self, staging: np.ndarray, started: Any, finished: Any) -> np.ndarray:
        return staging.copy()

    def elapsed(self, started: Any, finished: Any) -> float:
        return 0.0


class _StagingSlot:
    """One pinned staging buffer and the CUDA events recorded around the copy that last read it."""

    def __init__(self, copies: Any):
        self.copies = copies
        self.buffer: np.ndarray | None = None
        self.started = copies.event()
        self.finished = copies.event()
        self.pending = False

    def reserve(self, nbytes: int) -> np.ndarray:
        if self.buffer is None or self.buffer.shape[0] < nbytes:
            self.buffer = None  # free the smaller one first (its copies are done: the slot was retired)
            self.buffer = self.copies.pinned(max(_ALIGNMENT, int(nbytes * _GROWTH)))
        return self.buffer

    def retire(self) -> float:
        """Wait for this slot's copy; return its device time in seconds (0 when none was pending)."""
        if not self.pending:
            return 0.0
        self.finished.synchronize()
        self.pending = False
        return self.copies.elapsed(self.started, self.finished)


@dataclass
class StagedRun:
    """A run packed into a pinned staging slot, its copy not queued yet (:meth:`HostToDeviceCopier.stage`).

    ``waited_seconds`` is what its stager spent on the slot's previous copy; ``pack_seconds`` the packing.
    """

    run: "HostRun | None"
    buffers: list[_Buffer]
    slot: _StagingSlot
    starts: list[int]
    total: int
    pack_seconds: float
    copy_seconds: float = 0.0  # device seconds of the slot's previous copy, retired while staging
    waited: bool = False


#: A staging area this large is packed on the process's decode pool (one memcpy a core), not on one thread.
_PARALLEL_PACK_BYTES = 16 << 20
#: A large single-array buffer is packed in row ranges of about this many bytes, one task each.
_PACK_CHUNK_BYTES = 4 << 20


def _pack(buffers: Sequence[_Buffer], starts: Sequence[int], staging: np.ndarray) -> None:
    """Write ``buffers`` at ``starts`` of ``staging``; a large area in parallel on the decode pool's threads.

    Why: one thread copies into pinned memory at a few GB/s, a fraction of PCIe's 25-50 GB/s; NumPy's
    copies release the interpreter lock, so a batch's buffers (and row ranges of large ones) pack on
    all cores. The pool's tasks never wait on others, so packing from any thread cannot deadlock it.
    """
    views = [staging[start:start + buffer.nbytes].view(buffer.dtype).reshape(buffer.shape)
             for buffer, start in zip(buffers, starts)]
    pool = None
    if sum(buffer.nbytes for buffer in buffers) >= _PARALLEL_PACK_BYTES:
        from gpu_engine.connectors.decode_pool import decode_pool, default_decode_threads

        pool = decode_pool(default_decode_threads())
    if pool is None:
        for buffer, view in zip(buffers, views):
            buffer.write(view)
        return
    tasks: list[Callable[[], Any]] = []
    for buffer, view in zip(buffers, views):
        if buffer.only is not None and buffer.nbytes > _PACK_CHUNK_BYTES:
            step = max(1, buffer.length * _PACK_CHUNK_BYTES // buffer.nbytes)
            tasks.extend(partial(np.copyto, view[row:row + step], buffer.only[row:row + step])
                         for row in range(0, buffer.length, step))
        else:
            tasks.append(partial(buffer.write, view))
    for future in [pool.submit(task) for task in tasks]:
        future.result()


def _layout(buffers: Sequence[_Buffer]) -> tuple[list[int], int]:
    """Return each buffer's offset in the staging area (aligned) and the area's size."""
    starts, total = [], 0
    for buffer in buffers:
        starts.append(total)
        total += -(-buffer.nbytes // _ALIGNMENT) * _ALIGNMENT
    return starts, total


class HostToDeviceCopier:
    """Pack runs of Arrow record batches into device batches, through pinned memory on a GPU.

    The driver that owns a copier calls :meth:`upload`, :meth:`upload_buffers` and
    :meth:`close`; :meth:`stage` may run on any thread (a scan's prefetch threads).

    Parameters
    ----------
    device
        The destination. On ``cuda``, runs are staged in pinned slots and copied with one
        asynchronous copy each on the current CUDA stream; on ``cuda-sim`` the same steps run
        on NumPy arrays (:attr:`stages` is True on both); on ``cpu`` the pieces are packed
        into NumPy arrays.
    report
        ``report(name, value)`` adds to a runtime stat (``Operator.add_runtime_stat``);
        called on the owning driver's thread only, where the copier stages.
    slots
        Pinned staging slots: two (one being copied while the next is packed), or more
        when prefetch threads stage ahead (:meth:`stage`): one per staged run not yet uploaded, plus one.
    """

    def __init__(self, device: Device, report: Callable[[str, float], None] | None = None, slots: int = 2):
        self.device = device
        self._report = report or (lambda name, value: None)
        self._slot_count = max(2, int(slots))
        self._copies: Any = None
        self._free: list[_StagingSlot] = []  # slots no staged run holds (a copy may still read them)
        self._made = 0
        self._lock = threading.Condition()
        self._closed = False

    @staticmethod
    def stages(device: Device) -> bool:
        """Return True when uploads to ``device`` go through staging slots, one copy each (``cuda``, ``cuda-sim``)."""
        return device.is_gpu or device.name == "cuda-sim"

    def copy(self, record_batches: Sequence[pa.RecordBatch]) -> Batch:
        """Return one device batch holding the rows of ``record_batches`` (one schema), in order."""
        return self.upload(prepare_run(record_batches))

    def upload(self, run: "HostRun | StagedRun") -> Batch:
        """Return the device batch of a prepared (or staged) run: one copy from a pinned slot, or NumPy on ``cpu``."""
        if isinstance(run, StagedRun):
            return run.run.build(self._queue_copy(run), self.device)
        if not run.names:
            return Batch((), (), self.device, None, run.rows)
        if not self.stages(self.device):
            return run.to_host_batch(self.device)
        return run.build(self._queue_copy(self._stage(run.buffers(), run)), self.device)

    def stage(self, run: "HostRun") -> "StagedRun | HostRun":
        """Pack ``run`` into a free pinned slot now, on this thread, so the driver only queues its copy; thread-safe.

        Why: packing a batch into pinned memory is the host's largest per-batch work after decoding; on a
        prefetch thread it overlaps the driver's kernels on the batch before. Waits while every slot holds a
        staged run not uploaded yet (the copier's ``slots`` bound the pinned memory). Returns ``run`` as it
        is where nothing is staged (``cpu``, a run without columns).

        Raises
        ------
        RuntimeError
            When the copier was closed meanwhile (the Task ended): the run is not needed.
        """
        if not run.names or not self.stages(self.device):
            return run
        return self._stage(run.buffers(), run)

    def upload_buffers(self, buffers: Sequence[_Buffer]) -> list[Any]:
        """Return device arrays holding ``buffers`` (a run's, or :func:`array_buffer` s), in one packing.

        Where the copier stages they go through a pinned slot and one asynchronous copy, as
        :meth:`upload` copies a run; on ``cpu`` each is its host array (or written into a new one).
        """
        if self.stages(self.device):
            return self._queue_copy(self._stage(buffers, None))
        arrays = []
        for buffer in buffers:
            if buffer.only is None:
                array = np.empty(buffer.shape, dtype=buffer.dtype)
                buffer.write(array)
                arrays.append(array)
            else:
                arrays.append(buffer.only)
        return arrays

    def attach(self) -> None:
        """Bind the copier to this thread's current GPU (call it on the owning driver's thread before :meth:`stage`).

        Why: the threads that stage ahead have no current GPU of their own; they make this one current.
        """
        if self.stages(self.device):
            self._engine()

    # -------------------------------------------------------------- staging
    def _engine(self) -> Any:
        with self._lock:
            if self._copies is None:
                self._copies = _CupyCopies(self.device.xp) if self.device.is_gpu else _SimulatedCopies()
            return self._copies

    def _take_slot(self) -> _StagingSlot:
        with self._lock:
            while True:
                if self._closed:
                    raise RuntimeError("the host-to-device copier is closed")
                # A slot whose last copy is done, else a new slot while the count allows (the copy in flight goes
                # on while this one is packed: double buffering), else the slot copied longest ago (waited on).
                ready = next((slot for slot in self._free if not slot.pending or slot.finished.done), None)
                if ready is not None:
                    self._free.remove(ready)
                    return ready
                if self._made < self._slot_count:
                    self._made += 1
                    return _StagingSlot(self._engine())
                if self._free:
                    return self._free.pop(0)
                self._lock.wait(0.05)

    def _give_back(self, slot: _StagingSlot) -> None:
        with self._lock:
            closed = self._closed
            if not closed:
                self._free.append(slot)
            self._lock.notify_all()
        if closed:  # its pinned buffer goes: the copy reading it must be done first
            self._report_seconds(slot.retire())

    def _stage(self, buffers: Sequence[_Buffer], run: "HostRun | None") -> StagedRun:
        """Pack ``buffers`` into a slot whose last copy has finished; queue nothing."""
        copies = self._engine()
        copies.use_device()
        slot = self._take_slot()
        try:
            waited = slot.pending and not slot.finished.done  # the copy engine is still reading it: the host waits
            copy_seconds = slot.retire()  # its last copy must be done before it is overwritten
            starts, total = _layout(buffers)
            staging = slot.reserve(total)
            began = time.perf_counter()
            _pack(buffers, starts, staging)
            packed = time.perf_counter() - began
        except BaseException:
            self._give_back(slot)
            raise
        return StagedRun(run, list(buffers), slot, starts, total, packed, copy_seconds, waited)

    def _queue_copy(self, staged: StagedRun) -> list[Any]:
        """Queue the one copy of a staged area on the current stream; return the buffers as views of its block.

        Why one copy: each ``cudaMemcpyAsync`` costs host time and a gap on the copy engine; a batch of
        twenty buffers moved as twenty copies spent that twenty times. The device arrays share the block,
        which lives while any of them does.
        """
        slot = staged.slot
        xp = self.device.xp
        try:
            if staged.copy_seconds:
                self._report("h2d_seconds", staged.copy_seconds)
            if staged.waited:
                self._report("h2d_staging_waits", 1)
            self._report("h2d_pack_seconds", staged.pack_seconds)
            block = slot.copies.copy(slot.buffer[:staged.total], slot.started, slot.finished)
            slot.pending = True
            self._report("h2d_copies", 1)
            self._report("h2d_bytes", sum(buffer.nbytes for buffer in staged.buffers))
            arrays = []
            for buffer, start in zip(staged.buffers, staged.starts):
                if buffer.nbytes == 0:
                    arrays.append(xp.empty(buffer.shape, dtype=buffer.dtype))
                else:
                    arrays.append(block[start:start + buffer.nbytes].view(buffer.dtype).reshape(buffer.shape))
            return arrays
        finally:
            self._give_back(slot)

    def close(self) -> None:
        """Wait for the copies still in flight, count their time and free the pinned buffers.

        Stagers still waiting for a slot stop with an error (the runs are not needed); close
        the copier before waiting for the threads that stage (a scan's prefetcher).
        """
        with self._lock:
            self._closed = True
            free, self._free = self._free, []
            self._lock.notify_all()
        for slot in free:
            self._report_seconds(slot.retire())

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
