"""Plan TPC-H Q9, the product type profit measure query: profit on green parts per nation and year."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.9, validation parameter COLOR = green.
SQL = """\
SELECT
    nation,
    o_year,
    sum(amount) AS sum_profit
FROM (
    SELECT
        n_name AS nation,
        extract(year FROM o_orderdate) AS o_year,
        l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity AS amount
    FROM
        part,
        supplier,
        lineitem,
        partsupp,
        orders,
        nation
    WHERE
        s_suppkey = l_suppkey
        AND ps_suppkey = l_suppkey
        AND ps_partkey = l_partkey
        AND p_partkey = l_partkey
        AND o_orderkey = l_orderkey
        AND s_nationkey = n_nationkey
        AND p_name LIKE '%green%') AS profit
GROUP BY
    nation,
    o_year
ORDER BY
    nation,
    o_year DESC"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q9's plan: lineitem probes the green parts' offers, then suppliers and nations; orders probe last.

    The part only filters (``p_name``), so it cuts partsupp by a semi join and
    lineitem joins that on both keys, which also applies ``p_partkey =
    l_partkey``. Lineitem is cut by the same green parts first (a semi join
    on ``l_partkey``, as DuckDB and Spark join part to lineitem first): the
    partsupp join then probes 1/20 of lineitem, and on Spark only those lines
    are shuffled to it. The green lines are fewer than the orders, so they
    are the build side of the order join.
    """
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    def green_parts() -> PlanBuilder:
        return scan("part", ["p_partkey", "p_name"]).filter("p_name LIKE '%green%'")

    green_offers = scan("partsupp", ["ps_partkey", "ps_suppkey", "ps_supplycost"]).hash_join(
        ["ps_partkey"], ["p_partkey"], green_parts(), ["ps_partkey", "ps_suppkey", "ps_supplycost"],
        join_type="left_semi",
    )
    suppliers = scan("supplier", ["s_suppkey", "s_nationkey"])
    nations = scan("nation", ["n_nationkey", "n_name"])
    line_columns = ["l_extendedprice", "l_discount", "l_quantity"]
    green_lines = (
        scan("lineitem", ["l_orderkey", "l_partkey", "l_suppkey", *line_columns])
        .hash_join(["l_partkey"], ["p_partkey"], green_parts(),
                   ["l_orderkey", "l_partkey", "l_suppkey", *line_columns], join_type="left_semi")
        .hash_join(["l_partkey", "l_suppkey"], ["ps_partkey", "ps_suppkey"], green_offers,
                   ["l_orderkey", "l_suppkey", *line_columns, "ps_supplycost"])
        .hash_join(["l_suppkey"], ["s_suppkey"], suppliers, ["l_orderkey", "s_nationkey", *line_columns,
                                                             "ps_supplycost"])
        .hash_join(["s_nationkey"], ["n_nationkey"], nations, ["l_orderkey", "n_name", *line_columns,
                                                               "ps_supplycost"])
    )
    return (
        scan("orders", ["o_orderkey", "o_orderdate"])
        .hash_join(["o_orderkey"], ["l_orderkey"], green_lines, ["n_name", "o_orderdate", *line_columns,
                                                                 "ps_supplycost"])
        .project(["n_name AS nation", "EXTRACT(year FROM o_orderdate) AS o_year",
                  "l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity AS amount"])
        .aggregation(["nation", "o_year"], ["sum(amount) AS sum_profit"])
        .order_by(["nation", "o_year DESC"])
        .plan()
    )
