"""The driver launch path: numba signatures from arguments, numba's parameter ABI, plans, fallbacks, threads.

Why: a wrong signature compiles the wrong kernel and a wrong parameter
buffer makes a kernel read garbage pointers, and neither shows in the
simulator (CI runs kernels there, never through this path). So these tests
check, without a GPU, what the path hands the driver: a recording driver
decodes each launch's parameters the way the real one copies them, at the
call, from the widths the PTX entry declares. Expected values restate
numba's ``_prepare_args``; expected types come from ``numba.typeof`` of the
equivalent host value. That the layout matches real numba PTX for every
kernel is checked in ``test_driver_launch_abi.py``; a ``gpu`` test at the end
launches real kernels.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
import time

import numba
import numpy as np
import pytest
from fake_cuda_arrays import CupyLikeArray, InterfaceOnlyArray, as_fake_argument
from numba.core import types

from gpu_engine.kernels import driver_launch
from gpu_engine.kernels.driver_launch import (
    KernelLaunchError,
    KernelLauncher,
    ParameterSlot,
    UnsupportedLaunch,
    argument_signature,
    kernel_launcher_choice,
    parameter_layout,
)
from gpu_engine.kernels.ptx_cache import PtxCache, clear_compile_records, compile_records, ptx_entry_parameters

_PTX_TYPES = {(1, False): "u8", (2, False): "u16", (4, False): "u32", (8, False): "u64", (4, True): "f32",
              (8, True): "f64"}
_DECODE = {(1, False): "B", (2, False): "H", (4, False): "I", (8, False): "Q", (4, True): "f", (8, True): "d"}
ARRAY_KINDS = [pytest.param(CupyLikeArray, id="cupy-like"), pytest.param(InterfaceOnlyArray, id="interface-only")]


def ptx_declaring(layout, entry="stub_entry", body="\tret;"):
    """Return PTX text whose entry declares one parameter per slot of ``layout``, as numba's PTX does."""
    parameters = ",\n".join(f"\t.param .{_PTX_TYPES[(slot.size, slot.is_float)]} {entry}_param_{index}"
                            for index, slot in enumerate(layout))
    return (f".version 8.0\n.target sm_80\n.address_size 64\n\n"
            f".visible .entry {entry}(\n{parameters}\n)\n{{\n{body}\n}}\n")


class StubCompiler:
    """Stand in for numba's compile_ptx (no NVVM in the simulator): count calls, declare the packer's layout."""

    def __init__(self, make_ptx=None):
        self.calls = []
        self.make_ptx = make_ptx or (lambda signature: ptx_declaring(parameter_layout(signature)))

    def __call__(self, py_func, signature, compute_capability, options):
        self.calls.append((py_func.__name__, signature, compute_capability, options))
        return self.make_ptx(signature)


class RecordingDriver:
    """Decode every launch's parameters at the call, from the pointer array, as the CUDA driver copies them.

    ``pause_midway`` yields the interpreter half-way through the copy, so
    another thread can run its own launch in between: were a parameter buffer
    shared between threads, the values read after the pause would be another
    launch's.
    """

    invalid_context = 201

    def __init__(self, errors=(), pause_midway=False):
        self.errors = list(errors)
        self.pause_midway = pause_midway
        self.loaded = []
        self.launches = []
        self.made_current = []

    def load(self, ptx, entry):
        self.loaded.append(entry)
        return (entry, tuple(ptx_entry_parameters(ptx))), f"context-{len(self.loaded)}"

    def launch_kernel(self, function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared, stream, params,
                      extra):
        entry, declared = function
        pointers = (ctypes.c_void_p * max(len(declared), 1)).from_address(params)
        values = []
        for index, (size, is_float) in enumerate(declared):
            if self.pause_midway and index == len(declared) // 2:
                time.sleep(0)
            values.append(struct.unpack(_DECODE[(size, is_float)], ctypes.string_at(pointers[index], size))[0])
        self.launches.append({"entry": entry, "grid": (grid_x, grid_y, grid_z), "block": (block_x, block_y, block_z),
                              "shared": shared, "stream": stream, "values": values, "extra": extra})
        return (self.errors.pop(0) if self.errors else 0,)

    def make_current(self, context):
        self.made_current.append(context)

    def error_text(self, error):
        return f"CUDA_ERROR_{error}"


class StubKernel:
    """What the launcher reads of a numba dispatcher: ``py_func`` and ``targetoptions``."""

    def __init__(self, py_func, **targetoptions):
        self.py_func = py_func
        self.targetoptions = {"debug": False, "lineinfo": False, "opt": True, "link": [], "fastmath": False,
                              "device": False, "extensions": [], **targetoptions}


def _kernel_of_one(a):
    pass


def _kernel_of_three(a, b, c):
    pass


def _kernel_of_many(*arguments):
    pass


def numba_abi_values(value):
    """Restate numba's ``_Kernel._prepare_args``: the parameter values one argument becomes, as unsigned bit patterns.

    An array's strides are those of its ``__cuda_array_interface__``, where a
    C-contiguous array (CuPy's included) gives none and numba computes them
    from the shape (NumPy's own may differ for an empty array).
    """
    if isinstance(value, np.ndarray):
        strides = value.strides
        if value.flags.c_contiguous:
            strides = tuple(int(np.prod(value.shape[axis + 1:], dtype=np.int64)) * value.itemsize
                            for axis in range(value.ndim))
        fields = [0, 0, value.size, value.itemsize, value.ctypes.data, *value.shape, *strides]
        return [field & (2**64 - 1) for field in fields]
    numba_type = numba.typeof(value)
    if numba_type == types.boolean:
        return [int(value)]
    if numba_type == types.float16:
        return [int(np.float16(value).view(np.uint16))]
    if numba_type in (types.complex64, types.complex128):
        part = np.float32 if numba_type == types.complex64 else float
        return [float(part(value.real)), float(part(value.imag))]
    if numba_type in (types.float32, types.float64):
        return [float(np.float32(value)) if numba_type == types.float32 else float(value)]
    return [int(value) & (2**numba_type.bitwidth - 1)]


@pytest.fixture
def launcher_parts(tmp_path):
    clear_compile_records()
    compiler = StubCompiler()
    driver = RecordingDriver()
    launcher = KernelLauncher(driver, PtxCache((8, 0), tmp_path / "ptx", compile=compiler))
    return launcher, driver, compiler


# --------------------------------------------------------------- signatures
SCALARS = [True, np.True_, 7, -1, 2**63 + 5, 2.5, 1 + 2j, np.int8(-3), np.int16(300), np.int32(-7), np.int64(9),
           np.uint8(200), np.uint16(60000), np.uint32(4_000_000_000), np.uint64(2**64 - 1), np.float16(1.5),
           np.float32(0.1), np.float64(-2.25), np.complex64(1 - 1j), np.complex128(3 + 4j)]
ARRAYS = [
    pytest.param(lambda: np.arange(5, dtype=np.int64), id="int64"),
    pytest.param(lambda: np.ones(4, dtype=np.bool_), id="bool"),
    pytest.param(lambda: np.zeros(0, dtype=np.float32), id="empty-float32"),
    pytest.param(lambda: np.arange(12, dtype=np.uint64).reshape(3, 4), id="uint64-2d-C"),
    pytest.param(lambda: np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)), id="int32-2d-F"),
    pytest.param(lambda: np.arange(10, dtype=np.float64)[::2], id="float64-strided"),
    pytest.param(lambda: np.arange(24, dtype=np.int16).reshape(2, 3, 4)[:, 1:, :], id="int16-3d-A"),
]


@pytest.mark.parametrize("value", SCALARS, ids=repr)
def test_scalars_get_the_type_numba_gives_them(value):
    assert argument_signature([value]) == (numba.typeof(value),)


@pytest.mark.parametrize("make", ARRAYS)
@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_device_arrays_get_the_type_numba_gives_the_same_host_array(make, kind):
    host = make()
    assert argument_signature([kind(host)]) == (numba.typeof(host),)


def test_interface_arrays_with_contiguous_strides_spelled_out_are_contiguous():
    host = np.arange(6, dtype=np.int64).reshape(2, 3)
    assert argument_signature([InterfaceOnlyArray(host, omit_contiguous_strides=False)]) == (types.int64[:, ::1],)


@pytest.mark.parametrize("value", [np.arange(3), [1, 2], "text", None], ids=["numpy-host-array", "list", "str", "none"])
def test_arguments_that_are_not_device_arrays_or_scalars_are_refused(value):
    with pytest.raises(UnsupportedLaunch):
        argument_signature([value])


def test_parameter_layout_flattens_arrays_and_sizes_scalars_as_numba_does():
    signature = (types.int64[:, ::1], types.boolean, types.int32, types.uint8, types.float32, types.float64,
                 types.float16, types.complex64)
    pointer, intp = ParameterSlot("Q", 8, False), ParameterSlot("q", 8, False)
    null = ParameterSlot("", 8, False)
    assert parameter_layout(signature) == (
        # meminfo, parent, nitems, itemsize, data, 2 extents, 2 strides
        null, null, intp, intp, pointer, intp, intp, intp, intp,
        ParameterSlot("?", 1, False), ParameterSlot("i", 4, False), ParameterSlot("B", 1, False),
        ParameterSlot("f", 4, True), ParameterSlot("d", 8, True), ParameterSlot("e", 2, False),
        ParameterSlot("f", 4, True), ParameterSlot("f", 4, True))


# ------------------------------------------------------------------ packing
ARGUMENT_SETS = [
    pytest.param(lambda: [np.arange(7, dtype=np.float64), np.arange(5, dtype=np.int32), np.empty(5)], id="gather"),
    pytest.param(lambda: [np.arange(12, dtype=np.uint64).reshape(3, 4), True, np.int32(-5), 2**63 + 1],
                 id="matrix-and-scalars"),
    pytest.param(lambda: [np.asfortranarray(np.ones((2, 3), np.float32)), np.arange(9, dtype=np.int8)[::3],
                          np.float16(0.5), np.uint8(250), 1.25, np.float32(3.5), 2 - 3j, np.complex64(1 + 2j)],
                 id="fortran-strided-floats-complex"),
    pytest.param(lambda: [np.zeros(0, np.int64), np.bool_(False), -(2**63), np.uint64(2**64 - 1)], id="edges"),
]


@pytest.mark.parametrize("make", ARGUMENT_SETS)
@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_launch_hands_the_driver_numba_abi_values(launcher_parts, make, kind):
    launcher, driver, _ = launcher_parts
    values = make()
    assert launcher.launch(StubKernel(_kernel_of_many), 40, 128, 0xABC, [as_fake_argument(v, kind) for v in values])
    (launch,) = driver.launches
    assert launch["grid"] == (40, 1, 1) and launch["block"] == (128, 1, 1) and launch["stream"] == 0xABC
    assert launch["shared"] == 0 and launch["extra"] == 0
    assert launch["values"] == [field for value in values for field in numba_abi_values(value)]


def test_each_signature_compiles_once_and_equivalent_keys_share_it(launcher_parts):
    launcher, driver, compiler = launcher_parts
    kernel = StubKernel(_kernel_of_three)
    arrays = lambda dtype: CupyLikeArray(np.zeros(4, dtype))
    for scalar in (3, np.int64(4), 5):  # a Python int and an np.int64 both type as int64
        assert launcher.launch(kernel, 1, 32, 0, [arrays(np.int64), scalar, arrays(np.int64)])
    assert len(compiler.calls) == 1 and len(driver.loaded) == 1
    assert launcher.launch(kernel, 1, 32, 0, [arrays(np.int32), 3, arrays(np.int64)])
    assert len(compiler.calls) == 2 and len(driver.loaded) == 2
    assert [value for launch in driver.launches for value in launch["values"][7:8]] == [3, 4, 5, 3]
    assert [record.outcome for record in compile_records()] == ["compiled", "compiled"]


def test_a_new_launcher_on_the_same_cache_directory_loads_from_disk(launcher_parts, tmp_path):
    launcher, _, compiler = launcher_parts
    kernel = StubKernel(_kernel_of_one)
    assert launcher.launch(kernel, 1, 32, 0, [CupyLikeArray(np.zeros(3))])
    second_compiler, second_driver = StubCompiler(), RecordingDriver()
    second = KernelLauncher(second_driver, PtxCache((8, 0), tmp_path / "ptx", compile=second_compiler))
    assert second.launch(kernel, 1, 32, 0, [CupyLikeArray(np.zeros(3))])
    assert second_compiler.calls == [] and len(second_driver.launches) == 1
    assert [record.outcome for record in compile_records()] == ["compiled", "disk"]


# ---------------------------------------------------------------- fallbacks
def _fallback_reasons():
    return [record.reason for record in compile_records() if record.outcome == "fallback"]


def test_the_options_numba_cuda_sets_by_default_keep_the_driver_path(launcher_parts):
    launcher, driver, compiler = launcher_parts
    numba_cuda_defaults = {"inline": "never", "forceinline": False, "launch_bounds": None, "lto": True}
    assert launcher.launch(StubKernel(_kernel_of_one, **numba_cuda_defaults), 1, 32, 0, [CupyLikeArray(np.zeros(2))])
    assert compiler.calls[0][3] == {"fastmath": False, "lineinfo": False, "opt": True}


def test_a_numpy_host_array_falls_back_to_numba_once_recorded(launcher_parts):
    launcher, driver, compiler = launcher_parts
    with pytest.warns(RuntimeWarning, match="numba's dispatcher"):
        assert launcher.launch(StubKernel(_kernel_of_one), 1, 32, 0, [np.zeros(3)]) is False
    assert launcher.launch(StubKernel(_kernel_of_one), 1, 32, 0, [np.zeros(3)]) is False
    assert driver.launches == [] and compiler.calls == []
    assert len(_fallback_reasons()) == 1 and "neither a device array nor a scalar" in _fallback_reasons()[0]


@pytest.mark.parametrize("options, reason", [({"debug": True}, "debug"), ({"link": ["extra.cu"]}, "links"),
                                             ({"max_registers": 32}, "max_registers")])
def test_kernel_options_ptx_cannot_honour_fall_back(launcher_parts, options, reason):
    launcher, driver, compiler = launcher_parts
    with pytest.warns(RuntimeWarning):
        assert not launcher.launch(StubKernel(_kernel_of_one, **options), 1, 32, 0, [CupyLikeArray(np.zeros(2))])
    assert compiler.calls == [] and driver.launches == [] and reason in _fallback_reasons()[0]


@pytest.mark.parametrize("make_ptx, reason", [
    (lambda signature: ptx_declaring(parameter_layout(signature)[:-1]), "declares parameters"),
    (lambda signature: ".extern .func vprintf(.param .b64 a);\n" + ptx_declaring(parameter_layout(signature)),
     "links in separately"),
], ids=["layout-mismatch", "extern-function"])
def test_ptx_the_packer_cannot_serve_falls_back(tmp_path, make_ptx, reason):
    clear_compile_records()
    driver = RecordingDriver()
    launcher = KernelLauncher(driver, PtxCache((8, 0), tmp_path, compile=StubCompiler(make_ptx)))
    with pytest.warns(RuntimeWarning):
        assert not launcher.launch(StubKernel(_kernel_of_one), 1, 32, 0, [CupyLikeArray(np.zeros(2))])
    assert driver.loaded == [] and reason in _fallback_reasons()[0]


class _LoadRefusingDriver(RecordingDriver):
    def load(self, ptx, entry):
        raise KernelLaunchError("cuModuleLoadData failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION")


def _raise_typing_error(signature):
    raise TypeError("numba cannot type this kernel")


@pytest.mark.parametrize("driver, make_ptx, reason", [
    (RecordingDriver(), _raise_typing_error, "TypeError: numba cannot type this kernel"),
    (_LoadRefusingDriver(), None, "UNSUPPORTED_PTX_VERSION"),
], ids=["compile", "module-load"])
def test_a_failed_compile_or_load_leaves_the_kernel_to_numba(tmp_path, driver, make_ptx, reason):
    clear_compile_records()
    launcher = KernelLauncher(driver, PtxCache((8, 0), tmp_path, compile=StubCompiler(make_ptx)))
    with pytest.warns(RuntimeWarning):
        assert not launcher.launch(StubKernel(_kernel_of_one), 1, 32, 0, [CupyLikeArray(np.zeros(2))])
    assert not launcher.launch(StubKernel(_kernel_of_one), 1, 32, 0, [CupyLikeArray(np.zeros(2))])
    (fallback,) = _fallback_reasons()
    assert fallback.startswith(driver_launch.COMPILE_FAILED) and reason in fallback and driver.launches == []


# ------------------------------------------------------------ driver errors
def test_a_thread_without_a_current_context_gets_the_plans_and_launches_again(tmp_path):
    driver = RecordingDriver(errors=[RecordingDriver.invalid_context])
    launcher = KernelLauncher(driver, PtxCache((8, 0), tmp_path, compile=StubCompiler()))
    array = np.arange(3, dtype=np.int64)
    assert launcher.launch(StubKernel(_kernel_of_one), 2, 64, 5, [CupyLikeArray(array)])
    assert driver.made_current == ["context-1"]
    assert [launch["values"] for launch in driver.launches] == [numba_abi_values(array)] * 2


def test_other_driver_errors_name_the_kernel_and_the_way_around(tmp_path):
    driver = RecordingDriver(errors=[700])
    launcher = KernelLauncher(driver, PtxCache((8, 0), tmp_path, compile=StubCompiler()))
    with pytest.raises(KernelLaunchError, match=r"_kernel_of_one.*CUDA_ERROR_700.*GPU_ENGINE_KERNEL_LAUNCHER=numba"):
        launcher.launch(StubKernel(_kernel_of_one), 1, 32, 0, [CupyLikeArray(np.zeros(2))])
    assert driver.made_current == []


# ------------------------------------------------------------------ threads
def test_concurrent_launches_never_share_a_parameter_buffer(tmp_path):
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    driver = RecordingDriver(pause_midway=True)
    launcher = KernelLauncher(driver, PtxCache((8, 0), tmp_path, compile=StubCompiler()))
    kernel = StubKernel(_kernel_of_three)
    threads_count, launches_each = 8, 150
    arrays = [(np.arange(thread + 1, dtype=np.int64), np.zeros(thread + 2, np.float64))
              for thread in range(threads_count)]
    failures = []

    def run(thread):
        left, right = arrays[thread]
        arguments = [CupyLikeArray(left), thread * 1000, CupyLikeArray(right)]
        for _ in range(launches_each):
            launcher.launch(kernel, 1, 32, thread, arguments)

    workers = [threading.Thread(target=run, args=(thread,)) for thread in range(threads_count)]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(previous)
    assert len(driver.launches) == threads_count * launches_each
    for launch in driver.launches:
        left, right = arrays[launch["stream"]]
        expected = numba_abi_values(left) + [launch["stream"] * 1000] + numba_abi_values(right)
        if launch["values"] != expected:
            failures.append(launch)
    assert failures == []
    (plan,) = {id(plan): plan for plans in launcher._plans.values() for plan in plans.values()}.values()
    assert len(plan.free_buffers) > 1, "the threads never overlapped, so this test checked nothing"


# --------------------------------------------------------------- selection
@pytest.mark.parametrize("value, choice", [(None, "driver"), ("driver", "driver"), (" Numba ", "numba"),
                                           ("", "driver")])
def test_the_environment_variable_picks_the_launcher(monkeypatch, value, choice):
    if value is None:
        monkeypatch.delenv("GPU_ENGINE_KERNEL_LAUNCHER", raising=False)
    else:
        monkeypatch.setenv("GPU_ENGINE_KERNEL_LAUNCHER", value)
    assert kernel_launcher_choice() == choice


def test_an_unknown_launcher_is_an_error_naming_the_choices(monkeypatch):
    monkeypatch.setenv("GPU_ENGINE_KERNEL_LAUNCHER", "cupy")
    with pytest.raises(ValueError, match="driver, numba"):
        kernel_launcher_choice()


def test_choosing_numba_leaves_every_launch_to_the_dispatcher(monkeypatch):
    monkeypatch.setenv("GPU_ENGINE_KERNEL_LAUNCHER", "numba")
    monkeypatch.setattr(driver_launch, "_DEFAULT", None)
    arguments = [CupyLikeArray(np.zeros(2))]
    assert driver_launch.launch_through_driver(StubKernel(_kernel_of_one), 1, 32, 0, arguments) is False


# --------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_real_kernels_launched_through_the_driver_match_numpy(tmp_path):
    from gpu_engine.device import gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    import cupy

    from gpu_engine.kernels import gather, group_by, hash, partition

    launcher = KernelLauncher(driver_launch.CudaDriver(),
                              PtxCache(driver_launch._current_compute_capability(), tmp_path))
    stream = cupy.cuda.Stream(non_blocking=True)
    rng = np.random.default_rng(3)
    with stream:
        values, indices = rng.normal(size=5000), rng.integers(0, 5000, size=3000).astype(np.int32)
        out = cupy.empty(3000, dtype=cupy.float64)
        assert launcher.launch(gather._gather_cuda, 12, 256, stream.ptr,
                               [cupy.asarray(values), cupy.asarray(indices), out])
        hashes_host = rng.integers(0, 2**63, size=4000, dtype=np.uint64)
        partitions, counts = cupy.empty(4000, cupy.int32), cupy.zeros(7, cupy.int32)
        assert launcher.launch(partition._histogram_cuda, 16, 256, stream.ptr,
                               [cupy.asarray(hashes_host), 7, partitions, counts])
        words_host = rng.integers(0, 2**63, size=(1000, 3), dtype=np.uint64)
        row_hashes = cupy.empty(1000, cupy.uint64)
        assert launcher.launch(group_by._hash_rows_cuda, 4, 256, stream.ptr, [cupy.asarray(words_host), row_hashes])
        combined = cupy.zeros(4000, cupy.uint64)
        validity = cupy.asarray(rng.random(4000) < 0.8)
        assert launcher.launch(hash._combine_column_cuda, 16, 256, stream.ptr,
                               [combined, cupy.asarray(hashes_host), validity, True, True])
        stream.synchronize()
    np.testing.assert_array_equal(out.get(), values[indices])
    np.testing.assert_array_equal(partitions.get(), (hashes_host % 7).astype(np.int32))
    np.testing.assert_array_equal(counts.get(), np.bincount(hashes_host % 7, minlength=7))
    expected_rows = np.empty(1000, np.uint64)
    group_by._hash_rows_cpu(words_host, expected_rows)
    np.testing.assert_array_equal(row_hashes.get(), expected_rows)
    expected_combined = np.zeros(4000, np.uint64)
    hash._combine_column_cpu(expected_combined, hashes_host, validity.get(), True, True)
    np.testing.assert_array_equal(combined.get(), expected_combined)


@pytest.mark.gpu
def test_engine_launches_on_a_gpu_take_the_driver_path():
    from gpu_engine.device import get_device, gpu_available

    if not gpu_available() or kernel_launcher_choice() != "driver":
        pytest.skip("needs a CUDA GPU and the driver launcher")
    from gpu_engine.kernels.gather import gather

    device = get_device("cuda")
    values = np.arange(1000, dtype=np.int64) * 3
    indices = np.arange(999, -1, -1, dtype=np.int32)
    result = gather(device, device.asarray(values), device.asarray(indices))
    np.testing.assert_array_equal(device.to_host(result), values[indices])
    from gpu_engine.kernels.gather import _gather_cuda

    plans = driver_launch._DEFAULT._plans[_gather_cuda]  # the process's launcher, made at its first GPU launch
    key = ((np.dtype(np.int64), 1, "C"), (np.dtype(np.int32), 1, "C"), (np.dtype(np.int64), 1, "C"))
    assert plans[key] is not driver_launch._FALLBACK, [r for r in compile_records() if r.outcome == "fallback"]
