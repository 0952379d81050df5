"""Define Velox's operator contract, its blocking reasons and the stats the driver collects.

An operator never calls another operator. The :class:`~gpu_engine.exec.driver.Driver`
moves batches between neighbours and decides which one to advance, so a driver
can leave its thread whenever an operator is blocked (see the end-of-data
protocol in :mod:`gpu_engine.exec.driver`). Operators only hold state; their
plan nodes stay immutable.
"""

from __future__ import annotations

import enum
from concurrent.futures import Future
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from gpu_engine.columnar.batch import Batch, BatchSlices
from gpu_engine.columnar.concat import concat_batches

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.exec.memory_pool import MemoryPool
    from gpu_engine.exec.task import Task
    from gpu_engine.plans.nodes import PlanNode

__all__ = ["BlockingReason", "OperatorStats", "OperatorCtx", "Operator", "BarrierOperator", "NOT_BLOCKED", "ready_future"]


class BlockingReason(enum.Enum):
    """Why a driver cannot advance an operator (Velox's ``BlockingReason``)."""

    NOT_BLOCKED = "not blocked"
    WAIT_FOR_SPLIT = "wait for split"
    WAIT_FOR_PRODUCER = "wait for producer"
    WAIT_FOR_CONSUMER = "wait for consumer"
    WAIT_FOR_JOIN_BUILD = "wait for join build"
    WAIT_FOR_MEMORY = "wait for memory"


NOT_BLOCKED: tuple[BlockingReason, None] = (BlockingReason.NOT_BLOCKED, None)


def ready_future(value: Any = None) -> Future:
    """Return an already-completed future (for APIs that always hand one back)."""
    future: Future = Future()
    future.set_result(value)
    return future


@dataclass
class OperatorStats:
    """Counters of one operator in one driver; the driver loop fills them, not the operator.

    Times are wall seconds spent inside each contract call. ``runtime`` holds
    operator-specific counters (flushes, host-to-device bytes, …) that an operator
    adds with :meth:`Operator.add_runtime_stat`. ``peak_memory_bytes`` is the
    most state the operator held at once (its memory pool's high-water mark,
    :meth:`Operator.set_memory_reservation`); merged over drivers it is the
    largest driver's, not a sum. ``kernel_launches``, ``host_syncs`` and
    ``device_allocations`` are what the operator's calls added to its thread's
    :mod:`~gpu_engine.exec.device_counters`: the host work per batch that a
    GPU pays for, counted on every device; ``kernels_compiled`` and
    ``compile_seconds`` the kernels numba compiled during its calls.
    """

    operator_type: str
    plan_node_id: str
    operator_id: int
    pipeline_id: int
    input_rows: int = 0
    input_batches: int = 0
    input_bytes: int = 0
    output_rows: int = 0
    output_batches: int = 0
    output_bytes: int = 0
    add_input_seconds: float = 0.0
    get_output_seconds: float = 0.0
    no_more_input_seconds: float = 0.0
    is_blocked_seconds: float = 0.0
    #: The driver thread's CPU time (user + sys) inside the operator's calls: below the calls' wall time when the
    #: thread waited (a lock, the GIL, a device sync) or the machine was loaded.
    cpu_seconds: float = 0.0
    blocked_seconds: float = 0.0
    blocked_count: int = 0
    kernel_launches: int = 0
    host_syncs: int = 0
    device_allocations: int = 0
    kernels_compiled: int = 0
    compile_seconds: float = 0.0
    drivers: int = 1
    peak_memory_bytes: int = 0
    runtime: dict[str, float] = field(default_factory=dict)

    @property
    def wall_seconds(self) -> float:
        """Return the wall time spent inside the operator's calls (``cpu_seconds`` is the thread's CPU time)."""
        return self.add_input_seconds + self.get_output_seconds + self.no_more_input_seconds + self.is_blocked_seconds

    def merge(self, other: "OperatorStats") -> "OperatorStats":
        """Return the sum of two drivers' stats for the same operator."""
        merged = OperatorStats(self.operator_type, self.plan_node_id, self.operator_id, self.pipeline_id)
        for f in fields(self):
            if f.name in ("operator_type", "plan_node_id", "operator_id", "pipeline_id", "runtime", "peak_memory_bytes"):
                continue
            setattr(merged, f.name, getattr(self, f.name) + getattr(other, f.name))
        merged.peak_memory_bytes = max(self.peak_memory_bytes, other.peak_memory_bytes)
        merged.runtime = dict(self.runtime)
        for key, value in other.runtime.items():
            merged.runtime[key] = merged.runtime.get(key, 0) + value
        return merged


@dataclass
class OperatorCtx:
    """What an operator may reach: its Task, its driver's place, the device and the configs."""

    task: "Task"
    pipeline_id: int
    driver_id: int
    operator_id: int
    num_drivers: int
    #: True for the operators a fused operator runs its lowest tier with: they see ``fuse=False``, so they
    #: never generate a kernel themselves (:mod:`gpu_engine.codegen.background_compiles`).
    lowest_tier: bool = False

    @property
    def device(self):
        """Return the device the Task runs on."""
        return self.task.query_ctx.device

    @property
    def config(self):
        """Return the query's configuration (with ``fuse=False`` for a lowest-tier operator)."""
        config = self.task.query_ctx.config
        return replace(config, fuse=False) if self.lowest_tier else config


class Operator:
    """Base of every operator: Velox's contract in snake_case.

    Subclasses override what they need. The defaults describe a pass-through
    operator holding at most one input batch: it wants input while it holds
    none and it is finished once told there is no more input and its held
    batch has been taken.
    """

    def __init__(self, ctx: OperatorCtx, node: "PlanNode", operator_type: str | None = None):
        self.ctx = ctx
        self.node = node
        self.operator_type = operator_type or type(self).__name__
        self.stats = OperatorStats(self.operator_type, node.id, ctx.operator_id, ctx.pipeline_id)
        self.input: Batch | None = None
        self.no_more_input_received = False
        self._blocking: tuple[BlockingReason, Future] | None = None
        self._memory_pool: "MemoryPool | None" = None

    # ------------------------------------------------------------ contract
    def needs_input(self) -> bool:
        """Return True when the driver may call :meth:`add_input` now."""
        return not self.no_more_input_received and self.input is None

    def add_input(self, batch: Batch) -> None:
        """Accept one batch; called only when :meth:`needs_input` is True."""
        self.input = batch

    def no_more_input(self) -> None:
        """Learn that the upstream operator is finished; flush pending state from here on."""
        self.no_more_input_received = True

    def get_output(self) -> Batch | None:
        """Return a batch of output, or None when there is none right now."""
        raise NotImplementedError

    def is_blocked(self) -> tuple[BlockingReason, Future | None]:
        """Return why the driver must wait, and a future completed when it may go on.

        The default reports what :meth:`block_on` recorded, until its future completes.
        """
        if self._blocking is not None:
            reason, future = self._blocking
            if not future.done():
                return reason, future
            self._blocking = None
        return NOT_BLOCKED

    def block_on(self, reason: BlockingReason, future: Future | None) -> None:
        """Make :meth:`is_blocked` report ``reason`` until ``future`` completes (None: not blocked)."""
        self._blocking = None if future is None else (reason, future)

    @property
    def is_waiting(self) -> bool:
        """Return True while a future given to :meth:`block_on` is still pending."""
        return self._blocking is not None and not self._blocking[1].done()

    def is_finished(self) -> bool:
        """Return True when the operator will produce no more output."""
        return self.no_more_input_received and self.input is None

    def close(self) -> None:
        """Release resources; called once, when the driver ends (normally or not)."""
        self.input = None
        if self._memory_pool is not None:
            self._memory_pool.release()

    # --------------------------------------------------------------- helpers
    @property
    def device(self):
        """Return the device the operator's batches live on."""
        return self.ctx.device

    @property
    def memory_pool(self) -> "MemoryPool":
        """Return this operator's leaf pool under its Task's pool, created on first use."""
        if self._memory_pool is None:
            ctx = self.ctx
            self._memory_pool = ctx.task.pool.add_child(
                f"{self.operator_type}[{self.node.id}]", operator=self.operator_type, plan_node_id=self.node.id,
                where=f"pipeline {ctx.pipeline_id}, driver {ctx.driver_id}")
        return self._memory_pool

    def set_memory_reservation(self, nbytes: int) -> None:
        """Declare that the operator's state now takes ``nbytes`` (a total, not a delta).

        Growth is reserved against the query's cap and raises
        :class:`~gpu_engine.errors.MemoryCapExceeded` naming this operator;
        shrinking releases. :meth:`close` releases what is left.
        """
        pool = self.memory_pool
        pool.set_reservation(nbytes)
        self.stats.peak_memory_bytes = max(self.stats.peak_memory_bytes, pool.peak_bytes)

    def add_runtime_stat(self, name: str, value: float) -> None:
        """Add ``value`` to an operator-specific counter shown by explain-analyze."""
        self.stats.runtime[name] = self.stats.runtime.get(name, 0) + value


class BarrierOperator(Operator):
    """Hold every input batch until the input ends, compute one result from all of it, hand it out in slices.

    Why: a sort or a window needs all its rows at once (a pipeline barrier). The held batches are reserved in
    the operator's memory pool as they come, then twice over while they are concatenated; a subclass's
    :meth:`result` turns the concatenated input into the output (reserving what it keeps) and the output goes
    out in scan-sized slices (:class:`~gpu_engine.columnar.batch.BatchSlices`). No input, no output.
    """

    def __init__(self, ctx: OperatorCtx, node: "PlanNode"):
        super().__init__(ctx, node)
        self._batches: list[Batch] = []
        self._buffered_bytes = 0
        self._output: BatchSlices | None = None
        self._batch_rows = ctx.config.scan_batch_rows(ctx.device)

    def result(self, data: Batch) -> Batch:
        """Return the output computed from ``data``, every input batch concatenated."""
        raise NotImplementedError

    def needs_input(self) -> bool:
        return not self.no_more_input_received

    def add_input(self, batch: Batch) -> None:
        self._batches.append(batch)
        self._buffered_bytes += batch.nbytes
        self.set_memory_reservation(self._buffered_bytes)

    def no_more_input(self) -> None:
        super().no_more_input()
        if not self._batches:
            return
        self.set_memory_reservation(2 * self._buffered_bytes)  # the batches and their concatenated copy
        data = concat_batches(self._batches)
        self._batches = []
        self._output = BatchSlices(self.result(data), self._batch_rows)

    def get_output(self) -> Batch | None:
        return None if self._output is None else self._output.next()

    def is_finished(self) -> bool:
        return self.no_more_input_received and (self._output is None or self._output.exhausted)

    def close(self) -> None:
        self._batches, self._output = [], None
        super().close()
