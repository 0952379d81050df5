"""Plan TPC-H Q15, the top supplier query: the revenue view, its maximum, and the suppliers that reach it."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.15, validation parameter DATE = 1996-01-01; the view is written as a CTE.
SQL = """\
WITH revenue0 AS (
    SELECT
        l_suppkey AS supplier_no,
        sum(l_extendedprice * (1 - l_discount)) AS total_revenue
    FROM
        lineitem
    WHERE
        l_shipdate >= DATE '1996-01-01'
        AND l_shipdate < DATE '1996-01-01' + INTERVAL '3' MONTH
    GROUP BY
        supplier_no
)
SELECT
    s_suppkey,
    s_name,
    s_address,
    s_phone,
    total_revenue
FROM
    supplier,
    revenue0
WHERE
    s_suppkey = supplier_no
    AND total_revenue = (
        SELECT
            max(total_revenue)
        FROM
            revenue0)
ORDER BY
    s_suppkey"""


def _revenue(catalog: Mapping[str, pa.Schema], ids: PlanNodeIdGenerator) -> PlanBuilder:
    """Return the revenue0 view: revenue per supplier over the quarter (exact decimals)."""
    return (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("lineitem", ["l_suppkey", "l_extendedprice", "l_discount", "l_shipdate"])
        .filter("l_shipdate >= DATE '1996-01-01' AND l_shipdate < DATE '1996-04-01'")
        .project(["l_suppkey AS supplier_no", "l_extendedprice * (1 - l_discount) AS revenue"])
        .aggregation(["supplier_no"], ["sum(revenue) AS total_revenue"])
    )


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q15's plan.

    ``total_revenue = (SELECT max(total_revenue) FROM revenue0)`` keeps the
    view's rows whose revenue is the largest: the first row by revenue
    descending and every row tied with it (a TopN ``WITH TIES`` of one row,
    after dropping NULL revenues, which equal nothing). The view is computed
    once; planned as a join with its own maximum it was computed twice
    (scanning lineitem twice), which took 3x DuckDB's time at SF1.
    """
    ids = PlanNodeIdGenerator()
    best = (
        _revenue(catalog, ids)
        .filter("total_revenue IS NOT NULL")
        .top_n(["total_revenue DESC"], 1, with_ties=True)
    )
    return (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("supplier", ["s_suppkey", "s_name", "s_address", "s_phone"])
        .hash_join(["s_suppkey"], ["supplier_no"], best,
                   ["s_suppkey", "s_name", "s_address", "s_phone", "total_revenue"])
        .order_by(["s_suppkey"])
        .plan()
    )
