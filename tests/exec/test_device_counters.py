"""Device counters: what counts as a launch or a host sync, per thread, and how the Driver attributes them to operators."""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.device import Device
from gpu_engine.exec.device_counters import (
    DeviceCounts, count_host_sync, count_kernel_launch, counts_now, watch_device_allocations,
)
from gpu_engine.exec.local_planner import make_operator
from gpu_engine.exec.operator import Operator, OperatorStats
from gpu_engine.kernels.filter import selection_from_mask
from gpu_engine.kernels.gather import gather
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode


def _spent(action) -> DeviceCounts:
    before = counts_now()
    action()
    return counts_now() - before


# ------------------------------------------------------------------ counting
def test_each_device_read_counts_one_host_sync(device):
    values = device.asarray(np.array([3, 0, 7], dtype=np.int64))
    flags = device.asarray(np.array([False, True, False]))
    assert _spent(lambda: device.read_scalar(values, -1)) == DeviceCounts(0, 1, 0)
    assert _spent(lambda: device.any(flags)) == DeviceCounts(0, 1, 0)
    assert _spent(lambda: device.to_host(values)) == DeviceCounts(0, 1, 0)
    assert _spent(lambda: device.read_scalars([values[0], values.max(), device.xp.any(flags)])) == DeviceCounts(0, 1, 0)
    assert _spent(lambda: device.read_scalars([])) == DeviceCounts()


def test_device_reads_return_host_values(device):
    values = device.asarray(np.array([3, 0, 7], dtype=np.int64))
    assert device.read_scalar(values, -1) == 7
    assert device.read_scalars([values[0], values.max(), device.xp.any(values == 0), device.xp.all(values == 0)]) == [3, 7, 1, 0]
    assert device.any(values > 6) is True and device.any(values > 7) is False


def test_a_kernel_counts_its_launches_and_the_read_it_needs(device):
    """A selection launches one CPU twin or two CUDA kernels, and reads its kept count once, on every device."""
    mask = device.asarray(np.array([True, False, True, True]))
    spent = _spent(lambda: selection_from_mask(device, mask))
    assert spent.host_syncs == 1
    assert spent.kernel_launches == (1 if device.kernel_flavor == "cpu" else 2)
    rows = device.asarray(np.array([2, 0], dtype=np.int32))
    assert _spent(lambda: gather(device, device.asarray(np.arange(4)), rows)) == DeviceCounts(1, 0, 0)


def test_counters_belong_to_the_calling_thread():
    before = counts_now()
    other = threading.Thread(target=lambda: (count_kernel_launch(5), count_host_sync(2)))
    other.start()
    other.join()
    assert counts_now() == before
    count_kernel_launch(2)
    count_host_sync()
    assert counts_now() - before == DeviceCounts(2, 1, 0)


def test_allocations_are_only_watched_on_a_gpu(device):
    """NumPy has no allocation hook, so cpu and cuda-sim leave ``device_allocations`` at 0."""
    if device.is_gpu:
        pytest.skip("counted by a CuPy memory hook on cuda")
    watch_device_allocations(device)
    assert _spent(lambda: device.xp.empty(1 << 20)).device_allocations == 0


class FakeMemoryHook:
    """Stands in for ``cupy.cuda.MemoryHook``: a hook entered on a thread sees that thread's pool mallocs only."""

    name = "MemoryHook"
    _registered = threading.local()

    def __enter__(self):
        hooks = getattr(FakeMemoryHook._registered, "hooks", {})
        hooks[self.name] = self
        FakeMemoryHook._registered.hooks = hooks
        return self

    @staticmethod
    def malloc(nbytes: int) -> None:
        for hook in getattr(FakeMemoryHook._registered, "hooks", {}).values():
            hook.malloc_preprocess(device_id=0, size=nbytes, mem_size=512)


def test_gpu_allocations_are_counted_on_the_threads_that_watch_them():
    gpu = Device("cuda", types.SimpleNamespace(cuda=types.SimpleNamespace(MemoryHook=FakeMemoryHook)))
    spent: dict[str, DeviceCounts] = {}

    def allocate(name: str, watch: bool) -> None:
        before = counts_now()
        if watch:
            watch_device_allocations(gpu)
            watch_device_allocations(gpu)  # once per thread, however often a driver runs on it
        for _ in range(3):
            FakeMemoryHook.malloc(64)
        spent[name] = counts_now() - before

    for name, watch in (("watching", True), ("not watching", False)):
        thread = threading.Thread(target=allocate, args=(name, watch))
        thread.start()
        thread.join()
    assert spent == {"watching": DeviceCounts(0, 0, 3), "not watching": DeviceCounts()}


def test_merged_stats_sum_the_counters():
    first = OperatorStats("FilterProject", "1", 1, 0, kernel_launches=3, host_syncs=1, device_allocations=4)
    second = OperatorStats("FilterProject", "1", 1, 0, kernel_launches=5, host_syncs=2)
    merged = first.merge(second)
    assert (merged.kernel_launches, merged.host_syncs, merged.device_allocations) == (8, 3, 4)


# --------------------------------------------------------------- attribution
@dataclass(frozen=True, kw_only=True)
class CountingNode(PlanNode):
    """A test node whose operator reports fixed launches and syncs for every batch it receives."""

    launches_per_batch: int
    syncs_per_batch: int


class Counting(Operator):
    def add_input(self, batch):
        count_kernel_launch(self.node.launches_per_batch)
        count_host_sync(self.node.syncs_per_batch)
        self.input = batch

    def get_output(self):
        batch, self.input = self.input, None
        return batch


@make_operator.register
def _(item: CountingNode, ctx):
    return Counting(ctx, item)


@pytest.mark.parametrize("drivers", [1, 3])
def test_driver_attributes_each_operators_counts_to_it(device_name, drivers):
    table = pa.table({"x": pa.array(range(4000), pa.int64())})
    session = Session(device=device_name, drivers=drivers, batch_rows=1000)
    values = PlanBuilder().values(table).plan()
    counting = CountingNode(id="counting", output_schema=values.output_schema, sources=(values,),
                            launches_per_batch=7, syncs_per_batch=3)
    # A last operator that counts nothing itself: delivering results (a copy to the host) is charged to it.
    last = CountingNode(id="last", output_schema=values.output_schema, sources=(counting,),
                        launches_per_batch=0, syncs_per_batch=0)
    session.execute(last)
    by_node = session.last_stats().operator_stats_by_node()
    (stats,) = by_node["counting"]
    assert stats.input_batches == 4
    assert (stats.kernel_launches, stats.host_syncs, stats.device_allocations) == (7 * 4, 3 * 4, 0)
    assert all(s.kernel_launches == s.host_syncs == 0 for s in by_node[values.id])
    (delivering,) = by_node["last"]
    assert delivering.kernel_launches == 0 and delivering.host_syncs >= delivering.output_batches  # at least the waits


def _thirds() -> pa.Table:
    return pa.table({"x": pa.array(range(3000), pa.int64()), "k": pa.array([i % 3 for i in range(3000)], pa.int64())})


def _ahead_of_a_last_operator(plan: PlanNode) -> PlanNode:
    """Return ``plan`` under an operator that counts nothing, so result delivery is not charged to ``plan``'s root."""
    return CountingNode(id="last", output_schema=plan.output_schema, sources=(plan,), launches_per_batch=0,
                        syncs_per_batch=0)


def test_filter_project_counts_per_batch(device_name):
    """A filter keeping some rows and one checked addition: the predicate's kernel, a selection and the projection's
    kernel (it reads x through the selection's map), two reads per batch (the kept count; the predicate's and the
    add's checks together)."""
    session = Session(device=device_name, drivers=1, batch_rows=1000)
    plan = PlanBuilder().values(_thirds()).filter("k = 0").project(["x + 1 AS y"]).plan()
    session.execute(_ahead_of_a_last_operator(plan))
    (stats,) = session.last_stats().operator_stats_by_node()[plan.id]
    selection_launches = 1 if session.device.kernel_flavor == "cpu" else 2
    assert stats.input_batches == 3
    assert stats.kernel_launches == 3 * (1 + selection_launches + 1)  # predicate, selection, projection kernel
    assert stats.host_syncs == 3 * 2  # the kept count; the predicate's and the add's checks, read together


def test_explain_analyze_shows_launches_and_syncs(device_name):
    session = Session(device=device_name, drivers=1, batch_rows=1000)
    plan = PlanBuilder().values(_thirds()).filter("k = 0").project(["x + 1 AS y"]).plan()
    text = session.explain(plan, analyze=True)
    (stats,) = session.last_stats().operator_stats_by_node()[plan.id]
    assert stats.kernel_launches > 0 and f"launches {stats.kernel_launches}, syncs {stats.host_syncs}" in text
    assert ("allocations" in text) == session.device.is_gpu  # counted by CuPy's memory hook only
