"""Plan TPC-H Q22, the global sales opportunity query: a scalar average, NOT EXISTS, and SUBSTRING country codes."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan"]

# TPC-H specification 2.4.22, validation parameters: I1..I7 = 13, 31, 23, 29, 30, 18, 17.
SQL = """\
SELECT
    cntrycode,
    count(*) AS numcust,
    sum(c_acctbal) AS totacctbal
FROM (
    SELECT
        substring(c_phone FROM 1 FOR 2) AS cntrycode,
        c_acctbal
    FROM
        customer
    WHERE
        substring(c_phone FROM 1 FOR 2) IN ('13', '31', '23', '29', '30', '18', '17')
        AND c_acctbal > (
            SELECT
                avg(c_acctbal)
            FROM
                customer
            WHERE
                c_acctbal > 0.00
                AND substring(c_phone FROM 1 FOR 2) IN ('13', '31', '23', '29', '30', '18', '17'))
        AND NOT EXISTS (
            SELECT
                *
            FROM
                orders
            WHERE
                o_custkey = c_custkey)) AS custsale
GROUP BY
    cntrycode
ORDER BY
    cntrycode"""

_CODES = "('13', '31', '23', '29', '30', '18', '17')"


def plan(catalog: Mapping[str, pa.Schema]) -> PlanNode:
    """Return Q22's plan: the average is an EnforceSingleRow build side of a nested-loop join.

    NOT EXISTS is a right anti join: the few qualifying customers are the
    build side and the orders stream through it, instead of a hash table
    over every order's customer key.
    """
    ids = PlanNodeIdGenerator()

    def scan(table: str, columns: list[str]) -> PlanBuilder:
        return PlanBuilder(catalog, id_generator=ids).table_scan(table, columns)

    average = (
        scan("customer", ["c_phone", "c_acctbal"])
        .filter(f"c_acctbal > 0.00 AND substring(c_phone FROM 1 FOR 2) IN {_CODES}")
        .aggregation([], ["avg(c_acctbal) AS avg_acctbal"])
        .enforce_single_row()
    )
    rich_customers = (
        scan("customer", ["c_custkey", "c_phone", "c_acctbal"])
        .project(["c_custkey", "substring(c_phone FROM 1 FOR 2) AS cntrycode", "c_acctbal"])
        .filter(f"cntrycode IN {_CODES}")
        .nested_loop_join(average, ["c_custkey", "cntrycode", "c_acctbal"], filter="c_acctbal > avg_acctbal")
    )
    return (
        scan("orders", ["o_custkey"])
        .hash_join(["o_custkey"], ["c_custkey"], rich_customers, ["cntrycode", "c_acctbal"], join_type="right_anti")
        .aggregation(["cntrycode"], ["count(*) AS numcust", "sum(c_acctbal) AS totacctbal"])
        .order_by(["cntrycode"])
        .plan()
    )
