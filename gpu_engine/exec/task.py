"""Run one plan fragment with its splits: Velox's ``exec::Task``.

A Task turns its plan into pipelines (:mod:`gpu_engine.exec.local_planner`),
makes the drivers, queues them on the query's executor and tracks them until
all are done. Splits may arrive before or after :meth:`Task.start`. The first
error of any driver fails the Task: it is kept with its operator and plan node,
every blocked driver is woken so it can see the failure and close, and
:meth:`Task.wait` raises it. Nothing is left running after ``wait`` returns.
"""

from __future__ import annotations

import enum
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from gpu_engine.codegen.background_compiles import hold_compiles_while
from gpu_engine.columnar.batch import Batch
from gpu_engine.errors import ExecutionError, TaskCancelled
from gpu_engine.exec.abandoned_partials import AbandonedPartials
from gpu_engine.exec.cancel_points import watch_compile_passes
from gpu_engine.exec.device_counters import CompileCounts, compiles_now, watch_compilations
from gpu_engine.exec.dynamic_filters import DynamicFilters
from gpu_engine.exec.idle_memory import task_ended, task_started
from gpu_engine.exec.memory_pool import is_device_out_of_memory, translate_device_out_of_memory
from gpu_engine.exec.operator import Operator, OperatorStats
from gpu_engine.exec.query_ctx import QueryCtx
from gpu_engine.exec.split import ConnectorSplit
from gpu_engine.plans.nodes import PlanNode

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.exec.driver import Driver
    from gpu_engine.exec.exchange_queue import ExchangeQueue
    from gpu_engine.exec.local_exchange_queue import LocalExchangeQueue

__all__ = ["Task", "TaskState", "TaskStats", "PipelineStats"]


class TaskState(enum.Enum):
    """Lifecycle of a Task."""

    CREATED = "created"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELED = "canceled"


@dataclass
class PipelineStats:
    """One pipeline's operators, each with stats summed over its drivers."""

    pipeline_id: int
    num_drivers: int
    operators: list[OperatorStats]


@dataclass
class TaskStats:
    """What a Task reports: its pipelines, wall time and split counts, and the kernels it compiled.

    ``kernels_compiled`` and ``compile_seconds`` are the query's totals: its operators' (summed over
    drivers) and those compiled while the Task created them.
    """

    task_id: str
    state: str
    wall_seconds: float
    splits: int
    pipelines: list[PipelineStats] = field(default_factory=list)
    kernels_compiled: int = 0
    compile_seconds: float = 0.0

    def operator_stats_by_node(self) -> dict[str, list[OperatorStats]]:
        """Return every operator's stats grouped by plan node id (explain-analyze uses it)."""
        by_node: dict[str, list[OperatorStats]] = {}
        for pipeline in self.pipelines:
            for stats in pipeline.operators:
                by_node.setdefault(stats.plan_node_id, []).append(stats)
        return by_node


class Task:
    """Execute a plan fragment on a device with its drivers.

    Parameters
    ----------
    task_id
        A name for logs and stats.
    plan
        The fragment's root node.
    query_ctx
        Device, config and executor.
    max_drivers
        Drivers per pipeline (fewer where a node needs a single stream).
    consumer
        Called with each output batch of the output pipeline, from driver
        threads; when None, batches are kept and returned by :meth:`results`.
    """

    def __init__(self, task_id: str, plan: PlanNode, query_ctx: QueryCtx, max_drivers: int = 1,
                 consumer: Callable[[Batch], None] | None = None):
        self.task_id = task_id
        self.plan = plan
        self.query_ctx = query_ctx
        self.pool = query_ctx.memory_pool.add_child(f"task {task_id}")
        self.max_drivers = max(1, int(max_drivers))
        self._consumer = consumer
        self._results: list[Batch] = []
        self._lock = threading.Lock()
        self._splits: dict[str, deque[ConnectorSplit]] = {}
        self._no_more_splits: set[str] = set()
        self._split_waiters: dict[str, list[Future]] = {}
        self._splits_added = 0
        self._given_splits: dict[str, list[ConnectorSplit]] = {}  # every split given to a node (see split_rows)
        self._split_rows: dict[str, Future] = {}  # each node's split_rows answer, once counted
        self.abandoned_partials = AbandonedPartials()  # what PARTIAL steps that gave up grouping saw
        self.local_exchange_queues: dict[str, "LocalExchangeQueue"] = {}
        self.exchange_queues: dict[str, "ExchangeQueue"] = {}
        self._listeners: list[Callable[["Task"], None]] = []
        self.bridges: dict[str, object] = {}
        self.dynamic_filters = DynamicFilters()  # join-key filters from build sides to probe scans
        self.drivers: list["Driver"] = []
        self.pipeline_drivers: dict[int, int] = {}
        self._running_drivers = 0
        self._done = threading.Event()
        self.state = TaskState.CREATED
        self.error: BaseException | None = None
        self._start_time = 0.0
        self._end_time = 0.0
        self._start_compiles = CompileCounts()
        self._held: "Driver | None" = None  # the driver the caller runs first (start(caller_runs=True))

    # ---------------------------------------------------------------- splits
    def add_split(self, plan_node_id: str, split: ConnectorSplit) -> None:
        """Give a source node one more split; may be called before or after start."""
        with self._lock:
            if plan_node_id in self._no_more_splits:
                raise ValueError(f"split for node {plan_node_id} after no_more_splits")
            self._splits.setdefault(plan_node_id, deque()).append(split)
            self._given_splits.setdefault(plan_node_id, []).append(split)
            self._splits_added += 1
            waiters = self._split_waiters.pop(plan_node_id, [])
        for waiter in waiters:
            waiter.set_result(None)

    def no_more_splits(self, plan_node_id: str) -> None:
        """Say no more splits will come for a node; its scans finish once theirs are read."""
        with self._lock:
            self._no_more_splits.add(plan_node_id)
            waiters = self._split_waiters.pop(plan_node_id, [])
        for waiter in waiters:
            waiter.set_result(None)

    def split_rows(self, plan_node_id: str) -> int | None:
        """Return the rows of all splits a node is given, once ``no_more_splits`` was said and each split knows
        its rows without being read (:meth:`ConnectorSplit.num_rows`); None otherwise. An estimate's input:
        an aggregation sizes its table by it (:mod:`gpu_engine.exec.abandoned_partials`)."""
        with self._lock:
            if plan_node_id not in self._no_more_splits:
                return None
            counted = self._split_rows.get(plan_node_id)
            first = counted is None
            if first:  # counted once, by the first asker; later ones wait on its Future
                counted = self._split_rows[plan_node_id] = Future()
                splits = tuple(self._given_splits.get(plan_node_id, ()))
        if not first:
            return counted.result()
        # Outside the lock: a Parquet split's count reads its file's footer, and add_split, get_split_or_future
        # and every driver's scan take this lock meanwhile.
        try:
            rows = [split.num_rows() for split in splits]
        except BaseException as error:
            with self._lock:
                del self._split_rows[plan_node_id]  # a later ask counts again
            counted.set_exception(error)
            raise
        counted.set_result(None if None in rows else sum(rows))
        return counted.result()

    def pending_splits(self, plan_node_id: str) -> int:
        """Return how many splits a node was given but has not taken yet (a feeder waits while there are many)."""
        with self._lock:
            return len(self._splits.get(plan_node_id, ()))

    def get_split_or_future(self, plan_node_id: str) -> tuple[ConnectorSplit | None, Future | None]:
        """Return ``(split, None)``, ``(None, future)`` to wait on, or ``(None, None)`` at the end."""
        with self._lock:
            queue = self._splits.get(plan_node_id)
            if queue:
                return queue.popleft(), None
            if plan_node_id in self._no_more_splits:
                return None, None
            future: Future = Future()
            self._split_waiters.setdefault(plan_node_id, []).append(future)
            return None, future

    # -------------------------------------------------------------- lifecycle
    def start(self, caller_runs: bool = False) -> "Task":
        """Plan pipelines, create every driver and queue them on the executor.

        With ``caller_runs`` one driver that can run at once (:func:`_driver_for_caller`) is held back for
        the calling thread, which runs its first slice in :meth:`run_held_driver` after giving the splits,
        instead of waking a pool thread for it and then sleeping in :meth:`wait`. Why: woken together by a
        caller that then sleeps, a pipeline's drivers are placed by Linux on the caller's CPU unless another
        is idle, and on a busy machine two scan drivers took turns on one CPU (TPC-H q15 at SF1: the same
        CPU time, twice the wall; ``bench/results/2026-11-28-tpchwall-q15-q12-placement.md``). A caller
        that keeps running wakes one thread fewer, and is itself already on a CPU (as DuckDB's calling
        thread and Velox's serial execution run the query's work).
        """
        from gpu_engine.exec.driver import Driver
        from gpu_engine.exec.local_planner import plan_pipelines

        if self.state is not TaskState.CREATED:
            raise RuntimeError(f"task {self.task_id} already started")
        self._start_time = time.perf_counter()
        watch_compilations()
        watch_compile_passes()
        before = compiles_now()
        factories = plan_pipelines(self.plan, self.max_drivers)
        for factory in factories:
            factory.prepare_task(self)
        try:
            for factory in factories:
                self.pipeline_drivers[factory.pipeline_id] = factory.num_drivers
                for driver_id in range(factory.num_drivers):
                    operators = factory.create_operators(self, driver_id)
                    self.drivers.append(Driver(self, factory.pipeline_id, driver_id, operators, factory.is_output))
        except BaseException:
            self.state = TaskState.FAILED
            self.pool.release_all()
            self._done.set()
            raise
        finally:
            self._start_compiles = compiles_now() - before
        self.state = TaskState.RUNNING
        self._running_drivers = len(self.drivers)
        if self.drivers:  # counted out by the last driver_finished (see gpu_engine.exec.idle_memory)
            task_started()
        hold_compiles_while(self)  # a young query's drivers run without the compile process (if pausing is on)
        held = _driver_for_caller(self.drivers) if caller_runs else None
        if held is not None:
            held.hold()
            self._held = held
        for driver in list(self.drivers):
            if driver is not held:
                driver.enqueue()
        return self

    def run_held_driver(self, on_this_thread: bool = True) -> None:
        """Run the driver held by ``start(caller_runs=True)`` on this thread until it blocks, yields or ends
        (or, ``on_this_thread`` False, hand it to the executor like the others).

        Later slices go to the executor as any driver's do. Does nothing when no driver is held (or a
        failure or cancel already handed it to the executor).
        """
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            if on_this_thread:
                held.run()
            else:
                held.release()

    def add_listener(self, listener: Callable[["Task"], None]) -> None:
        """Call ``listener(task)`` when the Task fails, is cancelled or finishes (a coordinator's hook).

        It runs on the thread that changed the state, outside the Task's lock;
        a failure is reported at once, before the drivers have stopped.
        """
        with self._lock:
            self._listeners.append(listener)

    def _notify(self) -> None:
        for listener in list(self._listeners):
            listener(self)

    @property
    def is_terminating(self) -> bool:
        """Return True once the Task failed or was cancelled; drivers stop at their next step."""
        return self.state in (TaskState.FAILED, TaskState.CANCELED)

    def deliver_result(self, batch: Batch):
        """Hand one output batch to the consumer (or keep it); return what the consumer returns.

        A consumer that copies the batch to the host may return a
        :class:`~gpu_engine.columnar.transfers.Transfer`, which the driver
        counts in its last operator's stats.
        """
        if self._consumer is not None:
            return self._consumer(batch)
        with self._lock:
            self._results.append(batch)
        return None

    def set_error(self, error: BaseException, operator: Operator | None = None) -> None:
        """Fail the Task with its first error, then wake every driver so all of them stop."""
        with self._lock:
            if self.state in (TaskState.FAILED, TaskState.CANCELED, TaskState.FINISHED):
                return
            self.state = TaskState.FAILED
            self.error = _with_operator(error, operator)
        self._terminate()
        self._notify()

    def cancel(self) -> None:
        """Stop the Task: blocked drivers are woken and every driver closes at its next step."""
        with self._lock:
            if self.state in (TaskState.FAILED, TaskState.CANCELED, TaskState.FINISHED):
                return
            self.state = TaskState.CANCELED
            self.error = TaskCancelled(f"task {self.task_id} was cancelled")
        self._terminate()
        self._notify()

    def _terminate(self) -> None:
        with self._lock:
            waiters = [w for ws in self._split_waiters.values() for w in ws]
            self._split_waiters.clear()
            held, self._held = self._held, None
        if held is not None:  # its caller will not run it now (it raised before run_held_driver): close it
            held.release()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        for queue in self.local_exchange_queues.values():
            queue.abort()
        for queue in self.exchange_queues.values():
            queue.abort()
        for driver in list(self.drivers):
            driver.wake()
        if self._running_drivers == 0:
            self._done.set()

    def driver_finished(self, driver: "Driver") -> None:
        """Count a driver out; the Task is finished when all drivers are."""
        with self._lock:
            self._running_drivers -= 1
            remaining = self._running_drivers
            if remaining == 0:
                self._end_time = time.perf_counter()
                if self.state is TaskState.RUNNING:
                    self.state = TaskState.FINISHED
        if remaining == 0:
            self.pool.release_all()  # what operators and shared structures (build tables, queues) held
            task_ended()  # the last Task running gives back the memory kept for reuse, before wait() returns
            self._done.set()
            self._notify()

    def wait(self, timeout: float | None = None) -> "Task":
        """Block until every driver is done; raise the Task's error if it failed."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"task {self.task_id} did not finish within {timeout} s")
        if self.error is not None:
            raise self.error
        return self

    @property
    def is_done(self) -> bool:
        """Return True once every driver has ended (finished, failed or cancelled)."""
        return self._done.is_set()

    def wait_done(self, timeout: float | None = None) -> bool:
        """Block until every driver has ended; return False on timeout. Never raises the Task's error."""
        return self._done.wait(timeout)

    def wait_quietly(self, timeout: float = 60.0) -> None:
        """Wait for a cancelled or failed Task's drivers to end, without raising its error."""
        self._done.wait(timeout)

    def results(self) -> list[Batch]:
        """Return the output batches kept when no consumer was given."""
        return list(self._results)

    # ------------------------------------------------------------------ stats
    def task_stats(self) -> TaskStats:
        """Return stats with each operator's counters summed over its drivers."""
        merged: dict[tuple[int, int], OperatorStats] = {}
        for driver in self.drivers:
            for operator in driver.operators:
                key = (driver.pipeline_id, operator.stats.operator_id)
                if key in merged:
                    merged[key] = merged[key].merge(operator.stats)
                else:
                    merged[key] = operator.stats.merge(OperatorStats(operator.operator_type, operator.node.id,
                                                                      operator.stats.operator_id, driver.pipeline_id, drivers=0))
        pipelines = []
        for pipeline_id, num_drivers in sorted(self.pipeline_drivers.items()):
            ops = [s for (p, _), s in sorted(merged.items()) if p == pipeline_id]
            pipelines.append(PipelineStats(pipeline_id, num_drivers, ops))
        end = self._end_time or time.perf_counter()
        operators = [stats for pipeline in pipelines for stats in pipeline.operators]
        return TaskStats(self.task_id, self.state.value, end - self._start_time if self._start_time else 0.0,
                         self._splits_added, pipelines,
                         self._start_compiles.kernels_compiled + sum(s.kernels_compiled for s in operators),
                         self._start_compiles.compile_seconds + sum(s.compile_seconds for s in operators))


def _driver_for_caller(drivers: list["Driver"]) -> "Driver | None":
    """Return the driver the Task's caller should run first: the first one reading a table that waits on no
    other pipeline (no join probe), so the caller's slice does work at once; None when there is none."""
    from gpu_engine.operators.hash_probe import HashProbe
    from gpu_engine.operators.nested_loop_join_probe import NestedLoopJoinProbe
    from gpu_engine.operators.table_scan import TableScan

    for driver in drivers:
        operators = driver.operators
        if (operators and isinstance(operators[0], TableScan)
                and not any(isinstance(op, (HashProbe, NestedLoopJoinProbe)) for op in operators)):
            return driver
    return None


def _with_operator(error: BaseException, operator: Operator | None) -> BaseException:
    """Wrap an error so it names the operator and plan node it came from (device out-of-memory as MemoryCapExceeded)."""
    if operator is None or (isinstance(error, ExecutionError) and error.operator is not None):
        return error
    if is_device_out_of_memory(error):
        return translate_device_out_of_memory(error, operator.operator_type, operator.node.id, operator.ctx.task.pool)
    wrapped = ExecutionError(f"{type(error).__name__}: {error}", operator=operator.operator_type,
                             plan_node_id=operator.node.id)
    wrapped.__cause__ = error
    return wrapped
