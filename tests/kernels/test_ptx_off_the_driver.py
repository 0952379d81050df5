"""On ``cuda`` a generated kernel's PTX compiles in the background compile process and its module loads off the drivers.

Why: the driver launch path compiled a generated kernel's PTX (seconds, holding the interpreter lock) and loaded
it on the driver that first launched it, inside the launcher's lock; in the ``"background"`` compile mode
:func:`~gpu_engine.codegen.background_compiles.kernel_state` now asks the launcher first, queues a
:class:`~gpu_engine.kernels.ptx_cache.PtxJob` for the compile process, and the module is loaded by the thread that
reads the process's answers. Without a GPU: a stand-in CUDA driver (``RecordingDriver``), CuPy-like arrays over
host memory, and a compile process started without the simulator (it compiles PTX for sm_90 with this machine's
NVVM, as ``bench/ptx_ahead.py`` does; skipped where there is none).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import threading

import numpy as np
import pyarrow as pa
import pytest

from fake_cuda_arrays import CupyLikeArray
from gpu_engine.codegen import background_compiles
from gpu_engine.codegen.background_compiles import (PENDING, READY, BackgroundCompiler, TierSwitch, TwinRef,
                                                    kernel_state)
from gpu_engine.device import Device, get_device
from gpu_engine.kernels import driver_launch
from gpu_engine.kernels.driver_launch import KernelLauncher, _compile_options, argument_signature
from gpu_engine.kernels.ptx_cache import PtxCache, clear_compile_records, compile_records
from test_driver_launch import RecordingDriver

H100 = (9, 0)


@pytest.fixture(scope="module")
def q6_filter():
    """Return TPC-H Q6's predicate kernel as a generated file, and a maker of its launch arguments (fake arrays)."""
    from gpu_engine.codegen.compiled_modules import generated_file
    from gpu_engine.codegen.fused_aggregation_kernel import KernelLayout
    from gpu_engine.codegen.fused_filter_kernel import generate_fused_filter
    from gpu_engine.codegen.fusion_program import plan_fusion_program
    from gpu_engine.columnar.types import physical_dtype
    from gpu_engine.plans import PlanBuilder

    schema = pa.schema([("l_quantity", pa.decimal128(15, 2)), ("l_discount", pa.decimal128(15, 2)),
                        ("l_shipdate", pa.date32())])
    predicate = PlanBuilder({"lineitem": schema}).table_scan("lineitem").filter(
        "l_quantity < 24 AND l_discount BETWEEN 0.05 AND 0.07 AND l_shipdate >= DATE '1994-01-01'").plan().predicate
    program = plan_fusion_program((predicate,), (), [], {field.name: field.type for field in schema})
    generated = generate_fused_filter(program, KernelLayout(False, (False,) * len(program.columns), ()))
    file = generated_file(generated.source, stem="filter", evict=False)
    arrays = {f"c{k}": np.zeros(4, physical_dtype(ref.dtype)) for k, ref in enumerate(program.columns)}
    arrays.update(n=4, rows=np.zeros(4, np.int32), parameters=np.zeros(4, np.int64), mask=np.zeros(4, np.bool_),
                  status=np.zeros(1, np.int64))
    assert tuple(arrays) != generated.parameters and set(arrays) == set(generated.parameters)

    def arguments():
        values = [arrays[parameter] for parameter in generated.parameters]
        return [CupyLikeArray(value) if isinstance(value, np.ndarray) else value for value in values]

    return file, arguments


class _ThreadRecordingDriver(RecordingDriver):
    """A stand-in driver that also records which thread loaded each module."""

    def __init__(self):
        super().__init__()
        self.loading_threads = []

    def load(self, ptx, entry):
        self.loading_threads.append(threading.current_thread().name)
        return super().load(ptx, entry)


def test_a_ptx_job_is_picklable_and_names_the_entry_the_launcher_reads(q6_filter, tmp_path):
    file, arguments = q6_filter
    kernel = TwinRef(file, "filter_cpu").cuda_dispatcher
    cache = PtxCache(H100, tmp_path)
    job = KernelLauncher(RecordingDriver(), cache).ptx_job(kernel, arguments(), str(file.path))
    signature = argument_signature(arguments())
    assert pickle.loads(pickle.dumps(job)) == job
    assert job.path == str(cache.path_for(kernel, signature, _compile_options(kernel)))
    assert (job.module, job.module_path, job.function) == (file.name, str(file.path), "filter_cuda")
    assert job.signature == signature and job.compute_capability == H100 and not job.written()
    assert str(job.signature[1]) == "array(int32, 1d, C)" and str(job.signature[0]) == "int64"


def test_cuda_sim_asks_the_launcher_nothing(q6_filter, monkeypatch):
    file, _ = q6_filter
    monkeypatch.setattr(driver_launch, "process_launcher", lambda: pytest.fail("cuda-sim asked for a launcher"))
    compiler = BackgroundCompiler()
    monkeypatch.setattr(background_compiles, "_COMPILER", compiler)
    simulated = [np.zeros(4, np.int64)]  # never looked at
    assert kernel_state(get_device("cuda-sim"), "background", TwinRef(file, "filter_cpu"), simulated) == READY
    assert compiler.pending() == 0 and compiler.finished == 0


def _compile_process_environment() -> dict[str, str]:
    from test_cuda_compile import _cuda_home

    environment = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    home = _cuda_home()
    if home:
        environment["CUDA_HOME"] = home
    return environment


def test_the_compile_process_writes_the_entry_and_the_module_loads_off_the_driver(q6_filter, tmp_path, monkeypatch):
    file, arguments = q6_filter
    driver = _ThreadRecordingDriver()
    launcher = KernelLauncher(driver, PtxCache(H100, tmp_path / "ptx"))
    monkeypatch.setattr(driver_launch, "_DEFAULT", launcher)
    compiler = BackgroundCompiler(environment=_compile_process_environment())
    monkeypatch.setattr(background_compiles, "_COMPILER", compiler)
    cuda = Device("cuda", np, kernel_flavor="cuda")  # a GPU device as kernel_state sees one (no GPU touched)
    twin, kernel = TwinRef(file, "filter_cpu"), TwinRef(file, "filter_cpu").cuda_dispatcher
    job = launcher.ptx_job(kernel, arguments(), str(file.path))
    clear_compile_records()
    tiers = TierSwitch(cuda, "background")  # what a fused operator asks before each batch
    try:
        assert tiers.compiles_in_background and not tiers.use_generated(lambda: [(twin, arguments())])
        assert kernel_state(cuda, "background", twin, arguments()) == PENDING
        assert driver.loaded == [] and compiler.pending() == 1
        assert compiler.wait_idle(timeout=240)
        if compiler.failures:
            reason = next(iter(compiler.failures.values()))
            if "NVVM" in reason or "libnvvm" in reason.lower():
                pytest.skip(f"no usable NVVM for the compile process: {reason[:300]}")
            pytest.fail(reason)
        assert job.written()  # the compile process wrote the very entry the launcher keys
        assert kernel_state(cuda, "background", twin, arguments()) == READY
        assert tiers.use_generated(lambda: [(twin, arguments())])  # the next batch switches to the kernel
        assert len(driver.loaded) == 1 and driver.loading_threads == ["gpu_engine-compile-answers"]  # not a driver
        assert launcher.launch(kernel, 1, 32, 0, arguments())  # no plan made at the launch: nothing loads again
        assert len(driver.loaded) == 1 and len(driver.launches) == 1
        assert [record.outcome for record in compile_records()] == ["disk"]  # nothing compiled in this process
        assert compiler.compiled == 1
    finally:
        compiler.close()
    # A later process finds the entry on disk: only the module load is left, on a thread of its own (no worker).
    later_driver = _ThreadRecordingDriver()
    monkeypatch.setattr(driver_launch, "_DEFAULT", KernelLauncher(later_driver, PtxCache(H100, tmp_path / "ptx")))
    later = BackgroundCompiler()
    monkeypatch.setattr(background_compiles, "_COMPILER", later)
    assert kernel_state(cuda, "background", twin, arguments()) in (PENDING, READY)
    assert later.wait_idle(timeout=60) and kernel_state(cuda, "background", twin, arguments()) == READY
    assert later_driver.loading_threads == ["gpu_engine-ptx-load"] and later._process is None
    assert later.compiled == 0 and later.finished == 1


def test_the_compile_process_writes_no_entry_under_a_key_its_code_does_not_give(q6_filter, tmp_path):
    file, arguments = q6_filter
    kernel = TwinRef(file, "filter_cpu").cuda_dispatcher
    job = KernelLauncher(RecordingDriver(), PtxCache(H100, tmp_path)).ptx_job(kernel, arguments(), str(file.path))
    stale = dataclasses.replace(job, path=str(tmp_path / "filter_cuda-stale.ptx"))  # as if keyed by older code
    with pytest.raises(RuntimeError, match="keys to .* in the compile process but to .*stale"):
        PtxCache.write_job(stale, kernel)
    assert list(tmp_path.iterdir()) == []
