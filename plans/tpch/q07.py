"""Plan TPC-H Q7, the volume shipping query: trade between two nations per year, from two nation scans."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.7, validation parameters: NATION1 = FRANCE, NATION2 = GERMANY.
SQL = """\
SELECT
    supp_nation,
    cust_nation,
    l_year,
    sum(volume) AS revenue
FROM (
    SELECT
        n1.n_name AS supp_nation,
        n2.n_name AS cust_nation,
        extract(year FROM l_shipdate) AS l_year,
        l_extendedprice * (1 - l_discount) AS volume
    FROM
        supplier,
        lineitem,
        orders,
        customer,
        nation n1,
        nation n2
    WHERE
        s_suppkey = l_suppkey
        AND o_orderkey = l_orderkey
        AND c_custkey = o_custkey
        AND s_nationkey = n1.n_nationkey
        AND c_nationkey = n2.n_nationkey
        AND ((n1.n_name = 'FRANCE'
                AND n2.n_name = 'GERMANY')
            OR (n1.n_name = 'GERMANY'
                AND n2.n_name = 'FRANCE'))
        AND l_shipdate BETWEEN CAST('1995-01-01' AS date)
        AND CAST('1996-12-31' AS date)) AS shipping
GROUP BY
    supp_nation,
    cust_nation,
    l_year
ORDER BY
    supp_nation,
    cust_nation,
    l_year"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q7's plan: the two nations' lines probe their orders by customer; the pair filter runs on the join.

    Each side is cut to the two nations before the joins: suppliers of either
    nation (as ``supp_nation``) filter the shipped lines, customers of either
    nation (as ``cust_nation``) filter the orders; the join on the order key
    keeps the cross-nation pairs only. Each nation scan renames ``n_name``, so
    the two scans' columns never clash.
    """
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    def nations(name: str) -> PlanBuilder:
        return (
            scan("nation", ["n_nationkey", "n_name"])
            .filter("n_name IN ('FRANCE', 'GERMANY')")
            .project(["n_nationkey", f"n_name AS {name}"])
        )

    suppliers = scan("supplier", ["s_suppkey", "s_nationkey"]).hash_join(
        ["s_nationkey"], ["n_nationkey"], nations("supp_nation"), ["s_suppkey", "supp_nation"]
    )
    customers = scan("customer", ["c_custkey", "c_nationkey"]).hash_join(
        ["c_nationkey"], ["n_nationkey"], nations("cust_nation"), ["c_custkey", "cust_nation"]
    )
    orders = scan("orders", ["o_orderkey", "o_custkey"]).hash_join(
        ["o_custkey"], ["c_custkey"], customers, ["o_orderkey", "cust_nation"]
    )
    return (
        scan("lineitem", ["l_orderkey", "l_suppkey", "l_extendedprice", "l_discount", "l_shipdate"])
        .filter("l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'")
        .hash_join(["l_suppkey"], ["s_suppkey"], suppliers,
                   ["l_orderkey", "supp_nation", "l_extendedprice", "l_discount", "l_shipdate"])
        .hash_join(["l_orderkey"], ["o_orderkey"], orders,
                   ["supp_nation", "cust_nation", "l_extendedprice", "l_discount", "l_shipdate"],
                   filter="(supp_nation = 'FRANCE' AND cust_nation = 'GERMANY') "
                          "OR (supp_nation = 'GERMANY' AND cust_nation = 'FRANCE')")
        .project(["supp_nation", "cust_nation", "EXTRACT(year FROM l_shipdate) AS l_year",
                  "l_extendedprice * (1 - l_discount) AS volume"])
        .aggregation(["supp_nation", "cust_nation", "l_year"], ["sum(volume) AS revenue"])
        .order_by(["supp_nation", "cust_nation", "l_year"])
        .plan()
    )
