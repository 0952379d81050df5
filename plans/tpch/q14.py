"""Plan TPC-H Q14, the promotion effect query: lineitem ⋈ part, a ratio of two sums."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.14, validation parameter DATE = 1995-09-01.
SQL = """\
SELECT
    100.00 * sum(
        CASE WHEN p_type LIKE 'PROMO%' THEN
            l_extendedprice * (1 - l_discount)
        ELSE
            0
        END) / sum(l_extendedprice * (1 - l_discount)) AS promo_revenue
FROM
    lineitem,
    part
WHERE
    l_partkey = p_partkey
    AND l_shipdate >= DATE '1995-09-01'
    AND l_shipdate < DATE '1995-09-01' + INTERVAL '1' MONTH"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q14's plan: the month's lineitems probe part; the ratio is projected after the two sums."""
    ids = PlanNodeIdGenerator()
    parts = PlanBuilder(catalog, id_generator=ids).table_scan("part", ["p_partkey", "p_type"])
    return (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("lineitem", ["l_partkey", "l_extendedprice", "l_discount", "l_shipdate"])
        .filter("l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'")
        .hash_join(["l_partkey"], ["p_partkey"], parts, ["p_type", "l_extendedprice", "l_discount"])
        .project(
            [
                "l_extendedprice * (1 - l_discount) AS volume",
                "CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END AS promo_volume",
            ]
        )
        .aggregation([], ["sum(promo_volume) AS promo", "sum(volume) AS total"])
        .project(["100.00 * promo / total AS promo_revenue"])
        .plan()
    )
