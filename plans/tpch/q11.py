"""Plan TPC-H Q11, the important stock identification query: a grouped sum against a scalar subquery's total."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.11, validation parameters: NATION = GERMANY, FRACTION = 0.0001.
SQL = """\
SELECT
    ps_partkey,
    sum(ps_supplycost * ps_availqty) AS value
FROM
    partsupp,
    supplier,
    nation
WHERE
    ps_suppkey = s_suppkey
    AND s_nationkey = n_nationkey
    AND n_name = 'GERMANY'
GROUP BY
    ps_partkey
HAVING
    sum(ps_supplycost * ps_availqty) > (
        SELECT
            sum(ps_supplycost * ps_availqty) * 0.0001000000
        FROM
            partsupp,
            supplier,
            nation
        WHERE
            ps_suppkey = s_suppkey
            AND s_nationkey = n_nationkey
            AND n_name = 'GERMANY')
ORDER BY
    value DESC"""


def _german_stock(catalog: Mapping[str, pa.Schema], ids: PlanNodeIdGenerator) -> PlanBuilder:
    """Return partsupp rows of German suppliers with their stock value (exact decimals)."""

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    germany = scan("nation", ["n_nationkey", "n_name"]).filter("n_name = 'GERMANY'")
    suppliers = scan("supplier", ["s_suppkey", "s_nationkey"]).hash_join(
        ["s_nationkey"], ["n_nationkey"], germany, ["s_suppkey"], join_type="left_semi"
    )
    return (
        scan("partsupp", ["ps_partkey", "ps_suppkey", "ps_supplycost", "ps_availqty"])
        .hash_join(["ps_suppkey"], ["s_suppkey"], suppliers, ["ps_partkey", "ps_supplycost", "ps_availqty"],
                   join_type="left_semi")
        .project(["ps_partkey", "ps_supplycost * ps_availqty AS stock_value"])
    )


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q11's plan.

    The uncorrelated scalar subquery (the country's total times the fraction)
    is an aggregation under EnforceSingleRow, joined to every group by a
    nested-loop join whose filter is the HAVING condition, as Velox plans it.
    The German stock is computed twice (no common-subplan reuse).
    """
    ids = PlanNodeIdGenerator()
    threshold = (
        _german_stock(catalog, ids)
        .aggregation([], ["sum(stock_value) AS total_value"])
        .project(["total_value * 0.0001000000 AS threshold"])
        .enforce_single_row()
    )
    return (
        _german_stock(catalog, ids)
        .aggregation(["ps_partkey"], ["sum(stock_value) AS value"])
        .nested_loop_join(threshold, ["ps_partkey", "value"], filter="value > threshold")
        .order_by(["value DESC"])
        .plan()
    )
