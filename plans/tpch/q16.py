"""Plan TPC-H Q16, the parts/supplier relationship query: a NOT IN subquery and count(DISTINCT)."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.16, validation parameters: BRAND = Brand#45, TYPE = MEDIUM POLISHED,
# SIZE1..8 = 49, 14, 23, 45, 19, 3, 36, 9.
SQL = """\
SELECT
    p_brand,
    p_type,
    p_size,
    count(DISTINCT ps_suppkey) AS supplier_cnt
FROM
    partsupp,
    part
WHERE
    p_partkey = ps_partkey
    AND p_brand <> 'Brand#45'
    AND p_type NOT LIKE 'MEDIUM POLISHED%'
    AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
    AND ps_suppkey NOT IN (
        SELECT
            s_suppkey
        FROM
            supplier
        WHERE
            s_comment LIKE '%Customer%Complaints%')
GROUP BY
    p_brand,
    p_type,
    p_size
ORDER BY
    supplier_cnt DESC,
    p_brand,
    p_type,
    p_size"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q16's plan: NOT IN is a null-aware anti join; count(DISTINCT) is PlanBuilder's two-step rewrite."""
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    complaints = scan("supplier", ["s_suppkey", "s_comment"]).filter("s_comment LIKE '%Customer%Complaints%'")
    parts = scan("part", ["p_partkey", "p_brand", "p_type", "p_size"]).filter(
        "p_brand <> 'Brand#45' AND p_type NOT LIKE 'MEDIUM POLISHED%' "
        "AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)"
    )
    return (
        scan("partsupp", ["ps_partkey", "ps_suppkey"])
        .hash_join(["ps_suppkey"], ["s_suppkey"], complaints, ["ps_partkey", "ps_suppkey"],
                   join_type="null_aware_anti")
        .hash_join(["ps_partkey"], ["p_partkey"], parts, ["p_brand", "p_type", "p_size", "ps_suppkey"])
        .aggregation(["p_brand", "p_type", "p_size"], ["count(DISTINCT ps_suppkey) AS supplier_cnt"])
        .order_by(["supplier_cnt DESC", "p_brand", "p_type", "p_size"])
        .plan()
    )
