"""Each driver issues its work on its own CUDA stream; batches cross drivers only after their stream is drained.

No GPU is needed: a fake ``cuda`` device (NumPy buffers, CPU kernels, and a
recording stand-in for ``cupy.cuda``) runs the real Driver, queues, bridges
and Session, so the stream bookkeeping is checked on every machine. On a real
GPU the ``gpu``-marked test at the end runs the same query on ``cuda``.
"""

from __future__ import annotations

import threading
import types

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.device import Device
from gpu_engine.exec import driver_stream
from gpu_engine.exec.made_once import MadeOnce
from gpu_engine.kernels import launch
from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator

from duckdb_reference import assert_same_rows


class FakeStream:
    """Records what a driver does with its stream: entering it on threads, and synchronizing it."""

    _next_handle = 1000

    def __init__(self, cuda: "FakeCuda", non_blocking: bool = False):
        self.cuda = cuda
        self.non_blocking = non_blocking
        FakeStream._next_handle += 1
        self.ptr = FakeStream._next_handle
        self.entered_on: set[str] = set()
        self.synchronized = 0
        self.lock = threading.Lock()

    def __enter__(self):
        with self.lock:
            self.entered_on.add(threading.current_thread().name)
        self.cuda.push(self)
        return self

    def __exit__(self, *exc):
        self.cuda.pop(self)

    def synchronize(self):
        with self.lock:
            self.synchronized += 1


class FakeCuda:
    """Stands in for ``cupy.cuda``: streams, the thread's current stream."""

    def __init__(self):
        self.streams: list[FakeStream] = []
        self.null = FakeStream(self)
        self.null.ptr = 0
        self._local = threading.local()
        self._lock = threading.Lock()

    def Stream(self, non_blocking: bool = False):  # noqa: N802 - cupy's name
        stream = FakeStream(self, non_blocking)
        with self._lock:
            self.streams.append(stream)
        return stream

    def push(self, stream):
        self._local.stack = getattr(self._local, "stack", []) + [stream]

    def pop(self, stream):
        assert self._local.stack[-1] is stream
        self._local.stack = self._local.stack[:-1]

    def get_current_stream(self):
        stack = getattr(self._local, "stack", [])
        return stack[-1] if stack else self.null


@pytest.fixture
def fake_gpu() -> tuple[Device, FakeCuda]:
    cuda = FakeCuda()
    xp = types.SimpleNamespace(**{name: getattr(np, name) for name in dir(np) if not name.startswith("__")})
    xp.cuda = cuda
    return Device("cuda", xp, kernel_flavor="cpu"), cuda


@pytest.fixture
def orders() -> pa.Table:
    rng = np.random.default_rng(3)
    rows = 5000
    return pa.table({
        "k": pa.array(rng.integers(0, 50, rows), pa.int64()),
        "v": pa.array(rng.integers(-1000, 1000, rows), pa.int64()),
        "s": pa.array([f"s{i % 13}" for i in range(rows)]),
    })


@pytest.fixture
def keys() -> pa.Table:
    return pa.table({"kk": pa.array(range(0, 50, 2), pa.int64()), "name": [f"n{i}" for i in range(0, 50, 2)]})


def _plan(catalog):
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(catalog, id_generator=ids).table_scan("keys")
    return (PlanBuilder(catalog, id_generator=ids).table_scan("orders")
            .hash_join(["k"], ["kk"], build, ["k", "v", "s", "name"])
            .aggregation(["name", "s"], ["count(*) AS c", "sum(v) AS total"]).plan())


def _session(device, drivers, orders, keys, **config) -> Session:
    settings = {"batch_rows": 512, "query_memory_limit_bytes": 1 << 30, "scan_pinned_staging": False, **config}
    session = Session(device=device, drivers=drivers, **settings)
    session.register("orders", orders, split_rows=700)
    session.register("keys", keys, split_rows=10)
    return session


@pytest.mark.parametrize("drivers", [1, 2, 4])
def test_each_driver_has_its_own_stream_and_results_match_cpu(fake_gpu, drivers, orders, keys):
    device, cuda = fake_gpu
    session = _session(device, drivers, orders, keys)
    result = session.execute(_plan(session.catalog))
    task = session.last_task

    assert len(cuda.streams) == len(task.drivers)  # one stream per driver, made once
    assert {id(d.stream) for d in task.drivers} == {id(s) for s in cuda.streams}
    assert all(s.non_blocking for s in cuda.streams)
    assert all(s.entered_on for s in cuda.streams)  # every driver ran inside its own stream
    assert cuda.get_current_stream() is cuda.null  # and left it on the way out
    # A driver drains its stream before each hand-off: build rows to the bridge, batches to a queue, results out.
    for driver in task.drivers:
        sink = driver.operators[-1]
        handoffs = sink.stats.output_batches if driver.is_output else int(sink.stats.input_batches > 0)
        if sink.operator_type == "HashBuild":
            handoffs = 1
        assert driver.stream.synchronized >= handoffs, (driver, sink.operator_type)
    assert sum(s.synchronized for s in cuda.streams) >= len(cuda.streams) // 2

    cpu = _session("cpu", 1, orders, keys)
    assert_same_rows(result, cpu.execute(_plan(cpu.catalog)), ordered=False)


def test_drivers_hop_threads_and_keep_their_stream(fake_gpu, orders, keys):
    device, cuda = fake_gpu
    # A tiny time slice makes drivers yield after a step or two and be re-queued, often onto another thread.
    session = _session(device, 2, orders, keys, driver_time_slice_seconds=0.002)
    session.execute(_plan(session.catalog))
    assert len(cuda.streams) == len(session.last_task.drivers)  # no new stream per run
    assert any(len(s.entered_on) >= 2 for s in cuda.streams)  # a stream followed its driver to another thread


def test_results_copied_to_the_host_are_counted_on_a_gpu_only(fake_gpu, orders, keys):
    device, _ = fake_gpu
    session = _session(device, 1, orders, keys)
    plan_text = session.explain(_plan(session.catalog), analyze=True)
    assert "d2h_bytes=" in plan_text and "d2h_seconds=" in plan_text and "h2d_bytes=" in plan_text
    cpu = _session("cpu", 1, orders, keys)
    cpu_text = cpu.explain(_plan(cpu.catalog), analyze=True)
    assert "d2h_" not in cpu_text and "h2d_" not in cpu_text


def test_handoff_waits_for_the_threads_driver_stream_only():
    cuda = FakeCuda()
    stream = cuda.Stream(non_blocking=True)
    driver_stream.synchronize_for_handoff()  # outside a driver: nothing to wait for
    assert stream.synchronized == 0
    with driver_stream.stream_scope(stream):
        assert driver_stream.current_driver_stream() is stream
        assert cuda.get_current_stream() is stream
        driver_stream.synchronize_for_handoff()
        with driver_stream.stream_scope(None):  # a host device's driver nested inside changes nothing
            assert driver_stream.current_driver_stream() is stream
    assert stream.synchronized == 1
    assert driver_stream.current_driver_stream() is None
    assert driver_stream.create_driver_stream(Device("cpu", np)) is None


class RecordingKernel:
    """Stands in for a numba.cuda kernel: records the launch configuration."""

    def __init__(self):
        self.configs = []

    def __getitem__(self, config):
        self.configs.append(config)
        return lambda *arguments: None


def test_kernels_launch_on_cupys_current_stream(fake_gpu, monkeypatch):
    device, cuda = fake_gpu
    wrapped = []

    def external_stream(handle):
        wrapped.append(handle)
        return ("numba-stream", handle)

    monkeypatch.setattr(launch.cuda, "external_stream", external_stream, raising=False)
    monkeypatch.setattr(launch, "_cai_sync_disabled", True)
    monkeypatch.setattr(launch, "_NUMBA_STREAMS", MadeOnce())
    kernel = RecordingKernel()

    launch.launch_cuda(device, kernel, 10)  # the legacy default stream: no stream argument
    stream = cuda.Stream(non_blocking=True)
    with stream:
        launch.launch_cuda(device, kernel, 10)
        launch.launch_cuda(device, kernel, 10)
    launch.launch_cuda(device, kernel, 0)  # nothing to do: no launch

    blocks, threads = device.launch_shape(10)
    assert kernel.configs == [(blocks, threads), (blocks, threads, ("numba-stream", stream.ptr)),
                              (blocks, threads, ("numba-stream", stream.ptr))]
    assert wrapped == [stream.ptr]  # one wrapper per stream, reused


def test_numba_is_told_not_to_sync_array_interface_streams(monkeypatch):
    from numba.core import config

    monkeypatch.setattr(config, "CUDA_ARRAY_INTERFACE_SYNC", True)
    monkeypatch.delenv("NUMBA_CUDA_ARRAY_INTERFACE_SYNC", raising=False)  # restored (unset) afterwards
    monkeypatch.setattr(launch, "_cai_sync_disabled", False)
    launch._disable_array_interface_sync()
    assert config.CUDA_ARRAY_INTERFACE_SYNC is False


@pytest.mark.gpu
def test_drivers_run_on_distinct_cuda_streams_on_a_gpu(orders, keys):
    from gpu_engine.device import gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    session = _session("cuda", 4, orders, keys, scan_pinned_staging=None)  # the GPU's default scan: pinned copies
    result = session.execute(_plan(session.catalog))
    streams = [driver.stream for driver in session.last_task.drivers]
    assert all(type(s).__module__.startswith("cupy") and s.ptr for s in streams)
    assert len({s.ptr for s in streams}) == len(streams)
    cpu = _session("cpu", 1, orders, keys)
    assert_same_rows(result, cpu.execute(_plan(cpu.catalog)), ordered=False)
