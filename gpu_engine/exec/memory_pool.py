"""Account the memory a query's operators hold against a per-query cap (Velox's MemoryPool tree).

Velox gives every query a root pool with a capacity, every Task a child of it
and every operator a leaf; operators reserve before they grow and release when
they flush or close, and a reservation that would take the root past its
capacity fails with ``MEM_CAP_EXCEEDED`` naming the pool that asked. This
module does the same with three levels:

* the **query pool** (on :class:`~gpu_engine.exec.query_ctx.QueryCtx`, shared by
  every Task of the query), whose cap is ``EngineConfig.query_memory_limit_bytes``
  or, by default, :data:`DEFAULT_QUERY_MEMORY_FRACTION` of the device's free
  memory (``cudaMemGetInfo`` plus CuPy's cached free blocks on ``cuda``;
  ``MemAvailable`` of the host on ``cpu`` and ``cuda-sim``, whose buffers are
  host memory);
* a **Task pool** per Task, released as a whole when the Task's last driver ends;
* a **leaf pool** per operator instance (named by its label, ``HashAggregation[3]``)
  and per structure a Task shares (a join's build table, a LocalExchange queue).

What is counted is the state an operator keeps between calls (a hash table and
its accumulators, buffered batches, a build table, queued batches), not the
batch in flight between two operators, which lives for one driver step. It is
bookkeeping, not an allocator: buffers still come from NumPy or CuPy's pool.
So the cap stops a query whose state outgrows its share with a clear error,
and the device's own out-of-memory (``cupy.cuda.memory.OutOfMemoryError``, also
what CuPy raises past the optional ``EngineConfig.cupy_pool_limit_bytes``) is
translated by the Task into the same :class:`~gpu_engine.errors.MemoryCapExceeded`,
naming the operator (:func:`translate_device_out_of_memory`).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from gpu_engine.errors import MemoryCapExceeded

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.device import Device
    from gpu_engine.exec.query_ctx import EngineConfig

__all__ = ["MemoryPool", "DEFAULT_QUERY_MEMORY_FRACTION", "format_bytes", "free_memory_bytes", "query_memory_cap",
           "create_query_pool", "is_device_out_of_memory", "translate_device_out_of_memory"]

#: Share of the device's free memory a query may hold when no cap is configured:
#: the rest stays for the batches in flight, kernels' scratch space and other work.
DEFAULT_QUERY_MEMORY_FRACTION = 0.8

_LIMIT_SETTING = "EngineConfig.query_memory_limit_bytes"
_CUDA_ERROR_OUT_OF_MEMORY = 2  # cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_MEMORY


class MemoryPool:
    """One node of a query's memory tree: a cap at the root, reservations at the leaves.

    Only leaves reserve; every pool's :attr:`reserved_bytes` is the sum of its
    leaves', and :attr:`peak_bytes` its high-water mark. One lock per tree
    keeps the counts exact while drivers reserve concurrently.

    Parameters
    ----------
    name
        What errors and stats call the pool: an operator label (``OrderBy[5]``),
        ``task query-3``, ``query``.
    parent
        The pool this one belongs to (None for the query pool).
    cap
        The root's capacity in bytes (None: no cap); ignored below the root.
    operator, plan_node_id
        The operator type and plan node a leaf accounts for, so a
        :class:`MemoryCapExceeded` can name them.
    where
        Extra text for errors (``pipeline 1, driver 3``).
    """

    def __init__(self, name: str, parent: "MemoryPool | None" = None, cap: int | None = None, *,
                 operator: str | None = None, plan_node_id: str | None = None, where: str = ""):
        self.name = name
        self.parent = parent
        self.cap = cap if parent is None else None
        self.operator = operator
        self.plan_node_id = plan_node_id
        self.where = where
        self.root: MemoryPool = self if parent is None else parent.root
        self._lock: threading.Lock = threading.Lock() if parent is None else parent._lock
        self.children: list[MemoryPool] = []
        self.reserved_bytes = 0
        self.peak_bytes = 0
        self._own_bytes = 0

    def __repr__(self) -> str:
        return f"MemoryPool({self.name!r}, reserved={self.reserved_bytes}, peak={self.peak_bytes})"

    def add_child(self, name: str, **details) -> "MemoryPool":
        """Return a new pool under this one (a Task under the query, an operator under its Task)."""
        child = MemoryPool(name, self, **details)
        with self._lock:
            self.children.append(child)
        return child

    # ----------------------------------------------------------- reservations
    def reserve(self, nbytes: int) -> None:
        """Reserve ``nbytes`` more; raise :class:`MemoryCapExceeded` (reserving nothing) past the cap."""
        with self._lock:
            self._apply_locked(int(nbytes))

    def release(self, nbytes: int | None = None) -> None:
        """Give back ``nbytes`` of this leaf's reservation (default: all of it)."""
        with self._lock:
            amount = self._own_bytes if nbytes is None else min(int(nbytes), self._own_bytes)
            self._apply_locked(-amount)

    def set_reservation(self, nbytes: int) -> None:
        """Make this leaf hold exactly ``nbytes``: growth is checked against the cap, shrinking releases."""
        with self._lock:
            self._apply_locked(int(nbytes) - self._own_bytes)

    def transfer_to(self, other: "MemoryPool") -> None:
        """Move this leaf's whole reservation to ``other`` (same tree), as state changes hands; never fails."""
        if other.root is not self.root:
            raise ValueError(f"cannot move a reservation from {self.name} to {other.name}: different queries")
        with self._lock:
            amount = self._own_bytes
            self._add_locked(-amount)
            other._add_locked(amount)

    def release_all(self) -> None:
        """Release every reservation in this pool's subtree (a Task ending frees what its operators held)."""
        with self._lock:
            for leaf in self._subtree():
                if leaf._own_bytes:
                    leaf._add_locked(-leaf._own_bytes)

    def _apply_locked(self, delta: int) -> None:
        if delta > 0:
            root = self.root
            if root.cap is not None and root.reserved_bytes + delta > root.cap:
                raise self._cap_exceeded_locked(delta)
        self._add_locked(delta)

    def _add_locked(self, delta: int) -> None:
        self._own_bytes += delta
        pool: MemoryPool | None = self
        while pool is not None:
            pool.reserved_bytes += delta
            if pool.reserved_bytes > pool.peak_bytes:
                pool.peak_bytes = pool.reserved_bytes
            pool = pool.parent

    def _subtree(self):
        stack = [self]
        while stack:
            pool = stack.pop()
            yield pool
            stack.extend(pool.children)

    # ----------------------------------------------------------------- errors
    def largest_holders(self, count: int = 3) -> list[tuple[str, int]]:
        """Return the ``count`` names holding the most bytes under this pool (drivers of one operator summed)."""
        by_name: dict[str, int] = {}
        for pool in self._subtree():
            if pool._own_bytes > 0:
                by_name[pool.name] = by_name.get(pool.name, 0) + pool._own_bytes
        return sorted(by_name.items(), key=lambda item: -item[1])[:count]

    def _cap_exceeded_locked(self, requested: int) -> MemoryCapExceeded:
        root = self.root
        asker = self.name + (f" ({self.where})" if self.where else "")
        holders = ", ".join(f"{name} {format_bytes(held)}" for name, held in root.largest_holders())
        message = (f"Exceeded the query memory cap of {format_bytes(root.cap)}: {asker} asked for "
                   f"{format_bytes(requested)} more while the query held {format_bytes(root.reserved_bytes)}"
                   + (f" (largest: {holders})" if holders else "")
                   + f". Raise the cap with {_LIMIT_SETTING} (e.g. Session(..., query_memory_limit_bytes=...)); "
                   f"by default it is {DEFAULT_QUERY_MEMORY_FRACTION:.0%} of the device's free memory")
        return MemoryCapExceeded(message, operator=self.operator, plan_node_id=self.plan_node_id,
                                 requested_bytes=requested, used_bytes=root.reserved_bytes, cap_bytes=root.cap)


def format_bytes(nbytes: int | None) -> str:
    """Return a byte count for messages: bytes below 1 MB, MB above."""
    if nbytes is None:
        return "no cap"
    if abs(nbytes) < 1_000_000:
        return f"{nbytes:,} bytes"
    return f"{nbytes / 1e6:.1f} MB"


# ------------------------------------------------------------------ the cap
def _available_host_memory() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def free_memory_bytes(device: "Device") -> int | None:
    """Return the memory a query on ``device`` could still take (None when the platform cannot tell).

    On ``cuda`` that is the GPU's free memory plus the free blocks CuPy's pool
    caches (they are reusable, though ``cudaMemGetInfo`` counts them as used);
    ``cpu`` and ``cuda-sim`` keep buffers in host memory, so it is the host's
    available memory.
    """
    if device.is_gpu:
        xp = device.xp
        free, _total = xp.cuda.runtime.memGetInfo()
        return int(free) + int(xp.get_default_memory_pool().free_bytes())
    return _available_host_memory()


def query_memory_cap(device: "Device", config: "EngineConfig") -> int | None:
    """Return a query's cap: the configured bytes, else the default fraction of free memory."""
    limit = config.query_memory_limit_bytes
    if limit is not None:
        if int(limit) <= 0:
            raise ValueError(f"query_memory_limit_bytes must be positive, got {limit}")
        return int(limit)
    free = free_memory_bytes(device)
    return None if free is None else int(DEFAULT_QUERY_MEMORY_FRACTION * free)


def create_query_pool(device: "Device", config: "EngineConfig") -> MemoryPool:
    """Return the root pool of one query, applying CuPy's pool limit first when the config asks for one.

    ``cupy_pool_limit_bytes`` caps CuPy's default memory pool, which is
    process-wide: it is only set when configured, and stays set for later
    queries of the process (CuPy then raises its out-of-memory error, which the
    Task reports as :class:`MemoryCapExceeded`).
    """
    cupy_limit = config.cupy_pool_limit_bytes
    if cupy_limit is not None and device.is_gpu:
        device.xp.get_default_memory_pool().set_limit(size=int(cupy_limit))
    return MemoryPool("query", cap=query_memory_cap(device, config))


# ------------------------------------------------------------ device errors
def is_device_out_of_memory(error: BaseException) -> bool:
    """Return True for the device's out-of-memory errors (CuPy's pool, the CUDA runtime, numba's driver API).

    Matched by type name and module, so no GPU library is imported to ask.
    """
    kind = type(error)
    module = kind.__module__ or ""
    if kind.__name__ == "OutOfMemoryError" and module.startswith("cupy"):
        return True
    if kind.__name__ == "CUDARuntimeError" and module.startswith("cupy"):
        return getattr(error, "status", None) == _CUDA_ERROR_OUT_OF_MEMORY
    if kind.__name__ == "CudaAPIError" and module.startswith("numba"):  # numba.cuda or numba_cuda
        return getattr(error, "code", None) == _CUDA_ERROR_OUT_OF_MEMORY
    return False


def translate_device_out_of_memory(error: BaseException, operator: str, plan_node_id: str,
                                   pool: MemoryPool | None) -> MemoryCapExceeded:
    """Return the :class:`MemoryCapExceeded` a device out-of-memory inside ``operator`` is reported as."""
    root = pool.root if pool is not None else None
    held = f"; the query held {format_bytes(root.reserved_bytes)} of operator state" if root is not None else ""
    cap = f" (cap {format_bytes(root.cap)})" if root is not None else ""
    message = (f"The device ran out of memory in {operator}[{plan_node_id}]: {type(error).__name__}: {error}{held}{cap}. "
               f"Lower {_LIMIT_SETTING} so queries stop before the device does, lower batch_rows, "
               f"or free device memory (Session.uncache)")
    translated = MemoryCapExceeded(message, operator=operator, plan_node_id=plan_node_id,
                                   used_bytes=root.reserved_bytes if root is not None else 0,
                                   cap_bytes=root.cap if root is not None else None)
    translated.__cause__ = error
    return translated
