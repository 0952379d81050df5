"""Plan the primer query: one grouped count over lineitem, the smallest useful end-to-end check."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode

__all__ = ["SQL", "plan"]

SQL = """\
SELECT l_partkey, count(*) AS count
FROM lineitem
GROUP BY l_partkey"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return the primer plan: scan ``l_partkey``, count rows per key."""
    return (
        PlanBuilder(catalog)
        .table_scan("lineitem", ["l_partkey"])
        .aggregation(["l_partkey"], ["count(*) AS count"])
        .plan()
    )
