"""LocalCluster: distributed TPC-H queries against DuckDB, end of data, back-pressure, failures, cancel, stats."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from dataclasses import dataclass

import pyarrow as pa
import pytest

from cluster_tpch import SCALE_FACTOR_BY_DEVICE, register_lineitem
from duckdb_reference import assert_same_rows, duckdb_connection, duckdb_table
from gpu_engine import ExecutionError, Session, TaskCancelled
from gpu_engine.cluster import LocalCluster, chain_fragments
from gpu_engine.exec.local_planner import make_operator
from gpu_engine.exec.operator import Operator
from gpu_engine.exec.task import TaskState
from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator, tpch
from gpu_engine.plans.nodes import PlanNode

QUERIES = {
    "primer": (tpch.primer_query, tpch.PRIMER_SQL, False),
    "q1": (lambda catalog: tpch.query(1, catalog), tpch.sql(1), True),
    "q6": (lambda catalog: tpch.query(6, catalog), tpch.sql(6), False),
}


def _leftover_threads() -> list[threading.Thread]:
    """Return the driver threads not idle in a session's kept pool (gpu_engine.exec.driver_executors)."""
    from gpu_engine.exec.driver_executors import working_driver_threads

    return working_driver_threads()


@pytest.fixture(scope="module")
def duckdb_answers(tpch_folder):
    answers = {}

    def answer(scale_factor, name):
        if (scale_factor, name) not in answers:
            with duckdb_connection(tpch_folder(scale_factor)) as connection:
                answers[scale_factor, name] = duckdb_table(connection, QUERIES[name][1])
        return answers[scale_factor, name]

    return answer


def _tpch_session(device_name, folder, drivers=1, **config) -> Session:
    session = Session(device=device_name, drivers=drivers, **config)
    register_lineitem(session, folder)
    return session


CPU_CASES = [(name, widths, drivers) for name in QUERIES
             for widths, drivers in [((4, 4, 1), 1), ((1, 1, 1), 1), ((3, 5, 1), 2)]]


@pytest.mark.parametrize("name, widths, drivers", CPU_CASES,
                         ids=[f"{n}-{'x'.join(map(str, w))}-drivers{d}" for n, w, d in CPU_CASES])
def test_tpch_on_cpu_matches_duckdb(name, widths, drivers, tpch_folder, duckdb_answers):
    _check_tpch("cpu", name, widths, drivers, tpch_folder, duckdb_answers)


SIM_CASES = [("primer", (3, 2, 1)), ("q1", (2, 3, 1)), ("q6", (2, 2, 1))]


@pytest.mark.parametrize("name, widths", SIM_CASES, ids=[f"{n}-{'x'.join(map(str, w))}" for n, w in SIM_CASES])
def test_tpch_on_the_gpu_device_matches_duckdb(name, widths, device_name, tpch_folder, duckdb_answers):
    if device_name == "cpu":
        pytest.skip("covered by test_tpch_on_cpu_matches_duckdb")
    _check_tpch(device_name, name, widths, 1, tpch_folder, duckdb_answers)


def _check_tpch(device_name, name, widths, drivers, tpch_folder, duckdb_answers):
    scale_factor = SCALE_FACTOR_BY_DEVICE[device_name]
    build_plan, _, ordered = QUERIES[name]
    session = _tpch_session(device_name, tpch_folder(scale_factor), drivers)
    cluster = LocalCluster(session, widths)
    actual = cluster.execute(build_plan(session.catalog))
    assert_same_rows(actual, duckdb_answers(scale_factor, name), ordered=ordered)
    stats = cluster.last_stats
    assert [len(s.tasks) for s in stats.stages][0] == widths[0]
    assert all(t.state == "finished" for s in stats.stages for t in s.tasks)
    leaf_splits = [t.splits for t in stats.stages[0].tasks]
    assert sum(leaf_splits) == len(session.table("lineitem").splits()) and min(leaf_splits) > 0
    assert _leftover_threads() == []


def test_explicit_fragments_with_compressed_pages(tpch_folder, duckdb_answers):
    session = _tpch_session("cpu", tpch_folder(0.01), shuffle_compression="lz4", shuffle_page_bytes=4096)
    ids = PlanNodeIdGenerator()
    leaf = (PlanBuilder(session.catalog, id_generator=ids).table_scan("lineitem", ["l_partkey"])
            .partial_aggregation(["l_partkey"], ["count(*) AS count"]).partitioned_output(["l_partkey"], 3).plan())
    middle = (PlanBuilder(id_generator=ids).exchange(leaf.output_schema).local_partition(["l_partkey"])
              .final_aggregation(partial=leaf.source).partitioned_output([], 1).plan())
    output = PlanBuilder(id_generator=ids).exchange(middle.output_schema).plan()
    cluster = LocalCluster(session, (2, 3, 1))
    actual = cluster.execute(chain_fragments(leaf, middle, output))
    assert_same_rows(actual, duckdb_answers(0.01, "primer"))
    assert cluster.last_stats.stages[0].shuffle_pages >= 6  # every leaf Task sent to every destination


# ------------------------------------------------------------------ end of data
@pytest.fixture
def small_table() -> pa.Table:
    return pa.table({"k": pa.array([1, 2, 2, 3, None] * 20, pa.int64()), "v": pa.array(range(100), pa.int64())})


@pytest.mark.parametrize("rows", [100, 0], ids=["some-rows", "no-rows"])
def test_empty_destinations_and_empty_leaf_splits(device_name, small_table, rows):
    table = small_table.slice(0, rows)
    session = Session(device=device_name)
    session.register("t", table, split_rows=30)  # 4 splits, or a single empty one
    cluster = LocalCluster(session, (6, 8, 1))  # leaf Tasks without splits, middle Tasks without keys
    grouped = PlanBuilder(session.catalog).table_scan("t").aggregation(["k"], ["count(*) AS c", "sum(v) AS s"]).plan()
    overall = PlanBuilder(session.catalog).table_scan("t").aggregation([], ["count(*) AS c", "sum(v) AS s"]).plan()
    import duckdb

    connection = duckdb.connect()
    connection.register("t", table)
    assert_same_rows(cluster.execute(grouped),
                     connection.sql("SELECT k, count(*) AS c, sum(v) AS s FROM t GROUP BY k").to_arrow_table())
    assert_same_rows(cluster.execute(overall),
                     connection.sql("SELECT count(*) AS c, sum(v) AS s FROM t").to_arrow_table())
    assert _leftover_threads() == []


# --------------------------------------------------- test nodes: slow and failing
@dataclass(frozen=True, kw_only=True)
class SlowNode(PlanNode):
    """A test node whose operator passes batches on, taking ``seconds`` for each."""

    seconds: float


@dataclass(frozen=True, kw_only=True)
class FailAfterNode(PlanNode):
    """A test node whose operator raises once it has seen ``rows`` rows."""

    rows: int


class PassThrough(Operator):
    def get_output(self):
        batch, self.input = self.input, None
        return batch


class Slow(PassThrough):
    def add_input(self, batch):
        time.sleep(self.node.seconds)  # the consumer is slow on purpose
        self.input = batch


class FailAfter(PassThrough):
    seen = 0

    def add_input(self, batch):
        self.seen += batch.num_rows
        if self.seen >= self.node.rows:
            raise ValueError("injected failure")
        self.input = batch


@make_operator.register
def _(item: SlowNode, ctx):
    return Slow(ctx, item)


@make_operator.register
def _(item: FailAfterNode, ctx):
    return FailAfter(ctx, item)


@pytest.fixture
def numbers() -> pa.Table:
    return pa.table({"x": pa.array(range(200_000), pa.int64()), "g": pa.array([i % 7 for i in range(200_000)], pa.int64())})


def _shuffle_then(session, node_factory, kind="arbitrary") -> PlanNode:
    """Return scan -> PartitionedOutput | Exchange -> node_factory(exchange): a two-stage plan."""
    ids = PlanNodeIdGenerator()
    leaf = PlanBuilder(session.catalog, id_generator=ids).table_scan("n").partitioned_output([], 1, kind).plan()
    exchange = PlanBuilder(id_generator=ids).exchange(leaf.output_schema).plan()
    return chain_fragments(leaf, node_factory(exchange))


def test_slow_consumer_blocks_producer_within_one_page_of_the_cap(numbers):
    cap = 64 << 10
    session = Session(device="cpu", batch_rows=2048, output_buffer_max_bytes=cap, shuffle_page_bytes=16 << 10,
                      exchange_max_bytes=16 << 10)
    session.register("n", numbers, split_rows=50_000)
    plan = _shuffle_then(session, lambda e: SlowNode(id="slow", output_schema=e.output_schema, sources=(e,),
                                                       seconds=0.002))
    cluster = LocalCluster(session, (1, 1))
    result = cluster.execute(plan)
    assert result.num_rows == numbers.num_rows
    (buffer,) = cluster.last_stats.stages[0].output_buffers
    assert buffer.bytes > 4 * cap  # far more went through than the cap holds
    assert buffer.blocked_count > 0
    assert cap < buffer.peak_bytes <= cap + buffer.max_page_bytes
    producer = cluster.last_stats.stages[0].merged().operator_stats_by_node()[plan.source.source.id][0]
    assert producer.blocked_count > 0 and producer.blocked_seconds > 0


@pytest.mark.parametrize("stage", ["leaf", "middle"])
def test_failing_task_fails_the_query_promptly_and_stops_every_task(device_name, numbers, stage):
    session = Session(device=device_name, drivers=2, batch_rows=1000)
    session.register("n", numbers.slice(0, 20_000), split_rows=2000)
    scan = PlanBuilder(session.catalog).table_scan("n").plan()
    failing = FailAfterNode(id="fail", output_schema=scan.output_schema, sources=(scan,), rows=3000)
    if stage == "leaf":
        plan = PlanBuilder(session.catalog).table_scan("n").aggregation(["g"], ["sum(x) AS s"]).plan()
        plan = dataclasses.replace(plan, sources=(failing,))
    else:
        plan = _shuffle_then(session, lambda e: FailAfterNode(id="fail", output_schema=e.output_schema,
                                                              sources=(e,), rows=3000))
    cluster = LocalCluster(session, (2, 2, 1))
    start = time.perf_counter()
    with pytest.raises(ExecutionError, match="injected failure") as raised:
        cluster.execute(plan)
    assert time.perf_counter() - start < 10
    assert raised.value.plan_node_id == "fail"
    states = [t.state for s in cluster.last_stats.stages for t in s.tasks]
    assert "failed" in states and "running" not in states and "created" not in states
    assert _leftover_threads() == []


def test_cancel_stops_a_running_query(numbers):
    session = Session(device="cpu", batch_rows=1000, shuffle_page_bytes=16 << 10)  # ~200 pages, 50 ms each
    session.register("n", numbers, split_rows=10_000)
    plan = _shuffle_then(session, lambda e: SlowNode(id="slow", output_schema=e.output_schema, sources=(e,),
                                                       seconds=0.05))
    cluster = LocalCluster(session, (2, 1))
    raised: list[BaseException] = []

    def run():
        try:
            cluster.execute(plan)
        except BaseException as error:  # noqa: BLE001
            raised.append(error)

    runner = threading.Thread(target=run)
    runner.start()
    time.sleep(0.5)
    start = time.perf_counter()
    cluster.cancel()
    runner.join(30)
    assert not runner.is_alive() and time.perf_counter() - start < 10
    assert len(raised) == 1 and isinstance(raised[0], TaskCancelled)
    states = [t.state for s in cluster.last_stats.stages for t in s.tasks]
    assert TaskState.CANCELED.value in states and set(states) <= {"canceled", "finished"}
    assert _leftover_threads() == []


@pytest.mark.parametrize("kind", ["broadcast", "arbitrary", "partitioned"])
def test_partitioned_output_kinds_reach_every_consumer(numbers, kind):
    session = Session(device="cpu", batch_rows=5000)
    table = numbers.slice(0, 20_000)
    session.register("n", table, split_rows=5000)
    ids = PlanNodeIdGenerator()
    keys = ["g"] if kind == "partitioned" else []
    leaf = PlanBuilder(session.catalog, id_generator=ids).table_scan("n").partitioned_output(keys, 3, kind).plan()
    middle = (PlanBuilder(id_generator=ids).exchange(leaf.output_schema)
              .aggregation(["g"], ["count(*) AS c"]).partitioned_output([], 1).plan())
    output = PlanBuilder(id_generator=ids).exchange(middle.output_schema).plan()
    cluster = LocalCluster(session, (2, 3, 1))
    result = cluster.execute(chain_fragments(leaf, middle, output)).to_pylist()
    per_group = {}
    for row in result:
        per_group.setdefault(row["g"], []).append(row["c"])
    if kind == "broadcast":  # each of the 3 consumers saw every row
        assert {g: sorted(c) for g, c in per_group.items()} == {g: [20_000 // 7 + (g < 20_000 % 7)] * 3 for g in range(7)}
    elif kind == "partitioned":  # each group went to exactly one consumer
        assert {g: c for g, c in per_group.items()} == {g: [20_000 // 7 + (g < 20_000 % 7)] for g in range(7)}
    else:
        assert {g: sum(c) for g, c in per_group.items()} == {g: 20_000 // 7 + (g < 20_000 % 7) for g in range(7)}
        assert len(result) > 7  # spread over several consumers


def test_explain_analyze_shows_stages_tasks_pipelines_and_operators(numbers):
    session = Session(device="cpu", drivers=2, batch_rows=5000)
    session.register("n", numbers.slice(0, 20_000), split_rows=5000)
    plan = PlanBuilder(session.catalog).table_scan("n").aggregation(["g"], ["sum(x) AS s"]).order_by(["g"]).plan()
    cluster = LocalCluster(session, (2, 2, 1))
    text = cluster.explain(plan, analyze=True)
    lines = text.splitlines()
    assert lines[0].startswith("Query cluster-") and "3 stage(s), 5 task(s)" in lines[0]
    assert [line.split(":")[0] for line in lines if line.startswith("Stage")] == ["Stage 0", "Stage 1", "Stage 2"]
    assert sum(1 for line in lines if line.strip().startswith("Task cluster-")) == 5
    for expected in ("-- PartitionedOutput[1.output][PARTITIONED [g] 2]", "-- Exchange[1.remote][]",
                     "-- LocalPartition[1.exchange][REPARTITION [g]]", "-- OrderBy[2]", "-- Exchange[2.remote][]",
                     "PartitionedOutput (pipeline 0, 4 driver(s))", "TableScan (pipeline 0, 4 driver(s)): input 0 rows",
                     "output 20000 rows", "pipeline 0 x 2, pipeline 1 x 2", "pages=", "remote_splits=4"):
        assert expected in text, expected
    # Device counters summed over the stage's Tasks: the (fused) partial aggregation launches kernels on every batch.
    one_line_stats = re.sub(r",\n *", ", ", text)  # stats lines over 120 characters wrap after a comma
    assert re.search(r"FusedAggregation \(pipeline 0, 4 driver\(s\)\): input 20000 rows.*, launches [1-9]\d*, syncs \d+",
                     one_line_stats)
