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
    """Return Q4's plan: EXISTS is a right semi join; the quarter's orders are the build side, late lines probe it.

    The quarter's orders (~4% of orders) are far fewer than the late lines
    (~63% of lineitem), so building the orders and streaming the lines through
    the table beats building a table over millions of lines for a left semi join.
    """
    ids = PlanNodeIdGenerator()
    quarter_orders = (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("orders", ["o_orderkey", "o_orderdate", "o_orderpriority"])
        .filter("o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-10-01'")
    )
    return (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("lineitem", ["l_orderkey", "l_commitdate", "l_receiptdate"])
        .filter("l_commitdate < l_receiptdate")
        .hash_join(["l_orderkey"], ["o_orderkey"], quarter_orders, ["o_orderpriority"], join_type="right_semi")
        .aggregation(["o_orderpriority"], ["count(*) AS order_count"])
        .order_by(["o_orderpriority"])
        .plan()
    )
