"""A join on several keys is estimated from its key set, not its most selective key
(:func:`gpu_engine.sql.join_ordering.key_set_divisor`).

Returns joined to their sales on (ticket, item) match one sale each: the key set has as many values as
the sales have rows, so the join keeps the returns' rows. Estimated from the ticket alone it kept 20x
more, and the join order put the returns last (TPC-DS q17/q25: store_sales x store_returns on ticket,
item and customer).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.plans.nodes import HashJoinNode, TableScanNode, walk_plan
from gpu_engine.sql.join_ordering import join_estimate
from gpu_engine.sql.planning_context import Relation
from gpu_engine.sql.statistics import ColumnStatistics

_RNG = np.random.default_rng(72)
_TICKETS, _ITEMS = 500, 20
_SALE_TICKET = np.repeat(np.arange(_TICKETS), _ITEMS)  # every (ticket, item) once: 10,000 sales
_SALE_ITEM = np.tile(np.arange(_ITEMS), _TICKETS)
SALES = pa.table({"s_ticket": pa.array(_SALE_TICKET, pa.int32()), "s_item": pa.array(_SALE_ITEM, pa.int32()),
                  "s_day": pa.array(_RNG.integers(0, 400, _TICKETS * _ITEMS), pa.int32()),
                  "s_amount": pa.array(_RNG.integers(0, 1000, _TICKETS * _ITEMS), pa.int64())})
_RETURNED = _RNG.choice(_TICKETS * _ITEMS, 300, replace=False)
RETURNS = pa.table({"r_ticket": pa.array(_SALE_TICKET[_RETURNED], pa.int32()),
                    "r_item": pa.array(np.where(np.arange(300) < 295, _SALE_ITEM[_RETURNED], None), pa.int32()),
                    "r_qty": pa.array(_RNG.integers(1, 5, 300), pa.int64())})
DAYS = pa.table({"d_key": pa.array(np.arange(400), pa.int32()),
                 "d_year": pa.array(1990 + np.arange(400) // 40, pa.int32())})
QUERY = ("SELECT d_year, count(*) AS n, sum(s_amount) AS amount, sum(r_qty) AS qty FROM sales, returns, days "
         "WHERE s_ticket = r_ticket AND s_item = r_item AND s_day = d_key AND d_year BETWEEN 1990 AND 1994 "
         "GROUP BY d_year")


def _relation(alias: str, rows: float, ndvs: dict[str, float]) -> Relation:
    return Relation(node=None, columns={(alias, name): name for name in ndvs}, aliases=frozenset({alias}),
                    rows=rows, stats={name: ColumnStatistics(ndv, None, None) for name, ndv in ndvs.items()})


def test_a_join_on_two_keys_divides_by_the_distinct_values_of_the_key_set():
    sales = _relation("s", 10_000, {"s_ticket": 500, "s_item": 20})
    returns = _relation("r", 300, {"r_ticket": 260, "r_item": 20})
    # each side's key set: at most the product of its keys' counts and at most its rows; the larger divides
    assert join_estimate(sales, returns, [("s_ticket", "r_ticket"), ("s_item", "r_item")]) == pytest.approx(300)
    assert join_estimate(sales, returns, [("s_ticket", "r_ticket")]) == pytest.approx(10_000 * 300 / 500)
    # a column that two pairs repeat counts once (s_ticket = r_ticket AND s_ticket = r_item)
    assert join_estimate(sales, returns, [("s_ticket", "r_ticket"), ("s_ticket", "r_item")]) == \
        pytest.approx(10_000 * 300 / 500)
    # keys of few values: their product, not the rows, bounds the key set
    days = _relation("d", 400, {"d_year": 10, "d_month": 12})
    events = _relation("e", 5_000, {"e_year": 10, "e_month": 12})
    assert join_estimate(days, events, [("d_year", "e_year"), ("d_month", "e_month")]) == \
        pytest.approx(400 * 5_000 / 120)


def _first_join_tables(plan) -> set[str]:
    """Return the tables scanned under the lowest join whose both inputs hold no join."""
    for node in walk_plan(plan):
        if isinstance(node, HashJoinNode) and not any(
                isinstance(inner, HashJoinNode) for source in node.sources for inner in walk_plan(source)):
            return {scan.table_name for scan in walk_plan(node) if isinstance(scan, TableScanNode)}
    raise AssertionError("no join")


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_sales_meet_their_returns_on_both_keys_before_the_date_filter(device):
    tables = {"sales": SALES, "returns": RETURNS, "days": DAYS}
    session = session_with_tables(tables, device=device, fuse=False)
    # sales x returns keeps ~300 rows, sales x days half the sales: the returns are joined first
    assert _first_join_tables(session.sql_plan(QUERY)) == {"sales", "returns"}
    with duckdb_with_tables(tables) as reference:
        assert_same_rows(session.sql(QUERY), duckdb_table(reference, QUERY))
