"""Run a plan as stages of Tasks in one process, as Prestissimo's coordinator runs it on workers.

``LocalCluster(session, stage_widths=(4, 4, 1)).execute(plan)``:

1. A plan without boundaries gets them (:func:`add_remote_exchanges`); one
   with PartitionedOutput/Exchange boundaries is taken as given. It is cut
   into fragments, producers first (:func:`plan_fragments`).
2. Stage ``i`` runs fragment ``i`` on ``stage_widths[i]`` Tasks (the output
   stage takes the last width; a fragment whose rows must meet in one place
   runs one Task). Each PartitionedOutput gets as many partitions as its
   consuming stage has Tasks. Each fragment gets the local exchanges its
   drivers need (:func:`add_local_exchanges`).
3. Every Task of the query shares one QueryCtx: one executor, one
   OutputBufferManager. Tasks start, then receive their splits while running:
   TableScan splits of the session's tables round-robin over the leaf Tasks,
   and for each Exchange one RemoteSplit per producer Task naming this Task's
   destination; then ``no_more_splits``.
4. The output stage's batches are gathered into one ``pyarrow.Table``.

A Task that fails cancels the query at once (a listener on every Task): the
other Tasks are cancelled, their blocked drivers wake and close, and the first
error reaches the caller. Cancelling from another thread does the same for
one query: ``execute(plan, cancel=token)`` with a :class:`CancelToken`, or
``handle.cancel()`` on the :class:`QueryHandle` that :meth:`LocalCluster.submit`
returns; other queries running on the same cluster are not touched (each
query keeps its own Tasks and its own cancelled flag). :meth:`LocalCluster.cancel`
cancels every query running at that moment. Either way, every Task's results
are deleted and the executor is shut down before ``execute`` returns or
raises, so no thread is left.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import replace

import pyarrow as pa

from gpu_engine.cluster.fragments import Fragment, has_remote_exchanges, plan_fragments
from gpu_engine.cluster.query_stats import QueryStats, StageStats, format_query_stats
from gpu_engine.cluster.remote_exchanges import add_remote_exchanges
from gpu_engine.errors import TaskCancelled
from gpu_engine.exec.output_buffer_manager import OutputBufferManager
from gpu_engine.planning import placement_text, plan_placement, prepare_plan
from gpu_engine.exec.query_ctx import QueryCtx
from gpu_engine.exec.split import RemoteSplit
from gpu_engine.host_cpus import usable_cpus
from gpu_engine.exec.task import Task, TaskState
from gpu_engine.plans.explain import format_plan
from gpu_engine.plans.nodes import PlanNode, TableScanNode, walk_plan

__all__ = ["LocalCluster", "Stage", "CancelToken", "QueryHandle"]

_query_ids = itertools.count()


class Stage:
    """The Tasks running one fragment."""

    def __init__(self, fragment: Fragment, plan: PlanNode, width: int):
        self.fragment = fragment
        self.plan = plan
        self.width = width
        self.tasks: list[Task] = []

    @property
    def stage_id(self) -> int:
        return self.fragment.fragment_id


class CancelToken:
    """Cancel one query from any thread: pass it to :meth:`LocalCluster.execute`, then call :meth:`cancel`.

    Why a token rather than ``cluster.cancel()``: several queries may run on
    one cluster at once (one thread each), and a caller must be able to stop
    its own without stopping, or failing, the others. A token cancelled
    before its query starts makes the query stop as soon as its Tasks exist.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._cancelled = False
        self._callbacks: list = []

    @property
    def cancelled(self) -> bool:
        """Return True once :meth:`cancel` was called."""
        with self._lock:
            return self._cancelled

    def cancel(self) -> None:
        """Stop the query this token was given to; its ``execute`` raises TaskCancelled."""
        with self._lock:
            self._cancelled = True
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def _subscribe(self, callback) -> None:
        """Call ``callback`` on cancel (at once when already cancelled)."""
        with self._lock:
            self._callbacks.append(callback)
            cancelled = self._cancelled
        if cancelled:
            callback()

    def _unsubscribe(self, callback) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


class QueryHandle:
    """A query running on its own thread (:meth:`LocalCluster.submit`): cancel it or wait for its rows."""

    def __init__(self, cluster: "LocalCluster", plan: PlanNode, timeout: float | None):
        self.token = CancelToken()
        self._result: pa.Table | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(cluster, plan, timeout),
                                         name="gpu-engine-cluster-query", daemon=True)
        self._thread.start()

    def _run(self, cluster: "LocalCluster", plan: PlanNode, timeout: float | None) -> None:
        try:
            self._result = cluster.execute(plan, timeout, cancel=self.token)
        except BaseException as error:  # noqa: BLE001 - handed to result()
            self._error = error

    def cancel(self) -> None:
        """Cancel this query only; :meth:`result` then raises TaskCancelled."""
        self.token.cancel()

    def done(self) -> bool:
        """Return True when the query finished, failed or was cancelled."""
        return not self._thread.is_alive()

    def result(self, timeout: float | None = None) -> pa.Table:
        """Wait for the query and return its rows, or raise its error (TimeoutError when still running)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the query is still running after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._result


class _RunningQuery:
    """One execute call's Tasks and whether it was cancelled (never shared between queries)."""

    def __init__(self, tasks: list[Task]):
        self.tasks = tasks
        self.cancelled = False


class LocalCluster:
    """Run plans on stages of Tasks over a Session's tables, device and config.

    Parameters
    ----------
    session
        Supplies the tables, the device, the drivers per Task and the config.
    stage_widths
        Tasks per stage, leaf stage first; the output stage takes the last
        width and the stages in between the middle ones (the last middle one
        repeats for deeper plans).
    threads
        Executor threads shared by every Task of a query (default: the cores).
    """

    def __init__(self, session, stage_widths: tuple[int, ...] = (4, 4, 1), threads: int | None = None):
        widths = tuple(int(w) for w in stage_widths)
        if not widths or min(widths) < 1:
            raise ValueError(f"stage widths must be positive integers, got {stage_widths!r}")
        self.session = session
        self.stage_widths = widths
        self.threads = threads or max(2, usable_cpus())
        self._lock = threading.Lock()
        self._queries: list[_RunningQuery] = []
        self.last_stats: QueryStats | None = None

    # -------------------------------------------------------------- planning
    def plan_stages(self, plan: PlanNode) -> list[Stage]:
        """Return the stages ``plan`` runs as: fragments, widths and executed plans (nothing runs)."""
        if self.session.config.optimize:  # on the whole plan: a filter moves across what become stage boundaries
            from gpu_engine.optimizer import optimize_plan

            plan = optimize_plan(plan, self.session.statistics())
        else:  # the subquery predicates still become joins: no operator evaluates them
            from gpu_engine.optimizer import required_rewrites

            plan = required_rewrites(plan)
        distributed = plan if has_remote_exchanges(plan) else add_remote_exchanges(plan)
        fragments = plan_fragments(distributed)
        widths = [self._width(f, len(fragments)) for f in fragments]
        consumer_width = {}
        for fragment in fragments:
            for _, producer in fragment.producers:
                consumer_width[producer] = widths[fragment.fragment_id]
        stages = []
        for fragment, width in zip(fragments, widths):
            root = fragment.root
            if fragment.output is not None:
                root = replace(root, num_partitions=consumer_width[fragment.fragment_id])
            executed = prepare_plan(root, self.session.device, self.session.drivers, self.session.config,
                                    optimize=False).plan
            stages.append(Stage(fragment, executed, width))
        return stages

    def _width(self, fragment: Fragment, count: int) -> int:
        widths = self.stage_widths
        if fragment.fragment_id == count - 1:
            width = widths[-1]
        else:
            width = widths[min(fragment.fragment_id, max(0, len(widths) - 2))]
        return min(width, fragment.max_width or width)

    # ------------------------------------------------------------- execution
    def execute(self, plan: PlanNode, timeout: float | None = None, cancel: CancelToken | None = None) -> pa.Table:
        """Run ``plan`` on stages of Tasks and return the output stage's rows as one table.

        ``cancel``: a :class:`CancelToken` another thread may cancel; this
        query then stops and raises TaskCancelled, other queries run on.
        """
        return self._execute(plan, timeout, cancel)[0]

    def _execute(self, plan: PlanNode, timeout: float | None,
                 cancel: CancelToken | None) -> tuple[pa.Table, QueryStats]:
        """Run ``plan``; return its rows and this query's stats (``last_stats`` may be another thread's by then)."""
        from gpu_engine.session import conform_to_schema

        stages = self.plan_stages(plan)
        for stage in stages:
            for scan in _scans(stage.plan):  # what cannot run on the device failed in plan_stages
                self.session.table(scan.table_name)  # unknown tables fail before anything runs
        if cancel is not None and cancel.cancelled:
            raise TaskCancelled("the query was cancelled before it started")
        query_id = f"cluster-{next(_query_ids)}"
        manager = OutputBufferManager()
        query_ctx = QueryCtx.create(self.session.device, self.session.config, self.threads, manager)
        batches: list[pa.RecordBatch] = []
        batches_lock = threading.Lock()
        failure: list[BaseException] = []

        def collect(batch) -> None:
            record_batch = batch.to_arrow()
            with batches_lock:
                batches.append(record_batch)

        tasks: list[Task] = []

        def on_task_state(task: Task) -> None:
            if task.state is TaskState.FAILED:
                with self._lock:
                    if not failure:
                        failure.append(task.error)
                self._cancel_tasks(tasks)

        start = time.perf_counter()
        output_stage = stages[-1]
        for stage in stages:
            for index in range(stage.width):
                task = Task(f"{query_id}.{stage.stage_id}.{index}", stage.plan, query_ctx, self.session.drivers,
                            collect if stage is output_stage else None)
                task.add_listener(on_task_state)
                stage.tasks.append(task)
                tasks.append(task)
        query = _RunningQuery(tasks)

        def cancel_query() -> None:
            with self._lock:
                query.cancelled = True
            self._cancel_tasks(tasks)

        try:
            for task in tasks:
                task.start()
            with self._lock:  # after start: a Task cancelled before it starts cannot start
                self._queries.append(query)
            if cancel is not None:
                cancel._subscribe(cancel_query)
            self._send_remote_splits(stages)
            self._send_table_splits(stages)
            self._wait(query, timeout)
            if failure:
                raise failure[0]
            for task in tasks:
                if task.error is not None:
                    raise task.error
        except BaseException:
            self._cancel_tasks(tasks)
            for task in tasks:
                task.wait_quietly()
            raise
        finally:
            stats = self.last_stats = self._stats(query_id, stages, manager, time.perf_counter() - start)
            for task in tasks:
                manager.delete_results(task.task_id)
            query_ctx.shutdown()
            if cancel is not None:
                cancel._unsubscribe(cancel_query)
            with self._lock:
                if query in self._queries:
                    self._queries.remove(query)
        schema = output_stage.plan.output_schema
        return pa.Table.from_batches([conform_to_schema(b, schema) for b in batches], schema=schema), stats

    def submit(self, plan: PlanNode, timeout: float | None = None) -> QueryHandle:
        """Start ``plan`` on a thread of its own and return at once; the handle cancels it or waits for its rows."""
        return QueryHandle(self, plan, timeout)

    def cancel(self) -> None:
        """Cancel every query running now, from another thread; each ``execute`` raises TaskCancelled.

        To stop one query among several, use its :class:`CancelToken` or :class:`QueryHandle`.
        """
        with self._lock:
            queries = list(self._queries)
            for query in queries:
                query.cancelled = True
        for query in queries:
            self._cancel_tasks(query.tasks)

    def explain(self, plan: PlanNode, analyze: bool = False) -> str:
        """Return the stages as text; with ``analyze``, run the plan and show per-stage, per-Task stats."""
        if analyze:
            return format_query_stats(self._execute(plan, None, None)[1])  # this query's stats, not the last one's
        lines = []
        for stage in self.plan_stages(plan):
            lines.append(f"Stage {stage.stage_id}: {stage.width} task(s) x {self.session.drivers} driver(s)")
            placements = placement_text(plan_placement(stage.plan, self.session.device))
            lines.extend("  " + line for line in format_plan(stage.plan, placements=placements).splitlines())
        return "\n".join(lines)

    # ------------------------------------------------------------- internals
    @staticmethod
    def _cancel_tasks(tasks: list[Task]) -> None:
        for task in tasks:
            task.cancel()

    @staticmethod
    def _send_remote_splits(stages: list[Stage]) -> None:
        """Tell each consumer Task about every producer Task of each of its Exchanges."""
        by_id = {stage.stage_id: stage for stage in stages}
        for stage in stages:
            for exchange_id, producer_id in stage.fragment.producers:
                producers = by_id[producer_id].tasks
                for destination, task in enumerate(stage.tasks):
                    for producer in producers:
                        task.add_split(exchange_id, RemoteSplit(producer.task_id, destination))
                    task.no_more_splits(exchange_id)

    def _send_table_splits(self, stages: list[Stage]) -> None:
        """Hand out every scan's splits round-robin over its stage's running Tasks, then say no more."""
        for stage in stages:
            for scan in _scans(stage.plan):
                splits = self.session.splits(scan.table_name)  # cached batches when Session.cache holds the table
                for number, split in enumerate(splits):
                    task = stage.tasks[number % len(stage.tasks)]
                    if task.is_terminating:
                        return
                    task.add_split(scan.id, split)
                for task in stage.tasks:
                    task.no_more_splits(scan.id)

    def _wait(self, query: _RunningQuery, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for task in query.tasks:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not task.wait_done(remaining):
                raise TimeoutError(f"query did not finish within {timeout} s (task {task.task_id} still running)")
        with self._lock:
            cancelled = query.cancelled
        if cancelled:
            raise TaskCancelled("the query was cancelled")

    def _stats(self, query_id: str, stages: list[Stage], manager: OutputBufferManager, wall: float) -> QueryStats:
        states = {task.state for stage in stages for task in stage.tasks}
        state = next((s for s in (TaskState.FAILED, TaskState.CANCELED, TaskState.RUNNING) if s in states),
                     TaskState.FINISHED)
        stats = QueryStats(query_id, state.value, wall, self.session.device.name)
        for stage in stages:
            buffers = [manager.stats(t.task_id) for t in stage.tasks
                       if stage.fragment.output is not None and manager.has_task(t.task_id)]
            stats.stages.append(StageStats(stage.stage_id, stage.plan, self.session.drivers,
                                           [t.task_stats() for t in stage.tasks], buffers))
        return stats


def _scans(plan: PlanNode) -> list[TableScanNode]:
    return [node for node in walk_plan(plan) if isinstance(node, TableScanNode)]
