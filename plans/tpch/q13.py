"""Plan TPC-H Q13, the customer distribution query: customer left-joined with orders, counted twice."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.13, validation parameters: WORD1 = special, WORD2 = requests.
SQL = """\
SELECT
    c_count,
    count(*) AS custdist
FROM (
    SELECT
        c_custkey,
        count(o_orderkey)
    FROM
        customer
    LEFT OUTER JOIN orders ON c_custkey = o_custkey
        AND o_comment NOT LIKE '%special%requests%'
    GROUP BY
        c_custkey) AS c_orders (c_custkey,
        c_count)
GROUP BY
    c_count
ORDER BY
    custdist DESC,
    c_count DESC"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q13's plan: qualifying orders probe a right join built on the customers (the smaller side: 150K rows
    instead of 1.5M orders with their comments); count per customer, then per count."""
    ids = PlanNodeIdGenerator()
    customers = PlanBuilder(catalog, id_generator=ids).table_scan("customer", ["c_custkey"])
    return (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("orders", ["o_orderkey", "o_custkey", "o_comment"])
        .filter("NOT (o_comment LIKE '%special%requests%')")
        .hash_join(["o_custkey"], ["c_custkey"], customers, ["c_custkey", "o_orderkey"], join_type="right")
        .aggregation(["c_custkey"], ["count(o_orderkey) AS c_count"])
        .aggregation(["c_count"], ["count(*) AS custdist"])
        .order_by(["custdist DESC", "c_count DESC"])
        .plan()
    )
