"""Launch numba.cuda kernels through the CUDA driver API: PTX compiled once, parameters packed by hand.

Why: the H100 baseline (``../shared/gpu/h100-baseline.md``) measured 130 µs
of host time per launch for numba's dispatcher typing CuPy arguments, and
5.4 µs for the same kernel compiled to PTX once and launched with
``cuLaunchKernel`` from a pre-packed parameter buffer; this module is that
second way, made general (``bench/launch_microbench.py`` times it). Kernel
sources stay numba kernels, so the simulator still runs them in CI; only the
launch on a GPU changes.

A launch, in three steps:

1. *Key*: one cheap item per argument, a ``(dtype, ndim, layout)`` tuple for
   a device array, the Python type for a scalar (a Python ``int`` past
   int64 gets its own item, as numba types it uint64).
2. *Plan*, once per kernel and signature (a lock makes it once): the numba
   signature; the PTX from :class:`~gpu_engine.kernels.ptx_cache.PtxCache`
   (disk, else ``numba.cuda.compile_ptx`` for the GPU's compute capability,
   device functions and ``@njit`` helpers compiled in); the parameter layout,
   checked against the ``.param`` list of the PTX entry; the module loaded
   with ``cuModuleLoadData``; and a generated ``pack`` function that writes
   every parameter with one ``struct.pack_into`` call.
3. *Pack and launch*: take a parameter buffer from the plan's free list (a
   thread takes a buffer no other thread holds, so concurrent drivers never
   share one; ``cuLaunchKernel`` copies the parameters before it returns, so
   the buffer goes back right after), pack, launch on the stream handle given
   (CuPy's current stream, i.e. the driver's own stream).

The parameter ABI is numba's (``_Kernel._prepare_args`` in
``numba.cuda.dispatcher``): an array flattens to ``meminfo, parent, nitems,
itemsize, data, shape[0..ndim), strides[0..ndim)`` (meminfo and parent are
null; the others 64-bit); a boolean is one byte, an integer or float its own
width, a float16 its 16 bits, a complex number two floats. Every parameter
gets an 8-byte slot of the buffer; the driver reads only its declared width.

Anything this path does not handle launches through numba's dispatcher
instead (``launch`` returns False), and is recorded once as a ``fallback``
in :func:`~gpu_engine.kernels.ptx_cache.compile_records`: arguments that are
not device arrays or plain scalars (a NumPy host array, which numba would
copy), kernels with options PTX alone cannot honour (``debug``, ``link``,
extensions), PTX that calls functions numba would link in, a parameter
layout that differs from the PTX's, or a compile or module load that fails
(numba's dispatcher then compiles the kernel itself, or raises its own
error). ``GPU_ENGINE_KERNEL_LAUNCHER=numba`` sends every launch through
numba's dispatcher, to compare or to work around a problem; ``driver`` (the
default) uses this path.

Step 2 off the drivers (``"background"`` compile mode,
:func:`gpu_engine.codegen.background_compiles.kernel_state`): a generated
kernel's plan is asked for before its first launch (:meth:`KernelLauncher.ready`);
when it is not made, :meth:`KernelLauncher.ptx_job` describes the PTX entry
for the background compile process, and once the entry is on disk
:meth:`KernelLauncher.load_plan` reads it and loads the module (PTX to SASS)
on the thread that calls it, which holds no lock of the launcher's (the lock
guards only the plan tables); the batches meanwhile run on the lowest tier.
Not run on a GPU yet (no GPU was lent when it was written): on ``cuda-sim``
nothing compiles, and the tests drive it with a stand-in driver.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from gpu_engine.errors import DeviceError
from gpu_engine.kernels.ptx_cache import CompileRecord, PtxCache, PtxJob, add_compile_record, ptx_entry_parameters

__all__ = [
    "COMPILE_FAILED",
    "KERNEL_LAUNCHER_VARIABLE",
    "CudaDriver",
    "KernelLaunchError",
    "KernelLauncher",
    "ParameterSlot",
    "UnsupportedLaunch",
    "argument_signature",
    "kernel_launcher_choice",
    "launch_through_driver",
    "parameter_layout",
    "process_launcher",
]

KERNEL_LAUNCHER_VARIABLE = "GPU_ENGINE_KERNEL_LAUNCHER"
COMPILE_FAILED = "compiling to PTX or loading it failed"
_LAUNCHERS = ("driver", "numba")
_SLOT_BYTES = 8


class UnsupportedLaunch(Exception):
    """Raise when the driver path cannot launch a kernel with these arguments; numba's dispatcher does."""


class KernelLaunchError(DeviceError):
    """Raise when the CUDA driver refuses a launch, naming the kernel, its signature and the driver's error."""


@dataclass(frozen=True)
class ParameterSlot:
    """One kernel parameter: its ``struct`` code (empty for a null pointer), its width, and whether it is a float."""

    code: str
    size: int
    is_float: bool


_NULL = ParameterSlot("", 8, False)
_INT64 = ParameterSlot("q", 8, False)
_POINTER = ParameterSlot("Q", 8, False)


# ------------------------------------------------------------- argument types
_ARRAY, _SCALAR, _INTERFACE, _UNSUPPORTED = 1, 2, 3, 4
_ARRAY_ATTRIBUTES = ("_c_contiguous", "_f_contiguous", "dtype", "ndim", "size", "data", "shape", "strides")
_SCALAR_TYPES = (bool, int, float, complex, np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                 np.uint32, np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128)
_KINDS: dict[type, int] = {scalar_type: _SCALAR for scalar_type in _SCALAR_TYPES}
_UINT64_INT = "python int past int64"  # numba types such an int as uint64
_INT64_MIN, _INT64_END = -(1 << 63), 1 << 63


def _kind(argument_type: type) -> int:
    """Classify a type once: a CuPy-like array, a scalar, another CUDA-array-interface class, or anything else.

    "Anything else" may still carry ``__cuda_array_interface__`` as an instance attribute.
    """
    kind = _KINDS.get(argument_type)
    if kind is None:
        if not hasattr(argument_type, "__cuda_array_interface__"):
            kind = _UNSUPPORTED
        elif all(hasattr(argument_type, name) for name in _ARRAY_ATTRIBUTES):
            kind = _ARRAY
        else:
            kind = _INTERFACE
        _KINDS[argument_type] = kind
    return kind


class _NeedsInterface(Exception):
    """Raise from the fast key when an argument is only known through ``__cuda_array_interface__``."""


class _InterfaceArray:
    """Present a ``__cuda_array_interface__`` object with the CuPy attributes the packer reads."""

    __slots__ = ("dtype", "ndim", "size", "data", "shape", "strides", "_c_contiguous", "_f_contiguous")

    class _Pointer:
        __slots__ = ("ptr",)

        def __init__(self, pointer: int) -> None:
            self.ptr = pointer

    def __init__(self, interface: dict) -> None:
        if interface.get("mask") is not None:
            raise UnsupportedLaunch("masked CUDA arrays have no numba kernel type")
        self.dtype = np.dtype(interface["typestr"])
        self.shape = tuple(int(extent) for extent in interface["shape"])
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        self.data = self._Pointer(int(interface["data"][0] or 0))
        contiguous = _contiguous_strides(self.shape, self.dtype.itemsize, "C")
        given = interface.get("strides")
        self.strides = contiguous if given is None else tuple(int(stride) for stride in given)
        self._c_contiguous = self._same_layout(contiguous)
        self._f_contiguous = self._same_layout(_contiguous_strides(self.shape, self.dtype.itemsize, "F"))

    def _same_layout(self, contiguous: tuple[int, ...]) -> bool:
        """Compare strides as NumPy does: extents of 1 may have any stride; an empty array is contiguous."""
        if self.size == 0:
            return True
        return all(extent == 1 or stride == expected
                   for extent, stride, expected in zip(self.shape, self.strides, contiguous))


_KINDS[_InterfaceArray] = _ARRAY


def _contiguous_strides(shape: tuple[int, ...], itemsize: int, order: str) -> tuple[int, ...]:
    strides, step = [], itemsize
    for extent in (reversed(shape) if order == "C" else shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides)) if order == "C" else tuple(strides)


def _argument_key(arguments: Sequence[Any]) -> tuple:
    """Return the per-launch key of ``arguments`` (see the module docstring); the hot path of every launch."""
    key = []
    append = key.append
    for argument in arguments:
        argument_type = type(argument)
        kind = _KINDS.get(argument_type) or _kind(argument_type)
        if kind == _ARRAY:
            append((argument.dtype, argument.ndim,
                    "C" if argument._c_contiguous else ("F" if argument._f_contiguous else "A")))
        elif kind == _SCALAR:
            if argument_type is int and not _INT64_MIN <= argument < _INT64_END:
                append(_UINT64_INT)
            else:
                append(argument_type)
        elif kind == _INTERFACE or hasattr(argument, "__cuda_array_interface__"):  # a class or an instance attribute
            raise _NeedsInterface
        else:
            raise UnsupportedLaunch(f"argument of type {argument_type.__module__}.{argument_type.__qualname__} "
                                    "is neither a device array nor a scalar")
    return tuple(key)


def _key_with_interface_arrays(arguments: Sequence[Any]) -> tuple[tuple, tuple]:
    """Return ``(key, arguments)`` with every interface-only array wrapped as an :class:`_InterfaceArray`."""
    try:
        wrapped = tuple(argument if _kind(type(argument)) != _UNSUPPORTED and _kind(type(argument)) != _INTERFACE
                        or not hasattr(argument, "__cuda_array_interface__")
                        else _InterfaceArray(argument.__cuda_array_interface__) for argument in arguments)
    except (KeyError, TypeError, ValueError) as error:
        raise UnsupportedLaunch(f"unreadable __cuda_array_interface__: {error!r}") from None
    return _argument_key(wrapped), wrapped


def _numba_type(item: Any) -> Any:
    from numba.core import types
    from numba.np import numpy_support

    if isinstance(item, tuple):
        dtype, ndim, layout = item
        return types.Array(numpy_support.from_dtype(dtype), ndim, layout)
    if item is _UINT64_INT:
        return types.uint64
    python_types = {bool: types.boolean, int: types.int64, float: types.float64, complex: types.complex128}
    if item in python_types:
        return python_types[item]
    return numpy_support.from_dtype(np.dtype(item))


def argument_signature(arguments: Sequence[Any]) -> tuple:
    """Return the numba signature numba's dispatcher would compile for ``arguments`` (types, no return type)."""
    try:
        key = _argument_key(arguments)
    except _NeedsInterface:
        key, _ = _key_with_interface_arrays(arguments)
    return tuple(_numba_type(item) for item in key)


# ------------------------------------------------------------------- packing
def parameter_layout(signature: Sequence[Any]) -> tuple[ParameterSlot, ...]:
    """Return the kernel parameters numba's ABI passes for ``signature``, in order."""
    from numba.core import types

    slots: list[ParameterSlot] = []
    for argument_type in signature:
        if isinstance(argument_type, types.Array):
            slots += [_NULL, _NULL, _INT64, _INT64, _POINTER] + [_INT64] * (2 * argument_type.ndim)
        elif argument_type == types.boolean:
            slots.append(ParameterSlot("?", 1, False))
        elif isinstance(argument_type, types.Integer):
            code = {8: "b", 16: "h", 32: "i", 64: "q"}[argument_type.bitwidth]
            slots.append(ParameterSlot(code if argument_type.signed else code.upper(), argument_type.bitwidth // 8,
                                       False))
        elif argument_type == types.float16:
            slots.append(ParameterSlot("e", 2, False))  # numba passes the 16 bits; PTX declares .u16/.b16
        elif argument_type in (types.float32, types.float64):
            slots.append(ParameterSlot("f" if argument_type == types.float32 else "d", argument_type.bitwidth // 8,
                                       True))
        elif argument_type in (types.complex64, types.complex128):
            part = ParameterSlot("f", 4, True) if argument_type == types.complex64 else ParameterSlot("d", 8, True)
            slots += [part, part]
        else:
            raise UnsupportedLaunch(f"no driver packing for arguments of numba type {argument_type}")
    return tuple(slots)


def _pack_function(signature: Sequence[Any], layout: Sequence[ParameterSlot]) -> tuple[Any, int]:
    """Generate ``pack(arguments, buffer)`` writing every parameter of ``signature``; return it and the buffer bytes.

    Generated, so a launch runs one ``struct.pack_into`` with the argument
    attributes inlined: no loop over parameters and no ctypes object per
    value. A contiguous 1-d array's shape and stride are its size and
    itemsize, so only ``size`` and ``data.ptr`` are read from it.
    """
    from numba.core import types
    from numba.np import numpy_support

    layout_format = "=" + "".join(
        (slot.code + (f"{_SLOT_BYTES - slot.size}x" if slot.size < _SLOT_BYTES else "")) if slot.code
        else f"{_SLOT_BYTES}x" for slot in layout)
    packer = struct.Struct(layout_format)
    assert packer.size == _SLOT_BYTES * len(layout), layout_format
    lines, values = [], []
    for position, argument_type in enumerate(signature):
        name = f"a{position}"
        if isinstance(argument_type, types.Array):
            itemsize = numpy_support.as_dtype(argument_type.dtype).itemsize
            if argument_type.ndim == 1 and argument_type.layout == "C":
                lines.append(f"    n{position} = {name}.size")
                values += [f"n{position}", str(itemsize), f"{name}.data.ptr", f"n{position}", str(itemsize)]
            else:
                values += [f"{name}.size", str(itemsize), f"{name}.data.ptr"]
                if argument_type.ndim:
                    values += [f"*{name}.shape", f"*{name}.strides"]
        elif argument_type in (types.complex64, types.complex128):
            values += [f"{name}.real", f"{name}.imag"]
        else:
            values.append(name)
    arguments = ", ".join(f"a{position}" for position in range(len(signature)))
    unpack = [f"    {arguments}, = arguments"] if signature else []
    source = "\n".join(["def pack(arguments, buffer):", *unpack, *lines,
                        f"    pack_into(buffer, 0{''.join(', ' + value for value in values)})"])
    namespace: dict[str, Any] = {"pack_into": packer.pack_into}
    exec(compile(source, f"<driver_launch pack {layout_format}>", "exec"), namespace)
    return namespace["pack"], packer.size


class _LaunchPlan:
    """What launching one kernel with one signature needs: the function, the packer, free parameter buffers."""

    __slots__ = ("function", "pack", "free_buffers", "buffer_bytes", "slot_count", "context", "kernel_name",
                 "signature_text")

    def __init__(self, function: Any, context: Any, pack: Any, buffer_bytes: int, slot_count: int,
                 kernel_name: str, signature_text: str) -> None:
        self.function = function
        self.context = context
        self.pack = pack
        self.buffer_bytes = buffer_bytes
        self.slot_count = slot_count
        self.kernel_name = kernel_name
        self.signature_text = signature_text
        self.free_buffers: list[tuple] = []

    def new_buffer(self) -> tuple:
        """Return ``(values, address of the pointer array, pointer array)``: one thread's parameter buffer."""
        values = ctypes.create_string_buffer(max(self.buffer_bytes, _SLOT_BYTES))
        base = ctypes.addressof(values)
        pointers = (ctypes.c_void_p * max(self.slot_count, 1))(
            *[base + _SLOT_BYTES * slot for slot in range(self.slot_count)])
        return values, ctypes.addressof(pointers), pointers


_FALLBACK = object()  # a plan slot meaning: numba's dispatcher launches this kernel and signature


# -------------------------------------------------------------------- driver
class CudaDriver:
    """The few CUDA driver calls the launcher makes, through ``cuda.bindings`` (shipped with numba-cuda)."""

    def __init__(self) -> None:
        from cuda.bindings import driver

        self._driver = driver
        self._modules: list[Any] = []  # loaded modules stay loaded for the life of the process
        # (error,) = launch_kernel(function, grid x, y, z, block x, y, z, shared bytes, stream, params, extra)
        self.launch_kernel = driver.cuLaunchKernel
        self.invalid_context = int(driver.CUresult.CUDA_ERROR_INVALID_CONTEXT)

    def _check(self, result: tuple, call: str) -> Any:
        error = result[0]
        if error:
            raise KernelLaunchError(f"{call} failed: {self.error_text(error)}")
        return result[1] if len(result) > 1 else None

    def load(self, ptx: str, entry: str) -> tuple[Any, Any]:
        """Load ``ptx`` into the current context; return ``(function, context)``."""
        context = self._check(self._driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
        module = self._check(self._driver.cuModuleLoadData(ptx.encode() + b"\0"), "cuModuleLoadData")
        self._modules.append(module)
        function = self._check(self._driver.cuModuleGetFunction(module, entry.encode()), "cuModuleGetFunction")
        return function, context

    def current_context(self) -> Any:
        """Return this thread's current context (the launcher's, made current on the thread that creates it)."""
        return self._check(self._driver.cuCtxGetCurrent(), "cuCtxGetCurrent")

    def make_current(self, context: Any) -> None:
        """Make ``context`` current on this thread (a thread that has not touched CUDA yet has none)."""
        self._check(self._driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")

    def error_text(self, error: Any) -> str:
        """Return the driver's name and description of ``error``."""
        name = self._driver.cuGetErrorName(error)[1]
        text = self._driver.cuGetErrorString(error)[1]
        decode = lambda value: value.decode() if isinstance(value, bytes) else str(value)
        return f"{decode(name)} ({decode(text)})"


def _current_compute_capability() -> tuple[int, int]:
    from numba import cuda

    return tuple(cuda.get_current_device().compute_capability)  # also makes the primary context current


# ------------------------------------------------------------------ launcher
_SUPPORTED_OPTIONS = {"lineinfo", "fastmath", "opt"}
# Checked apart (debug, link, extensions), or no effect on a kernel's own PTX: numba-cuda sets ``lto`` whenever
# nvjitlink is present, which matters only when linking other code (PTX that would need it falls back).
_IGNORED_OPTIONS = {"device", "cache", "inline", "debug", "link", "extensions", "lto"}


class KernelLauncher:
    """Launch numba.cuda dispatchers through the driver API (see the module docstring).

    Parameters
    ----------
    driver
        A :class:`CudaDriver`, or a stand-in with the same methods (tests).
    ptx_cache
        Where PTX comes from.
    context
        The CUDA context a thread that has none makes current before loading a module
        (:meth:`load_plan`); None leaves the thread's as it is.
    """

    def __init__(self, driver: Any, ptx_cache: PtxCache, context: Any = None) -> None:
        self.driver = driver
        self.ptx_cache = ptx_cache
        self.context = context
        self._launch_kernel = driver.launch_kernel
        self._plans: dict[Any, dict[tuple, Any]] = {}
        self._signature_plans: dict[tuple, Any] = {}  # (kernel, signature) -> plan, shared by equivalent keys
        self._fallbacks: set[tuple[str, str, str]] = set()
        self._lock = threading.RLock()

    def launch(self, kernel: Any, blocks: int, threads: int, stream_handle: int, arguments: Sequence[Any]) -> bool:
        """Launch ``kernel[blocks, threads, stream](*arguments)``; return False when numba's dispatcher must instead."""
        plans = self._plans.get(kernel)
        if plans is None:
            plans = self._plans.setdefault(kernel, {})
        try:
            key = _argument_key(arguments)
        except (_NeedsInterface, UnsupportedLaunch):
            try:
                key, arguments = _key_with_interface_arrays(arguments)
            except UnsupportedLaunch as reason:
                self._fall_back(kernel, "(?)", str(reason))
                return False
        plan = plans.get(key)
        if plan is None:
            plan = self._plan(kernel, key, plans)
        if plan is _FALLBACK:
            return False
        free = plan.free_buffers
        try:
            buffer = free.pop()
        except IndexError:
            buffer = plan.new_buffer()
        plan.pack(arguments, buffer[0])
        error, = self._launch_kernel(plan.function, blocks, 1, 1, threads, 1, 1, 0, stream_handle, buffer[1], 0)
        free.append(buffer)
        if error:
            self._retry(plan, error, blocks, threads, stream_handle, arguments)
        return True

    def _retry(self, plan: _LaunchPlan, error: Any, blocks: int, threads: int, stream_handle: int,
               arguments: Sequence[Any]) -> None:
        """Launch again once a thread without a current context has the plan's; raise any other error."""
        if int(error) == self.driver.invalid_context:
            self.driver.make_current(plan.context)
            buffer = plan.new_buffer()
            plan.pack(arguments, buffer[0])
            error, = self._launch_kernel(plan.function, blocks, 1, 1, threads, 1, 1, 0, stream_handle, buffer[1], 0)
            if not error:
                return
        raise KernelLaunchError(
            f"cuLaunchKernel of {plan.kernel_name}{plan.signature_text} failed: {self.driver.error_text(error)}; "
            f"set {KERNEL_LAUNCHER_VARIABLE}=numba to launch through numba's dispatcher instead")

    def _plan(self, kernel: Any, key: tuple, plans: dict) -> Any:
        with self._lock:
            plan = plans.get(key)
            if plan is not None:
                return plan
            signature = tuple(_numba_type(item) for item in key)
            plan = self._signature_plans.get((kernel, signature))
            if plan is None:
                try:
                    plan = self._build_plan(kernel, signature)
                except UnsupportedLaunch as reason:
                    self._fall_back(kernel, _signature_text(signature), str(reason))
                    plan = _FALLBACK
                except Exception as error:  # numba's dispatcher then compiles it, or raises numba's own error
                    self._fall_back(kernel, _signature_text(signature),
                                    f"{COMPILE_FAILED}: {type(error).__name__}: {error}")
                    plan = _FALLBACK
                self._signature_plans[(kernel, signature)] = plan
            plans[key] = plan
            return plan

    # ------------------------------------------------- made off the drivers
    def ready(self, kernel: Any, arguments: Sequence[Any]) -> bool:
        """Return whether launching ``kernel`` with ``arguments`` makes no plan (compiles and loads nothing).

        A plan that falls back to numba's dispatcher counts as made. Lock-free: reads of the plan tables.
        """
        plans = self._plans.get(kernel)
        try:
            key = _argument_key(arguments)
        except (_NeedsInterface, UnsupportedLaunch):
            try:
                key, _ = _key_with_interface_arrays(arguments)
            except UnsupportedLaunch:
                return True  # numba's dispatcher launches it (compiling inline): nothing to prepare here
        if plans is not None and key in plans:
            return True
        return (kernel, tuple(_numba_type(item) for item in key)) in self._signature_plans

    def ptx_job(self, kernel: Any, arguments: Sequence[Any], module_path: str | None = None) -> PtxJob | None:
        """Return the job compiling the PTX entry a launch of ``kernel`` with ``arguments`` reads (its ``signature``
        is the one :meth:`load_plan` takes once the entry is written).

        None when there is nothing another process can prepare: the driver path does not launch these
        (numba's dispatcher does), or the PTX cache has no disk folder.
        """
        try:
            signature = argument_signature(arguments)
            options = _compile_options(kernel)
            parameter_layout(signature)
        except UnsupportedLaunch:
            return None
        return self.ptx_cache.job(kernel, signature, options, module_path)

    def load_plan(self, kernel: Any, signature: tuple) -> None:
        """Make the plan of ``kernel`` for ``signature`` from the PTX on disk, without holding the launcher's lock.

        Called on a thread that is no driver (the background compiler's, once the compile process wrote
        the entry): reading the file, checking the parameters and the driver's PTX-to-SASS load happen
        here, and only installing the plan takes the lock. A missing entry raises
        :class:`FileNotFoundError` (it compiles nothing); a plan the driver path cannot make is recorded
        as a fallback to numba's dispatcher, as at a launch.
        """
        signature = tuple(signature)
        if (kernel, signature) in self._signature_plans:
            return
        if self.context is not None:  # a thread that never touched CUDA has no current context
            self.driver.make_current(self.context)
        try:
            plan = self._build_plan(kernel, signature, compile_missing=False)
        except FileNotFoundError:
            raise
        except UnsupportedLaunch as reason:
            self._fall_back(kernel, _signature_text(signature), str(reason))
            plan = _FALLBACK
        except Exception as error:  # numba's dispatcher then compiles it at the launch, or raises its own error
            self._fall_back(kernel, _signature_text(signature), f"{COMPILE_FAILED}: {type(error).__name__}: {error}")
            plan = _FALLBACK
        with self._lock:
            self._signature_plans.setdefault((kernel, signature), plan)

    def _build_plan(self, kernel: Any, signature: tuple, compile_missing: bool = True) -> _LaunchPlan:
        options = _compile_options(kernel)
        layout = parameter_layout(signature)
        compiled = self.ptx_cache.ptx(kernel, signature, options, compile_missing=compile_missing)
        if ".extern .func" in compiled.ptx:
            raise UnsupportedLaunch("its PTX calls functions numba links in separately")
        declared = ptx_entry_parameters(compiled.ptx)
        packed = [(slot.size, slot.is_float) for slot in layout]
        if declared != packed:
            raise UnsupportedLaunch(f"the PTX entry declares parameters {declared}, the packer writes {packed}")
        function, context = self.driver.load(compiled.ptx, compiled.entry)
        pack, buffer_bytes = _pack_function(signature, layout)
        return _LaunchPlan(function, context, pack, buffer_bytes, len(layout), compiled.record.kernel,
                           compiled.record.signature)

    def _fall_back(self, kernel: Any, signature_text: str, reason: str) -> None:
        """Record and warn, once per kernel, signature and reason, that numba's dispatcher launches this."""
        py_func = getattr(kernel, "py_func", kernel)
        name = f"{getattr(py_func, '__module__', '?')}.{getattr(py_func, '__qualname__', repr(kernel))}"
        with self._lock:
            if (name, signature_text, reason) in self._fallbacks:
                return
            self._fallbacks.add((name, signature_text, reason))
        add_compile_record(CompileRecord(name, signature_text, "fallback", 0.0, None, reason))
        warnings.warn(f"{name}{signature_text} launches through numba's dispatcher: {reason}", RuntimeWarning,
                      stacklevel=4)


def _signature_text(signature: Sequence[Any]) -> str:
    return "(" + ", ".join(str(argument_type) for argument_type in signature) + ")"


def _compile_options(kernel: Any) -> dict:
    """Return the ``compile_ptx`` options of ``kernel``'s ``@cuda.jit``, or raise when PTX alone cannot honour them."""
    options = dict(getattr(kernel, "targetoptions", {}) or {})
    if options.get("debug"):
        raise UnsupportedLaunch("debug kernels report exceptions through numba's launcher")
    if options.get("link"):
        raise UnsupportedLaunch("it links extra files")
    if options.get("extensions"):
        raise UnsupportedLaunch("its argument extensions run in numba's launcher")
    unknown = sorted(name for name, value in options.items()
                     if value and name not in _SUPPORTED_OPTIONS and name not in _IGNORED_OPTIONS)
    if unknown:
        raise UnsupportedLaunch(f"option(s) {', '.join(unknown)} are not passed to compile_ptx")
    return {name: options[name] for name in sorted(_SUPPORTED_OPTIONS) if name in options}


# ------------------------------------------------------------ process default
_DEFAULT: Any = None
_DISABLED = object()
_DEFAULT_LOCK = threading.Lock()


def kernel_launcher_choice() -> str:
    """Return ``driver`` or ``numba`` from ``$GPU_ENGINE_KERNEL_LAUNCHER`` (default ``driver``)."""
    choice = os.environ.get(KERNEL_LAUNCHER_VARIABLE, "driver").strip().lower() or "driver"
    if choice not in _LAUNCHERS:
        raise ValueError(f"{KERNEL_LAUNCHER_VARIABLE}={choice!r}: choose one of {', '.join(_LAUNCHERS)}")
    return choice


def _create_default() -> Any:
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is not None:
            return _DEFAULT
        if kernel_launcher_choice() == "numba":
            _DEFAULT = _DISABLED
            return _DEFAULT
        try:
            driver = CudaDriver()
        except ImportError as error:
            warnings.warn(f"kernels launch through numba's dispatcher: cuda.bindings is missing ({error}); "
                          "install numba-cuda (or cuda-python) for the driver launch path", RuntimeWarning,
                          stacklevel=3)
            _DEFAULT = _DISABLED
            return _DEFAULT
        compute_capability = _current_compute_capability()  # also makes the primary context current here
        _DEFAULT = KernelLauncher(driver, PtxCache(compute_capability), driver.current_context())
        return _DEFAULT


def process_launcher() -> KernelLauncher | None:
    """Return this process's :class:`KernelLauncher` (made now if no launch made it yet), None when numba launches."""
    launcher = _DEFAULT
    if launcher is None:
        launcher = _create_default()
    return None if launcher is _DISABLED else launcher


def launch_through_driver(kernel: Any, blocks: int, threads: int, stream_handle: int,
                          arguments: Sequence[Any]) -> bool:
    """Launch ``kernel`` through this process's :class:`KernelLauncher`; return False when numba's dispatcher must.

    The launcher is made at the first launch (the first GPU launch of the
    process), following ``$GPU_ENGINE_KERNEL_LAUNCHER`` as it is then.
    """
    launcher = _DEFAULT
    if launcher is None:
        launcher = _create_default()
    if launcher is _DISABLED:
        return False
    return launcher.launch(kernel, blocks, threads, stream_handle, arguments)
