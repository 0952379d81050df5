"""Plan TPC-H Q19, the discounted revenue query: lineitem ⋈ part with a three-way OR as the join filter."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.19, validation parameters: QUANTITY1 = 1,
# QUANTITY2 = 10, QUANTITY3 = 20, BRAND1 = Brand#12, BRAND2 = Brand#23,
# BRAND3 = Brand#34.
SQL = """\
SELECT
    sum(l_extendedprice * (1 - l_discount)) AS revenue
FROM
    lineitem,
    part
WHERE (p_partkey = l_partkey
    AND p_brand = 'Brand#12'
    AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
    AND l_quantity >= 1
    AND l_quantity <= 1 + 10
    AND p_size BETWEEN 1 AND 5
    AND l_shipmode IN ('AIR', 'AIR REG')
    AND l_shipinstruct = 'DELIVER IN PERSON')
    OR (p_partkey = l_partkey
        AND p_brand = 'Brand#23'
        AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
        AND l_quantity >= 10
        AND l_quantity <= 10 + 10
        AND p_size BETWEEN 1 AND 10
        AND l_shipmode IN ('AIR', 'AIR REG')
        AND l_shipinstruct = 'DELIVER IN PERSON')
    OR (p_partkey = l_partkey
        AND p_brand = 'Brand#34'
        AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
        AND l_quantity >= 20
        AND l_quantity <= 20 + 10
        AND p_size BETWEEN 1 AND 15
        AND l_shipmode IN ('AIR', 'AIR REG')
        AND l_shipinstruct = 'DELIVER IN PERSON')"""

# The conjuncts common to the three branches (the key equality, ship mode and
# instruction, size >= 1) are pulled out; what differs per branch is the join filter.
_JOIN_FILTER = (
    "(p_brand = 'Brand#12' AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG') "
    "AND l_quantity >= 1 AND l_quantity <= 11 AND p_size <= 5) "
    "OR (p_brand = 'Brand#23' AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK') "
    "AND l_quantity >= 10 AND l_quantity <= 20 AND p_size <= 10) "
    "OR (p_brand = 'Brand#34' AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG') "
    "AND l_quantity >= 20 AND l_quantity <= 30 AND p_size <= 15)"
)


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q19's plan: filtered lineitems probe part; the per-brand conditions are the join's filter."""
    ids = PlanNodeIdGenerator()
    parts = (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("part", ["p_partkey", "p_brand", "p_container", "p_size"])
        # Implied by the OR of the three brand conditions; prunes the build side to a few thousand parts
        # so the join's per-pair filter sees few pairs (DuckDB derives the same filters).
        .filter("p_size BETWEEN 1 AND 15 AND p_brand IN ('Brand#12', 'Brand#23', 'Brand#34') "
                "AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG', 'MED BAG', 'MED BOX', "
                "'MED PKG', 'MED PACK', 'LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')")
    )
    return (
        PlanBuilder(catalog, id_generator=ids)
        .table_scan("lineitem", ["l_partkey", "l_quantity", "l_extendedprice", "l_discount", "l_shipmode",
                                 "l_shipinstruct"])
        .filter("l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON' "
                "AND l_quantity BETWEEN 1 AND 30")
        .hash_join(["l_partkey"], ["p_partkey"], parts, ["l_extendedprice", "l_discount"], filter=_JOIN_FILTER)
        .aggregation([], ["sum(l_extendedprice * (1 - l_discount)) AS revenue"])
        .plan()
    )
