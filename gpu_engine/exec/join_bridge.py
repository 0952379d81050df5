"""Task state between a join's build and probe pipelines: HashJoinBridge and HashJoinTable (Velox's HashJoinBridge).

The build drivers of a join hand their batches to the bridge; the last one
builds and publishes the table every probe driver shares; for right and full
joins the probe drivers report their matched build rows to it and the last one
gets the union. It is Task state (Velox's Task owns its bridges), so it lives
in ``exec/``; the operators are in :mod:`gpu_engine.operators.hash_build`,
:mod:`gpu_engine.operators.hash_probe` and the nested-loop join modules.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from gpu_engine.columnar.batch import Batch
from gpu_engine.exec.dynamic_filters import DynamicFilters, JoinKeyFilter, KeyFilterTarget
from gpu_engine.exec.driver_stream import synchronize_for_handoff
from gpu_engine.exec.memory_pool import MemoryPool
from gpu_engine.kernels.hash_join import JoinHashTable

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.columnar.column import Column
    from gpu_engine.device import Device

__all__ = ["HashJoinBridge", "HashJoinTable"]


@dataclass
class HashJoinTable:
    """What the build side publishes: the key table and the build columns the probe reads.

    For a join that emits unmatched probe rows (left, full), ``columns`` has
    one extra, all-NULL row at index ``null_row`` (= ``num_rows``), so those
    rows gather their build side from it like any match. Other joins never
    read it, and their build columns are not copied to append it.
    """

    keys: JoinHashTable
    columns: Batch
    #: For a semi or anti join whose condition is ``probe.c <> build.c``: ``(c's probe column, lows, highs)``,
    #: the bounds of ``c`` per key id (:meth:`~gpu_engine.kernels.hash_join.JoinHashTable.value_bounds`), else None.
    value_bounds: tuple[str, Any, Any] | None = None

    @property
    def num_rows(self) -> int:
        """Return the build rows (without the NULL row)."""
        return self.keys.num_rows

    @property
    def null_row(self) -> int:
        """Return the index of the all-NULL row of :attr:`columns`."""
        return self.keys.num_rows

    @property
    def nbytes(self) -> int:
        """Return the bytes of the key table and the columns (what the join's memory pool holds)."""
        bounds = 0 if self.value_bounds is None else sum(int(a.nbytes) for a in self.value_bounds[1:])
        return self.keys.nbytes + self.columns.nbytes + bounds


class HashJoinBridge:
    """Hand the build side's table from the build drivers to the probe drivers of one join (Velox's HashJoinBridge).

    What it carries is the join's business: a HashJoin publishes a
    :class:`HashJoinTable`, a NestedLoopJoin its build rows as one Batch
    (:mod:`gpu_engine.operators.nested_loop_join_build`). The planner sets
    :attr:`num_builders` and :attr:`num_probers` (the driver counts of the two
    pipelines) before any driver runs.
    """

    def __init__(self):
        self.num_builders = 1
        self.num_probers = 1
        self._lock = threading.Lock()
        self._batches: list[Batch] = []
        self._builders_done = 0
        self._published: Future = Future()
        self._probers_done = 0
        self._probers_closed = 0
        self._matched: Any = None
        self.memory_pool: MemoryPool | None = None
        #: The key filters this join pushes to its probe pipeline's scan, and the Task's registry they go to
        #: (set by the local planner; see :mod:`gpu_engine.exec.dynamic_filters`).
        self.key_filter_targets: tuple[KeyFilterTarget, ...] = ()
        self.dynamic_filters: DynamicFilters | None = None

    def hold_memory_of(self, pool: MemoryPool) -> MemoryPool:
        """Move a build driver's reservation into the bridge's pool, which now holds its batches; return that pool.

        The bridge's pool is a leaf of the Task's pool with the build
        operator's name; it accounts for the batches handed over and then the
        published table, and is released when the Task ends.
        """
        with self._lock:
            if self.memory_pool is None:
                self.memory_pool = pool.parent.add_child(pool.name, operator=pool.operator,
                                                         plan_node_id=pool.plan_node_id, where="join build side")
        pool.transfer_to(self.memory_pool)
        return self.memory_pool

    def add_build_batches(self, batches: list[Batch]) -> list[Batch] | None:
        """Keep one build driver's batches; return every driver's batches to the last one, else None."""
        synchronize_for_handoff()  # the last build driver reads them on its own CUDA stream
        with self._lock:
            self._batches.extend(batches)
            self._builders_done += 1
            if self._builders_done < self.num_builders:
                return None
            batches, self._batches = self._batches, []
            return batches

    def push_key_filters(self, device: Device, key_columns: Sequence[Column]) -> int:
        """Add a filter per target to the Task's scans from the complete build side's key columns; return how many.

        Called by the last build driver before it publishes the table, so every
        probe-side scan finds the filters before it reads a split (it reads none
        while its join's probe is blocked on the table).
        """
        if self.dynamic_filters is None:
            return 0
        for target in self.key_filter_targets:
            self.dynamic_filters.add(target.scan_id, JoinKeyFilter.of_build_keys(
                device, key_columns[target.key_index], target.column, target.kind, target.join_id))
        return len(self.key_filter_targets)

    def publish(self, table: HashJoinTable | Batch) -> None:
        """Make the table visible and wake every probe driver waiting for it."""
        synchronize_for_handoff()  # probe drivers read it on their own CUDA streams
        self._published.set_result(table)

    def table_or_future(self) -> tuple[HashJoinTable | Batch | None, Future | None]:
        """Return ``(table, None)`` once published, else ``(None, future)`` completed on publication."""
        if self._published.done():
            return self._published.result(), None
        return None, self._published

    def prober_closed(self) -> None:
        """Count one probe driver out; the last one hands the key table's large arrays back for reuse.

        Nothing reads the key table once every probe driver has closed (their outputs are gathered
        copies), so its memory goes to the buffer recycler (:meth:`~gpu_engine.kernels.hash_join.JoinHashTable.release`)
        rather than back to the OS, and the next query's build finds it touched.
        """
        with self._lock:
            self._probers_closed += 1
            last = self._probers_closed == self.num_probers
        if last and self._published.done() and not self._published.cancelled():
            table = self._published.result()
            if isinstance(table, HashJoinTable):
                table.keys.release()

    def probe_finished(self, matched: Any, merge: Any = None) -> Any:
        """Merge one probe driver's matched-build-row flags (or what ``merge(previous, matched)`` merges: a
        right_semi join's value bounds); return the union to the last driver, else None."""
        with self._lock:
            if matched is not None:
                previous = self._matched  # made on another prober's stream: freed only after the merge has run
                self._matched = (matched.copy() if previous is None else previous | matched if merge is None
                                 else merge(previous, matched))
                synchronize_for_handoff()  # the merge ran on this driver's stream; the next prober reads it on its own
                del previous
            self._probers_done += 1
            return self._matched if self._probers_done == self.num_probers else None
