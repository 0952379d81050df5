"""A CUDA kernel defined before numba.cuda is imported (kernels/lazy_cuda.LazyKernel) copies and pickles.

Why: kernels are kept in tuples and dicts (launch tables, twins) that may be copied, and Spark pickles what it
ships to executors; a LazyKernel forwarded every missing attribute to numba.cuda's dispatcher, so ``copy``
asking a half-built copy for ``__setstate__`` recursed (RecursionError) and pickling failed ('not the same
object': the module's name holds the LazyKernel, not its function). Neither may compile or import anything.
"""

from __future__ import annotations

import copy
import pickle
import sys
import types

import pytest

from gpu_engine.kernels.lazy_cuda import LazyKernel


@pytest.fixture
def kernel_module():
    """A module whose kernel ``add_one`` is a LazyKernel, as ``@cuda.jit`` leaves it before numba.cuda's import."""
    module = types.ModuleType("lazy_kernel_probe_module")
    exec("def add_one(a):\n    a[0] += 1\n", module.__dict__)
    module.add_one = LazyKernel(module.add_one, {"cache": False})
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_a_module_s_lazy_kernel_pickles_and_copies_as_that_kernel_without_compiling(kernel_module):
    lazy = kernel_module.add_one
    assert pickle.loads(pickle.dumps(lazy)) is lazy
    assert pickle.loads(pickle.dumps({"twins": (lazy, lazy)}))["twins"] == (lazy, lazy)
    assert copy.copy(lazy) is lazy and copy.deepcopy([lazy])[0] is lazy
    assert lazy._dispatcher is None  # nothing asked numba.cuda for a dispatcher


def test_a_lazy_kernel_no_module_names_copies_as_an_uncompiled_lazy_kernel():
    def scale(a):
        a[0] *= 2

    lazy = LazyKernel(scale, {"fastmath": True})
    for copied in (copy.copy(lazy), copy.deepcopy(lazy)):
        assert type(copied) is LazyKernel and copied.py_func is scale and copied._options == {"fastmath": True}
        assert copied._dispatcher is None
    assert not hasattr(lazy, "__array_interface__") and lazy._dispatcher is None
