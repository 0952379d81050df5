"""What the PARTIAL aggregation steps of a Task that gave up grouping saw, for their FINAL steps (Task state).

Why: a PARTIAL step that finds about a group per row stops grouping and hands every later row on
(:meth:`~gpu_engine.aggregation.aggregation_operator.AggregationOperator._grouping_pays`), so its FINAL
step receives as many rows as were scanned, nearly all new keys. Without knowing how many are coming, the
FINAL step's table grew by doubling (db-benchmark's q10: 8 growths of a table that ends at 640 MB a driver,
each a fresh zeroed table and a move of every key). The rows and groups the PARTIAL steps saw before giving
up, with the scan's row count (:meth:`gpu_engine.exec.task.Task.split_rows`), size the FINAL step's table once
(:meth:`gpu_engine.operators.fused_aggregation.FusedAggregation._size_for_abandoned_partials`).
"""

from __future__ import annotations

import threading

__all__ = ["AbandonedPartials"]


class AbandonedPartials:
    """Rows grouped and groups held when each PARTIAL step's driver gave up, summed per plan node."""

    def __init__(self):
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, int]] = {}

    def record(self, plan_node_id: str, rows: int, groups: int) -> None:
        """Count one driver's giving up at ``groups`` groups in ``rows`` rows grouped."""
        with self._lock:
            before_rows, before_groups = self._seen.get(plan_node_id, (0, 0))
            self._seen[plan_node_id] = (before_rows + rows, before_groups + groups)

    def seen(self, plan_node_id: str) -> tuple[int, int] | None:
        """Return (rows grouped, groups) over the node's drivers that gave up so far, or None if none did."""
        with self._lock:
            return self._seen.get(plan_node_id)
