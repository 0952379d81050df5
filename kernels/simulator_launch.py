"""Launch a CUDA kernel in numba's CUDA simulator, one at a time, with the launching Task's cancel points inside.

Why: the simulator runs every CUDA thread of a launch as a Python thread, so
one launch over a TPC-DS fact table can run for minutes, and a Task's cancel
points (:mod:`gpu_engine.exec.cancel_points`) sat between launches: TPC-DS
q78 at SF 0.01 was still inside one simulated kernel 13 minutes after its
240 s timeout, and the session's executor waited for it. Here each array
argument reaches the kernel as a simulator device array whose element reads
and writes first look at the Task that the launching thread runs: once it is
cancelled or failed, the next access in any simulated thread raises
:class:`~gpu_engine.errors.TaskCancelled`, the simulator stops the block (it
raises the first simulated thread's error), the other simulated threads end at
their own next access, and the launch raises the Task's cancellation.

The check is one attribute read per element access, on the simulator only
(which spends microseconds per access anyway); this module is imported by the
simulator's launch path alone, so launches on cpu and on a GPU never pay it.
A launch from a thread that runs no Task (tests calling kernels directly)
hands its arrays over unwatched.

Other things the simulator needs: it runs one kernel at a time per process
(drivers on threads would collide), so launches take a lock; and it copies
every array argument back to the host after a launch, so read-only NumPy
arrays (Arrow-backed buffers) are handed over as inputs only.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from numba.cuda.args import ArgHint, In, InOut
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

from gpu_engine.errors import TaskCancelled
from gpu_engine.exec.cancel_points import cancel_point, current_task

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.exec.task import Task

__all__ = ["launch_simulated"]

_SIMULATOR_LOCK = threading.Lock()


class _WatchedArray(FakeCUDAArray):
    """Give simulated threads a device array that raises once the launching Task is terminating."""

    def __init__(self, array: np.ndarray, task: "Task"):
        super().__init__(array)
        self._task = task

    def __getitem__(self, index):
        if self._task.is_terminating:
            raise TaskCancelled(f"task {self._task.task_id} was cancelled")
        return FakeCUDAArray.__getitem__(self, index)

    def __setitem__(self, index, value):
        if self._task.is_terminating:
            raise TaskCancelled(f"task {self._task.task_id} was cancelled")
        self._ary[index] = value


class _Watched(ArgHint):
    """Hand an array to the simulator as an input (read-only) or input-output, watched by ``task``."""

    def __init__(self, value: np.ndarray, task: "Task"):
        super().__init__(value)
        self._task = task

    def to_device(self, retr, stream=0):
        hint = InOut(self.value) if self.value.flags.writeable else In(self.value)
        device_array = hint.to_device(retr, stream)  # the write-back in retr copies from this same buffer
        return _WatchedArray(device_array._ary, self._task)


def _simulator_argument(argument: Any, task: "Task | None") -> Any:
    if not isinstance(argument, np.ndarray) or argument.ndim == 0:
        return argument
    if task is not None:
        return _Watched(argument, task)
    return argument if argument.flags.writeable else In(argument)


def launch_simulated(kernel: Any, blocks: int, threads: int, arguments: Sequence[Any]) -> None:
    """Run ``kernel[blocks, threads](*arguments)`` in the simulator; raise TaskCancelled if its Task stops meanwhile."""
    task = current_task()
    arguments = tuple(_simulator_argument(argument, task) for argument in arguments)
    with _SIMULATOR_LOCK:
        cancel_point()  # a Task cancelled while this launch waited for the lock does not start it
        try:
            kernel[blocks, threads](*arguments)
        except TaskCancelled:
            cancel_point()  # the Task's own message, not the simulated thread's
            raise
