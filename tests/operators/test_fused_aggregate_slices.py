"""A fused aggregation whose aggregates pass the slice budget runs as a key kernel and slice kernels (issue 29 item 3).

:func:`~gpu_engine.codegen.kernel_bounds.aggregate_slices` packs the aggregates into slices of at most
:data:`~gpu_engine.codegen.kernel_bounds.MAX_AGGREGATION_SLICE_NODES` nodes; the key kernel finds each row's slot
and every slice kernel folds its aggregates there. Here: the nodes per generated kernel and the kernels per
aggregation stay bounded as aggregates are added (counts, no compile), and split runs give DuckDB's rows and the
unsplit run's errors, with NULLs, a filter, no rows, no keys, string keys and a table that grows while rows are
pending; a split adds one launch per slice to a batch and no host sync. Most cases shrink the budget
(``small_budget``) so a few cheap aggregates split: the kernels stay small to compile, the paths are the same.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_rows
from gpu_engine import ExecutionError, Session
from gpu_engine.aggregation import aggregate_functions_of
from gpu_engine.codegen import kernel_bounds
from gpu_engine.codegen.fused_aggregation_kernel import LIFTED_DICTIONARY, KernelLayout, generate_fused_aggregation
from gpu_engine.codegen.fusion_program import plan_fusion_program
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.expressions import ColumnRef

#: The budget the run cases shrink the slice budget to: two int64 sums (7 nodes each) a slice.
SMALL_BUDGET = 16


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(kernel_bounds, "MAX_AGGREGATION_SLICE_NODES", SMALL_BUDGET)


@pytest.fixture
def slices_generated(monkeypatch) -> list[int]:
    """Record the slice count of every fused aggregation module an operator generates."""
    import gpu_engine.operators.fused_aggregation as operator

    seen: list[int] = []
    original = operator.generate_fused_aggregation

    def recording(program, functions, layout):
        generated = original(program, functions, layout)
        seen.append(generated.slices)
        return generated

    monkeypatch.setattr(operator, "generate_fused_aggregation", recording)
    return seen


# ------------------------------------------------------------------ counts (no compile)

SCHEMA = {"k": pa.int64(), "price": pa.decimal128(15, 2), "discount": pa.decimal128(15, 2), "quantity": pa.int64()}


def _kernel_sources(count: int) -> dict[str, int]:
    """Return the bytes of each function in the module generated for ``count`` distinct conditional decimal sums
    (``sum(CASE WHEN quantity > i THEN price * discount ELSE 0 END)``) grouped by ``k``."""
    session = Session(device="cpu")
    session.register("t", pa.table({name: pa.array([], dtype) for name, dtype in SCHEMA.items()}))
    sums = [f"sum(CASE WHEN quantity > {i} THEN price * discount ELSE 0 END) AS s{i}" for i in range(count)]
    node = PlanBuilder(session.catalog).table_scan("t").aggregation(["k"], sums).plan()
    functions = aggregate_functions_of(node)
    program = plan_fusion_program((), (ColumnRef("k", pa.int64()),), functions, SCHEMA)
    slices = kernel_bounds.aggregate_slices(program.shape(), functions)
    budget = kernel_bounds.MAX_AGGREGATION_SLICE_NODES
    for chosen in slices:  # every kernel's aggregates fold at most the budget's nodes (one over it: alone)
        nodes = sum(kernel_bounds.aggregate_nodes(program.arguments[a], len(functions[a].state_arrays()))
                    for a in chosen)
        assert nodes <= budget or len(chosen) == 1
    layout = KernelLayout(False, (True,) * len(program.columns), (LIFTED_DICTIONARY,) * len(program.lifted))
    generated = generate_fused_aggregation(program, functions, layout)
    assert generated.slices == (len(slices) if len(slices) > 1 else 0)
    sizes, current = {}, None
    for line in generated.source.splitlines():
        if line.startswith("def "):
            current = line[4:line.index("(")]
        if current:
            sizes[current] = sizes.get(current, 0) + len(line) + 1
    return sizes


def test_nodes_and_source_per_kernel_stay_flat_as_aggregates_grow():
    few, many = _kernel_sources(16), _kernel_sources(64)
    kernels = lambda sizes: [name for name in sizes if name.endswith("_cpu") and not name.startswith("move")]
    # Kernels per aggregation grow with the aggregates (greedy packing: two neighbouring slices pass the budget).
    assert len(kernels(few)) >= 2
    assert len(kernels(many)) <= 1 + 2 * 64 * 14 // kernel_bounds.MAX_AGGREGATION_SLICE_NODES + 1
    # The largest kernel's source does not grow with them (one kernel for 64 sums was ~4x that for 16).
    assert max(many.values()) <= max(few.values()) * 1.1


def test_aggregates_within_the_budget_stay_one_kernel():
    sizes = _kernel_sources(2)
    assert "slice0_cpu" not in sizes and "fused_cpu" in sizes


# ------------------------------------------------------------------ runs against DuckDB

def _table(rows: int, groups: int, seed: int = 5) -> pa.Table:
    rng = np.random.default_rng(seed)
    pick = rng.random(rows)
    g = rng.integers(0, groups, rows)
    v = rng.integers(-1000, 1000, rows)
    d = rng.integers(-99999, 99999, rows)
    f = rng.normal(0, 10, rows)
    return pa.table({
        "g": pa.array([None if p < 0.05 else int(x) for p, x in zip(pick, g)], pa.int64()),
        "s": pa.array([None if p > 0.97 else f"key-{x % 50}" for p, x in zip(pick, g)]),
        "v": pa.array([None if 0.1 < p < 0.2 else int(x) for p, x in zip(pick, v)], pa.int64()),
        "d": pa.array([None if 0.3 < p < 0.35 else decimal.Decimal(int(x)).scaleb(-2) for p, x in zip(pick, d)],
                      pa.decimal128(12, 2)),
        "f": pa.array(f, pa.float64()),
    })


#: Three slices at SMALL_BUDGET: (sum, count, min), the conditional decimal sum, avg. Every query below filters
#: ``v > constant`` over tables of one layout, so their kernels share one compile per step (constants are
#: parameters).
AGGREGATES = "sum(v) AS s1, count(v) AS c1, min(d) AS mn, sum(CASE WHEN v > 0 THEN d ELSE 0 END) AS s3, avg(f) AS af"
FILTER = "v > -900"
NO_ROWS = "v > 5000"


def _run(device_name: str, table: pa.Table, sql: str, drivers: int, batch_rows: int = 1024) -> pa.Table:
    session = Session(device=device_name, drivers=drivers, batch_rows=batch_rows)
    session.register("t", table, split_rows=max(1, table.num_rows // 4))
    return session.sql(sql)


@pytest.mark.simulator_values(drivers=(1,))
@pytest.mark.parametrize("drivers", [1, 2])
def test_split_group_by_equals_duckdb(device_name, drivers, small_budget, slices_generated):
    table = _table(2000 if device_name == "cpu" else 300, 40)
    sql = f"SELECT g, {AGGREGATES} FROM t WHERE {FILTER} GROUP BY g"
    assert_same_rows(_run(device_name, table, sql, drivers), duckdb_rows(sql, t=table))
    assert slices_generated and all(s >= 3 for s in slices_generated)


def test_split_global_aggregation_equals_duckdb(device_name, small_budget, slices_generated):
    table = _table(2000 if device_name == "cpu" else 300, 40)
    sql = f"SELECT {AGGREGATES} FROM t WHERE {FILTER}"
    assert_same_rows(_run(device_name, table, sql, 1), duckdb_rows(sql, t=table))
    assert slices_generated and all(s >= 3 for s in slices_generated)


def test_split_group_by_of_no_rows_equals_duckdb(small_budget, slices_generated):
    table = _table(500, 40)
    for sql in (f"SELECT g, {AGGREGATES} FROM t WHERE {NO_ROWS} GROUP BY g", f"SELECT {AGGREGATES} FROM t WHERE {NO_ROWS}"):
        assert_same_rows(_run("cpu", table, sql, 1), duckdb_rows(sql, t=table))
    assert slices_generated and all(s >= 3 for s in slices_generated)


def test_split_group_by_growing_its_table_with_rows_pending_equals_duckdb(small_budget, slices_generated):
    """A batch of few keys, then batches of new string and int keys: the key kernel leaves rows pending, the table
    grows, and those rows run through the key kernel and every slice again (and no other row twice)."""
    rows = 12_000
    keys = [i % 10 if i < 4000 else i for i in range(rows)]
    table = (_table(rows, 50, seed=9).set_column(0, "g", pa.array(keys, pa.int64()))
             .set_column(1, "s", pa.array([f"k{k % 3000}" for k in keys])))
    session = Session(device="cpu", drivers=1, batch_rows=4000)
    session.register("t", table, split_rows=rows)
    sql = f"SELECT s, g, {AGGREGATES} FROM t WHERE {FILTER} GROUP BY s, g"
    assert_same_rows(session.sql(sql), duckdb_rows(sql, t=table))
    (stats,) = [s for node in session.last_stats().operator_stats_by_node().values() for s in node
                if s.operator_type == "FusedAggregation"]
    assert stats.runtime.get("pending_runs", 0) > 0, stats.runtime
    assert slices_generated and all(s >= 3 for s in slices_generated)


def _overflow_message(fuse: bool) -> str:
    values = list(range(300))
    values[250] = 2**62  # times 4 overflows
    table = pa.table({"g": pa.array([i % 3 for i in range(300)], pa.int64()), "v": pa.array(values, pa.int64())})
    session = Session(device="cpu", drivers=1, batch_rows=256, fuse=fuse)
    session.register("t", table, split_rows=100)
    with pytest.raises(ExecutionError) as raised:
        session.sql("SELECT g, sum(v) AS a, sum(v + 1) AS b, count(*) AS c, sum(v * 4) AS x FROM t GROUP BY g")
    return str(raised.value).split(" [operator")[0]


def test_an_error_in_a_slice_raises_the_unfused_error(small_budget, slices_generated):
    assert _overflow_message(True) == _overflow_message(False)
    assert slices_generated and all(s >= 2 for s in slices_generated)


# ------------------------------------------------------------------ launches and syncs

def _fused_counts(device_name: str, batch_rows: int) -> tuple[int, int, int]:
    table = _table(512, 8)
    session = Session(device=device_name, drivers=1, batch_rows=batch_rows)
    session.register("t", table, split_rows=512)
    session.sql(f"SELECT g, {AGGREGATES} FROM t WHERE {FILTER} GROUP BY g")
    (stats,) = [s for node in session.last_stats().operator_stats_by_node().values() for s in node
                if s.operator_type == "FusedAggregation"]
    return stats.input_batches, stats.kernel_launches, stats.host_syncs


def _per_extra_batch(device_name: str) -> tuple[float, float]:
    (few, few_launches, few_syncs), (many, many_launches, many_syncs) = (_fused_counts(device_name, rows)
                                                                          for rows in (128, 64))
    assert many > few
    return (many_launches - few_launches) / (many - few), (many_syncs - few_syncs) / (many - few)


def test_a_split_adds_a_launch_per_slice_and_no_host_sync_a_batch(device_name, monkeypatch, slices_generated):
    whole_launches, whole_syncs = _per_extra_batch(device_name)
    assert slices_generated and not any(slices_generated)
    slices_generated.clear()
    monkeypatch.setattr(kernel_bounds, "MAX_AGGREGATION_SLICE_NODES", SMALL_BUDGET)
    split_launches, split_syncs = _per_extra_batch(device_name)
    (slices,) = set(slices_generated)
    assert split_syncs == whole_syncs
    assert split_launches == whole_launches + slices


# ------------------------------------------------------------------ the node cap is per kernel

def test_a_split_aggregation_is_capped_per_kernel_not_as_a_whole(device_name, monkeypatch, small_budget,
                                                                  slices_generated):
    """kernel_bounds.refuse_oversized bounds each kernel a split aggregation compiles (its key kernel, each slice)
    by MAX_KERNEL_NODES, not the program as a whole: an aggregation of many small aggregates fuses (it stayed
    unfused). The cap is shrunk to the largest kernel here, below the whole program's nodes."""
    import gpu_engine.planning.fusion as fusion

    seen = []
    original = fusion.refuse_oversized
    monkeypatch.setattr(fusion, "refuse_oversized", lambda program, *rest: (seen.append((program, *rest)),
                                                                             original(program, *rest))[1])
    table = _table(2000 if device_name == "cpu" else 300, 40)
    sql = f"SELECT g, {AGGREGATES} FROM t WHERE {FILTER} GROUP BY g"
    session = Session(device=device_name, drivers=1, batch_rows=1024)
    session.register("t", table, split_rows=max(1, table.num_rows // 4))
    session.explain(session.sql_plan(sql))  # plans the fusion (no run)
    program, functions = seen[-1]  # the aggregation's (the one fusion in the plan)
    per_kernel = kernel_bounds.kernel_node_counts(program, functions, 10_000)
    whole = kernel_bounds.kernel_node_counts(program, None, 10_000)[0]
    assert len(per_kernel) >= 3 and max(per_kernel) < whole, (per_kernel, whole)
    monkeypatch.setattr(kernel_bounds, "MAX_KERNEL_NODES", max(per_kernel))
    with pytest.raises(kernel_bounds.Unsupported):  # the whole program is over the cap
        kernel_bounds.refuse_oversized(program)
    kernel_bounds.refuse_oversized(program, functions)
    assert_same_rows(_run(device_name, table, sql, 1), duckdb_rows(sql, t=table))
    assert slices_generated and all(s == len(per_kernel) - 1 for s in slices_generated)
