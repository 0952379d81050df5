"""Carry what every Task of a query shares: the device, the configuration and the executor."""

from __future__ import annotations

import difflib
import numbers
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace

from gpu_engine.codegen.background_compiles import COMPILE_MODES, default_compile_mode
from gpu_engine.device import Device
from gpu_engine.exec.memory_pool import MemoryPool, create_query_pool
from gpu_engine.exec.output_buffer_manager import OutputBufferManager
from gpu_engine.host_cpus import usable_cpus

__all__ = ["EngineConfig", "QueryCtx", "gpu_batch_rows", "device_memory_bytes"]


#: Share of a GPU's total memory one default scan batch may take (see :func:`gpu_batch_rows`).
GPU_BATCH_MEMORY_FRACTION = 1 / 32
#: Bytes a row is assumed to take when sizing GPU batches: a dozen 8-byte
#: columns with their validity, or a cached table's few strings.
GPU_TYPICAL_ROW_BYTES = 128
#: Fewer rows than this and per-batch host work dominates on a GPU: the H100 baseline
#: (``shared/gpu/h100-baseline.md``) measured ~11 ms of host work per batch.
GPU_MIN_BATCH_ROWS = 8 << 20
#: More rows than this buy little and gather maps (int32 row indices) and
#: intermediate results grow with the batch.
GPU_MAX_BATCH_ROWS = 64 << 20


def gpu_batch_rows(total_memory_bytes: int | None) -> int:
    """Return the default scan batch rows for a GPU with ``total_memory_bytes`` of memory.

    The largest power of two of rows whose :data:`GPU_TYPICAL_ROW_BYTES`-byte
    rows fit in :data:`GPU_BATCH_MEMORY_FRACTION` of the memory, clamped to
    ``[GPU_MIN_BATCH_ROWS, GPU_MAX_BATCH_ROWS]`` (an 80 GB H100 gets 16M rows).
    A batch, its intermediates and a second batch in flight per driver then
    stay a small share of the device, while each batch is large enough that
    its fixed host cost is amortized. ``None`` (the size is unknown) gives the
    minimum.
    """
    if not total_memory_bytes or total_memory_bytes <= 0:
        return GPU_MIN_BATCH_ROWS
    rows = int(total_memory_bytes * GPU_BATCH_MEMORY_FRACTION) // GPU_TYPICAL_ROW_BYTES
    power_of_two = 1 << max(0, rows.bit_length() - 1)
    return max(GPU_MIN_BATCH_ROWS, min(GPU_MAX_BATCH_ROWS, power_of_two))


def device_memory_bytes(device: Device) -> int | None:
    """Return the total memory of ``device``'s current GPU (None on host devices or when it cannot tell)."""
    if not device.is_gpu:
        return None
    try:
        _free, total = device.xp.cuda.runtime.memGetInfo()
    except Exception:  # noqa: BLE001 - any failure means: unknown, use the minimum
        return None
    return int(total)


#: Numeric settings of :class:`EngineConfig`: (integer or number, lowest value, None allowed).
#: A "number" must be above its lowest value, an "integer" at least it.
_NUMERIC_SETTINGS = {
    "batch_rows": ("integer", 1, True),
    "partial_aggregation_max_groups": ("integer", 1, False),
    "partial_aggregation_abandon_rows": ("integer", 1, False),
    "partial_aggregation_abandon_percent": ("integer", 0, False),
    "radix_aggregation_min_groups": ("integer", 1, True),
    "local_exchange_max_bytes": ("integer", 1, False),
    "driver_time_slice_seconds": ("number", 0, False),
    "shuffle_page_bytes": ("integer", 1, False),
    "output_buffer_max_bytes": ("integer", 1, False),
    "exchange_max_bytes": ("integer", 1, False),
    "query_memory_limit_bytes": ("integer", 1, True),
    "cupy_pool_limit_bytes": ("integer", 1, True),
    "scan_prefetch_depth": ("integer", 0, True),
    "scan_decode_threads": ("integer", 0, True),
}
#: Settings of :class:`EngineConfig` that take one of a few values.
_CHOICE_SETTINGS = {
    "shuffle_compression": (None, "lz4", "zstd"),
    "scan_pinned_staging": (None, True, False),
    "parquet_reader": ("auto", "pyarrow", "cudf", "device"),
    "fuse": (True, False),
    "optimize": (True, False),
    "compile_mode": COMPILE_MODES,
}


@dataclass(frozen=True)
class EngineConfig:
    """Tunables of one query (Velox's QueryConfig), with defaults per device where it matters.

    Attributes
    ----------
    batch_rows
        Rows per batch a scan (and ``Session.cache``) produces; ``None`` picks per
        device: on ``cuda`` millions, derived from the GPU's memory
        (:func:`gpu_batch_rows`), because every batch pays a fixed host cost
        (kernel launches, Python work) that only large batches amortize;
        moderate on the CPU; tiny under the simulator.
    partial_aggregation_max_groups
        A partial aggregation emits its groups and starts over once its table holds
        more groups than this (Velox's ``max_partial_aggregation_memory``, counted in groups).
    partial_aggregation_abandon_rows, partial_aggregation_abandon_percent
        A partial aggregation that has read at least ``abandon_rows`` rows and holds more groups than
        ``abandon_percent`` % of them stops grouping: it emits its groups and hands each later row on as
        a group of its own (Velox's ``abandon_partial_aggregation_min_rows``/``_min_pct``), since a step
        that barely reduces its rows only doubles the final step's work.
    radix_aggregation_min_groups
        An aggregation of fixed-width keys (not a PARTIAL step) whose driver expects at least this many groups (a
        FINAL step whose PARTIAL step gave up grouping), or whose one table reaches this many at about a group a
        row, holds its input (from then on), partitions it by the high bits of its key hashes and aggregates one
        partition at a time into a slot table that stays in cache
        (:meth:`~gpu_engine.operators.fused_aggregation.FusedAggregation._run_radix`); ``None`` never does.
        Default 300,000: from there a driver's one table (2^20 slots, ~40 MB for a key and two aggregates)
        outgrows the 32 MiB L3: an integer-key GROUP BY ran 0.61-0.78x its CPU partitioned at 300K groups, 0.57x at
        1M (loaded), 0.60x quiet at 500K-5M; at 150K groups (a table that fits) partitioning cost 1.13x. String keys never
        partition (db-benchmark q10: 2.16x). ``bench/results/2026-11-29-radix.md``.
    local_exchange_max_bytes
        Bytes a LocalExchange queue buffers before producers block (back-pressure).
    driver_time_slice_seconds
        A driver running longer than this goes back to the executor queue, so
        drivers share threads fairly.
    shuffle_page_bytes
        A PartitionedOutput serializes a destination's pending rows into a page
        once they pass this many (Arrow) bytes; smaller pages mean earlier
        delivery, larger ones fewer per-page costs.
    shuffle_compression
        ``None``, ``"lz4"`` or ``"zstd"``: the codec of the Arrow IPC pages on the
        wire (pyarrow ``IpcWriteOptions.compression``).
    output_buffer_max_bytes
        Bytes a Task's output buffers hold (all destinations together) before its
        PartitionedOutput drivers block until consumers take pages.
    exchange_max_bytes
        Bytes of pages a Task's Exchange queue fetches ahead of its drivers
        before it stops asking producers for more.
    query_memory_limit_bytes
        The cap on the state one query's operators hold together (hash tables
        and accumulators, buffered sort and top-n input, join build tables,
        LocalExchange queues), counted in
        :mod:`gpu_engine.exec.memory_pool`; a query that would pass it fails
        with :class:`~gpu_engine.errors.MemoryCapExceeded` naming the operator.
        ``None`` means 80% of the device's free memory when the query starts
        (host available memory on ``cpu`` and ``cuda-sim``).
    cupy_pool_limit_bytes
        On ``cuda`` only: also cap CuPy's default memory pool at this many bytes
        (``cupy.get_default_memory_pool().set_limit``). The limit is
        process-wide and stays set after the query, so it is applied only when
        asked for; ``None`` leaves CuPy's pool alone.
    scan_pinned_staging
        How a TableScan copies Parquet/Arrow data to the device: gathering a
        split's record batches into ``batch_rows``-row batches packed through
        pinned host memory (:mod:`gpu_engine.columnar.transfers`), or one Arrow
        batch at a time. ``None`` packs on ``cuda`` only; ``True`` also packs on
        ``cpu`` and ``cuda-sim`` (into plain host arrays: how tests run the
        GPU's scan path without a GPU); ``False`` never packs.
    parquet_reader
        ``"auto"`` (default): cuDF's GPU reader on ``cuda`` when cuDF imports,
        else the engine's device decoder on ``cuda``, else the host
        (:func:`~gpu_engine.connectors.cudf_interop.resolve_parquet_reader`);
        ``"pyarrow"``: decode on the host (the engine's page decoder, pyarrow
        for the rest); ``"cudf"``: on ``cuda``, read Parquet splits with cuDF's
        GPU reader, straight into device memory
        (:mod:`gpu_engine.connectors.cudf_interop`), needs cuDF; ``"device"``:
        copy fixed-width columns' compressed pages to the device and decode
        them there (:mod:`gpu_engine.connectors.parquet_device_columns`; on
        ``cuda``, or ``cuda-sim`` in tests).
    scan_prefetch_depth
        Pieces of splits (runs of whole row groups, one scan batch each) a
        TableScan decodes ahead on threads of its own while its driver
        converts, copies and computes the current batch
        (:mod:`gpu_engine.connectors.split_prefetcher`), so the host decode of
        the next batch overlaps the device work of this one. ``0`` decodes on
        the driver's thread. ``None`` picks per device: 2 on ``cuda`` (each
        piece is also decoded column-parallel by pyarrow's threads); on ``cpu``
        2 while the scan's drivers leave cores idle, else 0 (measured at TPC-H
        SF1 on a shared 2-core machine, noisy: Q1 with 1 driver 15–30% faster,
        with 2 drivers no faster or slightly slower); 0 on ``cuda-sim``.
    scan_decode_threads
        Threads of the process's pool that decode a piece's Parquet column
        chunks in parallel (:mod:`gpu_engine.connectors.decode_pool`), shared
        by every scan and driver, so decode threads never outnumber it.
        ``None`` (default): ``$GPU_ENGINE_DECODE_THREADS``, else the cores the
        process may run on (its affinity mask), at most 16, less one a driver on ``cpu`` and ``cuda-sim``
        (drivers there compute on cores of their own); ``0`` decodes on the
        scan's own thread.
    fuse
        Replace filter/project/aggregation stretches by fused operators that
        run one generated kernel per batch (:mod:`gpu_engine.planning.fusion`);
        ``False`` runs every node as its own operator, for comparison.
    optimize
        Run the optimizer rules over the typed plan (:mod:`gpu_engine.optimizer`:
        constant folding, predicate pushdown, empty relations, projection
        pruning) before the
        physical passes; ``False`` runs the plan as built, for comparison.
    compile_mode
        When a generated kernel that is not compiled yet meets its first batch
        (:mod:`gpu_engine.codegen.background_compiles`): ``"background"``
        (default, or ``$GPU_ENGINE_COMPILE_MODE``) runs the batch on the lowest
        tier (eager expressions, static kernels) while a compile process
        of low priority compiles the kernel, which later batches and queries
        use; ``"inline"`` compiles on the driver first (the batch waits);
        ``"alternate"`` runs each operator's odd batches on the lowest tier and
        its even ones on the generated kernels (checks that the tiers agree);
        ``"lowest"`` runs every batch on the lowest tier and compiles nothing
        (what a first run is measured against: its lowest tier alone).
    """

    batch_rows: int | None = None
    partial_aggregation_max_groups: int = 1 << 20
    partial_aggregation_abandon_rows: int = 100_000
    partial_aggregation_abandon_percent: int = 80
    radix_aggregation_min_groups: int | None = 300_000
    local_exchange_max_bytes: int = 64 << 20
    driver_time_slice_seconds: float = 0.2
    shuffle_page_bytes: int = 1 << 20
    shuffle_compression: str | None = None
    output_buffer_max_bytes: int = 32 << 20
    exchange_max_bytes: int = 32 << 20
    query_memory_limit_bytes: int | None = None
    cupy_pool_limit_bytes: int | None = None
    scan_pinned_staging: bool | None = None
    parquet_reader: str = "auto"
    scan_prefetch_depth: int | None = None
    scan_decode_threads: int | None = None
    fuse: bool = True
    optimize: bool = True
    compile_mode: str = field(default_factory=default_compile_mode)

    def __post_init__(self) -> None:
        """Refuse values no query could run with, here rather than half-way through the first query.

        Why at construction: a typo'd or mistyped setting (``batch_rows=0``,
        ``query_memory_limit_bytes="abc"``) used to surface only at execute,
        or as an arithmetic error deep in an operator.
        """
        for name, (kind, low, optional) in _NUMERIC_SETTINGS.items():
            value = getattr(self, name)
            if value is None and optional:
                continue
            wanted = "an integer" if kind == "integer" else "a number"
            if (isinstance(value, bool) or not isinstance(value, numbers.Real)
                    or (kind == "integer" and not isinstance(value, numbers.Integral))):
                raise ValueError(f"{name} must be {wanted}{' or None' if optional else ''}, got {value!r}")
            if value < low or (kind == "number" and value == low):
                bound = f"{low} or more" if kind == "integer" and low == 0 else "positive"
                raise ValueError(f"{name} must be {bound}{' (or None)' if optional else ''}, got {value!r}")
        for name, choices in _CHOICE_SETTINGS.items():
            value = getattr(self, name)
            if not any(value is choice or (isinstance(value, str) and value == choice) for choice in choices):
                raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")

    def with_overrides(self, **overrides) -> "EngineConfig":
        """Return a copy with some settings changed.

        Raises
        ------
        TypeError
            For a name that is no setting, listing the settings (and the
            closest one, for a typo such as ``batch_rowz``).
        ValueError
            For a value out of its range or of the wrong type.
        """
        known = [f.name for f in fields(self)]
        for name in overrides:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise TypeError(f"unknown setting {name!r}{hint} valid settings: {', '.join(known)}")
        return replace(self, **overrides)

    def packs_scan_batches(self, device: Device) -> bool:
        """Return True when a TableScan on ``device`` gathers and packs its batches (see ``scan_pinned_staging``)."""
        return device.is_gpu if self.scan_pinned_staging is None else bool(self.scan_pinned_staging)

    def scan_batch_rows(self, device: Device) -> int:
        """Return the rows per scan batch for ``device`` (``batch_rows`` when set)."""
        if self.batch_rows is not None:
            return self.batch_rows
        if device.name == "cuda":
            return gpu_batch_rows(device_memory_bytes(device))
        if device.name == "cuda-sim":
            return 1 << 11
        return 1 << 18

    def scan_decode_pool_threads(self, device: Device | None = None, drivers: int = 1) -> int:
        """Return the decode pool's threads for a scan on ``device`` (None: a GPU) run by ``drivers`` drivers.

        ``scan_decode_threads`` when set, else the environment's or the machine's default, which on a
        host device leaves a core to each driver (see :func:`~gpu_engine.connectors.decode_pool.default_decode_threads`).
        """
        from gpu_engine.connectors.decode_pool import default_decode_threads

        if self.scan_decode_threads is not None:
            return self.scan_decode_threads
        return default_decode_threads(0 if device is None or device.is_gpu else drivers)

    def scan_prefetch(self, device: Device, drivers: int = 1) -> int:
        """Return how many split pieces a TableScan on ``device`` run by ``drivers`` drivers decodes ahead.

        See ``scan_prefetch_depth``; prefetch threads only pay where cores
        would otherwise idle, hence the driver count.
        """
        if self.scan_prefetch_depth is not None:
            if self.scan_prefetch_depth < 0:
                raise ValueError(f"scan_prefetch_depth must be 0 or more, got {self.scan_prefetch_depth}")
            return self.scan_prefetch_depth
        if device.is_gpu:
            return 2
        if device.name == "cpu" and drivers < usable_cpus():
            return 2
        return 0


@dataclass
class QueryCtx:
    """Hold the device, the config, the thread pool that runs a query's drivers and its output buffers.

    ``output_buffer_manager`` holds the pages every PartitionedOutput of the
    query's Tasks produces, keyed by task id; the Tasks of one LocalCluster
    query share one context, so their Exchanges find their producers' pages.
    ``memory_pool`` is the query's root memory pool, so those Tasks also share
    one cap (``query_memory_limit_bytes``).
    """

    device: Device
    config: EngineConfig = field(default_factory=EngineConfig)
    executor: ThreadPoolExecutor | None = None
    owns_executor: bool = False
    output_buffer_manager: OutputBufferManager = field(default_factory=OutputBufferManager)
    memory_pool: MemoryPool | None = None

    def __post_init__(self) -> None:
        if self.memory_pool is None:
            self.memory_pool = create_query_pool(self.device, self.config)

    @classmethod
    def create(cls, device: Device, config: EngineConfig | None = None, threads: int | None = None,
               output_buffer_manager: OutputBufferManager | None = None) -> "QueryCtx":
        """Return a context with its own executor of ``threads`` workers (default: the core count)."""
        threads = threads or max(2, usable_cpus())
        executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gpu-engine-driver")
        return cls(device, config or EngineConfig(), executor, True, output_buffer_manager or OutputBufferManager())

    def shutdown(self) -> None:
        """Stop the executor's threads (waiting for them), when this context created it."""
        if self.owns_executor and self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None
