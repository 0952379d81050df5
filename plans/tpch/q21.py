"""Plan TPC-H Q21, the suppliers who kept orders waiting query: EXISTS and NOT EXISTS over lineitem self-joins."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.21, validation parameter NATION = SAUDI ARABIA.
SQL = """\
SELECT
    s_name,
    count(*) AS numwait
FROM
    supplier,
    lineitem l1,
    orders,
    nation
WHERE
    s_suppkey = l1.l_suppkey
    AND o_orderkey = l1.l_orderkey
    AND o_orderstatus = 'F'
    AND l1.l_receiptdate > l1.l_commitdate
    AND EXISTS (
        SELECT
            *
        FROM
            lineitem l2
        WHERE
            l2.l_orderkey = l1.l_orderkey
            AND l2.l_suppkey <> l1.l_suppkey)
    AND NOT EXISTS (
        SELECT
            *
        FROM
            lineitem l3
        WHERE
            l3.l_orderkey = l1.l_orderkey
            AND l3.l_suppkey <> l1.l_suppkey
            AND l3.l_receiptdate > l3.l_commitdate)
    AND s_nationkey = n_nationkey
    AND n_name = 'SAUDI ARABIA'
GROUP BY
    s_name
ORDER BY
    numwait DESC,
    s_name
LIMIT 100"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q21's plan: SAUDI ARABIA's late lines, semi-joined with F orders and other suppliers' lines.

    The waiting lines (late, Saudi supplier, finished order) are few, so
    they are the *build* side: EXISTS becomes a right semi join probed by all
    of lineitem, whose filter asks for another supplier on the order; NOT
    EXISTS a right anti join probed by the late lines with the same filter.
    Building the few and streaming the many is what makes Q21 cheap (a left
    semi join would build a hash table over all six million lines). The
    probe sides rename their lineitem columns (``l2_``, ``l3_``) so the
    filters can tell the two sides apart.
    """
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    saudi_arabia = scan("nation", ["n_nationkey", "n_name"]).filter("n_name = 'SAUDI ARABIA'")
    suppliers = scan("supplier", ["s_suppkey", "s_name", "s_nationkey"]).hash_join(
        ["s_nationkey"], ["n_nationkey"], saudi_arabia, ["s_suppkey", "s_name"], join_type="left_semi"
    )
    finished_orders = scan("orders", ["o_orderkey", "o_orderstatus"]).filter("o_orderstatus = 'F'")
    other_lines = scan("lineitem", ["l_orderkey", "l_suppkey"]).project(
        ["l_orderkey AS l2_orderkey", "l_suppkey AS l2_suppkey"]
    )
    other_late_lines = (
        scan("lineitem", ["l_orderkey", "l_suppkey", "l_receiptdate", "l_commitdate"])
        .filter("l_receiptdate > l_commitdate")
        .project(["l_orderkey AS l3_orderkey", "l_suppkey AS l3_suppkey"])
    )
    waiting_lines = (
        scan("lineitem", ["l_orderkey", "l_suppkey", "l_receiptdate", "l_commitdate"])
        .filter("l_receiptdate > l_commitdate")
        .hash_join(["l_suppkey"], ["s_suppkey"], suppliers, ["l_orderkey", "l_suppkey", "s_name"])
        .hash_join(["l_orderkey"], ["o_orderkey"], finished_orders, ["l_orderkey", "l_suppkey", "s_name"],
                   join_type="left_semi")
    )
    with_other_supplier = other_lines.hash_join(
        ["l2_orderkey"], ["l_orderkey"], waiting_lines, ["l_orderkey", "l_suppkey", "s_name"],
        join_type="right_semi", filter="l2_suppkey <> l_suppkey")
    return (
        other_late_lines
        .hash_join(["l3_orderkey"], ["l_orderkey"], with_other_supplier, ["s_name"],
                   join_type="right_anti", filter="l3_suppkey <> l_suppkey")
        .aggregation(["s_name"], ["count(*) AS numwait"])
        .top_n(["numwait DESC", "s_name"], 100)
        .plan()
    )
