"""Plan TPC-H Q8, the national market share query: BRAZIL's share of AMERICA's steel volume per year."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.8, validation parameters: NATION = BRAZIL, REGION = AMERICA,
# TYPE = ECONOMY ANODIZED STEEL.
SQL = """\
SELECT
    o_year,
    sum(
        CASE WHEN nation = 'BRAZIL' THEN
            volume
        ELSE
            0
        END) / sum(volume) AS mkt_share
FROM (
    SELECT
        extract(year FROM o_orderdate) AS o_year,
        l_extendedprice * (1 - l_discount) AS volume,
        n2.n_name AS nation
    FROM
        part,
        supplier,
        lineitem,
        orders,
        customer,
        nation n1,
        nation n2,
        region
    WHERE
        p_partkey = l_partkey
        AND s_suppkey = l_suppkey
        AND l_orderkey = o_orderkey
        AND o_custkey = c_custkey
        AND c_nationkey = n1.n_nationkey
        AND n1.n_regionkey = r_regionkey
        AND r_name = 'AMERICA'
        AND s_nationkey = n2.n_nationkey
        AND o_orderdate BETWEEN CAST('1995-01-01' AS date)
        AND CAST('1996-12-31' AS date)
        AND p_type = 'ECONOMY ANODIZED STEEL') AS all_nations
GROUP BY
    o_year
ORDER BY
    o_year"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q8's plan: AMERICA's orders of 1995-96 probe the steel parts' lines, then supplier and nation.

    The customer side (nation n1, region) only restricts the orders, so it is a
    chain of semi joins; the lines of the one part type (1/150 of lineitem) are
    the smaller side of the order join and are built. The supplier's nation
    (n2) names the nation; the share is projected after the two sums.
    """
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    america = scan("region", ["r_regionkey", "r_name"]).filter("r_name = 'AMERICA'")
    american_nations = scan("nation", ["n_nationkey", "n_regionkey"]).hash_join(
        ["n_regionkey"], ["r_regionkey"], america, ["n_nationkey"], join_type="left_semi"
    )
    american_customers = scan("customer", ["c_custkey", "c_nationkey"]).hash_join(
        ["c_nationkey"], ["n_nationkey"], american_nations, ["c_custkey"], join_type="left_semi"
    )
    steel_parts = scan("part", ["p_partkey", "p_type"]).filter("p_type = 'ECONOMY ANODIZED STEEL'")
    steel_lines = scan("lineitem", ["l_orderkey", "l_partkey", "l_suppkey", "l_extendedprice", "l_discount"]).hash_join(
        ["l_partkey"], ["p_partkey"], steel_parts, ["l_orderkey", "l_suppkey", "l_extendedprice", "l_discount"],
        join_type="left_semi",
    )
    suppliers = scan("supplier", ["s_suppkey", "s_nationkey"])
    nations = scan("nation", ["n_nationkey", "n_name"])
    return (
        scan("orders", ["o_orderkey", "o_custkey", "o_orderdate"])
        .filter("o_orderdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'")
        .hash_join(["o_custkey"], ["c_custkey"], american_customers, ["o_orderkey", "o_orderdate"],
                   join_type="left_semi")
        .hash_join(["o_orderkey"], ["l_orderkey"], steel_lines,
                   ["o_orderdate", "l_suppkey", "l_extendedprice", "l_discount"])
        .hash_join(["l_suppkey"], ["s_suppkey"], suppliers, ["o_orderdate", "s_nationkey", "l_extendedprice",
                                                             "l_discount"])
        .hash_join(["s_nationkey"], ["n_nationkey"], nations, ["o_orderdate", "n_name", "l_extendedprice",
                                                               "l_discount"])
        .project(["EXTRACT(year FROM o_orderdate) AS o_year", "l_extendedprice * (1 - l_discount) AS volume",
                  "n_name AS nation"])
        .aggregation(["o_year"], ["sum(CASE WHEN nation = 'BRAZIL' THEN volume ELSE 0 END) AS brazil_volume",
                                  "sum(volume) AS total_volume"])
        .project(["o_year", "brazil_volume / total_volume AS mkt_share"])
        .order_by(["o_year"])
        .plan()
    )
