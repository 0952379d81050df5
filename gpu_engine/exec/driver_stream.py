"""Give each Driver its own CUDA stream, and make batches safe to hand from one driver's stream to another's.

Why: drivers of one Task run on executor threads at the same time. If they
all queued their kernels and copies on CUDA's one default stream, the GPU
would run them one after another; on a stream each, copies of one driver
overlap kernels of another. A Driver creates its stream once
(:func:`create_driver_stream`, a ``cupy.cuda.Stream(non_blocking=True)``) and
makes it the current stream of whatever executor thread runs it, for the
length of one run (:func:`stream_scope`): CuPy then issues every array
operation on it, and :mod:`gpu_engine.kernels.launch` launches numba.cuda
kernels on CuPy's current stream. So the stream follows the driver across
thread hops.

Hand-off points. A batch, a build table or a flag array made on one driver's
stream may be read by another driver, on another stream, or by the caller on
the default stream: LocalExchange queues, join bridges and a Task's output.
Nothing orders work across non-blocking streams, so the producer waits for its
own stream before it publishes (:func:`synchronize_for_handoff`). That is the
simplest correct choice; the price is that the producing driver's thread
waits for its queued kernels at each hand-off (the GPU stays busy with the
other drivers' streams meanwhile). Recording a CUDA event and making the
consumer's stream wait on it would avoid that wait, at the cost of carrying
events with every queued batch.

The other direction. CuPy's memory pool hands a freed block back to the
stream that allocated it, which may reuse it at once. So a consumer that
drops the last reference to another driver's batch while its own kernels on
that batch are still queued would let the producer overwrite memory being
read. A LocalExchange therefore keeps the batch it handed on until its next
call and waits for its own stream before letting go of it.

On ``cpu`` and ``cuda-sim`` there is no stream: every function here is a no-op.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

from gpu_engine.device import Device
from gpu_engine.exec.device_counters import count_host_sync

__all__ = ["create_driver_stream", "stream_scope", "current_driver_stream", "synchronize_for_handoff"]

_thread = threading.local()


def create_driver_stream(device: Device) -> Any:
    """Return a new non-blocking CUDA stream for one driver on a GPU, else None."""
    if not device.is_gpu:
        return None
    return device.xp.cuda.Stream(non_blocking=True)


@contextmanager
def stream_scope(stream: Any) -> Iterator[None]:
    """Make ``stream`` the current CUDA stream of this thread (and the one hand-offs wait for) inside the block.

    ``None`` (a host device) makes this a no-op. Scopes nest: the previous
    stream is current again afterwards.
    """
    if stream is None:
        yield
        return
    previous = getattr(_thread, "stream", None)
    _thread.stream = stream
    try:
        with stream:
            yield
    finally:
        _thread.stream = previous


def current_driver_stream() -> Any:
    """Return the stream of the driver running on this thread, or None outside a GPU driver."""
    return getattr(_thread, "stream", None)


def synchronize_for_handoff() -> None:
    """Wait until this thread's driver stream has finished its queued work (no-op outside a GPU driver).

    Call it before publishing device data that another driver, or the
    caller, will read on a different stream. It counts as a host sync on
    every device (:mod:`gpu_engine.exec.device_counters`), as the wait it is on a GPU.
    """
    count_host_sync()
    stream = getattr(_thread, "stream", None)
    if stream is not None:
        stream.synchronize()
