"""gpu_engine: a Velox-style fragment executor whose operators run CUDA kernels on device columns."""

from gpu_engine.errors import DeviceError, ExecutionError, GpuEngineError, MemoryCapExceeded, PlanError, TaskCancelled

__all__ = ["Session", "PlanError", "DeviceError", "ExecutionError", "GpuEngineError", "MemoryCapExceeded",
           "TaskCancelled"]


def __getattr__(name: str):
    # Session imports the execution core; import it lazily so that choosing the
    # 'cuda-sim' device can still switch numba to its simulator first.
    if name == "Session":
        from gpu_engine.session import Session

        return Session
    raise AttributeError(name)
