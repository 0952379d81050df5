"""Task and Driver semantics: late splits, failures, cancellation, no leftover threads, stats and explain."""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass

import pyarrow as pa
import pytest

from gpu_engine import ExecutionError, Session
from gpu_engine.device import get_device
from gpu_engine.exec.local_planner import make_operator
from gpu_engine.exec.operator import Operator
from gpu_engine.exec.query_ctx import EngineConfig, QueryCtx
from gpu_engine.exec.split import ArrowSplit
from gpu_engine.exec.task import Task, TaskState
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode


def _driver_threads() -> list[threading.Thread]:
    """Return the driver threads not idle in a session's kept pool (gpu_engine.exec.driver_executors)."""
    from gpu_engine.exec.driver_executors import working_driver_threads

    return working_driver_threads()


@pytest.fixture
def numbers() -> pa.Table:
    return pa.table({"x": pa.array(range(10_000), pa.int64()), "g": pa.array([i % 7 for i in range(10_000)], pa.int32())})


@dataclass(frozen=True, kw_only=True)
class FailAfterNode(PlanNode):
    """A test node whose operator raises once it has seen ``rows`` rows."""

    rows: int


class FailAfter(Operator):
    def __init__(self, ctx, node):
        super().__init__(ctx, node)
        self.seen = 0

    def add_input(self, batch):
        self.seen += batch.num_rows
        if self.seen >= self.node.rows:
            raise ValueError("injected failure")
        self.input = batch

    def get_output(self):
        batch, self.input = self.input, None
        return batch


@make_operator.register
def _(item: FailAfterNode, ctx):
    return FailAfter(ctx, item)


@pytest.mark.parametrize("drivers", [1, 4])
def test_operator_error_fails_task_promptly_and_leaves_no_thread(device_name, drivers, numbers):
    session = Session(device=device_name, drivers=drivers, batch_rows=100)
    session.register("n", numbers, split_rows=500)
    aggregation = PlanBuilder(session.catalog).table_scan("n").aggregation(["g"], ["sum(x) AS s"]).plan()
    failing = FailAfterNode(id="fail", output_schema=aggregation.source.output_schema, sources=(aggregation.source,), rows=1000)
    plan = dataclasses.replace(aggregation, sources=(failing,))
    start = time.perf_counter()
    with pytest.raises(ExecutionError, match="injected failure") as raised:
        session.execute(plan)
    assert time.perf_counter() - start < 30
    assert raised.value.operator == "FailAfter" and raised.value.plan_node_id == "fail"
    assert session.last_task.state is TaskState.FAILED
    assert all(d.is_done for d in session.last_task.drivers)
    assert _driver_threads() == []


def test_splits_added_after_start_and_no_more_splits(device_name, numbers):
    plan = PlanBuilder({"n": numbers.schema}).table_scan("n").aggregation([], ["count(*) AS c", "sum(x) AS s"]).plan()
    query_ctx = QueryCtx.create(get_device(device_name), EngineConfig(batch_rows=1000))
    try:
        task = Task("late-splits", plan, query_ctx, max_drivers=1).start()
        scan_id = plan.source.id
        time.sleep(0.05)
        assert task.state is TaskState.RUNNING  # waiting for splits, not finished
        task.add_split(scan_id, ArrowSplit(numbers.slice(0, 4000)))
        task.add_split(scan_id, ArrowSplit(numbers.slice(4000, 0)))  # an empty split
        time.sleep(0.05)
        task.add_split(scan_id, ArrowSplit(numbers.slice(4000)))
        task.no_more_splits(scan_id)
        task.wait(60)
        (batch,) = task.results()
        assert batch.to_arrow().to_pylist() == [{"c": 10_000, "s": sum(range(10_000))}]
    finally:
        query_ctx.shutdown()
    assert _driver_threads() == []


def test_cancel_stops_a_task_waiting_for_splits(device_name, numbers):
    plan = PlanBuilder({"n": numbers.schema}).table_scan("n").plan()
    query_ctx = QueryCtx.create(get_device(device_name))
    try:
        task = Task("cancel-me", plan, query_ctx, max_drivers=2).start()
        task.add_split(plan.id, ArrowSplit(numbers.slice(0, 10)))
        task.cancel()
        with pytest.raises(Exception, match="cancelled"):
            task.wait(30)
        assert task.state is TaskState.CANCELED
    finally:
        query_ctx.shutdown()
    assert _driver_threads() == []


def test_a_driver_held_for_the_caller_closes_when_its_task_is_cancelled_first(device_name, numbers):
    """``start(caller_runs=True)`` keeps one scan driver off the executor for the caller (Task.run_held_driver);
    a caller that fails before running it (a bad split, a closed Session) cancels the Task, which must still end."""
    plan = PlanBuilder({"n": numbers.schema}).table_scan("n").aggregation(["g"], ["sum(x) AS s"]).plan()
    query_ctx = QueryCtx.create(get_device(device_name))
    try:
        task = Task("held-then-cancelled", plan, query_ctx, max_drivers=2).start(caller_runs=True)
        task.cancel()
        assert task.wait_done(30)
        assert task.state is TaskState.CANCELED and all(d.is_done for d in task.drivers)
        task.run_held_driver()  # nothing left to run
    finally:
        query_ctx.shutdown()
    assert _driver_threads() == []


@pytest.mark.parametrize("slice_seconds, on_this_thread", [(0.005, True), (0.2, True), (0.2, False)])
def test_a_driver_held_for_the_caller_answers_with_the_rest(device_name, numbers, slice_seconds, on_this_thread):
    """The caller runs the held driver's first slice; with a short time slice it yields and the executor
    runs the rest of it, beside the other drivers and pipelines (or the caller hands it to the executor)."""
    plan = PlanBuilder({"n": numbers.schema}).table_scan("n").aggregation(["g"], ["count(*) AS c", "sum(x) AS s"]).plan()
    scan_id = plan.source.id
    query_ctx = QueryCtx.create(get_device(device_name), EngineConfig(batch_rows=500,
                                                                      driver_time_slice_seconds=slice_seconds))
    try:
        task = Task("held", plan, query_ctx, max_drivers=2).start(caller_runs=True)
        for offset in range(0, 10_000, 1000):
            task.add_split(scan_id, ArrowSplit(numbers.slice(offset, 1000)))
        task.no_more_splits(scan_id)
        task.run_held_driver(on_this_thread)
        task.wait(60)
        by_group: dict = {}  # each driver groups its own rows (the plan is not prepared: no final step)
        for row in (r for b in task.results() for r in b.to_arrow().to_pylist()):
            c, s = by_group.get(row["g"], (0, 0))
            by_group[row["g"]] = (c + row["c"], s + row["s"])
        assert by_group == {g: (len(range(g, 10_000, 7)), sum(range(g, 10_000, 7))) for g in range(7)}
    finally:
        query_ctx.shutdown()
    assert _driver_threads() == []


def test_a_time_slice_shorter_than_a_step_still_advances(device_name, numbers):
    """Each slice takes at least one step before it looks at its deadline: a slice shorter than one step
    (here 1 ns) yielded before its first move, so the query never advanced (a livelock)."""
    plan = PlanBuilder({"n": numbers.schema}).table_scan("n").aggregation(["g"], ["count(*) AS c"]).plan()
    query_ctx = QueryCtx.create(get_device(device_name), EngineConfig(batch_rows=500, driver_time_slice_seconds=1e-9))
    try:
        task = Task("tiny-slices", plan, query_ctx, max_drivers=1).start()
        task.add_split(plan.source.id, ArrowSplit(numbers.slice(0, 2000)))
        task.no_more_splits(plan.source.id)
        try:
            task.wait(20)
        finally:
            task.cancel()
        counts = {row["g"]: row["c"] for b in task.results() for row in b.to_arrow().to_pylist()}
        assert counts == {g: len(range(g, 2000, 7)) for g in range(7)}
    finally:
        query_ctx.shutdown()
    assert _driver_threads() == []


@dataclass(frozen=True, kw_only=True)
class InterruptNode(PlanNode):
    """A test node whose operator raises KeyboardInterrupt on its first batch (Ctrl-C while the caller runs it)."""


class Interrupt(Operator):
    def add_input(self, batch):
        raise KeyboardInterrupt

    def get_output(self):
        return None


@make_operator.register
def _(item: InterruptNode, ctx):
    return Interrupt(ctx, item)


def test_ctrl_c_in_the_callers_slice_cancels_the_query_and_leaves_no_thread(numbers):
    """Ctrl-C reaches the main thread only: while it runs a driver's slice (Session._run), the query is cancelled
    and KeyboardInterrupt goes on up (the CLI's handler), as when it interrupts the caller waiting."""
    session = Session(device="cpu", drivers=1, batch_rows=100)
    session.register("n", numbers, split_rows=500)
    scan = PlanBuilder(session.catalog).table_scan("n").plan()
    plan = InterruptNode(id="interrupt", output_schema=scan.output_schema, sources=(scan,))
    with pytest.raises(KeyboardInterrupt):
        session.execute(plan)
    assert session.last_task.state is TaskState.CANCELED
    assert session.last_task.wait_done(30)
    assert _driver_threads() == []


def test_stats_count_rows_through_the_pipeline(device_name, numbers):
    # Unfused, so the Filter has its own operator whose rows can be counted.
    session = Session(device=device_name, drivers=2, batch_rows=1000, fuse=False)
    session.register("n", numbers, split_rows=2500)
    plan = PlanBuilder(session.catalog).table_scan("n").filter("x % 2 = 0").aggregation(["g"], ["count(*) AS c"]).plan()
    session.execute(plan)
    by_node = session.last_stats().operator_stats_by_node()
    scan_rows = sum(s.output_rows for s in by_node[plan.source.source.id])
    filter_rows = sum(s.output_rows for s in by_node[plan.source.id])
    assert scan_rows == 10_000 and filter_rows == 5_000
    text = session.explain(plan, analyze=True)
    assert "TableScan" in text and "Aggregation" in text and "output 10000 rows" in text


@dataclass(frozen=True)
class _CountingSplit(ArrowSplit):
    """An ArrowSplit whose ``num_rows`` notes whether the Task's lock was held while it counted, and how often."""

    seen: list = dataclasses.field(default_factory=list, compare=False, repr=False)
    task: list = dataclasses.field(default_factory=list, compare=False, repr=False)

    def num_rows(self):
        self.seen.append(self.task[0]._lock.locked())
        return super().num_rows()


def test_split_rows_counts_once_outside_the_tasks_lock(numbers):
    """A Parquet split's count reads its footer: under the Task's lock it held up add_split and every scan's
    get_split_or_future meanwhile (Task.split_rows). Counted once, with the lock free; an unfinished node says None."""
    plan = PlanBuilder({"n": numbers.schema}).table_scan("n").plan()
    query_ctx = QueryCtx.create(get_device("cpu"))
    try:
        task = Task("split-rows", plan, query_ctx, max_drivers=1)
        scan_id = plan.id
        split = _CountingSplit(table=numbers.slice(0, 300), task=[task])
        task.add_split(scan_id, split)
        task.add_split(scan_id, ArrowSplit(table=numbers.slice(300, 50)))
        assert task.split_rows(scan_id) is None  # splits may still come
        task.no_more_splits(scan_id)
        assert task.split_rows(scan_id) == 350
        assert task.split_rows(scan_id) == 350
        assert split.seen == [False]
    finally:
        query_ctx.shutdown()
