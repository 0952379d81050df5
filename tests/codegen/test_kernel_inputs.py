"""KernelInputs: lookup tables of lifted string subexpressions, evaluated once per dictionary and process.

A predicate such as ``mode IN ('MAIL', 'SHIP')`` over a dictionary column is
evaluated on the dictionary's values (a lookup table the kernel reads by code).
The table depends only on the expression and the dictionary's contents, so
every operator of every query reading that dictionary must get it without
evaluating again; an interned grouping key's ids depend on its operator's
interner and must not be shared.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import gpu_engine.codegen.kernel_inputs as kernel_inputs
from gpu_engine.codegen.fusion_program import plan_fusion_program
from gpu_engine.codegen.kernel_inputs import KernelInputs
from gpu_engine.columnar.batch import Batch
from gpu_engine.device import get_device
from gpu_engine.plans.sql_translator import parse_expression

SCHEMA = pa.schema([("mode", pa.string()), ("qty", pa.int64())])


def _batch(device, values: list[str], codes: list[int]) -> Batch:
    modes = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(values, pa.large_string()))
    table = pa.table({"mode": modes, "qty": pa.array(range(len(codes)), pa.int64())})
    return Batch.from_arrow(table, device)


def _program(predicate: str):
    expr = parse_expression(predicate, SCHEMA, "Filter[0]")
    return plan_fusion_program((expr,), (), (), {f.name: f.type for f in SCHEMA})


@pytest.fixture
def counted_evaluations(monkeypatch):
    calls = []
    evaluate = kernel_inputs.evaluate

    def counting(expr, batch):
        calls.append(expr)
        return evaluate(expr, batch)

    monkeypatch.setattr(kernel_inputs, "evaluate", counting)
    monkeypatch.setattr(kernel_inputs, "_shared_lookups", type(kernel_inputs._shared_lookups)())
    return calls


@pytest.mark.parametrize("device_name", ["cpu", "cuda-sim"])
def test_operators_share_a_dictionarys_lookup_table(counted_evaluations, device_name):
    device = get_device(device_name)
    program = _program("mode IN ('MAIL', 'SHIP')")
    assert len(program.lifted) == 1 and not program.lifted[0].interned
    batch = _batch(device, ["AIR", "MAIL", "SHIP", "RAIL"], [0, 1, 2, 3, 1])
    first, second = KernelInputs(device, program), KernelInputs(device, program)
    _, arrays = first.bind(batch)
    _, again = second.bind(_batch(device, ["AIR", "MAIL", "SHIP", "RAIL"], [3, 3, 2]))
    assert len(counted_evaluations) == 1  # the second operator read the first one's table
    assert list(device.to_host(arrays["l0_values"])[:4]) == [False, True, True, False]
    assert again["l0_values"] is arrays["l0_values"]


def test_another_dictionary_or_expression_is_evaluated_anew(counted_evaluations):
    device = get_device("cpu")
    program = _program("mode IN ('MAIL', 'SHIP')")
    KernelInputs(device, program).bind(_batch(device, ["AIR", "MAIL"], [0, 1]))
    _, arrays = KernelInputs(device, program).bind(_batch(device, ["MAIL", "AIR"], [0, 1]))
    assert len(counted_evaluations) == 2  # same values, another order: another table
    assert list(arrays["l0_values"][:2]) == [True, False]
    KernelInputs(device, _program("mode IN ('AIR')")).bind(_batch(device, ["MAIL", "AIR"], [0, 1]))
    assert len(counted_evaluations) == 3


def test_interned_keys_are_not_shared_between_operators(counted_evaluations):
    """A string grouping key's ids come from its operator's interner: each operator evaluates its own."""
    device = get_device("cpu")
    key = parse_expression("mode", SCHEMA, "Aggregation[0]")
    program = plan_fusion_program((), (key,), (), {f.name: f.type for f in SCHEMA})
    interned = [m for m, lift in enumerate(program.lifted) if lift.interned]
    assert interned, "a string grouping key is lifted and interned"
    batch = _batch(device, ["AIR", "MAIL"], [0, 1, 1])

    class Interner:
        def __init__(self, offset):
            self.offset = offset

        def ids(self, column, together=None):
            return np.arange(len(column), dtype=np.int64) + self.offset

    first = KernelInputs(device, program, {m: Interner(0) for m in interned})
    second = KernelInputs(device, program, {m: Interner(100) for m in interned})
    _, a = first.bind(batch)
    _, b = second.bind(batch)
    m = interned[0]
    assert list(a[f"l{m}_values"]) != list(b[f"l{m}_values"])


def test_a_batchs_writable_buffers_do_not_change_the_kernels_signature():
    """Columns decoded from Arrow are read-only, columns an operator computed are writable: numba types the
    two differently, so the same kernel compiled a second specialization when a later run's batch brought
    the other kind (TPC-DS q14's second run compiled its fused aggregation again, and in background mode
    ran that run on the lowest tier). Bound inputs are always read-only."""
    from dataclasses import replace

    from numba import typeof

    device = get_device("cpu")
    program = _program("mode IN ('MAIL', 'SHIP') AND qty > 1")
    from_arrow = _batch(device, ["AIR", "MAIL", "SHIP"], [0, 1, 2, 1])
    computed = Batch(from_arrow.names, tuple(replace(c, data=np.array(c.data)) for c in from_arrow.columns), device,
                     None, from_arrow.num_rows)
    assert computed.columns[1].data.flags.writeable and not from_arrow.columns[1].data.flags.writeable
    signatures = []
    for batch in (from_arrow, computed):
        _, arrays = KernelInputs(device, program).bind(batch)
        signatures.append({name: typeof(array) for name, array in arrays.items()})
    assert signatures[0] == signatures[1]


def test_a_batch_without_nulls_reads_the_variant_with_validity_once_its_shape_met_one():
    """A column's validity depends on a batch's data (a row group without NULLs has none); the layout followed
    it, so one query's batches alternated between kernel variants, compiled run after run (TPC-DS q14)."""
    device = get_device("cpu")
    program = _program("qty > 1")
    with_nulls = Batch.from_arrow(pa.table({"mode": pa.array(["a", "b", "c"]), "qty": pa.array([1, None, 3])}), device)
    without = Batch.from_arrow(pa.table({"mode": pa.array(["a", "b"]), "qty": pa.array([5, 6])}), device)
    assert with_nulls.columns[1].validity is not None and without.columns[1].validity is None
    first_layout, _ = KernelInputs(device, program).bind(with_nulls)
    layout, arrays = KernelInputs(device, program).bind(without)  # another operator, as another driver's
    assert layout == first_layout
    assert [bool(v) for v in arrays["c0_v"]] == [True, True]
    other, _ = KernelInputs(device, _program("qty < 1")).bind(without)  # a shape that never met a NULL
    assert other.column_validity == (False,)


def test_batches_sharing_one_unfingerprinted_dictionary_evaluate_it_once(counted_evaluations, monkeypatch):
    """A dictionary too large to fingerprint (a fused PARTIAL step's emitted key: every group's string, split
    by a LocalPartition into batches that share that one dictionary object) is evaluated once per operator,
    known by the object itself: a FINAL step interned all its values again for every batch (TPC-H q10's
    c_comment). Another dictionary object with the same values is evaluated anew (nothing says it is equal)."""
    import gpu_engine.columnar.column as column_module

    monkeypatch.setattr(column_module, "FINGERPRINT_MAX_BYTES", 0)  # every dictionary counts as too large
    device = get_device("cpu")
    program = _program("mode IN ('MAIL', 'SHIP')")
    inputs = KernelInputs(device, program)
    batch = _batch(device, ["AIR", "MAIL", "SHIP", "RAIL"], [0, 1, 2, 3, 1])
    _, first = inputs.bind(batch)
    _, second = inputs.bind(batch.with_gather_map(device.asarray(np.array([4, 2], dtype=np.int32))))
    assert len(counted_evaluations) == 1
    assert second["l0_values"] is first["l0_values"]
    inputs.bind(_batch(device, ["AIR", "MAIL", "SHIP", "RAIL"], [1, 1]))
    assert len(counted_evaluations) == 2
