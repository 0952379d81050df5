"""Plan TPC-H Q1, the pricing summary report: a filter, one fused projection, a grouped aggregation, a sort."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.1, substitution parameter DELTA = 90 (validation value).
SQL = """\
SELECT
    l_returnflag,
    l_linestatus,
    sum(l_quantity) AS sum_qty,
    sum(l_extendedprice) AS sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
    avg(l_quantity) AS avg_qty,
    avg(l_extendedprice) AS avg_price,
    avg(l_discount) AS avg_disc,
    count(*) AS count_order
FROM
    lineitem
WHERE
    l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
GROUP BY
    l_returnflag,
    l_linestatus
ORDER BY
    l_returnflag,
    l_linestatus"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q1's plan; the two price products are computed in one projection ahead of the aggregation."""
    return (
        PlanBuilder(catalog)
        .table_scan(
            "lineitem",
            ["l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_shipdate"],
        )
        .filter("l_shipdate <= DATE '1998-09-02'")
        .project(
            [
                "l_returnflag",
                "l_linestatus",
                "l_quantity",
                "l_extendedprice",
                "l_discount",
                "l_extendedprice * (1 - l_discount) AS disc_price",
                "l_extendedprice * (1 - l_discount) * (1 + l_tax) AS charge",
            ]
        )
        .aggregation(
            ["l_returnflag", "l_linestatus"],
            [
                "sum(l_quantity) AS sum_qty",
                "sum(l_extendedprice) AS sum_base_price",
                "sum(disc_price) AS sum_disc_price",
                "sum(charge) AS sum_charge",
                "avg(l_quantity) AS avg_qty",
                "avg(l_extendedprice) AS avg_price",
                "avg(l_discount) AS avg_disc",
                "count(*) AS count_order",
            ],
        )
        .order_by(["l_returnflag", "l_linestatus"])
        .plan()
    )
