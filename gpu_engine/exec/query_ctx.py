"""Carry what every Task of a query shares: the device, the configuration and the executor."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from gpu_engine.device import Device

__all__ = ["EngineConfig", "QueryCtx"]


@dataclass(frozen=True)
class EngineConfig:
    """Tunables of one query (Velox's QueryConfig), with defaults per device where it matters.

    Attributes
    ----------
    batch_rows
        Rows per batch a scan produces; ``None`` picks per device (large on a GPU,
        where launches must amortize; moderate on the CPU; tiny under the simulator).
    partial_aggregation_max_groups
        A partial aggregation emits its groups and starts over once its table holds
        more groups than this (Velox's ``max_partial_aggregation_memory``, counted in groups).
    local_exchange_max_bytes
        Bytes a LocalExchange queue buffers before producers block (back-pressure).
    driver_time_slice_seconds
        A driver running longer than this goes back to the executor queue, so
        drivers share threads fairly.
    """

    batch_rows: int | None = None
    partial_aggregation_max_groups: int = 1 << 20
    local_exchange_max_bytes: int = 64 << 20
    driver_time_slice_seconds: float = 0.2

    def with_overrides(self, **overrides) -> "EngineConfig":
        """Return a copy with some settings changed (unknown names raise TypeError)."""
        return replace(self, **overrides)

    def scan_batch_rows(self, device: Device) -> int:
        """Return the rows per scan batch for ``device``."""
        if self.batch_rows is not None:
            return self.batch_rows
        if device.name == "cuda":
            return 1 << 21
        if device.name == "cuda-sim":
            return 1 << 11
        return 1 << 18


@dataclass
class QueryCtx:
    """Hold the device, the config and the thread pool that runs a query's drivers."""

    device: Device
    config: EngineConfig = field(default_factory=EngineConfig)
    executor: ThreadPoolExecutor | None = None
    owns_executor: bool = False

    @classmethod
    def create(cls, device: Device, config: EngineConfig | None = None, threads: int | None = None) -> "QueryCtx":
        """Return a context with its own executor of ``threads`` workers (default: the core count)."""
        threads = threads or max(2, os.cpu_count() or 2)
        executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gpu-engine-driver")
        return cls(device, config or EngineConfig(), executor, True)

    def shutdown(self) -> None:
        """Stop the executor's threads (waiting for them), when this context created it."""
        if self.owns_executor and self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None
