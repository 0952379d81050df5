"""The generated fused-aggregation kernel's CUDA twin folds rows into a shared-memory cache of slot states.

Why a text test: the simulator runs the cache's code (every fused-aggregation
test on cuda-sim goes through it), but only a real GPU shows what it is for:
with few groups (TPC-H Q1's 4) every thread's atomics on the global slot
table serialized in L2 (Q1 hot at SF10 on an H100: 604 ms; 51 ms with the
cache). This pins the shape so that a rewrite cannot drop it unnoticed.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_engine.aggregation import aggregate_functions_of
from gpu_engine.codegen.fused_aggregation_kernel import (
    SHARED_CACHE_BYTES, KernelLayout, _shared_cache, generate_fused_aggregation,
)
from gpu_engine.codegen.fusion_program import plan_fusion_program
from gpu_engine.planning import prepare_plan
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import FusedAggregationNode, walk_plan

CATALOG = {"t": pa.schema([("k", pa.int64()), ("d", pa.decimal128(12, 2)), ("x", pa.float64())])}


def _twins(keys: list[str]) -> tuple[str, str]:
    plan = (PlanBuilder(CATALOG).table_scan("t").filter("x > 0")
            .aggregation(keys, ["sum(d) AS s", "avg(x) AS a", "min(x) AS m", "count(*) AS c"]).plan())
    node = next(n for n in walk_plan(prepare_plan(plan, "cpu", 1).plan) if isinstance(n, FusedAggregationNode))
    functions = aggregate_functions_of(node)
    program = plan_fusion_program(node.predicates, node.grouping_keys, functions,
                                  {f.name: f.type for f in node.source.output_schema})
    source = generate_fused_aggregation(program, functions, KernelLayout(False, (False,) * len(program.columns),
                                                                          ())).source
    cpu = source[source.index("def fused_cpu"):source.index("def fused_cuda")]
    end = source.find("def move_cpu")  # a table without keys never grows: no move twins
    cuda = source[source.index("def fused_cuda"):end if end >= 0 else len(source)]
    return cpu, cuda


def test_keyed_cuda_twin_caches_slot_states_in_shared_memory():
    cpu, cuda = _twins(["k"])
    assert "cuda.shared.array" in cuda and "cache_slot" in cuda and "cuda.syncthreads()" in cuda
    assert "cuda.atomic.cas(cache_slot" in cuda  # a block claims cache entries for global slots
    assert "shared" not in cpu


def test_global_cuda_twin_meets_in_one_shared_entry_before_one_merge_per_block():
    _, cuda = _twins([])
    assert "cuda.shared.array((1," in cuda and "cache_slot" not in cuda


def test_states_wider_than_the_budget_go_straight_to_the_slot_table():
    """The kernel size bound (codegen/kernel_bounds.py) keeps a plan this wide from fusing at all, so the
    layout is asked directly, for one fused sum's functions repeated past the shared-memory budget."""
    functions = aggregate_functions_of(next(
        n for n in walk_plan(prepare_plan(PlanBuilder(CATALOG).table_scan("t").aggregation(
            ["k"], ["sum(d) AS s"]).plan(), "cpu", 1).plan)
        if isinstance(n, FusedAggregationNode)))
    assert _shared_cache(functions * (SHARED_CACHE_BYTES // 8 // 3 + 1), keyed=True) is None
    assert _shared_cache(functions * 4, keyed=True).slots > 1


def test_slot_tables_fill_to_each_twins_maximum_load():
    """The CPU twin's tables fill to 3/4 of their slots before rows go pending, the CUDA twin's to 1/2; the
    operator's sizing keeps each below that."""
    from gpu_engine.codegen.fused_aggregation_kernel import max_groups, slots_for_groups

    cpu, cuda = _twins(["k"])
    assert "max_groups = np.int64(slot_table.shape[0] * 3 // 4)" in cpu
    assert "max_groups = np.int64(slot_table.shape[0] * 1 // 2)" in cuda
    for groups in (1, 2, 3, 767, 768, 769, 1 << 20):
        cpu_slots, cuda_slots = slots_for_groups(groups, "cpu"), slots_for_groups(groups, "cuda")
        assert cpu_slots & (cpu_slots - 1) == 0 and cuda_slots & (cuda_slots - 1) == 0
        assert groups <= cpu_slots * 3 // 4 and (cpu_slots == 2 or groups > cpu_slots // 2 * 3 // 4)
        assert groups <= cuda_slots // 2 and (cuda_slots == 2 or groups > cuda_slots // 4)
    assert slots_for_groups(768, "cpu") == 1024 and slots_for_groups(769, "cpu") == 2048
    assert slots_for_groups(512, "cuda") == 1024 and slots_for_groups(513, "cuda") == 2048
    assert max_groups(1024, "cpu") == 768 and max_groups(1024, "cuda") == 512
    for groups in (1, 767, 768, 769, 1 << 20):
        for flavor in ("cpu", "cuda"):
            assert groups <= max_groups(slots_for_groups(groups, flavor), flavor)
