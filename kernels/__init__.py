"""Kernels with a CPU twin (numba njit) and a CUDA twin (numba.cuda), one entry point each.

Installed as ``gpu_engine.kernels``. Every entry point takes a
:class:`gpu_engine.device.Device` first and dispatches on ``device.kernel_flavor``;
operators call entry points and never branch on the device themselves.
"""
