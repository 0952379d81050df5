"""Plan TPC-H Q2, the minimum cost supplier query: a correlated MIN subquery, decorrelated into a grouped join."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.2, validation parameters: SIZE = 15, TYPE = BRASS, REGION = EUROPE.
SQL = """\
SELECT
    s_acctbal,
    s_name,
    n_name,
    p_partkey,
    p_mfgr,
    s_address,
    s_phone,
    s_comment
FROM
    part,
    supplier,
    partsupp,
    nation,
    region
WHERE
    p_partkey = ps_partkey
    AND s_suppkey = ps_suppkey
    AND p_size = 15
    AND p_type LIKE '%BRASS'
    AND s_nationkey = n_nationkey
    AND n_regionkey = r_regionkey
    AND r_name = 'EUROPE'
    AND ps_supplycost = (
        SELECT
            min(ps_supplycost)
        FROM
            partsupp,
            supplier,
            nation,
            region
        WHERE
            p_partkey = ps_partkey
            AND s_suppkey = ps_suppkey
            AND s_nationkey = n_nationkey
            AND n_regionkey = r_regionkey
            AND r_name = 'EUROPE')
ORDER BY
    s_acctbal DESC,
    n_name,
    s_name,
    p_partkey
LIMIT 100"""


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q2's plan: the subquery becomes min(ps_supplycost) per part, joined back on (part, cost).

    Both the outer query and the subquery read the European offers of the
    qualifying parts (size 15, type ``%BRASS``); the subquery runs only over
    those parts, since its correlation key ``p_partkey`` comes from them.
    Every join builds its smaller side: parts, suppliers, nations, the minima.
    """
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    def parts() -> PlanBuilder:
        return scan("part", ["p_partkey", "p_mfgr", "p_size", "p_type"]).filter(
            "p_size = 15 AND p_type LIKE '%BRASS'"
        )

    def european_suppliers(columns: list[str]) -> PlanBuilder:
        europe = scan("region", ["r_regionkey", "r_name"]).filter("r_name = 'EUROPE'")
        nations = scan("nation", ["n_nationkey", "n_name", "n_regionkey"]).hash_join(
            ["n_regionkey"], ["r_regionkey"], europe, ["n_nationkey", "n_name"]
        )
        return scan("supplier", ["s_suppkey", "s_nationkey", *columns]).hash_join(
            ["s_nationkey"], ["n_nationkey"], nations, ["s_suppkey", *columns, "n_name"]
        )

    cheapest = (
        scan("partsupp", ["ps_partkey", "ps_suppkey", "ps_supplycost"])
        .hash_join(["ps_partkey"], ["p_partkey"], parts(), ["ps_partkey", "ps_suppkey", "ps_supplycost"],
                   join_type="left_semi")
        .hash_join(["ps_suppkey"], ["s_suppkey"], european_suppliers([]), ["ps_partkey", "ps_supplycost"],
                   join_type="left_semi")
        .aggregation(["ps_partkey"], ["min(ps_supplycost) AS min_supplycost"])
    )
    supplier_columns = ["s_name", "s_address", "s_phone", "s_acctbal", "s_comment"]
    return (
        scan("partsupp", ["ps_partkey", "ps_suppkey", "ps_supplycost"])
        .hash_join(["ps_partkey"], ["p_partkey"], parts(), ["p_partkey", "p_mfgr", "ps_suppkey", "ps_supplycost"])
        .hash_join(["p_partkey", "ps_supplycost"], ["ps_partkey", "min_supplycost"], cheapest,
                   ["p_partkey", "p_mfgr", "ps_suppkey"])
        .hash_join(["ps_suppkey"], ["s_suppkey"], european_suppliers(supplier_columns),
                   ["s_acctbal", "s_name", "n_name", "p_partkey", "p_mfgr", "s_address", "s_phone", "s_comment"])
        .top_n(["s_acctbal DESC", "n_name", "s_name", "p_partkey"], 100)
        .plan()
    )
