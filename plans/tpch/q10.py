"""Plan TPC-H Q10, the returned item reporting query: customer ⋈ orders ⋈ lineitem ⋈ nation, a top 20."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.10, validation parameter DATE = 1993-10-01.
SQL = """\
SELECT
    c_custkey,
    c_name,
    sum(l_extendedprice * (1 - l_discount)) AS revenue,
    c_acctbal,
    n_name,
    c_address,
    c_phone,
    c_comment
FROM
    customer,
    orders,
    lineitem,
    nation
WHERE
    c_custkey = o_custkey
    AND l_orderkey = o_orderkey
    AND o_orderdate >= DATE '1993-10-01'
    AND o_orderdate < DATE '1993-10-01' + INTERVAL '3' MONTH
    AND l_returnflag = 'R'
    AND c_nationkey = n_nationkey
GROUP BY
    c_custkey,
    c_name,
    c_acctbal,
    c_phone,
    n_name,
    c_address,
    c_comment
ORDER BY
    revenue DESC
LIMIT 20"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q10's plan: revenue per customer key first, its top 20, then their names and nations.

    The SQL groups by every customer column, but they all follow from
    ``c_custkey``, so the plan sums per ``o_custkey`` (an integer key), keeps
    the top 20, and only then joins customers (probing with all customers
    against a 20-row build) and, for those 20, their nations — the string
    columns are never hashed or gathered for the customers that do not make
    the list (joining nations first gathered all 150k customers' strings,
    29 MB, for ~36 ms of CPU at SF1).
    """
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    orders = scan("orders", ["o_orderkey", "o_custkey", "o_orderdate"]).filter(
        "o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE '1994-01-01'"
    )
    nations = scan("nation", ["n_nationkey", "n_name"])
    top_customers = (
        scan("lineitem", ["l_orderkey", "l_returnflag", "l_extendedprice", "l_discount"])
        .filter("l_returnflag = 'R'")
        .hash_join(["l_orderkey"], ["o_orderkey"], orders, ["l_extendedprice", "l_discount", "o_custkey"])
        .aggregation(["o_custkey"], ["sum(l_extendedprice * (1 - l_discount)) AS revenue"])
        .top_n(["revenue DESC"], 20)
    )
    return (
        scan("customer", ["c_custkey", "c_name", "c_acctbal", "c_phone", "c_address", "c_comment", "c_nationkey"])
        .hash_join(["c_custkey"], ["o_custkey"], top_customers,
                   ["c_custkey", "c_name", "revenue", "c_acctbal", "c_phone", "c_address", "c_comment", "c_nationkey"])
        .hash_join(["c_nationkey"], ["n_nationkey"], nations,
                   ["c_custkey", "c_name", "revenue", "c_acctbal", "n_name", "c_address", "c_phone", "c_comment"])
        .top_n(["revenue DESC"], 20)
        .plan()
    )
