"""EngineConfig defaults chosen per device: scan batch rows from GPU memory, scan prefetch depth."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from gpu_engine.device import Device, get_device
from gpu_engine.exec.query_ctx import GPU_MAX_BATCH_ROWS, GPU_MIN_BATCH_ROWS, EngineConfig, gpu_batch_rows

GIB = 1 << 30


def _fake_gpu(total_bytes: int | None) -> Device:
    """Return a ``cuda`` Device whose array module reports ``total_bytes`` of GPU memory (None: the query fails)."""

    def mem_info():
        if total_bytes is None:
            raise RuntimeError("no CUDA context")
        return total_bytes // 2, total_bytes

    xp = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(memGetInfo=mem_info)))
    return Device("cuda", xp, kernel_flavor="cuda")


@pytest.mark.parametrize("total, rows", [
    (80 * GIB, 16 << 20),  # an H100: 80 GiB / 32 / 128 B = 20M rows -> the power of two below
    (141 * GIB, 32 << 20),  # an H200
    (16 * GIB, GPU_MIN_BATCH_ROWS),  # 4M rows would fit the share: never below 8M on a GPU
    (4096 * GIB, GPU_MAX_BATCH_ROWS),
    (None, GPU_MIN_BATCH_ROWS),
    (0, GPU_MIN_BATCH_ROWS),
])
def test_gpu_batch_rows_follow_device_memory(total, rows):
    assert gpu_batch_rows(total) == rows


def test_scan_batch_rows_on_a_gpu_come_from_its_memory_unless_set():
    assert EngineConfig().scan_batch_rows(_fake_gpu(80 * GIB)) == 16 << 20
    assert EngineConfig().scan_batch_rows(_fake_gpu(None)) == GPU_MIN_BATCH_ROWS  # unknown size: the minimum
    assert EngineConfig(batch_rows=1000).scan_batch_rows(_fake_gpu(80 * GIB)) == 1000
    assert EngineConfig().scan_batch_rows(get_device("cpu")) == 1 << 18


def test_scan_prefetch_depth_defaults_per_device_and_is_checked():
    cores = os.cpu_count() or 1
    config = EngineConfig()
    assert config.scan_prefetch(_fake_gpu(80 * GIB)) == 2
    assert config.scan_prefetch(get_device("cpu"), drivers=cores) == 0  # every core has a driver already
    assert config.scan_prefetch(get_device("cpu"), drivers=cores - 1) == (2 if cores > 1 else 0)
    assert EngineConfig(scan_prefetch_depth=3).scan_prefetch(get_device("cpu"), drivers=cores) == 3
    assert EngineConfig(scan_prefetch_depth=0).scan_prefetch(_fake_gpu(80 * GIB)) == 0
    with pytest.raises(ValueError, match="scan_prefetch_depth must be 0 or more"):
        EngineConfig(scan_prefetch_depth=-1).scan_prefetch(get_device("cpu"))


def test_the_core_count_is_read_once_for_every_scan(monkeypatch):
    """The affinity mask is read from the kernel on each call; every TableScan of every query asks scan_prefetch."""
    from gpu_engine import host_cpus

    calls = []
    monkeypatch.setattr(host_cpus.os, "sched_getaffinity", lambda pid: calls.append(1) or set(range(8)))
    host_cpus.usable_cpus.cache_clear()
    try:
        assert [EngineConfig().scan_prefetch(get_device("cpu"), drivers=d) for d in (1, 7, 8)] == [2, 2, 0]
        assert len(calls) == 1
    finally:
        monkeypatch.undo()
        host_cpus.usable_cpus.cache_clear()  # the machine's own count again for later tests


def test_the_prefetch_depth_counts_the_cores_the_process_may_run_on(monkeypatch):
    """A process pinned to 2 cores of a 64-core host running 2 drivers has no core left for prefetch threads."""
    from gpu_engine import host_cpus

    monkeypatch.setattr(host_cpus.os, "sched_getaffinity", lambda pid: {4, 5})
    monkeypatch.setattr(host_cpus.os, "cpu_count", lambda: 64)
    host_cpus.usable_cpus.cache_clear()
    try:
        assert [EngineConfig().scan_prefetch(get_device("cpu"), drivers=d) for d in (1, 2)] == [2, 0]
    finally:
        monkeypatch.undo()
        host_cpus.usable_cpus.cache_clear()
