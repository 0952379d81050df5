"""Run one Spark partition through one engine Task, on the executor (the body of a ``mapInArrow``).

Why this shape: a Spark partition arrives as an iterator of Arrow record
batches that the JVM writes while Python reads, so each batch becomes a split
of the running Task the moment it arrives (``add_split``), never collected
first; ``no_more_splits`` follows the last one. The Task's output batches are
yielded back while input is still being fed, so neither side waits for the
other to finish. The feeder holds back once the Task has
``max_pending_splits`` unread splits, which bounds the memory a fast JVM
writer can pin in the Python worker.

A partition without rows yields nothing and starts no Task, unless the
fragment makes rows from no input (``runs_when_empty``). The Task's first
error is raised as an :class:`~gpu_engine.errors.ExecutionError` whose text
starts with :data:`ERROR_MARKER`, so the driver can find it inside Spark's
``PythonException`` and raise it again as itself. When Spark stops reading
early (a ``limit`` downstream), the generator is closed and the Task is
cancelled; no driver thread outlives the partition.

Where the Task's scan packs its batches for a device (``cuda``: see
``EngineConfig.packs_scan_batches``), Spark's small record batches
(``spark.sql.execution.arrow.maxRecordsPerBatch``, 10,000 rows by default)
are first gathered into splits of the scan's ``batch_rows`` (millions of rows
on a GPU): each split is then one device batch, staged in pinned memory on a
prefetch thread and copied in one asynchronous copy while the driver computes
on the batch before (:mod:`gpu_engine.columnar.transfers`). The feeder then
holds back once one such split waits unread, so a partition pins at most a few
device batches of rows in the worker. On ``cpu`` each Spark batch is a split,
as it comes.
"""

from __future__ import annotations

import itertools
import json
import queue
from typing import Callable, Iterator

import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.errors import ExecutionError
from gpu_engine.exec.query_ctx import EngineConfig, QueryCtx
from gpu_engine.exec.split import ArrowSplit
from gpu_engine.exec.split_serialization import split_from_json
from gpu_engine.exec.task import Task, TaskStats
from gpu_engine.plans.nodes import PartitionedOutputNode
from gpu_engine.plans.serialization import plan_from_json
from gpu_engine.spark.executor_device import TaskDeviceLog, choose_executor_device
from gpu_engine.spark.map_in_arrow import BUILD_SIDE, PROBE_SIDE, FragmentFunction, emits_partition_ids, side_column
from gpu_engine.spark.partition_ids import PARTITION_ID_COLUMN, partition_ids
from gpu_engine.spark.spark_types import conform_to_wire, wire_schema_for

__all__ = ["run_partition", "ERROR_MARKER"]

#: Starts the message of every error a fragment raises on an executor.
ERROR_MARKER = "[gpu_engine]"

_WAKE = object()
_POLL_SECONDS = 0.05


def run_partition(function: FragmentFunction, batches: Iterator[pa.RecordBatch],
                  on_stats: Callable[[TaskStats], None] | None = None) -> Iterator[pa.RecordBatch]:
    """Yield the fragment's output for one partition's ``batches``, cast to the declared Spark schema.

    ``on_stats`` gets the Task's stats once it ended (benchmarks and tests read its copies from them).
    """
    batches = iter(batches)
    first = next((b for b in batches if b.num_rows > 0), None)
    if first is None and not function.runs_when_empty:
        return
    yield from _run_task(function, batches if first is None else itertools.chain([first], batches), on_stats)


def _broadcast_table(payload) -> pa.Table:
    data = payload if isinstance(payload, (bytes, bytearray)) else payload.value  # a Spark Broadcast
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _spark_task_label() -> str:
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover
        return "local"
    context = TaskContext.get()
    if context is None:
        return "local"
    return f"stage {context.stageId()} partition {context.partitionId()} attempt {context.attemptNumber()}"


class _DeviceBatches:
    """Gather a partition's record batches (or unpacked tables) into tables of ``rows`` rows (the last: what is left).

    ``rows`` 0 hands each one on as it comes. Gathering is zero-copy (a table
    keeps the batches as chunks, a batch that straddles two tables is sliced);
    the scan packs each table into one device batch.
    """

    def __init__(self, rows: int, where: str):
        self.rows = rows
        self.where = where
        self._held: list[pa.Table] = []
        self._count = 0

    def add(self, part: pa.RecordBatch | pa.Table) -> list[pa.Table]:
        """Return the tables ready to feed after ``part``."""
        table = pa.Table.from_batches([part]) if isinstance(part, pa.RecordBatch) else part
        if self.rows <= 0:
            return [table]
        if table.num_rows == 0:
            return []
        if self._held and table.schema != self._held[0].schema:
            raise ExecutionError(f"{ERROR_MARKER} a partition's record batches must share one schema; in {self.where} "
                                 f"a batch has {table.schema} after batches of {self._held[0].schema}")
        self._held.append(table)
        self._count += table.num_rows
        if self._count < self.rows:
            return []
        held = self._joined()
        ready = [held.slice(start, self.rows) for start in range(0, held.num_rows - self.rows + 1, self.rows)]
        rest = held.slice(len(ready) * self.rows)
        self._held, self._count = ([rest] if rest.num_rows else []), rest.num_rows
        return ready

    def flush(self) -> list[pa.Table]:
        """Return what is held, as one table (none when nothing is)."""
        if not self._held:
            return []
        table = self._joined()
        self._held, self._count = [], 0
        return [table]

    def _joined(self) -> pa.Table:
        return self._held[0] if len(self._held) == 1 else pa.concat_tables(self._held)


def _run_task(function: FragmentFunction, batches: Iterator[pa.RecordBatch],
              on_stats: Callable[[TaskStats], None] | None = None) -> Iterator[pa.RecordBatch]:
    root = plan_from_json(function.plan_json)
    output = root if isinstance(root, PartitionedOutputNode) else None
    plan = root.source if output is not None else root
    keys = tuple(output.keys) if emits_partition_ids(root) else ()
    wire_schema = wire_schema_for(function.spark_schema, function.time_zone, function.large_var_types)
    chosen = choose_executor_device(function.device)
    device = chosen.device
    if function.device_log is not None:
        TaskDeviceLog.add(function.device_log, chosen)
    config = EngineConfig().with_overrides(**json.loads(function.config_json))
    query_ctx = QueryCtx(device=device, config=config, executor=chosen.executor(max(2, 2 * function.drivers)),
                         owns_executor=True)
    ready: queue.SimpleQueue = queue.SimpleQueue()
    where = _spark_task_label()

    replicated_any = [not function.replicate_keys]

    def deliver(batch: Batch) -> None:
        record_batch = batch.to_arrow()
        if keys:
            ids = device.to_host(partition_ids(device, batch, keys, output.num_partitions))
            record_batch = record_batch.append_column(pa.field(PARTITION_ID_COLUMN, pa.int32()),
                                                      pa.array(ids, pa.int32()))
            if function.replicate_keys and record_batch.num_rows:
                record_batch = _replicate_nulls_and_any(record_batch, function.replicate_keys, output.num_partitions,
                                                        not replicated_any[0])
                replicated_any[0] = True
            if function.packed_output:
                if record_batch.num_rows:
                    ready.put(_pack_by_destination(record_batch, plan.output_schema, wire_schema,
                                                   function.shuffle_compression))
                return
        ready.put(conform_to_wire(record_batch, wire_schema))

    task = Task(f"spark {function.name} ({where})", plan, query_ctx, function.drivers, deliver)
    task.add_listener(lambda _: ready.put(_WAKE))
    # Small Spark batches become device-sized splits where the scan packs for a device; one of them waiting is enough.
    device_rows = config.scan_batch_rows(device) if config.packs_scan_batches(device) else 0
    gathered = _DeviceBatches(device_rows, where)
    gathered_build = _DeviceBatches(device_rows, where)  # a shuffled join's build rows, gathered the same way
    pending_limit = function.max_pending_splits if gathered.rows <= 0 else 1
    try:
        task.start()
        for node_id, payload in function.broadcast_inputs:
            task.add_split(node_id, ArrowSplit(_broadcast_table(payload)))
            task.no_more_splits(node_id)
        input_id, build_id = function.input_node_id, function.build_input_node_id
        sides = _JoinSides(function) if build_id is not None else None
        for record_batch in batches:
            if input_id is None:
                continue  # the partition only triggers a fragment that reads broadcasts or Values
            if task.is_done:
                break  # failed, or finished early (a Limit): the rest of the partition is not needed
            if function.input_splits:  # numbers of splits the engine reads itself
                splits = [split_from_json(function.input_splits[number])
                          for number in record_batch.column(0).to_pylist()]
            elif sides is not None:  # a shuffled join's partition: build rows, then probe rows
                build, probe = sides.unpack(record_batch) if function.packed_input else sides.split(record_batch)
                for table in gathered_build.add(build) if build is not None else []:
                    task.add_split(build_id, ArrowSplit(table))
                if probe is not None and not sides.build_done:
                    for table in gathered_build.flush():
                        task.add_split(build_id, ArrowSplit(table))
                    task.no_more_splits(build_id)  # sorted by side: no build row comes after a probe row
                    sides.build_done = True
                splits = [ArrowSplit(table) for table in gathered.add(probe)] if probe is not None else []
            elif function.packed_input:
                splits = [ArrowSplit(t) for table in _unpack(record_batch.column(0)) for t in gathered.add(table)]
            else:
                splits = [ArrowSplit(table) for table in gathered.add(record_batch)]
            for split in splits:
                task.add_split(input_id, split)
            yield from _drain(ready, None)
            while (not function.input_splits and task.pending_splits(input_id) > pending_limit
                   and not task.is_done):  # hold back rows in memory; split numbers cost nothing to queue
                yield from _drain(ready, _POLL_SECONDS)
        if sides is not None and not sides.build_done:
            if not task.is_done:
                for table in gathered_build.flush():
                    task.add_split(build_id, ArrowSplit(table))
            task.no_more_splits(build_id)
        if input_id is not None:
            if not task.is_done:
                for table in gathered.flush():
                    task.add_split(input_id, ArrowSplit(table))
            task.no_more_splits(input_id)
        while not task.is_done:
            yield from _drain(ready, _POLL_SECONDS)
        yield from _drain(ready, None)
        if task.error is not None:
            raise ExecutionError(f"{ERROR_MARKER} Spark fragment {function.name} failed in {where} on device "
                                 f"{device.name}: {task.error}") from task.error
    finally:
        if not task.is_done:
            task.cancel()
            task.wait_quietly()
        query_ctx.shutdown()
        if on_stats is not None:
            on_stats(task.task_stats())


def _pack_by_destination(record_batch: pa.RecordBatch, schema: pa.Schema, wire_schema: pa.Schema,
                         compression: str | None = None) -> pa.RecordBatch:
    """Return one row per destination of ``record_batch``: its partition id and its rows as Arrow IPC bytes.

    The partition id column is the batch's last; the rows keep the engine's
    own types (``schema``, dictionaries decoded), since only the engine reads
    them. ``compression`` (``lz4``, ``zstd``) compresses the IPC buffers: the
    JVM then copies, sorts and writes a third of the bytes (decimals and
    dates are mostly zero bytes), for a few milliseconds per batch here.
    """
    import numpy as np

    ids = np.asarray(record_batch.column(record_batch.num_columns - 1))
    rows = conform_to_wire(record_batch.drop_columns([record_batch.schema.names[-1]]), schema)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    ends = np.r_[starts[1:], len(order)]
    taken = rows.take(pa.array(order)) if len(starts) > 1 else rows
    payloads = []
    options = pa.ipc.IpcWriteOptions(compression=compression)
    for start, end in zip(starts, ends):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema, options=options) as writer:
            writer.write_batch(taken.slice(start, end - start))
        payloads.append(sink.getvalue().to_pybytes())
    return pa.RecordBatch.from_arrays(
        [pa.array(sorted_ids[starts], wire_schema.field(0).type), pa.array(payloads, wire_schema.field(1).type)],
        schema=wire_schema)


def _unpack(payloads: pa.Array) -> list[pa.Table]:
    """Return the tables packed into a column of Arrow IPC streams."""
    return [pa.ipc.open_stream(pa.py_buffer(payload.as_buffer())).read_all() for payload in payloads]


class _JoinSides:
    """Split a shuffled join's partition batches (side tag, ``__p<i>``, ``__b<i>`` columns) into the two inputs."""

    def __init__(self, function: FragmentFunction):
        self.probe_names = function.probe_columns
        self.build_names = function.build_columns
        self.build_done = False

    def unpack(self, record_batch: pa.RecordBatch) -> tuple[pa.Table | None, pa.Table | None]:
        """Return the build and probe rows of packed rows (side tag, IPC bytes), each concatenated (None where none)."""
        tags = record_batch.column(0).to_pylist()
        tables = _unpack(record_batch.column(1))
        build = [table for tag, table in zip(tags, tables) if tag == BUILD_SIDE and table.num_rows]
        probe = [table for tag, table in zip(tags, tables) if tag == PROBE_SIDE and table.num_rows]
        return (pa.concat_tables(build) if build else None), (pa.concat_tables(probe) if probe else None)

    def split(self, record_batch: pa.RecordBatch) -> tuple[pa.Table | None, pa.Table | None]:
        """Return the batch's build rows and probe rows as tables named like the leaves (None where none)."""
        import pyarrow.compute as pc

        tags = record_batch.column(0)
        parts = []
        for tag, own, names in ((BUILD_SIDE, "b", self.build_names), (PROBE_SIDE, "p", self.probe_names)):
            rows = record_batch.filter(pc.equal(tags, pa.scalar(tag, tags.type)))
            if rows.num_rows == 0:
                parts.append(None)
                continue
            columns = [rows.column(side_column(own, i)) for i in range(len(names))]
            parts.append(pa.Table.from_arrays(columns, names=names))
        return parts[0], parts[1]


def _replicate_nulls_and_any(record_batch: pa.RecordBatch, keys: tuple[str, ...], num_partitions: int,
                             first: bool) -> pa.RecordBatch:
    """Return ``record_batch`` with its NULL-key rows (and its first row when ``first``) copied to every partition.

    Why: a null-aware anti join (``NOT IN``) returns nothing when the build
    side has a NULL key anywhere, and probe rows with a NULL key only when the
    build side is empty; shuffled, each partition must see every NULL-key
    build row and at least one build row if there are any. The partition id
    column is the batch's last.
    """
    import numpy as np
    import pyarrow.compute as pc

    null = np.zeros(record_batch.num_rows, dtype=bool)
    for key in keys:
        null |= np.asarray(pc.is_null(record_batch.column(key)).to_numpy(zero_copy_only=False), dtype=bool)
    if first:
        null[0] = True
    copied = np.flatnonzero(null)
    if len(copied) == 0:
        return record_batch
    kept = np.flatnonzero(~null)
    rows = np.concatenate([kept, np.repeat(copied, num_partitions)])
    ids = np.concatenate([np.asarray(record_batch.column(record_batch.num_columns - 1)).take(kept),
                          np.tile(np.arange(num_partitions, dtype=np.int32), len(copied))]).astype(np.int32)
    taken = record_batch.take(pa.array(rows))
    field = record_batch.schema.field(record_batch.num_columns - 1)
    return taken.set_column(record_batch.num_columns - 1, field, pa.array(ids, field.type))


def _drain(ready: queue.SimpleQueue, timeout: float | None) -> Iterator[pa.RecordBatch]:
    """Yield every ready batch; with a timeout, first wait that long for one to arrive."""
    if timeout is not None:
        try:
            item = ready.get(timeout=timeout)
        except queue.Empty:
            return
        if item is not _WAKE:
            yield item
    while True:
        try:
            item = ready.get_nowait()
        except queue.Empty:
            return
        if item is not _WAKE:
            yield item
