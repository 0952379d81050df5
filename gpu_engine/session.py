"""Run plans from Python: register tables, execute, explain (the engine's front door)."""

from __future__ import annotations

import itertools
import threading
from types import MappingProxyType
from typing import Mapping

import pyarrow as pa

from gpu_engine.columnar.batch import Batch
from gpu_engine.connectors.registered_table import RegisteredTable, register_source
from gpu_engine.device import Device, get_device
from gpu_engine.errors import PlanError
from gpu_engine.exec.local_exchanges import add_local_exchanges
from gpu_engine.exec.query_ctx import EngineConfig, QueryCtx
from gpu_engine.exec.task import Task, TaskStats
from gpu_engine.host_allocator import tune_host_allocator
from gpu_engine.plans.nodes import PlanNode, TableScanNode, walk_plan

__all__ = ["Session", "conform_to_schema", "node_stats_text"]

_task_ids = itertools.count()


class Session:
    """Hold registered tables, a device, a driver count and config; run plans on them.

    Parameters
    ----------
    device
        ``"auto"`` (``cuda`` when a GPU and CuPy are present, else ``cpu``),
        ``"cpu"``, ``"cuda"`` or ``"cuda-sim"``.
    drivers
        Drivers per pipeline (threads working on one query).
    **config
        Overrides of :class:`~gpu_engine.exec.query_ctx.EngineConfig` fields,
        e.g. ``batch_rows=4096``.
    """

    def __init__(self, device: str | Device = "auto", drivers: int = 1, **config):
        self.device = get_device(device)
        tune_host_allocator()
        self.drivers = max(1, int(drivers))
        self.config = EngineConfig().with_overrides(**config)
        self._tables: dict[str, RegisteredTable] = {}
        self.last_task: Task | None = None
        self.last_plan: PlanNode | None = None

    # ---------------------------------------------------------------- tables
    def register(self, name: str, source, split_rows: int | None = None) -> None:
        """Register a Parquet file or directory, or a ``pyarrow.Table``, under ``name``."""
        self._tables[name] = register_source(name, source, split_rows)

    def table(self, name: str) -> RegisteredTable:
        """Return a registered table (its schema and splits), for coordinators that hand out splits."""
        try:
            return self._tables[name]
        except KeyError:
            raise PlanError(f"unknown table {name!r}; registered: {', '.join(sorted(self._tables)) or '(none)'}") from None

    @property
    def catalog(self) -> Mapping[str, pa.Schema]:
        """Return table name -> schema, what PlanBuilder needs to resolve columns."""
        return MappingProxyType({name: table.schema for name, table in self._tables.items()})

    # --------------------------------------------------------------- execute
    def execute(self, plan: PlanNode, timeout: float | None = None) -> pa.Table:
        """Run ``plan`` to completion and return its rows as a ``pyarrow.Table``."""
        batches: list[Batch] = []
        lock = threading.Lock()

        def collect(batch: Batch) -> None:
            record_batch = batch.to_arrow()
            with lock:
                batches.append(record_batch)

        self._run(plan, collect, timeout)
        schema = plan.output_schema
        record_batches = [conform_to_schema(b, schema) for b in batches]
        return pa.Table.from_batches(record_batches, schema=schema)

    def _run(self, plan: PlanNode, consumer, timeout: float | None) -> Task:
        executed = add_local_exchanges(plan, self.drivers)
        scans = [node for node in walk_plan(executed) if isinstance(node, TableScanNode)]
        for scan in scans:
            if scan.table_name not in self._tables:
                raise PlanError(f"unknown table {scan.table_name!r}", node=scan.label)
        query_ctx = QueryCtx.create(self.device, self.config, threads=max(2, self.drivers * 2))
        task = Task(f"query-{next(_task_ids)}", executed, query_ctx, self.drivers, consumer)
        self.last_task, self.last_plan = task, executed
        try:
            task.start()
            for scan in scans:  # splits arrive after start, as from a coordinator
                for split in self._tables[scan.table_name].splits():
                    task.add_split(scan.id, split)
                task.no_more_splits(scan.id)
            task.wait(timeout)
        except BaseException:
            task.cancel()
            raise
        finally:
            query_ctx.shutdown()
        return task

    # --------------------------------------------------------------- explain
    def explain(self, plan: PlanNode, analyze: bool = False) -> str:
        """Return the plan as executed, as text; with ``analyze``, run it and show each node's stats."""
        from gpu_engine.plans.explain import format_plan

        if not analyze:
            return format_plan(add_local_exchanges(plan, self.drivers))
        self.execute(plan)
        stats = self.last_task.task_stats()
        header = (f"Task {stats.task_id}: {stats.state}, {stats.wall_seconds * 1000:.1f} ms wall, "
                  f"device {self.device.name}, {self.drivers} driver(s), {stats.splits} split(s)")
        return header + "\n" + format_plan(self.last_plan, node_stats_text(stats))

    def last_stats(self) -> TaskStats | None:
        """Return the stats of the last executed Task."""
        return None if self.last_task is None else self.last_task.task_stats()


def conform_to_schema(record_batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Cast a result batch to the plan's output schema (string kinds, dictionaries differ by batch)."""
    if record_batch.schema.equals(schema):
        return record_batch
    arrays = [record_batch.column(i).cast(schema.field(i).type) for i in range(len(schema))]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def node_stats_text(stats: TaskStats) -> dict[str, str]:
    """Return explain-analyze text per plan node id from a Task's stats."""
    out: dict[str, str] = {}
    for node_id, operator_stats in stats.operator_stats_by_node().items():
        lines = []
        for s in operator_stats:
            line = (f"{s.operator_type} (pipeline {s.pipeline_id}, {s.drivers} driver(s)): "
                    f"input {s.input_rows} rows/{s.input_batches} batches, "
                    f"output {s.output_rows} rows/{s.output_batches} batches/{_megabytes(s.output_bytes)}, "
                    f"cpu {s.cpu_seconds * 1000:.1f} ms, blocked {s.blocked_seconds * 1000:.1f} ms ({s.blocked_count}x)")
            if s.runtime:
                line += ", " + ", ".join(f"{k}={_format_runtime(k, v)}" for k, v in sorted(s.runtime.items()))
            lines.append(line)
        out[node_id] = "\n".join(lines)
    return out


def _megabytes(nbytes: float) -> str:
    return f"{nbytes / 1e6:.2f} MB"


def _format_runtime(name: str, value: float) -> str:
    if name.endswith("seconds"):
        return f"{value * 1000:.1f} ms"
    if name.endswith("bytes"):
        return _megabytes(value)
    return f"{value:g}"
