"""Run one pipeline's operators on a thread, Velox's ``Driver::runInternal``.

The driver loop
---------------
A driver owns a linear list of operators (source first, sink last). Each step
it first asks every operator ``is_blocked()``; if one is blocked, the driver
leaves its thread: it registers a callback on the operator's future that puts
the driver back on the executor, and returns. Otherwise it walks the operators
**from last to first**, looking for the last operator that can produce: for
operator ``i`` whose successor ``needs_input()``, it calls ``get_output()`` and,
if a batch comes, ``add_input()`` on the successor and starts the walk again
from the end. So one batch at a time travels as far as it can before the
source is asked for more, and the driver's stack stays flat: no operator calls
another, and a driver can go on or off a thread between any two calls. The
output of the last operator (in the Task's output pipeline) goes to the Task's
result consumer. After a time slice a driver yields its thread and re-queues.
On a GPU each driver issues its work on its own CUDA stream, made current on
whatever thread runs it (:mod:`gpu_engine.exec.driver_stream`), and waits for
that stream before handing a batch to another driver or to the consumer.

The end-of-data protocol (the one place it is written down)
------------------------------------------------------------
1. A source operator is finished when its input is exhausted: a TableScan when
   the Task said ``no_more_splits`` for its node and its last split is read; a
   Values when its rows are out; a LocalExchange when every producer driver of
   its queue has called ``no_more_data`` and the queue is empty; an Exchange
   when the Task said ``no_more_splits`` for its node, every producer Task
   named by its remote splits sent its end marker and its queue is empty.
2. When operator ``i`` ``is_finished()``, the driver calls ``no_more_input()``
   on operator ``i + 1`` exactly once. That lets barriers (aggregation, order
   by, top-n) start producing, and lets sinks flush.
3. A sink is finished after ``no_more_input`` once it has handed everything
   on: LocalPartition then calls ``no_more_data`` on its LocalExchange queue,
   which counts producers and marks every destination at end once all have;
   PartitionedOutput flushes every destination into pages, hands the last of
   them to the OutputBufferManager (waiting on ``WAIT_FOR_CONSUMER`` while the
   buffer is over its cap), then calls ``no_more_data`` on it, which sends an
   end marker to every destination once all the Task's drivers have.
4. A driver is done when its last operator ``is_finished()``; it closes its
   operators and tells the Task, which is finished when all its drivers are.
5. On a failure or cancel the Task wakes every blocked driver; each sees the
   Task terminating at the top of its loop, closes its operators and ends.
   End-of-data is never signalled by an empty batch: empty batches are dropped.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from gpu_engine.columnar.transfers import Transfer
from gpu_engine.exec.cancel_points import running_task
from gpu_engine.exec.device_counters import THREAD_COUNTERS, counts_now, watch_device_allocations
from gpu_engine.exec.driver_stream import create_driver_stream, stream_scope, synchronize_for_handoff
from gpu_engine.exec.operator import BlockingReason, Operator

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.exec.task import Task

__all__ = ["Driver", "StuckDriverError"]

_MAX_IDLE_STEPS = 10_000


class StuckDriverError(RuntimeError):
    """Raise when no operator can move and none says it is blocked (an operator bug)."""


class Driver:
    """A container for one linear sequence of operators, run step by step on the executor."""

    def __init__(self, task: "Task", pipeline_id: int, driver_id: int, operators: list[Operator], is_output: bool):
        self.task = task
        self.pipeline_id = pipeline_id
        self.driver_id = driver_id
        self.operators = operators
        self.is_output = is_output
        self._lock = threading.Lock()
        self._state = "idle"  # idle | queued | running | blocked | finished
        self._told_finished = [False] * len(operators)
        self._blocked_since = 0.0
        self._blocked_operator: Operator | None = None
        self._current: Operator | None = None
        # One CUDA stream per driver on a GPU (None elsewhere), current on whichever thread runs the driver.
        self.stream = create_driver_stream(task.query_ctx.device)

    def __repr__(self) -> str:
        return f"Driver(pipeline={self.pipeline_id}, driver={self.driver_id}, state={self._state})"

    @property
    def is_done(self) -> bool:
        """Return True once the driver has closed its operators."""
        return self._state == "finished"

    # ------------------------------------------------------------- scheduling
    def enqueue(self) -> None:
        """Put the driver on the executor unless it is already queued, running or done."""
        with self._lock:
            if self._state in ("queued", "running", "finished"):
                return
            self._state = "queued"
        executor = self.task.query_ctx.executor
        try:
            executor.submit(self.run)
        except RuntimeError:  # executor shut down under us: finish without running
            self._finish()

    def hold(self) -> None:
        """Mark the driver queued without putting it on the executor: the Task's caller runs its first slice.

        See :meth:`Task.run_held_driver`; :meth:`release` hands it to the executor instead (a Task ended first).
        """
        with self._lock:
            if self._state != "idle":
                return
            self._state = "queued"

    def release(self) -> None:
        """Put a held driver on the executor (it runs, sees its Task ending, and closes)."""
        try:
            self.task.query_ctx.executor.submit(self.run)
        except RuntimeError:  # executor shut down under us: finish without running
            self._finish()

    def wake(self) -> None:
        """Re-queue a blocked driver (the Task calls this when it fails or is cancelled)."""
        with self._lock:
            if self._state != "blocked":
                return
            self._state = "idle"
        self.enqueue()

    def _on_unblocked(self, _future: Future) -> None:
        if self._blocked_operator is not None:
            self._blocked_operator.stats.blocked_seconds += time.perf_counter() - self._blocked_since
            self._blocked_operator = None
        self.wake()

    # ------------------------------------------------------------------- run
    def run(self) -> None:
        """Advance the pipeline until it blocks, yields, finishes or fails."""
        with self._lock:
            if self._state != "queued":
                return
            self._state = "running"
        try:
            watch_device_allocations(self.task.query_ctx.device)
            with stream_scope(self.stream), running_task(self.task):  # its cancel points watch the Task
                outcome, future = self._run_internal()
        except (KeyboardInterrupt, SystemExit):  # the main thread running a slice (Task.run_held_driver): Ctrl-C
            self.task.cancel()  # cancels the query, as when it interrupts the caller waiting in Task.wait
            self._finish()
            raise
        except BaseException as error:  # noqa: BLE001 - any failure fails the Task
            self.task.set_error(error, self._current)
            outcome, future = "finished", None
        if outcome == "blocked":
            with self._lock:
                self._state = "blocked"
            future.add_done_callback(self._on_unblocked)
            if self.task.is_terminating:
                self.wake()
        elif outcome == "yield":
            with self._lock:
                self._state = "idle"
            self.enqueue()
        else:
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            if self._state == "finished":
                return
            self._state = "finished"
        with stream_scope(self.stream):  # closing may still hand device data over (a probe's matched rows)
            for operator in self.operators:
                try:
                    operator.close()
                except BaseException as error:  # noqa: BLE001
                    self.task.set_error(error, operator)
        self.task.driver_finished(self)

    def _timed(self, operator: Operator, stat: str, call, *args):
        """Call ``call(*args)`` for ``operator``, adding its seconds (wall and this thread's CPU) and its device counters
        to the operator's stats.

        The counters are thread-local and the call runs on this thread, so
        the deltas are exactly the launches, host syncs, allocations and
        compiles the call made (five attribute reads before and after: cheap
        enough for every call).
        """
        self._current = operator
        counters = THREAD_COUNTERS
        launches, syncs, allocations = counters.kernel_launches, counters.host_syncs, counters.device_allocations
        compiled, compiling = counters.kernels_compiled, counters.compile_seconds
        start, cpu_start = time.perf_counter(), time.thread_time()
        result = call(*args)
        stats = operator.stats
        setattr(stats, stat, getattr(stats, stat) + time.perf_counter() - start)
        stats.cpu_seconds += time.thread_time() - cpu_start
        stats.kernel_launches += counters.kernel_launches - launches
        stats.host_syncs += counters.host_syncs - syncs
        stats.device_allocations += counters.device_allocations - allocations
        stats.kernels_compiled += counters.kernels_compiled - compiled
        stats.compile_seconds += counters.compile_seconds - compiling
        return result

    def _run_internal(self) -> tuple[str, Future | None]:
        operators = self.operators
        last = len(operators) - 1
        deadline = time.perf_counter() + self.task.query_ctx.config.driver_time_slice_seconds
        idle_steps = 0
        stepped = False
        while True:
            if self.task.is_terminating:
                return "finished", None
            for operator in operators:
                reason, future = self._timed(operator, "is_blocked_seconds", operator.is_blocked)
                if reason is not BlockingReason.NOT_BLOCKED:
                    operator.stats.blocked_count += 1
                    self._blocked_operator = operator
                    self._blocked_since = time.perf_counter()
                    return "blocked", future
            if stepped and time.perf_counter() > deadline:  # a slice takes at least one step: one shorter
                return "yield", None                         # than a step would otherwise never advance
            stepped = True
            moved = False
            for i in range(last, -1, -1):
                operator = operators[i]
                if i == last:
                    batch = self._timed(operator, "get_output_seconds", operator.get_output)
                    if batch is not None and batch.num_rows:
                        self._count_output(operator, batch)
                        if self.is_output:
                            self._deliver(operator, batch)
                        moved = True
                        break
                    if operator.is_finished():
                        return "finished", None
                    continue
                successor = operators[i + 1]
                if self._told_finished[i + 1]:
                    continue
                if successor.needs_input():
                    batch = self._timed(operator, "get_output_seconds", operator.get_output)
                    if batch is not None and batch.num_rows:
                        self._count_output(operator, batch)
                        stats = successor.stats
                        stats.input_rows += batch.num_rows
                        stats.input_batches += 1
                        stats.input_bytes += batch.nbytes
                        self._timed(successor, "add_input_seconds", successor.add_input, batch)
                        moved = True
                        break
                    if operator.is_finished():
                        self._told_finished[i + 1] = True
                        self._timed(successor, "no_more_input_seconds", successor.no_more_input)
                        moved = True
                        break
            if moved:
                idle_steps = 0
                continue
            idle_steps += 1
            if idle_steps > _MAX_IDLE_STEPS:
                names = ", ".join(f"{op.operator_type}(finished={op.is_finished()})" for op in operators)
                raise StuckDriverError(f"no operator can advance and none is blocked: {names}")

    def _deliver(self, operator: Operator, batch) -> None:
        """Hand an output batch to the Task once this driver's stream has made it; count a copy the consumer reports.

        A consumer that copies the batch to the host (the Session's) returns a
        :class:`~gpu_engine.columnar.transfers.Transfer`; its bytes and seconds
        are shown as the last operator's ``d2h_*`` runtime stats, and the
        wait and the copy's host syncs as its ``host_syncs``.
        """
        before = counts_now()
        synchronize_for_handoff()
        transfer = self.task.deliver_result(batch)
        spent, stats = counts_now() - before, operator.stats
        stats.kernel_launches += spent.kernel_launches
        stats.host_syncs += spent.host_syncs
        stats.device_allocations += spent.device_allocations
        if isinstance(transfer, Transfer) and transfer.nbytes:
            operator.add_runtime_stat("d2h_bytes", transfer.nbytes)
            operator.add_runtime_stat("d2h_seconds", transfer.seconds)

    @staticmethod
    def _count_output(operator: Operator, batch) -> None:
        stats = operator.stats
        stats.output_rows += batch.num_rows
        stats.output_batches += 1
        stats.output_bytes += batch.nbytes
