"""The fused aggregation's CPU twin prefetches the slots of string keys' rows ahead, as it does integer keys'.

Why: a string grouping key is interned into ids before the kernel runs (:class:`~gpu_engine.kernels.string_keys.
StringKeyTable`), so the slot of row ``j + PREFETCH_DISTANCE`` is known while row ``j`` is probed; without the
hint each row of a table past the caches waited a memory round trip (db-benchmark's ``GROUP BY id3``, 100k
strings: half the kernel's time; q10's six keys over an 8M-slot table). The text tests pin which key reads the
look-ahead uses; the query tests run it over tables past :data:`~gpu_engine.kernels.prefetch.PREFETCH_MIN_BYTES`
(where it runs) with NULL keys, long strings, dictionary-coded keys and a final step over mapped batches.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from duckdb_reference import rows_mismatch

from gpu_engine import Session
from gpu_engine.aggregation import aggregate_functions_of
from gpu_engine.codegen.fused_aggregation_kernel import KernelLayout, generate_fused_aggregation
from gpu_engine.codegen.fusion_program import plan_fusion_program
from gpu_engine.planning import prepare_plan
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import FusedAggregationNode, walk_plan

CATALOG = {"t": pa.schema([("s", pa.string()), ("k", pa.int64()), ("x", pa.float64())])}


def _cpu_twin(keys: list[str], lifted_modes: tuple[str, ...]) -> str:
    plan = PlanBuilder(CATALOG).table_scan("t").aggregation(keys, ["sum(x) AS total", "count(*) AS n"]).plan()
    node = next(n for n in walk_plan(prepare_plan(plan, "cpu", 1).plan) if isinstance(n, FusedAggregationNode))
    functions = aggregate_functions_of(node)
    program = plan_fusion_program(node.predicates, node.grouping_keys, functions,
                                  {f.name: f.type for f in node.source.output_schema})
    assert [lift.interned for lift in program.lifted] == [True]  # s: an interned key
    layout = KernelLayout(False, (False,) * len(program.columns), lifted_modes)
    source = generate_fused_aggregation(program, functions, layout).source
    return source[source.index("def fused_cpu"):source.index("def fused_cuda")]


def test_interned_string_keys_prefetch_their_rows_slots():
    """An interned key read by row (plain strings), alone or beside an integer key, is read ahead by its id."""
    for keys in (["s"], ["s", "k"]):
        twin = _cpu_twin(keys, ("rows",))
        assert "prefetch_row(slot_table" in twin and "l0_values[ahead_i]" in twin, keys


def test_dictionary_coded_keys_prefetch_only_beside_other_keys():
    """Codes alone find their slots in the run's code cache (no look-ahead); beside an integer key the id is read
    through the code; codes with NULLs (a validity to read first) are read ahead too, a NULL row's code as the
    NULL code (TPC-DS q39's warehouse name beside three integer keys probed a 75 MB table a row at a time)."""
    assert "prefetch_row(slot_table" not in _cpu_twin(["s"], ("dictionary",))
    mixed = _cpu_twin(["s", "k"], ("dictionary",))
    assert "prefetch_row(slot_table" in mixed and "l0_values[np.int64(l0_codes[ahead])]" in mixed
    nullable = _cpu_twin(["s", "k"], ("dictionary+validity",))
    assert "prefetch_row(slot_table" in nullable
    assert "l0_values[(np.int64(l0_codes[ahead]) if l0_codes_v[ahead] else l0_null)]" in nullable


def _table(rows: int, distinct: int) -> pa.Table:
    rng = np.random.default_rng(11)
    picks = rng.integers(0, distinct, rows)
    labels = pa.array([None if p % 97 == 5 else f"a-string-longer-than-16-bytes-{p}" if p % 3 else f"s{p}"
                       for p in picks], pa.string())
    return pa.table({"s": labels, "d": labels.dictionary_encode(), "k": pa.array(rng.integers(0, 4, rows), pa.int64()),
                     "x": pa.array(rng.uniform(-1, 1, rows))})


@pytest.mark.parametrize("keys", ["s", "s, k", "d, k"])
def test_string_keys_past_the_caches_group_as_duckdb_does(device_name, keys):
    """On cpu the slot tables pass 1 MB (the look-ahead runs: 30k keys, four words a slot and more); ``d`` is
    dictionary-encoded (its ids read through its codes). The CUDA twins do not prefetch and run a small case."""
    simulated = device_name == "cuda-sim"
    table = _table(200 if simulated else 60_000, 60 if simulated else 30_000)
    session = Session(device=device_name, drivers=2, batch_rows=64 if simulated else 16_384)
    session.register("x", table, split_rows=max(1, table.num_rows // 4))
    sql = f"SELECT {keys}, sum(x) AS total, count(*) AS n FROM x GROUP BY {keys}"
    reference = duckdb.connect()
    reference.register("x", table)
    problem = rows_mismatch(session.sql(sql), reference.sql(sql).to_arrow_table())
    assert problem is None, problem
    stats = session.last_stats().operator_stats_by_node()
    fused = [s for node in stats.values() for s in node if s.operator_type == "FusedAggregation"]
    assert fused and not any(s.runtime.get("lowest_tier_batches") for s in fused)
