"""Plan TPC-H Q3, the shipping priority query: customer ⋈ orders ⋈ lineitem, a grouped sum, a top 10."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.3, validation parameters: SEGMENT = BUILDING, DATE = 1995-03-15.
SQL = """\
SELECT
    l_orderkey,
    sum(l_extendedprice * (1 - l_discount)) AS revenue,
    o_orderdate,
    o_shippriority
FROM
    customer,
    orders,
    lineitem
WHERE
    c_mktsegment = 'BUILDING'
    AND c_custkey = o_custkey
    AND l_orderkey = o_orderkey
    AND o_orderdate < DATE '1995-03-15'
    AND l_shipdate > DATE '1995-03-15'
GROUP BY
    l_orderkey,
    o_orderdate,
    o_shippriority
ORDER BY
    revenue DESC,
    o_orderdate
LIMIT 10"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q3's plan: lineitem probes (orders probing BUILDING customers), then sum and top 10."""
    ids = PlanNodeIdGenerator()
    customers = (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("customer", ["c_custkey", "c_mktsegment"])
        .filter("c_mktsegment = 'BUILDING'")
    )
    orders = (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("orders", ["o_orderkey", "o_custkey", "o_orderdate", "o_shippriority"])
        .filter("o_orderdate < DATE '1995-03-15'")
        .hash_join(["o_custkey"], ["c_custkey"], customers, ["o_orderkey", "o_orderdate", "o_shippriority"])
    )
    return (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("lineitem", ["l_orderkey", "l_extendedprice", "l_discount", "l_shipdate"])
        .filter("l_shipdate > DATE '1995-03-15'")
        .hash_join(
            ["l_orderkey"],
            ["o_orderkey"],
            orders,
            ["l_orderkey", "l_extendedprice", "l_discount", "o_orderdate", "o_shippriority"],
        )
        .aggregation(
            ["l_orderkey", "o_orderdate", "o_shippriority"],
            ["sum(l_extendedprice * (1 - l_discount)) AS revenue"],
        )
        .top_n(["revenue DESC", "o_orderdate"], 10)
        .project(["l_orderkey", "revenue", "o_orderdate", "o_shippriority"])
        .plan()
    )
