"""Plan TPC-H Q11, the important stock identification query: a grouped sum against a scalar subquery's total."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import PlanNode
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator

__all__ = ["SQL", "plan", "sql", "fraction", "DEPENDS_ON_SCALE_FACTOR"]

#: ``tpch.query``/``tpch.sql`` pass the scale factor to this module's ``plan`` and ``sql``.
DEPENDS_ON_SCALE_FACTOR = True


def fraction(sf: float = 1) -> str:
    """Return FRACTION as a SQL decimal literal: 0.0001 / SF (TPC-H specification 2.4.11.3), to 10 places.

    Ten places is the official text's ``0.0001000000`` at SF 1; a scale
    factor that does not divide 0.0001 evenly rounds half to even at the tenth.
    """
    from decimal import ROUND_HALF_EVEN, Decimal

    if not sf > 0:
        raise ValueError(f"a TPC-H scale factor is positive, got {sf!r}")
    value = (Decimal("0.0001") / Decimal(repr(float(sf)))).quantize(Decimal("1E-10"), rounding=ROUND_HALF_EVEN)
    if value == 0:
        raise ValueError(f"Q11's FRACTION 0.0001 / {sf:g} rounds to 0 at 10 places")
    return format(value, "f")


# TPC-H specification 2.4.11, validation parameters: NATION = GERMANY, FRACTION = 0.0001 / SF.
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
            sum(ps_supplycost * ps_availqty) * {fraction}
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
_SQL_TEMPLATE = SQL
SQL = _SQL_TEMPLATE.format(fraction=fraction(1))


def sql(sf: float = 1) -> str:
    """Return Q11's SQL with FRACTION for scale factor ``sf``."""
    return _SQL_TEMPLATE.format(fraction=fraction(sf))


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


def plan(catalog: Mapping[str, pa.Schema], sf: float = 1) -> PlanNode:
    """Return Q11's plan for scale factor ``sf`` (FRACTION = 0.0001 / SF).

    The uncorrelated scalar subquery (the country's total times the fraction)
    is an aggregation under EnforceSingleRow, joined to every group by a
    nested-loop join whose filter is the HAVING condition, as Velox plans it.
    The German stock is computed twice (no common-subplan reuse).
    """
    ids = PlanNodeIdGenerator()
    threshold = (
        _german_stock(catalog, ids)
        .aggregation([], ["sum(stock_value) AS total_value"])
        .project([f"total_value * {fraction(sf)} AS threshold"])
        .enforce_single_row()
    )
    return (
        _german_stock(catalog, ids)
        .aggregation(["ps_partkey"], ["sum(stock_value) AS value"])
        .nested_loop_join(threshold, ["ps_partkey", "value"], filter="value > threshold")
        .order_by(["value DESC"])
        .plan()
    )
