"""The per-query memory cap: pool accounting, operators that hold state, a clear error, and a Session that keeps working."""

from __future__ import annotations

import dataclasses
import threading
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine import ExecutionError, MemoryCapExceeded, Session
from gpu_engine.device import Device, get_device
from gpu_engine.exec.local_planner import make_operator
from gpu_engine.exec.memory_pool import (
    DEFAULT_QUERY_MEMORY_FRACTION, MemoryPool, create_query_pool, free_memory_bytes, is_device_out_of_memory,
    query_memory_cap,
)
from gpu_engine.exec.operator import Operator
from gpu_engine.exec.query_ctx import EngineConfig
from gpu_engine.exec.task import TaskState
from gpu_engine.exec.local_exchange_queue import LocalExchangeQueue
from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator
from gpu_engine.plans.nodes import PlanNode


def _driver_threads() -> list[threading.Thread]:
    """Return the driver threads not idle in a session's kept pool (gpu_engine.exec.driver_executors)."""
    from gpu_engine.exec.driver_executors import working_driver_threads

    return working_driver_threads()


# ------------------------------------------------------------------ the pools
def _tree(cap=1000):
    query = MemoryPool("query", cap=cap)
    task = query.add_child("task t")
    first = task.add_child("HashAggregation[3]", operator="HashAggregation", plan_node_id="3", where="driver 0")
    second = task.add_child("OrderBy[5]", operator="OrderBy", plan_node_id="5", where="driver 0")
    return query, task, first, second


def test_reservations_add_up_to_the_root_and_track_peaks():
    query, task, first, second = _tree()
    first.reserve(300)
    second.set_reservation(200)
    assert (query.reserved_bytes, task.reserved_bytes, first.reserved_bytes) == (500, 500, 300)
    second.set_reservation(50)  # shrinking releases
    first.release(100)
    assert query.reserved_bytes == 250 and query.peak_bytes == 500 and first.peak_bytes == 300
    first.release()
    assert first.reserved_bytes == 0 and query.reserved_bytes == 50


def test_a_reservation_past_the_cap_fails_naming_the_pool_and_reserves_nothing():
    query, task, first, second = _tree(cap=1000)
    second.reserve(700)
    with pytest.raises(MemoryCapExceeded) as raised:
        first.set_reservation(400)
    error = raised.value
    assert (error.requested_bytes, error.used_bytes, error.cap_bytes) == (400, 700, 1000)
    assert (error.operator, error.plan_node_id) == ("HashAggregation", "3")
    message = str(error)
    for part in ("HashAggregation[3] (driver 0)", "400 bytes", "700 bytes", "1,000 bytes", "OrderBy[5] 700 bytes",
                 "query_memory_limit_bytes"):
        assert part in message
    assert isinstance(error, ExecutionError)
    assert query.reserved_bytes == 700 and first.reserved_bytes == 0
    first.set_reservation(300)  # exactly at the cap is allowed
    assert query.reserved_bytes == 1000


def test_transfer_moves_a_reservation_without_a_cap_check_and_release_all_empties_a_subtree():
    query, task, first, second = _tree(cap=1000)
    first.reserve(600)
    table = task.add_child("HashBuild[2]")
    first.transfer_to(table)
    assert (first.reserved_bytes, table.reserved_bytes, query.reserved_bytes) == (0, 600, 600)
    with pytest.raises(ValueError):
        table.transfer_to(MemoryPool("other query").add_child("x"))
    second.reserve(100)
    task.release_all()
    assert query.reserved_bytes == 0 and task.peak_bytes == 700


def test_concurrent_reservations_stay_exact():
    query = MemoryPool("query", cap=None)
    leaves = [query.add_child(f"op{i}") for i in range(8)]

    def churn(leaf):
        for size in range(1, 2001):
            leaf.set_reservation(size)
        leaf.release(500)

    threads = [threading.Thread(target=churn, args=(leaf,)) for leaf in leaves]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert query.reserved_bytes == 8 * 1500


# ------------------------------------------------------------------ the cap
def test_the_default_cap_is_a_fraction_of_free_memory_and_a_configured_one_wins(device_name):
    device = get_device(device_name)
    free = free_memory_bytes(device)
    assert free is not None and free > 0
    default = query_memory_cap(device, EngineConfig())
    assert 0 < default <= DEFAULT_QUERY_MEMORY_FRACTION * free * 1.5  # free memory moves a little between reads
    assert query_memory_cap(device, EngineConfig(query_memory_limit_bytes=12345)) == 12345
    with pytest.raises(ValueError, match="positive"):
        query_memory_cap(device, EngineConfig(query_memory_limit_bytes=0))
    assert Session(device=device_name, query_memory_limit_bytes=777).config.query_memory_limit_bytes == 777


class _FakeCupyPool:
    def __init__(self):
        self.limit = None

    def set_limit(self, size):
        self.limit = size

    def free_bytes(self):
        return 100


def test_on_a_gpu_free_memory_counts_cupys_cached_blocks_and_the_cupy_limit_is_set_only_when_asked():
    pool = _FakeCupyPool()
    xp = SimpleNamespace(get_default_memory_pool=lambda: pool,
                         cuda=SimpleNamespace(runtime=SimpleNamespace(memGetInfo=lambda: (1000, 4000))))
    gpu = Device("cuda", xp, kernel_flavor="cuda")
    assert free_memory_bytes(gpu) == 1100
    assert create_query_pool(gpu, EngineConfig()).cap == int(DEFAULT_QUERY_MEMORY_FRACTION * 1100)
    assert pool.limit is None
    create_query_pool(gpu, EngineConfig(cupy_pool_limit_bytes=5000))
    assert pool.limit == 5000
    create_query_pool(get_device("cpu"), EngineConfig(cupy_pool_limit_bytes=5000))  # ignored off the GPU


def _error_named(module: str, name: str, **attributes) -> BaseException:
    kind = type(name, (Exception,), {"__module__": module})
    error = kind("out of memory allocating 1,024 bytes")
    for key, value in attributes.items():
        setattr(error, key, value)
    return error


@pytest.mark.parametrize("error, expected", [
    pytest.param(_error_named("cupy.cuda.memory", "OutOfMemoryError"), True, id="cupy pool"),
    pytest.param(_error_named("cupy_backends.cuda.api.runtime", "CUDARuntimeError", status=2), True, id="cuda runtime"),
    pytest.param(_error_named("cupy_backends.cuda.api.runtime", "CUDARuntimeError", status=700), False, id="other runtime"),
    pytest.param(_error_named("numba.cuda.cudadrv.driver", "CudaAPIError", code=2), True, id="numba driver"),
    pytest.param(MemoryError("host"), False, id="host MemoryError"),
    pytest.param(_error_named("mylib", "OutOfMemoryError"), False, id="other library"),
])
def test_device_out_of_memory_is_recognized_by_type(error, expected):
    assert is_device_out_of_memory(error) is expected


# ------------------------------------------------------- queries under a cap
@pytest.fixture
def wide(device_name) -> pa.Table:
    """Many distinct keys and long strings: enough state to pass a small cap in every stateful operator.

    The simulator interprets every CUDA thread in Python, so it gets a third of the rows (still over the cap).
    """
    rows = 1000 if device_name == "cuda-sim" else 3000
    return pa.table({
        "k": pa.array(np.arange(rows, dtype=np.int64)),
        "g": pa.array(np.arange(rows, dtype=np.int64) % 7),
        # Two rows a value: a grouping on a key proven unique is a projection, which holds no state
        # (optimizer.unique_groupings); the aggregation under test groups on this one.
        "h": pa.array(np.arange(rows, dtype=np.int64) // 2),
        "s": pa.array([f"value-{i:06d}-" * 4 for i in range(rows)]),
    })


def _plans(catalog):
    """Return, per stateful operator, a plan whose state passes a 40 KB cap."""
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(catalog, id_generator=ids).table_scan("w", ["k", "s"]).project(["k AS bk", "s AS bs"])
    return {
        "HashAggregation": PlanBuilder(catalog).table_scan("w").aggregation(["h"], ["min(s) AS m"]).plan(),
        "OrderBy": PlanBuilder(catalog).table_scan("w").order_by(["s DESC"]).plan(),
        "TopN": PlanBuilder(catalog).table_scan("w").top_n(["s DESC"], 2500).plan(),
        "HashBuild": (PlanBuilder(catalog, id_generator=ids).table_scan("w", ["k", "g"])
                      .hash_join(["k"], ["bk"], build, ["g", "bs"]).plan()),
        "NestedLoopJoinBuild": (PlanBuilder(catalog, id_generator=ids).table_scan("w", ["k", "g"]).filter("k < 5")
                                .nested_loop_join(build, ["k", "bs"], filter="k = bk").plan()),
    }


def _operator_node(plan: PlanNode, operator: str) -> str:
    """Return the id the failing operator's node has in the plan (a join's build reports the join node)."""
    kind = {"HashAggregation": "Aggregation", "HashBuild": "HashJoin",
            "NestedLoopJoinBuild": "NestedLoopJoin"}.get(operator, operator)
    return next(node.id for node in _walk(plan) if node.kind == kind)


def _walk(node):
    yield node
    for source in node.sources:
        yield from _walk(source)


@pytest.mark.parametrize("operator", ["HashAggregation", "OrderBy", "TopN", "HashBuild", "NestedLoopJoinBuild"])
@pytest.mark.parametrize("drivers", [1, 4])
def test_a_query_past_its_cap_fails_naming_the_operator_and_the_session_keeps_working(device_name, drivers, operator,
                                                                                       wide):
    cap = 40_000
    session = Session(device=device_name, drivers=drivers, batch_rows=256, query_memory_limit_bytes=cap)
    # Splits of 1500 rows: each driver's own state passes the cap before any driver finishes its input
    # and hands it to a LocalExchange queue, so the operator under test is the one that asks past the cap.
    session.register("w", wide, split_rows=1500)
    plan = _plans(session.catalog)[operator]
    with pytest.raises(MemoryCapExceeded) as raised:
        session.execute(plan)
    error = raised.value
    # With several drivers an OrderBy's input first waits in the gather queue in front of it, which counts
    # against the same cap: whichever of the two asks past the cap is named.
    assert error.operator in ({operator, "LocalPartition"} if operator == "OrderBy" and drivers > 1 else {operator})
    assert error.plan_node_id.split(".")[0] == _operator_node(plan, operator).split(".")[0]
    assert error.cap_bytes == cap and error.requested_bytes > 0 and error.used_bytes + error.requested_bytes > cap
    assert f"{error.operator}[{error.plan_node_id}]" in str(error) and "query_memory_limit_bytes" in str(error)
    task = session.last_task
    assert task.state is TaskState.FAILED and all(d.is_done for d in task.drivers)
    assert task.pool.reserved_bytes == 0 and task.query_ctx.memory_pool.reserved_bytes == 0
    assert _driver_threads() == []
    # The same Session runs the next query, one that holds no state (a hash table alone would pass this cap).
    small = PlanBuilder(session.catalog).table_scan("w", ["k", "g"]).filter("g = 3").plan()
    assert sorted(session.execute(small).column("k").to_pylist()) == list(range(3, wide.num_rows, 7))


@pytest.mark.parametrize("drivers", [1, 4])
def test_peak_memory_is_reported_per_operator_and_everything_is_released(device_name, drivers, wide):
    session = Session(device=device_name, drivers=drivers, batch_rows=256)
    session.register("w", wide, split_rows=500)
    for build in ("HashBuild", "NestedLoopJoinBuild"):
        session.execute(_plans(session.catalog)[build])
        stats = session.last_stats()
        peaks = {s.operator_type: s.peak_memory_bytes for p in stats.pipelines for s in p.operators}
        assert peaks[build] > 0
        task = session.last_task
        assert task.pool.reserved_bytes == 0 and task.pool.peak_bytes >= peaks[build]
        assert peaks[build] <= task.query_ctx.memory_pool.cap
    aggregation = PlanBuilder(session.catalog).table_scan("w").aggregation(["h"], ["min(s) AS m"]).plan()
    text = session.explain(aggregation, analyze=True)
    assert "HashAggregation" in text and "peak memory" in text
    assert session.last_task.query_ctx.memory_pool.reserved_bytes == 0


def test_merged_stats_keep_the_largest_drivers_peak(device_name, wide):
    session = Session(device=device_name, drivers=4, batch_rows=256)
    session.register("w", wide, split_rows=300)
    session.execute(_plans(session.catalog)["OrderBy"])
    drivers = [op.stats.peak_memory_bytes for d in session.last_task.drivers for op in d.operators
               if op.operator_type == "OrderBy"]
    merged = [s for p in session.last_stats().pipelines for s in p.operators if s.operator_type == "OrderBy"]
    assert merged and merged[0].peak_memory_bytes == max(drivers) > 0


def test_local_exchange_queue_reserves_what_it_buffers_and_releases_it(device):
    query = MemoryPool("query", cap=10_000)
    queue = LocalExchangeQueue(num_partitions=2, num_producers=1, max_bytes=1 << 20)
    queue.memory_pool = query.add_child("LocalPartition[1]", operator="LocalPartition", plan_node_id="1")
    from gpu_engine.columnar.batch import Batch

    batch = Batch.from_arrow(pa.table({"x": pa.array(np.arange(100, dtype=np.int64))}), device)
    queue.enqueue([(0, batch), (1, batch)])
    assert query.reserved_bytes == 2 * batch.nbytes
    assert queue.next(0)[0] is batch and query.reserved_bytes == batch.nbytes
    queue.close_partition(1)
    assert query.reserved_bytes == 0
    queue.enqueue([(0, batch)])
    with pytest.raises(MemoryCapExceeded, match=r"LocalPartition\[1\]"):
        queue.enqueue([(0, batch)] * 20)
    assert query.reserved_bytes == batch.nbytes  # the failed enqueue queued nothing
    queue.abort()
    assert query.reserved_bytes == 0


# ------------------------------------------------- device out of memory
@dataclasses.dataclass(frozen=True, kw_only=True)
class DeviceOutOfMemoryNode(PlanNode):
    """A test node whose operator raises what CuPy raises when the device is out of memory."""


class DeviceOutOfMemory(Operator):
    def add_input(self, batch):
        raise _error_named("cupy.cuda.memory", "OutOfMemoryError")

    def get_output(self):
        return None


@make_operator.register
def _(item: DeviceOutOfMemoryNode, ctx):
    return DeviceOutOfMemory(ctx, item)


@pytest.mark.parametrize("drivers", [1, 4])
def test_device_out_of_memory_in_an_operator_becomes_memory_cap_exceeded(device_name, drivers, wide):
    session = Session(device=device_name, drivers=drivers, batch_rows=256)
    session.register("w", wide, split_rows=500)
    scan = PlanBuilder(session.catalog).table_scan("w", ["k"]).plan()
    plan = DeviceOutOfMemoryNode(id="oom", output_schema=scan.output_schema, sources=(scan,))
    with pytest.raises(MemoryCapExceeded) as raised:
        session.execute(plan)
    error = raised.value
    assert (error.operator, error.plan_node_id) == ("DeviceOutOfMemory", "oom")
    assert "ran out of memory in DeviceOutOfMemory[oom]" in str(error) and "OutOfMemoryError" in str(error)
    assert type(error.__cause__).__name__ == "OutOfMemoryError"
    assert session.last_task.state is TaskState.FAILED and _driver_threads() == []
    assert session.execute(scan).num_rows == wide.num_rows
