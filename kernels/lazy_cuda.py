"""numba.cuda imported when a CUDA twin is first used, not when a kernel module defines one.

Why: every kernel module (and every generated kernel module) defines its CUDA twin with ``@cuda.jit`` next
to its CPU twin, so a cpu process imported numba's CUDA target (asyncio, multiprocessing, unittest through
``numba.runtests``: ~40 ms CPU, more under load) before its first query, although it never launches a CUDA
kernel; so did every Spark executor and test worker (issue 29 item 4).

:func:`install` (run by ``gpu_engine.kernels`` before any kernel module) sets the attribute ``numba.cuda`` to a
stand-in while numba's CUDA target is not imported, so ``from numba import cuda`` in kernel modules, in
generated kernel sources and anywhere else yields it without changing a line of theirs (an edit of a kernel
file would make numba recompile all of that file's cached CPU kernels on every machine). ``cuda.jit`` on the
stand-in keeps the function as a :class:`LazyKernel`; anything else asked of it (``cuda.external_stream``, a
kernel's launch configuration, ``py_func``) is a real use. The first real use (or a ``cuda``/``cuda-sim``
device being made, :func:`real_cuda`) imports numba.cuda (the import itself sets ``numba.cuda`` back to the
module) and replaces, in every loaded module, the stand-in by the module and each :class:`LazyKernel` by its
numba dispatcher: kernel bodies then see the module under the name ``cuda`` as numba.cuda compiles them
(and its simulator swaps it by identity), and a kernel looked up by name is numba's own dispatcher, as
before. A kernel kept elsewhere (in a tuple, a dict) stays a :class:`LazyKernel` that forwards everything.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

__all__ = ["install", "real_cuda", "LazyKernel", "is_loaded"]

_lock = threading.RLock()
_real: list[Any] = []  # numba.cuda once a real use imported it


class LazyKernel:
    """A function given to ``cuda.jit`` before numba.cuda was imported: compiled by it at its first real use."""

    __slots__ = ("py_func", "_options", "_dispatcher", "__weakref__")

    def __init__(self, function, options: dict):
        self.py_func = function
        self._options = options
        self._dispatcher = None

    def dispatcher(self):
        """numba.cuda's dispatcher of this kernel (importing numba.cuda at the first call)."""
        if self._dispatcher is None:
            cuda = real_cuda()
            with _lock:
                if self._dispatcher is None:
                    self._dispatcher = cuda.jit(**self._options)(self.py_func)
        return self._dispatcher

    def __getitem__(self, configuration):
        return self.dispatcher()[configuration]

    def __call__(self, *arguments, **options):
        return self.dispatcher()(*arguments, **options)

    def __getattr__(self, name: str):
        # Dunder names (copy's and pickle's __deepcopy__, __setstate__ ...) and this class's own slots are no
        # use of the kernel: forwarding them imported numba.cuda, and a slot not set yet (a copy being built)
        # asked dispatcher() for _dispatcher again and again (RecursionError).
        if name.startswith("__") or name in LazyKernel.__slots__:
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)

    def __reduce__(self):
        """A kernel a module names is pickled (and copied) as that module's kernel, looked up when loaded, as
        pickle does for a function: the module's name now holds this LazyKernel or its dispatcher, not
        ``py_func``, so pickling ``py_func`` by reference failed ('not the same object'). Another kernel
        (a closure) is rebuilt from its function, uncompiled."""
        module, name = self.py_func.__module__, self.py_func.__qualname__
        if getattr(getattr(sys.modules.get(module), name, None), "py_func", None) is self.py_func:
            return _module_kernel, (module, name)
        return LazyKernel, (self.py_func, self._options)

    def __repr__(self) -> str:
        return f"<LazyKernel {self.py_func.__module__}.{self.py_func.__qualname__}>"


def _module_kernel(module: str, name: str):
    """The kernel ``module`` names ``name`` (a LazyKernel or numba's dispatcher): what a pickled kernel loads as."""
    import importlib

    return getattr(importlib.import_module(module), name)


class _CudaStandIn:
    """What ``from numba import cuda`` gives until numba.cuda is imported (see the module docstring)."""

    __name__ = "numba.cuda"

    def jit(self, function=None, **options):
        if _real:
            return _real[0].jit(function, **options) if function is not None else _real[0].jit(**options)
        if function is not None and not callable(function):  # a signature: numba compiles eagerly, so now
            return real_cuda().jit(function, **options)
        if function is None:
            return lambda f: LazyKernel(f, options)
        return LazyKernel(function, options)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(real_cuda(), name)

    def __repr__(self) -> str:
        return "<numba.cuda, imported at its first use (gpu_engine.kernels.lazy_cuda)>"


_STAND_IN = _CudaStandIn()


def install() -> None:
    """Let ``from numba import cuda`` yield the stand-in while numba.cuda is not imported."""
    import numba

    with _lock:
        if "numba.cuda" not in sys.modules and not _real:
            numba.cuda = _STAND_IN


def is_loaded() -> bool:
    """Whether numba.cuda is imported in this process."""
    return "numba.cuda" in sys.modules


def real_cuda():
    """numba.cuda, imported now if not yet, with the stand-in and lazy kernels replaced in every loaded module."""
    if _real:
        return _real[0]
    with _lock:
        if _real:
            return _real[0]
        import numba

        if getattr(numba, "cuda", None) is _STAND_IN:
            del numba.cuda  # (the import sets it again, to the module)
        import numba.cuda as cuda

        _real.append(cuda)
        pending: list[tuple[dict, str, LazyKernel]] = []
        stand_in = _STAND_IN
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict) or namespace is globals():
                continue
            for name, value in list(namespace.items()):
                if value is stand_in:
                    namespace[name] = cuda
                elif type(value) is LazyKernel:
                    pending.append((namespace, name, value))
    for namespace, name, kernel in pending:  # outside the lock: numba's jit takes its own
        namespace[name] = kernel.dispatcher()
    return _real[0]
