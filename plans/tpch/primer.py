"""Plan the primer query: one grouped count over lineitem, the smallest useful end-to-end check.

It ends with ``ORDER BY l_partkey`` (each key is one row, so the order is total):
without it the rows a demo or a test prints first depend on the hash table's
slot order and the number of drivers, and change between runs.
"""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode

__all__ = ["SQL", "plan"]

SQL = """\
SELECT l_partkey, count(*) AS count
FROM lineitem
GROUP BY l_partkey
ORDER BY l_partkey"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return the primer plan: scan ``l_partkey``, count rows per key, order by the key."""
    return (
        PlanBuilder(catalog)
        .table_scan("lineitem", ["l_partkey"])
        .aggregation(["l_partkey"], ["count(*) AS count"])
        .order_by(["l_partkey"])
        .plan()
    )
