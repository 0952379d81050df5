"""Plan TPC-H Q12, the shipping modes and order priority query: lineitem ⋈ orders, two conditional sums."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.12, validation parameters: SHIPMODE1 = MAIL,
# SHIPMODE2 = SHIP, DATE = 1994-01-01.
SQL = """\
SELECT
    l_shipmode,
    sum(
        CASE WHEN o_orderpriority = '1-URGENT'
            OR o_orderpriority = '2-HIGH' THEN
            1
        ELSE
            0
        END) AS high_line_count,
    sum(
        CASE WHEN o_orderpriority <> '1-URGENT'
            AND o_orderpriority <> '2-HIGH' THEN
            1
        ELSE
            0
        END) AS low_line_count
FROM
    orders,
    lineitem
WHERE
    o_orderkey = l_orderkey
    AND l_shipmode IN ('MAIL', 'SHIP')
    AND l_commitdate < l_receiptdate
    AND l_shipdate < l_commitdate
    AND l_receiptdate >= DATE '1994-01-01'
    AND l_receiptdate < DATE '1994-01-01' + INTERVAL '1' YEAR
GROUP BY
    l_shipmode
ORDER BY
    l_shipmode"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q12's plan: all orders probe the few qualifying lineitems; the priority tests are CASE sums.

    The lineitem filter keeps ~0.5% of lines, far fewer than the orders, so the
    lines are the build side and the orders stream through the table.
    """
    ids = PlanNodeIdGenerator()
    lines = (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("lineitem", ["l_orderkey", "l_shipmode", "l_commitdate", "l_receiptdate", "l_shipdate"])
        .filter(
            "l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate "
            "AND l_receiptdate >= DATE '1994-01-01' AND l_receiptdate < DATE '1995-01-01'"
        )
    )
    return (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("orders", ["o_orderkey", "o_orderpriority"])
        .hash_join(["o_orderkey"], ["l_orderkey"], lines, ["l_shipmode", "o_orderpriority"])
        .aggregation(
            ["l_shipmode"],
            [
                "sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END)"
                " AS high_line_count",
                "sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END)"
                " AS low_line_count",
            ],
        )
        .order_by(["l_shipmode"])
        .plan()
    )
