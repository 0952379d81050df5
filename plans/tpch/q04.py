"""Plan TPC-H Q4, the order priority checking query: orders semi-joined with late lineitems, a grouped count."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.4, validation parameter DATE = 1993-07-01.
SQL = """\
SELECT
    o_orderpriority,
    count(*) AS order_count
FROM
    orders
WHERE
    o_orderdate >= DATE '1993-07-01'
    AND o_orderdate < DATE '1993-07-01' + INTERVAL '3' MONTH
    AND EXISTS (
        SELECT
            *
        FROM
            lineitem
        WHERE
            l_orderkey = o_orderkey
            AND l_commitdate < l_receiptdate
    )
GROUP BY
    o_orderpriority
ORDER BY
    o_orderpriority"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q4's plan: EXISTS becomes a left semi join on the order key, the lineitem filter on the build side."""
    ids = PlanNodeIdGenerator()
    late_lines = (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("lineitem", ["l_orderkey", "l_commitdate", "l_receiptdate"])
        .filter("l_commitdate < l_receiptdate")
    )
    return (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("orders", ["o_orderkey", "o_orderdate", "o_orderpriority"])
        .filter("o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-10-01'")
        .hash_join(["o_orderkey"], ["l_orderkey"], late_lines, ["o_orderpriority"], join_type="left_semi")
        .aggregation(["o_orderpriority"], ["count(*) AS order_count"])
        .order_by(["o_orderpriority"])
        .plan()
    )
