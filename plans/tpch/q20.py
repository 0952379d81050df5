"""Plan TPC-H Q20, the potential part promotion query: nested IN subqueries and a correlated SUM, decorrelated."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.20, validation parameters: COLOR = forest, DATE = 1994-01-01, NATION = CANADA.
SQL = """\
SELECT
    s_name,
    s_address
FROM
    supplier,
    nation
WHERE
    s_suppkey IN (
        SELECT
            ps_suppkey
        FROM
            partsupp
        WHERE
            ps_partkey IN (
                SELECT
                    p_partkey
                FROM
                    part
                WHERE
                    p_name LIKE 'forest%')
                AND ps_availqty > (
                    SELECT
                        0.5 * sum(l_quantity)
                    FROM
                        lineitem
                    WHERE
                        l_partkey = ps_partkey
                        AND l_suppkey = ps_suppkey
                        AND l_shipdate >= CAST('1994-01-01' AS date)
                        AND l_shipdate < CAST('1995-01-01' AS date)))
    AND s_nationkey = n_nationkey
    AND n_name = 'CANADA'
ORDER BY
    s_name"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q20's plan: both IN subqueries are semi joins; the SUM is grouped by (part, supplier) and joined back.

    A (part, supplier) pair without 1994 shipments has a NULL sum, and
    ``ps_availqty > NULL`` is never true, so an inner join with the sums (and
    the comparison as its filter) is exact. The sums are needed for the forest
    parts only, so the 1994 lines are cut to them first.
    """
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    def forest_parts() -> PlanBuilder:
        return scan("part", ["p_partkey", "p_name"]).filter("p_name LIKE 'forest%'")

    shipped = (
        scan("lineitem", ["l_partkey", "l_suppkey", "l_quantity", "l_shipdate"])
        .filter("l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'")
        .hash_join(["l_partkey"], ["p_partkey"], forest_parts(), ["l_partkey", "l_suppkey", "l_quantity"],
                   join_type="left_semi")
        .aggregation(["l_partkey", "l_suppkey"], ["sum(l_quantity) AS shipped_quantity"])
        .project(["l_partkey", "l_suppkey", "0.5 * shipped_quantity AS quantity_limit"])
    )
    overstocked = (
        scan("partsupp", ["ps_partkey", "ps_suppkey", "ps_availqty"])
        .hash_join(["ps_partkey"], ["p_partkey"], forest_parts(), ["ps_partkey", "ps_suppkey", "ps_availqty"],
                   join_type="left_semi")
        .hash_join(["ps_partkey", "ps_suppkey"], ["l_partkey", "l_suppkey"], shipped, ["ps_suppkey"],
                   filter="ps_availqty > quantity_limit")
    )
    canada = scan("nation", ["n_nationkey", "n_name"]).filter("n_name = 'CANADA'")
    return (
        scan("supplier", ["s_suppkey", "s_name", "s_address", "s_nationkey"])
        .hash_join(["s_nationkey"], ["n_nationkey"], canada, ["s_suppkey", "s_name", "s_address"],
                   join_type="left_semi")
        .hash_join(["s_suppkey"], ["ps_suppkey"], overstocked, ["s_name", "s_address"], join_type="left_semi")
        .order_by(["s_name"])
        .plan()
    )
