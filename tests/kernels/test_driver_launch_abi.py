"""Every CUDA kernel of gpu_engine.kernels, compiled to PTX by real numba, gets exactly the parameters it declares.

Why: the driver launch path writes numba's kernel parameters by hand; if
numba's ABI and the packer disagree on a kernel (a count, a width, an
order), that kernel reads garbage on a GPU, and the simulator cannot show
it. So, in a fresh process without the simulator (as
``test_cuda_compile.py`` does; skipped where NVVM is missing), each kernel
is launched with representative arguments through a
:class:`~gpu_engine.kernels.driver_launch.KernelLauncher` on real numba
PTX (sm_80) and a recording driver: the launch must not fall back (the
launcher compares its layout with the PTX ``.param`` list), and the values
the driver would copy, read at the PTX's declared widths, must be numba's
``_prepare_args`` values. A second process on the same cache folder must
then read every kernel from disk without compiling. A kernel without a case
below fails the test: add its argument types. Generated (fused) kernels of
two representative plans are checked the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

NVVM_MISSING = 77
TESTS = Path(__file__).resolve().parent


def _zeros_of(dtype):
    """Return ``make(ndim=1)``: a small C-contiguous array of ``dtype`` (its values are never read)."""
    return lambda ndim=1: np.zeros((3,) * ndim, dtype=dtype)


i8, i32, i64, u8, u64, b1, f32, f64 = map(_zeros_of, (np.int8, np.int32, np.int64, np.uint8, np.uint64, np.bool_,
                                                     np.float32, np.float64))

#: kernel (module.function under gpu_engine.kernels) -> argument lists as the entry points pass them.
CASES = {
    "aggregate._count_cuda": [lambda: [i32(), b1(), True, i64()]],
    "aggregate._sum_int_cuda": [lambda: [i32(), i64(), b1(), True, i64(), i64(), b1(), False]],
    "aggregate._sum_words_cuda": [lambda: [i32(), i64(2), b1(), True, i64(), i64(), i64(), i64(), b1()]],
    "aggregate._sum_float_cuda": [lambda: [i32(), f64(), b1(), True, f64(), b1()]],
    "aggregate._split_words_cuda": [lambda: [i64(), i64(), i64(2)]],
    "aggregate._limb_words_cuda": [lambda: [i64(), i64(), i64(), i64(), i64(2), b1()]],
    "aggregate._sum_results_cuda": [lambda: [True, i64(), i64(), i64(), i64(), i64(), i64(), i64()]],
    "aggregate._extreme_int_cuda": [lambda: [i32(), i32(), b1(), True, i32(), b1(), True],
                                    lambda: [i32(), u64(), b1(), False, u64(), b1(), True]],
    "aggregate._extreme_float_cuda": [
        lambda: [i32(), f32(), i32(), b1(), True, i32(), b1(), True, np.int64(1), np.int64(2)],
        lambda: [i32(), f64(), i64(), b1(), True, i64(), b1(), False, np.int64(1), np.int64(2)]],
    "checked_arithmetic._checked_cuda": [lambda: [1, i64(), True, i64(), False, b1(), True, i64(), i64()]],
    "decimal128._wide_binary_cuda": [lambda: [1, i64(2), False, i64(2), True, 0, 2, 1, i64(2), i8()]],
    "filter._keep_flags_cuda": [lambda: [b1(), b1(), True, i32()]],
    "filter._scatter_kept_cuda": [lambda: [i32(), i32(), i32()]],
    "gamma._gamma_cuda": [lambda: [f64(), True, f64()]],
    "gather._gather_cuda": [lambda: [f64(), i32(), f64()], lambda: [b1(), i64(), b1()], lambda: [i8(), i32(), i8()],
                            lambda: [u64(), i64(), u64()], lambda: [f32(), i32(), f32()]],
    "gather._string_spans_cuda": [lambda: [i64(), i32(), i64(), i64()]],
    "gather._copy_string_chars_cuda": [lambda: [i64(), u8(), i64(), u8()]],
    "group_by._pack_strings_cuda": [lambda: [i64(), u8(), b1(), True, u64(2), 2, 1]],
    "group_by._hash_rows_cuda": [lambda: [u64(2), u64()]],
    "group_by._rehash_cuda": [lambda: [u64(), 5, i32()]],
    "group_by._lookup_rows_cuda": [lambda: [u64(2), u64(), i32(), u64(2), u64(), i32()]],
    "group_by._claim_slots_cuda": [lambda: [u64(2), u64(), i32(), u64(2), u64(), i64()]],
    "group_by._flag_first_rows_cuda": [lambda: [i32(), i64(), b1()]],
    "group_by._number_new_groups_cuda": [lambda: [i32(), u64(2), u64(), i64(), 5, i32(), u64(2), u64()]],
    "group_by._read_group_ids_cuda": [lambda: [i32(), i64(), i32()]],
    "hash._string_hashes_cuda": [lambda: [i64(), u8(), u64()]],
    "hash._combine_column_cuda": [lambda: [u64(), u64(), b1(), True, False]],
    "string_keys._hash_strings_cuda": [lambda: [i64(), u8(), u64()]],
    "string_keys._claim_string_slots_cuda": [
        lambda: [i64(), u8(), b1(), True, u64(), i32(), u64(2), i64(), u8(), i64(), i64()]],
    "string_keys._flag_first_string_rows_cuda": [lambda: [i32(), i64(), i32()]],
    "string_keys._intern_rows_serial_cuda": [
        lambda: [i64(), u8(), b1(), False, u64(), 0, i32(), u64(2), i64(), u8(), i64(), i64()]],
    "string_keys._append_new_strings_cuda": [
        lambda: [i32(), i64(), i64(), u8(), u64(), i64(), i32(), u64(2), i64(), u8(), i64()]],
    "string_keys._read_string_ids_cuda": [lambda: [i32(), i64(), i64()]],
    "hash_join._count_rows_cuda": [lambda: [i32(), i32()]],
    "hash_join._pack_keys_cuda": [lambda: [i64(2), i64(2), u64()]],
    "hash_join._find_keys_cuda": [lambda: [i64(2), i64(2), u64(), True, i32()]],
    "hash_join._find_fixed_width_keys_cuda": [lambda: [i64(), b1(), i32(), i64(2), u64(), True, i32()]],
    "hash_join._set_range_bits_cuda": [lambda: [i64(), np.int64(-3), u64()]],
    "hash_join._find_fixed_width_keys_in_range_cuda": [lambda: [i64(), b1(), i32(), i64(2), np.int64(-3), np.int64(40),
                                                                u64(), True, i32()]],
    "hash_join._pack_direct_cuda": [lambda: [i64(), i32(), np.int64(-3), i32(), u64()]],
    "hash_join._find_direct_keys_cuda": [lambda: [i64(), b1(), i32(), i32(), np.int64(-3), np.int64(40), u64(), True,
                                                  i32()]],
    "hash_join._scatter_rows_cuda": [lambda: [i32(), i32(), i32(), i32()]],
    "hash_join._count_matches_cuda": [lambda: [i32(), i64(), i64()]],
    "hash_join._value_bounds_cuda": [lambda: [i64(), i32(), i64(), b1(), i64(), i64()]],
    "hash_join._add_value_bounds_cuda": [lambda: [i32(), i64(), b1(), i64(), i64()]],
    "hash_join._emit_pairs_cuda": [lambda: [i32(), i64(), i32(), i64(), i32(), i32()]],
    "parquet_device._expand": [lambda: [u8(), i64(2), u8(), i64(2)]],
    "parquet_device._levels": [lambda: [u8(), i64(2), 1, 8, u8(), i32(), i32(), i64(2)]],
    "parquet_device._values": [lambda: [u8(), i64(2), i64(), 1, 8, i32(), i32(), i64(2), u8(), 3]],
    "partition._block_histogram_cuda": [lambda: [u64(), 16, 100, i32(2)]],
    "partition._block_scatter_cuda": [lambda: [u64(), 16, 100, i64(2), i32()]],
    "partition._histogram_cuda": [lambda: [u64(), 16, i32(), i32()]],
    "partition._scatter_cuda": [lambda: [i32(), i64(), i32()]],
    "radix_partition._radix_counts_cuda": [lambda: [u64(), np.uint64(60), i64()]],
    "radix_partition._radix_destinations_cuda": [lambda: [u64(), np.uint64(60), i64(), i64()]],
    "sort._encode_fixed_cuda": [lambda: [u64(), b1(), True, 1, False, u64(2), 0]],
    "sort._encode_strings_cuda": [lambda: [i64(), u8(), b1(), True, False, u64(2), 0, 2]],
    "strings._compare_cuda": [lambda: [i64(), u8(), i32(), True, i64(), u8(), i32(), False, i8()]],
    "strings._like_cuda": [lambda: [i64(), u8(), i32(), b1()]],
    "strings._isin_cuda": [lambda: [i64(), u8(), i64(), u8(), b1()]],
    "strings._substring_cuda": [lambda: [i64(), u8(), 1, 5, i64(), i64()]],
    "strings._substring_rows_cuda": [lambda: [i64(), u8(), i64(), True, i64(), i64(), i64(), i64()]],
    "strings._copy_cuda": [lambda: [u8(), i64(), i64(), u8()]],
    "strings._parse_decimal_cuda": [lambda: [i64(), u8(), 2, True, i64(), i8()]],
    "strings._parse_date_cuda": [lambda: [i64(), u8(), i32(), i8()]],
    "strings._like_segments_cuda": [lambda: [i64(), u8(), u8(), i64(), True, False, b1()]],
    "strings._trim_cuda": [lambda: [i64(), u8(), u8(), True, False, i64(), i64()]],
    "aggregate._moment_sums_cuda": [lambda: [i32(), b1(), True, False, i64(), f64(), f64(), f64(), f64(), True, i64(),
                                             f64(), f64()]],
    "aggregate._moment_deviations_cuda": [lambda: [i32(), b1(), True, False, i64(), f64(), f64(), f64(), f64(), f64(),
                                                   f64(), f64(), True, i64(), f64(), f64(), f64(), f64(), f64(), f64(),
                                                   f64(), f64()]],
    "aggregate._moment_join_cuda": [lambda: [i32(), b1(), False, True, i64(), f64(), f64(), f64(), f64(), f64(), f64(),
                                             f64(), f64(), i64(), f64(), f64(), f64(), f64(), f64(), f64(), f64()]],
    "aggregate._bits_cuda": [lambda: [i32(), i64(), b1(), True, i64(), b1(), np.int64(1)]],
    "aggregate._keep_any_cuda": [lambda: [i32(), b1(), i64(), i64(), b1()], lambda: [i32(), b1(), f64(), f64(), b1()]],
    "aggregate._product_cuda": [lambda: [i64(), i64(), f64(), b1(), False, f64(), b1()]],
    "window._segment_starts_cuda": [lambda: [b1(), i64(), i64()]],
    "window._scan_chunks_cuda": [lambda: [3, i64(), b1(), b1(), False, 1024, i64(), i64(), i64(), i64(), b1(), i64()],
                                 lambda: [0, f64(), b1(), b1(), True, 1024, f64(), i64(), f64(), i64(), b1(), i64()]],
    "window._chunk_carries_cuda": [lambda: [3, False, i64(), i64(), b1(), i64(), i64(), i64()],
                                   lambda: [0, True, f64(), i64(), b1(), f64(), i64(), i64()]],
    "window._apply_carries_cuda": [lambda: [3, b1(), False, 1024, i64(), i64(), i64(), i64(), i64()],
                                   lambda: [0, b1(), True, 1024, f64(), i64(), f64(), i64(), i64()]],
    "window._frame_loop_cuda": [lambda: [3, i64(), b1(), i64(), i64(), i64(), i64(), i64()],
                                lambda: [0, f64(), b1(), i64(), i64(), f64(), i64(), i64()]],
    "window._range_bounds_cuda": [lambda: [i64(), b1(), i64(), i64(), i64(), False, True, i64(), True, i64()],
                                  lambda: [f64(), b1(), i64(), i64(), i64(), True, False, f64(), False, i64()]],
    "window._tree_level_cuda": [lambda: [3, i64(), i64(), 0, 3, 3, i64()], lambda: [0, f64(), i64(), 0, 3, 3, i64()]],
    "window._tree_query_cuda": [lambda: [3, i64(), i64(), 3, i64(), i64(), i64(), i64(), i64()],
                                lambda: [0, f64(), i64(), 3, i64(), i64(), f64(), i64(), i64()]],
    "window_moments._moment_level_cuda": [lambda: [i64(), f64(), f64(), 0, 3, 3]],
    "window_moments._moment_query_cuda": [lambda: [i64(), f64(), f64(), 3, i64(), i64(), i64(), f64(), f64()]],
    "window_moments._comoment_level_cuda": [lambda: [i64(), f64(), f64(), f64(), f64(), f64(), 0, 3, 3]],
    "window_moments._comoment_query_cuda": [lambda: [i64(), f64(), f64(), f64(), f64(), f64(), 3, i64(), i64(), i64(),
                                                     f64(), f64(), f64(), f64(), f64()]],
}


def _generated_kernels() -> dict[str, tuple[object, list]]:
    """Return generated (fused) kernels of two representative plans: name -> (module, argument lists by kernel).

    A keyed kernel (a filter, a nullable column read through a gather map, a
    string key interned by dictionary code with code validity, float and
    decimal aggregates) and a global one (plain columns, a predicate lifted
    in row mode): their parameters cover every kind the generator emits,
    including the 2-D slot table and scalar lookup indices.
    """
    import pyarrow as pa

    from gpu_engine.aggregation import aggregate_functions_of
    from gpu_engine.codegen import kernel_bounds
    from gpu_engine.codegen.compiled_modules import generated_module
    from gpu_engine.codegen.fused_aggregation_kernel import KernelLayout, generate_fused_aggregation
    from gpu_engine.codegen.fused_filter_kernel import generate_fused_filter
    from gpu_engine.codegen.fused_project_kernel import generate_fused_projection
    from gpu_engine.codegen.fusion_program import plan_fusion_program
    from gpu_engine.planning import prepare_plan
    from gpu_engine.plans import PlanBuilder
    from gpu_engine.plans.nodes import FusedAggregationNode, walk_plan

    catalog = {"t": pa.schema([("k", pa.string()), ("d", pa.decimal128(12, 2)), ("x", pa.float64()),
                               ("i", pa.int32())])}
    keyed = (PlanBuilder(catalog).table_scan("t").filter("i > 0")
             .aggregation(["k"], ["sum(d) AS s", "avg(x) AS a", "min(x) AS m", "count(*) AS c"]).plan())
    grand = (PlanBuilder(catalog).table_scan("t").filter("k LIKE 'a%'")
             .aggregation([], ["sum(i) AS s", "max(i) AS m"]).plan())
    # "keyed" reads its string key and first column through a second map, as above a hash join (rows2).
    plans = {"keyed": (keyed, lambda columns, lifts: KernelLayout(True, (True,) * columns, ("dictionary+validity",) * lifts,
                                                                   (True,) + (False,) * (columns - 1), (True,) * lifts)),
             "global": (grand, lambda columns, lifts: KernelLayout(False, (False,) * columns, ("rows",) * lifts))}
    kinds = {"n": lambda: 3, "positions": i32, "has_positions": lambda: False, "rows": i32, "rows2": i32,
             "slot_table": lambda: i64(2),
             "status": i64, "pending": i32, "mask": b1, "parameters": i64, "row_slots": i64}
    out = {}
    # "split": "keyed" with its aggregates over a small slice budget: a key kernel and slice kernels (row_slots).
    plans["split"] = plans["keyed"]
    for name, (plan, layout_of) in plans.items():
        node = next(n for n in walk_plan(prepare_plan(plan, "cpu", 1).plan) if isinstance(n, FusedAggregationNode))
        schema = {f.name: f.type for f in node.source.output_schema}
        functions = aggregate_functions_of(node)
        program = plan_fusion_program(node.predicates, node.grouping_keys, functions, schema)
        budget = kernel_bounds.MAX_AGGREGATION_SLICE_NODES
        kernel_bounds.MAX_AGGREGATION_SLICE_NODES = 12 if name == "split" else budget
        try:
            generated = generate_fused_aggregation(program, functions,
                                                   layout_of(len(program.columns), len(program.lifted)))
        finally:
            kernel_bounds.MAX_AGGREGATION_SLICE_NODES = budget
        assert bool(generated.slices) == (name == "split")
        module = generated_module(generated.source)
        out[f"generated.{name}.fused_cuda"] = (module.fused_cuda, [_arguments(generated, program, kinds)])
        for g in range(generated.slices):
            out[f"generated.{name}.slice{g}_cuda"] = (getattr(module, f"slice{g}_cuda"),
                                                      [_arguments(generated, program, kinds)])
        if node.grouping_keys and name != "split":  # (the split module's move twin is keyed's)
            out[f"generated.{name}.move_cuda"] = (module.move_cuda, [lambda: [i64(2), i64(2)]])
    # A FilterProject's predicate kernel: a dictionary-lifted string test and checked arithmetic on a mapped batch.
    predicate = PlanBuilder(catalog).table_scan("t").filter("k LIKE 'a%' AND i + 1 > 0").plan().predicate
    program = plan_fusion_program((predicate,), (), [], {f.name: f.type for f in catalog["t"]})
    generated = generate_fused_filter(program, KernelLayout(True, (True,) * len(program.columns),
                                                            ("dictionary+validity",) * len(program.lifted)))
    module = generated_module(generated.source, stem="filter")
    out["generated.filter.filter_cuda"] = (module.filter_cuda, [_arguments(generated, program, kinds)])
    # A FilterProject's projection kernel: checked arithmetic, a CASE over a lifted string test, a date compare.
    outputs = PlanBuilder(catalog).table_scan("t").project(
        ["i * 2 + 1 AS a", "CASE WHEN k LIKE 'a%' THEN x ELSE -x END AS b", "d * 3 AS c"]).plan().expressions
    program = plan_fusion_program((), (), [], {f.name: f.type for f in catalog["t"]}, tuple(outputs))
    generated = generate_fused_projection(program, KernelLayout(True, (True,) * len(program.columns),
                                                                ("dictionary+validity",) * len(program.lifted)))
    module = generated_module(generated.source, stem="project")
    output_types = {f"o{j}": expr.dtype for j, expr in enumerate(program.outputs)}
    out["generated.project.project_cuda"] = (module.project_cuda, [_arguments(generated, program, kinds, output_types)])
    return out


def _arguments(generated, program, kinds, output_types=None):
    """Return a maker of one argument list for a generated kernel's parameters."""
    def make():
        column_types = {f"c{k}": ref.dtype for k, ref in enumerate(program.columns)} | (output_types or {})
        arguments = []
        for parameter in generated.parameters:
            if parameter in kinds:
                arguments.append(kinds[parameter]())
            elif parameter in column_types:
                arguments.append(np.zeros(3, dtype=_physical(column_types[parameter])))
            elif parameter.endswith(("_v", "_valid")):
                arguments.append(b1())
            elif parameter.endswith("_codes"):
                arguments.append(i32())
            elif parameter.endswith("_null"):
                arguments.append(np.int64(3))
            elif parameter.endswith("_values"):
                lift = program.lifted[int(parameter[1:parameter.index("_")])]
                arguments.append(i64() if lift.interned else np.zeros(3, dtype=_physical(lift.expr.dtype)))
            else:
                raise AssertionError(f"no argument kind for generated parameter {parameter}")
        return arguments

    return make


def _physical(dtype):
    from gpu_engine.columnar.types import physical_dtype

    return physical_dtype(dtype)


#: Kernels this machine's numba cannot compile to PTX (their block-shared histograms): warned, not failed.
KNOWN_UNCOMPILABLE = {"partition._block_histogram_cuda", "partition._block_scatter_cuda"}

CASES.update({name: argument_lists for name, (_, argument_lists) in _generated_kernels().items()})


def _run(cache: Path, uncompilable: list[str] | None = None) -> dict:
    """Run the check in a fresh process; with ``uncompilable`` (from a first run) it must compile nothing else."""
    environment = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    from test_cuda_compile import _cuda_home

    home = _cuda_home()
    if home:
        environment["CUDA_HOME"] = home
    command = [sys.executable, __file__, str(cache)]
    if uncompilable is not None:
        command.append(json.dumps(uncompilable))
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=600)
    if completed.returncode == NVVM_MISSING:
        pytest.skip(f"no usable NVVM: {completed.stdout.strip()[-300:]}")
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run the check twice on one cache folder: a first process compiles, a second must read from disk."""
    cache = tmp_path_factory.mktemp("ptx")
    first = _run(cache)
    return first, _run(cache, first["uncompilable"])


def test_every_kernel_packs_what_its_numba_ptx_declares(runs):
    first, _ = runs
    assert first["problems"] == []
    cases = sum(len(argument_lists) for name, argument_lists in CASES.items() if name not in first["uncompilable"])
    assert first["launches"] == 2 * cases and first["outcomes"].get("compiled") == cases
    # Every kernel but these compiles to PTX here (test_cuda_compile.py checked a list of them apart; this covers all).
    assert set(first["uncompilable"]) <= KNOWN_UNCOMPILABLE, first["uncompilable"]
    if first["uncompilable"]:  # numba here cannot compile them, so neither numba's dispatcher nor this path can
        warnings.warn(f"numba could not compile these kernels here, their parameters were not checked: "
                      f"{first['uncompilable']}")


def test_a_new_process_reads_every_kernel_from_disk(runs):
    first, second = runs
    assert second["problems"] == [] and second["uncompilable"] == first["uncompilable"]
    assert second["launches"] == first["launches"]
    assert second["outcomes"].get("disk") == first["outcomes"].get("compiled") and "compiled" not in second["outcomes"]


def test_every_cuda_kernel_has_argument_types_here(runs):
    first, _ = runs
    assert first["kernels_without_case"] == [], "add their argument types to CASES"


# ------------------------------------------------------------------ subprocess
def _all_cuda_kernels() -> dict[str, object]:
    import importlib
    import pkgutil

    from numba.cuda.dispatcher import CUDADispatcher

    import gpu_engine.kernels as package
    from gpu_engine.kernels.lazy_cuda import real_cuda

    real_cuda()  # kernel modules imported before numba.cuda (CASES above) hold lazy twins until then

    kernels = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"gpu_engine.kernels.{module_info.name}")
        for name, value in vars(module).items():
            if isinstance(value, CUDADispatcher) and value.py_func.__module__ == module.__name__:
                kernels[f"{module_info.name}.{name}"] = value
    return kernels


def _check_every_kernel(cache: str, known_uncompilable: list[str] | None) -> dict:
    import types as pytypes

    try:
        import numba.cuda.dispatcher as dispatcher
        from numba import cuda
        from numba.cuda.cudadrv.nvvm import NVVM

        NVVM()
    except Exception as error:
        print(f"NVVM unavailable: {error}")
        sys.exit(NVVM_MISSING)
    # Device functions ask the current GPU for its compute capability; pretend one exists (sm_80).
    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(8, 0))
    if known_uncompilable is not None:
        def refuse(*arguments, **options):
            raise AssertionError("compiled although the PTX is on disk")
        cuda.compile_ptx = refuse

    sys.path[:0] = [str(TESTS), str(TESTS.parent)]
    from fake_cuda_arrays import CupyLikeArray, InterfaceOnlyArray, as_fake_argument
    from test_driver_launch import RecordingDriver, numba_abi_values

    from gpu_engine.kernels.driver_launch import COMPILE_FAILED, KernelLauncher
    from gpu_engine.kernels.ptx_cache import PtxCache, compile_records

    kernels = _all_cuda_kernels()
    kernels.update({name: kernel for name, (kernel, _) in _generated_kernels().items()})
    driver = RecordingDriver()
    launcher = KernelLauncher(driver, PtxCache((8, 0), cache))
    problems, uncompilable, launches = [], set(), 0
    for name, argument_lists in CASES.items():
        if name not in kernels:
            continue
        for make in argument_lists:
            values = make()
            for kind in (CupyLikeArray, InterfaceOnlyArray):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        launched = launcher.launch(kernels[name], 3, 64, 0, [as_fake_argument(v, kind) for v in values])
                    except Exception as error:
                        problems.append(f"{name}: {type(error).__name__}: {error}")
                        continue
                if launched:
                    launches += 1
                    expected = [field for value in values for field in numba_abi_values(value)]
                    if driver.launches[-1]["values"] != expected:
                        problems.append(f"{name} ({kind.__name__}): packed {driver.launches[-1]['values']}, "
                                        f"numba passes {expected}")
                    continue
                reasons = [r.reason for r in compile_records() if r.outcome == "fallback" and r.kernel.endswith(name)]
                first_run = known_uncompilable is None
                if (name in known_uncompilable) if not first_run else (
                        reasons and all(reason.startswith(COMPILE_FAILED) for reason in reasons)):
                    uncompilable.add(name)
                else:
                    problems.append(f"{name}: fell back to numba: {reasons}")
    outcomes: dict[str, int] = {}
    for record in compile_records():
        outcomes[record.outcome] = outcomes.get(record.outcome, 0) + 1
    return {"problems": problems, "launches": launches, "outcomes": outcomes, "uncompilable": sorted(uncompilable),
            "kernels_without_case": sorted(set(kernels) - set(CASES))}


if __name__ == "__main__":
    known = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    print(json.dumps(_check_every_kernel(sys.argv[1], known)))
