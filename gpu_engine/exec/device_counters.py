"""Count kernel launches, host syncs and device allocations per thread, the same way on every device.

Why: on a GPU the cost of a batch is host work: each kernel launch (5 to 130
µs of Python and driver time) and each device-to-host read (a stall until the
stream drains). The ``cpu`` and ``cuda-sim`` devices hide both, so an
efficiency regression would only show on a GPU machine. These counters make it
visible everywhere: the launch seam (:mod:`gpu_engine.kernels.launch`) counts
launches, :class:`~gpu_engine.device.Device`'s read methods count host syncs,
and the Driver attributes the deltas to the operator it called
(``OperatorStats.kernel_launches`` …), so tests can bound them per batch.

What is counted
---------------
``kernel_launches``
    Launches of this engine's kernels: every :func:`~gpu_engine.kernels.launch.launch_cuda`
    and every CPU twin run in its place (through ``launch_twin`` or called
    directly by an entry point). Array-library operations (``xp.cumsum``,
    ``xp.where``, element-wise arithmetic) are kernels on a GPU too, but have
    no cheap hook on NumPy, so they are not counted on any device.
``host_syncs``
    Reads of device values by the host (:meth:`Device.read_scalar`,
    :meth:`Device.read_scalars`, :meth:`Device.any`, :meth:`Device.to_host`)
    and waits for a driver's stream at hand-offs. Counted on every device, as
    they would be on ``cuda``; a CPU twin that returns what its CUDA twin must
    read back (a kept-row count) counts that read too, so devices compare.
``kernels_compiled``, ``compile_seconds``
    Kernels numba compiled on the thread (not those it loaded from its
    cache) and the seconds they took: a compile is seconds of host work
    before a query's first row, so tests bound them like launches. Numba
    broadcasts each compile as a ``numba:compile`` event;
    :func:`watch_compilations` installs one listener that counts the
    outermost compile on its thread (the functions a kernel calls are
    compiled inside it and are part of its time, not kernels of their own).
``device_allocations``
    CuPy memory-pool allocations (``malloc`` requests, pool hits included) on
    ``cuda``, seen by a ``cupy.cuda.MemoryHook`` that
    :func:`watch_device_allocations` installs on each driver thread. NumPy has
    no allocation hook a Python program can set cheaply, so this stays 0 on
    ``cpu`` and ``cuda-sim``.

The counters are thread-local: drivers run on executor threads, and whatever
one driver's operator does between two reads of its thread's counters is that
operator's work.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.device import Device

__all__ = [
    "DeviceCounts",
    "THREAD_COUNTERS",
    "counts_now",
    "count_kernel_launch",
    "count_host_sync",
    "count_device_allocation",
    "watch_device_allocations",
    "CompileCounts",
    "compiles_now",
    "watch_compilations",
]


class _ThreadCounters(threading.local):
    """Hold one thread's running totals; every thread sees its own attributes."""

    def __init__(self) -> None:
        self.kernel_launches = 0
        self.host_syncs = 0
        self.device_allocations = 0
        self.watching_allocations = False
        self.kernels_compiled = 0
        self.compile_seconds = 0.0
        self.compile_depth = 0
        self.compile_started = 0.0


#: The running totals of the calling thread (read its attributes; increment through the functions below).
THREAD_COUNTERS = _ThreadCounters()


class DeviceCounts(NamedTuple):
    """A snapshot of the three counters; subtract two snapshots for the work in between."""

    kernel_launches: int = 0
    host_syncs: int = 0
    device_allocations: int = 0

    def __sub__(self, other: "DeviceCounts") -> "DeviceCounts":  # type: ignore[override]
        return DeviceCounts(self.kernel_launches - other.kernel_launches, self.host_syncs - other.host_syncs,
                            self.device_allocations - other.device_allocations)


def counts_now() -> DeviceCounts:
    """Return the calling thread's totals so far."""
    counters = THREAD_COUNTERS
    return DeviceCounts(counters.kernel_launches, counters.host_syncs, counters.device_allocations)


def count_kernel_launch(launches: int = 1) -> None:
    """Record kernel launches made by the calling thread."""
    THREAD_COUNTERS.kernel_launches += launches


def count_host_sync(syncs: int = 1) -> None:
    """Record device-to-host reads (or stream waits) made by the calling thread."""
    THREAD_COUNTERS.host_syncs += syncs


def count_device_allocation(allocations: int = 1) -> None:
    """Record device memory allocations requested by the calling thread."""
    THREAD_COUNTERS.device_allocations += allocations


_ALLOCATION_HOOK_CLASSES: dict[type, type] = {}


def _allocation_hook_class(memory_hook: type) -> type:
    """Return (defining once) a subclass of CuPy's ``MemoryHook`` that counts pool ``malloc`` calls on its thread.

    The base comes from the device's array module, so this module never imports CuPy.
    """
    hook_class = _ALLOCATION_HOOK_CLASSES.get(memory_hook)
    if hook_class is None:

        class _AllocationCounter(memory_hook):
            name = "gpu_engine.device_allocations"

            def malloc_preprocess(self, **kwargs) -> None:
                THREAD_COUNTERS.device_allocations += 1

        hook_class = _ALLOCATION_HOOK_CLASSES.setdefault(memory_hook, _AllocationCounter)
    return hook_class


def watch_device_allocations(device: "Device") -> None:
    """Count the calling thread's CuPy allocations from now on (once per thread; nothing off ``cuda``).

    CuPy keeps memory hooks per thread, so each thread that runs drivers
    installs its own; the hook stays for the thread's life (executor threads
    end with their query), and costs one Python call per allocation. An
    array module without ``cuda.MemoryHook`` (a test's stand-in) is not watched.
    """
    if not device.is_gpu or THREAD_COUNTERS.watching_allocations:
        return
    THREAD_COUNTERS.watching_allocations = True
    memory_hook = getattr(getattr(device.xp, "cuda", None), "MemoryHook", None)
    if memory_hook is not None:
        _allocation_hook_class(memory_hook)().__enter__()


class CompileCounts(NamedTuple):
    """A snapshot of the calling thread's compile counters; subtract two for the compiles in between."""

    kernels_compiled: int = 0
    compile_seconds: float = 0.0

    def __sub__(self, other: "CompileCounts") -> "CompileCounts":  # type: ignore[override]
        return CompileCounts(self.kernels_compiled - other.kernels_compiled,
                             self.compile_seconds - other.compile_seconds)


def compiles_now() -> CompileCounts:
    """Return the calling thread's compile totals so far."""
    return CompileCounts(THREAD_COUNTERS.kernels_compiled, THREAD_COUNTERS.compile_seconds)


_COMPILE_LISTENER: list = []
_COMPILE_LISTENER_LOCK = threading.Lock()


def watch_compilations() -> None:
    """Count numba's compiles per thread from now on (installs one process-wide listener, once).

    Why a listener: compiles happen wherever a kernel is first called (a static kernel missing from
    numba's cache, a generated one on its first batch), so only numba itself sees them all.
    """
    if _COMPILE_LISTENER:
        return
    with _COMPILE_LISTENER_LOCK:
        if _COMPILE_LISTENER:
            return
        from numba.core import event

        class _CompileCounter(event.Listener):
            def on_start(self, _event) -> None:
                counters = THREAD_COUNTERS
                if counters.compile_depth == 0:
                    counters.compile_started = time.perf_counter()
                counters.compile_depth += 1

            def on_end(self, _event) -> None:
                counters = THREAD_COUNTERS
                counters.compile_depth = max(0, counters.compile_depth - 1)
                if counters.compile_depth == 0:
                    counters.kernels_compiled += 1
                    counters.compile_seconds += time.perf_counter() - counters.compile_started

        listener = _CompileCounter()
        event.register("numba:compile", listener)
        _COMPILE_LISTENER.append(listener)
