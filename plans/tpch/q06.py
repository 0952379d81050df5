"""Plan TPC-H Q6, the forecasting revenue change: a selective filter feeding one global sum."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.6, validation parameters: DATE = 1994-01-01,
# DISCOUNT = 0.06, QUANTITY = 24.
SQL = """\
SELECT
    sum(l_extendedprice * l_discount) AS revenue
FROM
    lineitem
WHERE
    l_shipdate >= DATE '1994-01-01'
    AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR
    AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01
    AND l_quantity < 24"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q6's plan; the date window and discount band are folded to constants."""
    return (
        PlanBuilder(catalog)
        .table_scan("lineitem", ["l_shipdate", "l_discount", "l_quantity", "l_extendedprice"])
        .filter(
            "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
            "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"
        )
        .aggregation([], ["sum(l_extendedprice * l_discount) AS revenue"])
        .plan()
    )
