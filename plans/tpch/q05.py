"""Plan TPC-H Q5, the local supplier volume query: a six-table join, a grouped sum, a sort."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.5, validation parameters: REGION = ASIA, DATE = 1994-01-01.
SQL = """\
SELECT
    n_name,
    sum(l_extendedprice * (1 - l_discount)) AS revenue
FROM
    customer,
    orders,
    lineitem,
    supplier,
    nation,
    region
WHERE
    c_custkey = o_custkey
    AND l_orderkey = o_orderkey
    AND l_suppkey = s_suppkey
    AND c_nationkey = s_nationkey
    AND s_nationkey = n_nationkey
    AND n_regionkey = r_regionkey
    AND r_name = 'ASIA'
    AND o_orderdate >= DATE '1994-01-01'
    AND o_orderdate < DATE '1994-01-01' + INTERVAL '1' YEAR
GROUP BY
    n_name
ORDER BY
    revenue DESC"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q5's plan: lineitem probes orders, customers, suppliers (on both keys), then ASIA's nations."""
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    orders = scan("orders", ["o_orderkey", "o_custkey", "o_orderdate"]).filter(
        "o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1995-01-01'"
    )
    customers = scan("customer", ["c_custkey", "c_nationkey"])
    suppliers = scan("supplier", ["s_suppkey", "s_nationkey"])
    asia = scan("region", ["r_regionkey", "r_name"]).filter("r_name = 'ASIA'")
    nations = scan("nation", ["n_nationkey", "n_name", "n_regionkey"]).hash_join(
        ["n_regionkey"], ["r_regionkey"], asia, ["n_nationkey", "n_name"]
    )
    return (
        scan("lineitem", ["l_orderkey", "l_suppkey", "l_extendedprice", "l_discount"])
        .hash_join(["l_orderkey"], ["o_orderkey"], orders,
                   ["l_suppkey", "l_extendedprice", "l_discount", "o_custkey"])
        .hash_join(["o_custkey"], ["c_custkey"], customers,
                   ["l_suppkey", "l_extendedprice", "l_discount", "c_nationkey"])
        .hash_join(["l_suppkey", "c_nationkey"], ["s_suppkey", "s_nationkey"], suppliers,
                   ["l_extendedprice", "l_discount", "s_nationkey"])
        .hash_join(["s_nationkey"], ["n_nationkey"], nations, ["n_name", "l_extendedprice", "l_discount"])
        .aggregation(["n_name"], ["sum(l_extendedprice * (1 - l_discount)) AS revenue"])
        .order_by(["revenue DESC"])
        .plan()
    )
