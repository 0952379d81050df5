"""Kernels with a CPU twin (numba njit) and a CUDA twin (numba.cuda), one entry point each.

Installed as ``gpu_engine.kernels``. Every entry point takes a
:class:`gpu_engine.device.Device` first and dispatches on ``device.kernel_flavor``;
operators call entry points and never branch on the device themselves.

CPU twins are compiled with ``cache=True``: numba writes the machine code next
to the module (``__pycache__``, or ``NUMBA_CACHE_DIR`` where that is not
writable), so only the first process on a machine pays the JIT compilation
(~10 s for the TPC-H operators); later processes load it in about a second.
"""

from gpu_engine.codegen.guarded_numba_cache import install as _install_guarded_numba_cache
from gpu_engine.codegen.lazy_numba_cache import install as _install_lazy_numba_cache
from gpu_engine.codegen.numba_cache_lock import install as _install_numba_cache_lock
from gpu_engine.kernels.lazy_cuda import install as _install_lazy_cuda

_install_lazy_cuda()  # before any kernel module: numba.cuda is imported at a CUDA twin's first use

_install_numba_cache_lock()  # before any kernel compiles: cache writes are safe between processes

_install_guarded_numba_cache()  # before any kernel module: a bad disk-cache entry is a miss, not a failed query

_install_lazy_numba_cache()  # before any kernel module: a kernel's disk cache is made when it is first used
