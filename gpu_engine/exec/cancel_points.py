"""Cancel points: where a driver thread notices that its Task was cancelled or failed, and stops.

Why: a timeout or Ctrl-C cancels the Task, but a driver only looked at the
Task's state between operator calls, and one call can run for seconds: the
eager evaluation of a 2000-term predicate, a nested-loop join's batch, or a
kernel numba is compiling (its compiler holds the interpreter for most of a
compile, and a fused aggregation compiles several kernels on its first
batch). ``Session.sql(..., timeout=1.0)`` raised after 9.5 s.

The Driver marks its thread with the Task it runs (:func:`running_task`);
:func:`cancel_point` raises :class:`~gpu_engine.errors.TaskCancelled` on a
marked thread whose Task is terminating, and is cheap (a thread-local read and
a state check), so long loops call it per step: the eager evaluator per
expression node and every numba compile at its start and at the start of each
of its compiler passes (numba broadcasts both as events; one process-wide
listener, :func:`watch_compile_passes`, turns them into cancel points). Numba
runs a pass to its end, so a compile stops within one pass, not one compile.
On ``cuda-sim`` every element access of a launch's array arguments is one too
(:mod:`gpu_engine.kernels.simulator_launch`): one simulated launch can run
for minutes.
Unmarked threads (planning, tests calling operators directly) never raise.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

from gpu_engine.errors import TaskCancelled

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.exec.task import Task

__all__ = ["cancel_point", "current_task", "running_task", "watch_compile_passes"]


class _Running(threading.local):
    task: "Task | None" = None


_RUNNING = _Running()


@contextmanager
def running_task(task: "Task") -> Iterator[None]:
    """Mark the calling thread as running ``task`` (its cancel points watch it) for the ``with`` block."""
    previous = _RUNNING.task
    _RUNNING.task = task
    try:
        yield
    finally:
        _RUNNING.task = previous


def current_task() -> "Task | None":
    """Return the Task the calling thread runs (None when unmarked), for work it hands to other threads to watch.

    Why: numba's CUDA simulator runs a launch's CUDA threads on threads of its
    own, which are not marked; :mod:`gpu_engine.kernels.simulator_launch` gives
    them the launching thread's Task.
    """
    return _RUNNING.task


def cancel_point() -> None:
    """Raise :class:`TaskCancelled` when the calling thread runs a Task that was cancelled or failed."""
    task = _RUNNING.task
    if task is not None and task.is_terminating:
        raise TaskCancelled(f"task {task.task_id} was cancelled")


_LISTENER: list = []
_LISTENER_LOCK = threading.Lock()


def watch_compile_passes() -> None:
    """Make the start of every numba compile and compiler pass a cancel point (one listener per process)."""
    if _LISTENER:
        return
    with _LISTENER_LOCK:
        if _LISTENER:
            return
        from numba.core import event

        class _CancelPoint(event.Listener):
            def on_start(self, _event) -> None:
                cancel_point()

            def on_end(self, _event) -> None:
                pass

        listener = _CancelPoint()
        event.register("numba:compile", listener)
        event.register("numba:run_pass", listener)
        _LISTENER.append(listener)
