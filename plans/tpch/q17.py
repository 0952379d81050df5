"""Plan TPC-H Q17, the small-quantity-order revenue query: a correlated AVG subquery, decorrelated."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.17, validation parameters: BRAND = Brand#23, CONTAINER = MED BOX.
SQL = """\
SELECT
    sum(l_extendedprice) / 7.0 AS avg_yearly
FROM
    lineitem,
    part
WHERE
    p_partkey = l_partkey
    AND p_brand = 'Brand#23'
    AND p_container = 'MED BOX'
    AND l_quantity < (
        SELECT
            0.2 * avg(l_quantity)
        FROM
            lineitem
        WHERE
            l_partkey = p_partkey)"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q17's plan: 0.2 * avg(l_quantity) per part, joined back on the part key with a filter.

    The subquery is correlated on ``p_partkey`` only, so it is needed for the
    brand's parts alone: both lineitem scans are cut to them by a join with
    the parts (about 1/1000 of the table) before the average is taken.
    """
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    def parts() -> PlanBuilder:
        return scan("part", ["p_partkey", "p_brand", "p_container"]).filter(
            "p_brand = 'Brand#23' AND p_container = 'MED BOX'"
        )

    limits = (
        scan("lineitem", ["l_partkey", "l_quantity"])
        .hash_join(["l_partkey"], ["p_partkey"], parts(), ["l_partkey", "l_quantity"], join_type="left_semi")
        .aggregation(["l_partkey"], ["avg(l_quantity) AS avg_quantity"])
        .project(["l_partkey AS limit_partkey", "0.2 * avg_quantity AS quantity_limit"])
    )
    return (
        scan("lineitem", ["l_partkey", "l_quantity", "l_extendedprice"])
        .hash_join(["l_partkey"], ["p_partkey"], parts(), ["l_partkey", "l_quantity", "l_extendedprice"],
                   join_type="left_semi")
        .hash_join(["l_partkey"], ["limit_partkey"], limits, ["l_extendedprice"],
                   filter="l_quantity < quantity_limit")
        .aggregation([], ["sum(l_extendedprice) AS total_price"])
        .project(["total_price / 7.0 AS avg_yearly"])
        .plan()
    )
