"""Plan TPC-H Q18, the large volume customer query: orders of over 300 units, joined with customer and lineitem."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["QUANTITY", "SQL", "SQL_TEMPLATE", "plan"]

#: TPC-H specification 2.4.18, validation parameter QUANTITY.
QUANTITY = 300

SQL_TEMPLATE = """\
SELECT
    c_name,
    c_custkey,
    o_orderkey,
    o_orderdate,
    o_totalprice,
    sum(l_quantity)
FROM
    customer,
    orders,
    lineitem
WHERE
    o_orderkey IN (
        SELECT
            l_orderkey
        FROM
            lineitem
        GROUP BY
            l_orderkey
        HAVING
            sum(l_quantity) > {quantity})
    AND c_custkey = o_custkey
    AND o_orderkey = l_orderkey
GROUP BY
    c_name,
    c_custkey,
    o_orderkey,
    o_orderdate,
    o_totalprice
ORDER BY
    o_totalprice DESC,
    o_orderdate
LIMIT 100"""
SQL = SQL_TEMPLATE.format(quantity=QUANTITY)


def plan(catalog: Mapping[str, pa.Schema], quantity: int = QUANTITY) -> PlanNode:
    """Return Q18's plan: the IN subquery is a left semi join over an aggregated, HAVING-filtered build side.

    ``quantity`` is the HAVING threshold (``SQL_TEMPLATE.format(quantity=...)`` is the matching SQL): tests
    lower it where no order of a small scale factor has over 300 units.
    """
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    big_orders = (
        scan("lineitem", ["l_orderkey", "l_quantity"])
        .aggregation(["l_orderkey"], ["sum(l_quantity) AS order_quantity"])
        .filter(f"order_quantity > {quantity}")
    )
    customers = scan("customer", ["c_custkey", "c_name"])
    orders = (
        scan("orders", ["o_orderkey", "o_custkey", "o_orderdate", "o_totalprice"])
        .hash_join(["o_orderkey"], ["l_orderkey"], big_orders,
                   ["o_orderkey", "o_custkey", "o_orderdate", "o_totalprice"], join_type="left_semi")
        .hash_join(["o_custkey"], ["c_custkey"], customers,
                   ["c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice"])
    )
    return (
        scan("lineitem", ["l_orderkey", "l_quantity"])
        .hash_join(["l_orderkey"], ["o_orderkey"], orders,
                   ["c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice", "l_quantity"])
        .aggregation(["c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice"],
                     ['sum(l_quantity) AS "sum(l_quantity)"'])
        .top_n(["o_totalprice DESC", "o_orderdate"], 100)
        .plan()
    )
