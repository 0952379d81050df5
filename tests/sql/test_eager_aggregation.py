"""Aggregates pushed below inner joins (:mod:`gpu_engine.sql.eager_aggregation`): same answers as DuckDB.

Small tables with NULL join keys on both sides, a key repeated on the side
that is not aggregated (each of its rows takes the partial again), NULL
values, a customer whose prices are all NULL (its ``avg`` is NULL), and
inputs filtered to nothing (a global ``count`` is 0, a ``sum`` NULL). Each
query of :data:`PUSHED` must be planned with a pre-aggregation (its partial
columns are named ``$eager…``), each of :data:`KEPT` without one; both
answer as DuckDB does. The TPC-H Q10 plan test checks the rule picks
lineitem ⋈ orders grouped by ``o_custkey``, the hand plan's shape. These tables
are tiny, so every test here but the set-up tests at the end plans without the
rule's fixed cost (``_PRE_AGGREGATION_SETUP``, on by default: it keeps a
pre-aggregation of few rows out) and with their dimensions' strings costed as
a large build side's; they test the rule's shapes and answers.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.plans.nodes import AggregationNode, HashJoinNode, NestedLoopJoinNode, TableScanNode, walk_plan
from gpu_engine.sql import eager_aggregation
from gpu_engine.sql.ordering import order_key_columns

_RNG = np.random.default_rng(29)
_ROWS = 48
SALES = pa.table({
    # customers 0..5 (5: every price NULL), NULL for every 11th row; days 0..9, NULL for every 13th
    "s_cust": pa.array([None if k % 11 == 3 else int(v) for k, v in enumerate(_RNG.integers(0, 6, _ROWS))], pa.int32()),
    "s_day": pa.array([None if k % 13 == 5 else int(v) for k, v in enumerate(_RNG.integers(0, 10, _ROWS))], pa.int32()),
    "s_qty": pa.array([None if k % 7 == 2 else int(v) for k, v in enumerate(_RNG.integers(0, 10, _ROWS))], pa.int64()),
    "s_price": pa.array([None if k % 5 == 1 else float(v) / 4 for k, v in enumerate(_RNG.integers(0, 400, _ROWS))],
                        pa.float64()),
    "s_amount": pa.array([decimal.Decimal(int(v)) / 100 for v in _RNG.integers(-5000, 50000, _ROWS)],
                         pa.decimal128(9, 2)),
})
SALES = SALES.set_column(3, "s_price", pa.array([None if c == 5 else p for c, p in zip(
    SALES.column("s_cust").to_pylist(), SALES.column("s_price").to_pylist())], pa.float64()))
CUST = pa.table({  # key 2 twice (its sales join both rows), key 7 with no sales, a NULL key
    "c_key": pa.array([0, 1, 2, 2, 3, 4, 5, 7, None], pa.int32()),
    "c_name": pa.array(["ann", "bob", "cy", "cy2", "dee", None, "eve", "fay", "gus"]),
    "c_nation": pa.array([0, 1, 1, 2, None, 0, 2, 1, 0], pa.int32()),
})
DAYS = pa.table({"d_key": pa.array(np.arange(10), pa.int32()),
                 "d_year": pa.array([2000 + k // 4 for k in range(10)], pa.int32())})
NATION = pa.table({"n_key": pa.array([0, 1, 2], pa.int32()), "n_name": pa.array(["north", "south", "west"])})
MIXED_CASE = pa.table({"Cust": SALES.column("s_cust"), "Qty": SALES.column("s_qty")})  # quoted names
TABLES = {"sales": SALES, "cust": CUST, "days": DAYS, "nation": NATION, "Mixed": MIXED_CASE}

_JOIN = "FROM sales, cust WHERE s_cust = c_key"
_JOIN_NATION = "FROM sales, cust, nation WHERE s_cust = c_key AND c_nation = n_key"
#: Each is planned with a pre-aggregation below its join.
PUSHED = {
    "count_star_and_count_x": f"SELECT c_name, count(*) AS n, count(s_qty) AS q, count(s_price) AS p {_JOIN} "
                              "GROUP BY c_name",
    "sum_avg_min_max": "SELECT c_nation, sum(s_qty) AS s, avg(s_price) AS a, min(s_price) AS lo, max(s_qty) AS hi, "
                       "avg(s_amount) AS am, sum(s_amount) AS sa FROM sales JOIN cust ON s_cust = c_key "
                       "GROUP BY c_nation",
    "all_null_values_group": f"SELECT c_name, avg(s_price) AS a, sum(s_price) AS s, max(s_price) AS m {_JOIN} "
                             "GROUP BY c_name",
    "having": f"SELECT c_name, sum(s_qty) AS s {_JOIN} GROUP BY c_name HAVING sum(s_qty) > 10 AND count(*) > 1",
    "having_on_an_aggregate_not_selected": f"SELECT c_name {_JOIN} GROUP BY c_name HAVING avg(s_qty) > 4",
    "order_by_aggregate_limit": f"SELECT c_name, sum(s_price) AS revenue {_JOIN} GROUP BY c_name "
                                "ORDER BY revenue DESC NULLS LAST, c_name LIMIT 3",
    "order_by_aggregate_expression": f"SELECT c_name, count(*) AS n {_JOIN} GROUP BY c_name "
                                     "ORDER BY sum(s_qty) * 2 + count(s_qty) DESC, c_name",
    # Without GROUP BY the final aggregation is cheap: these pay for the two joins the pre-aggregation shrinks.
    "global": f"SELECT count(*) AS n, count(s_qty) AS q, sum(s_qty) AS s, avg(s_qty) AS a, min(s_amount) AS m "
              f"{_JOIN_NATION}",
    "empty_many_side_grouped": f"SELECT c_name, count(*) AS n, sum(s_qty) AS s {_JOIN} AND s_qty * 1 > 1000 "
                               "GROUP BY c_name",
    "empty_many_side_global": f"SELECT count(*) AS n, count(s_qty) AS q, sum(s_qty) AS s, min(s_price) AS m, "
                              f"avg(s_price) AS a {_JOIN_NATION} AND s_qty * 1 > 1000",
    "empty_other_side_global": f"SELECT count(*) AS n, sum(s_qty) AS s, avg(s_price) AS a {_JOIN_NATION} "
                               "AND c_key * 1 < 0",
    "aggregate_of_an_expression": f"SELECT c_name, sum(s_qty * s_price) AS v, max(s_qty + s_day) AS m {_JOIN} "
                                  "GROUP BY c_name",
    "filtered_aggregate": f"SELECT c_name, count(*) FILTER (WHERE s_qty > 3) AS n, sum(s_qty) FILTER (WHERE s_day < 5) "
                          f"AS s {_JOIN} GROUP BY c_name",
    "group_key_of_both_sides": f"SELECT s_day, c_name, sum(s_qty) AS s {_JOIN} GROUP BY s_day, c_name",
    "group_key_expression": f"SELECT upper(c_name) AS u, s_day % 3 AS d, sum(s_price) AS s {_JOIN} "
                            "GROUP BY upper(c_name), s_day % 3",
    "three_tables_dimension_joined_first": "SELECT c_name, d_year, sum(s_qty) AS s, count(*) AS n "
                                           "FROM sales, days, cust WHERE s_day = d_key AND s_cust = c_key "
                                           "GROUP BY c_name, d_year",
    "q10_shape": "SELECT c_key, c_name, n_name, sum(s_price * (1 - s_qty / 10)) AS revenue FROM sales, cust, nation "
                 "WHERE s_cust = c_key AND c_nation = n_key GROUP BY c_key, c_name, n_name "
                 "ORDER BY revenue DESC NULLS LAST, c_key, c_name LIMIT 4",
    "self_join": "SELECT b.s_day, sum(a.s_qty) AS s, count(*) AS n FROM sales a, sales b WHERE a.s_cust = b.s_cust "
                 "GROUP BY b.s_day",
    "derived_table": "SELECT c_name, sum(d.q) AS s, max(d.q) AS m "
                     "FROM (SELECT s_cust AS k, s_qty + 1 AS q FROM sales) d, cust WHERE d.k = c_key GROUP BY c_name",
    "quoted_mixed_case_names": 'SELECT c_name, sum("Qty") AS s, count("Qty") AS n FROM "Mixed", cust '
                               'WHERE "Cust" = c_key GROUP BY c_name',
    "constant_argument": f"SELECT c_name, sum(1) AS one, sum(s_qty) AS s {_JOIN} GROUP BY c_name",
    # Grouping sets re-aggregate the partials per set; grouping() reads the set, not the rows.
    "rollup": f"SELECT c_name, c_nation, sum(s_qty) AS s, count(*) AS n, avg(s_price) AS a {_JOIN} "
              "GROUP BY ROLLUP (c_nation, c_name)",
    "cube_with_a_key_of_each_side": f"SELECT s_day, c_name, count(s_qty) AS n, min(s_price) AS m, "
                                    f"grouping(s_day, c_name) AS g {_JOIN} GROUP BY CUBE (s_day, c_name)",
    "grouping_sets_with_empty_set": f"SELECT c_nation, c_name, max(s_qty) AS m, count(*) AS n {_JOIN} AND s_day < 3 "
                                    "GROUP BY GROUPING SETS ((c_nation), (c_name), ())",
}
#: Each must keep its aggregation above the joins.
KEPT = {
    "distinct_aggregate": f"SELECT c_name, count(DISTINCT s_qty) AS d, sum(s_qty) AS s {_JOIN} GROUP BY c_name",
    "inputs_of_both_sides": f"SELECT c_name, sum(s_qty * c_nation) AS s {_JOIN} GROUP BY c_name",
    "left_join": "SELECT c_name, count(*) AS n, sum(s_qty) AS s FROM sales LEFT JOIN cust ON s_cust = c_key "
                 "GROUP BY c_name",
    "right_join": "SELECT c_name, count(s_qty) AS n, sum(s_qty) AS s FROM sales RIGHT JOIN cust ON s_cust = c_key "
                  "GROUP BY c_name",
    "holistic": f"SELECT c_name, median(s_qty) AS m {_JOIN} GROUP BY c_name",
    "moments": f"SELECT c_name, stddev_samp(s_price) AS d {_JOIN} GROUP BY c_name",
    "window": f"SELECT c_name, sum(s_qty) AS s, rank() OVER (ORDER BY sum(s_qty)) AS r {_JOIN} GROUP BY c_name",
}
_SIMULATED = ("count_star_and_count_x", "sum_avg_min_max", "empty_many_side_global",
              "three_tables_dimension_joined_first")


@pytest.fixture(autouse=True)
def no_set_up(monkeypatch):
    """Plan without the pre-aggregation set-up cost: these tables' saving is rows, never 10,000 units; and
    with their dimensions' strings costed as a large build side's (a tiny one's group as dictionary codes)."""
    monkeypatch.setattr(eager_aggregation, "_PRE_AGGREGATION_SETUP", 0.0)
    monkeypatch.setattr(eager_aggregation, "DICTIONARY_BUILD_MAX_ROWS", 0)


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def _pre_aggregations(plan) -> list[AggregationNode]:
    """Return the aggregations that compute partials below a join (their aggregates named ``$eager…``)."""
    return [node for node in walk_plan(plan) if isinstance(node, AggregationNode)
            and any(name.startswith("$eager") for name in node.aggregate_names)]


@pytest.mark.parametrize("name", list(PUSHED))
def test_the_aggregation_is_pushed_below_the_join(name):
    plan = session_with_tables(TABLES, device="cpu").sql_plan(PUSHED[name])
    pre = _pre_aggregations(plan)
    assert len(pre) == 1, name
    joins = [n for n in walk_plan(plan) if isinstance(n, (HashJoinNode, NestedLoopJoinNode))]
    assert any(pre[0] in walk_plan(join) for join in joins), "the pre-aggregation is not below a join"


@pytest.mark.parametrize("name", list(KEPT))
def test_the_aggregation_stays_above_the_join(name):
    plan = session_with_tables(TABLES, device="cpu").sql_plan(KEPT[name])
    assert not _pre_aggregations(plan), name


def test_the_dimension_that_groups_better_joins_below_the_pre_aggregation():
    """Grouping sales by (customer, year) after joining days beats grouping by (customer, day) without it."""
    plan = session_with_tables(TABLES, device="cpu").sql_plan(PUSHED["three_tables_dimension_joined_first"])
    [pre] = _pre_aggregations(plan)
    assert {n.table_name for n in walk_plan(pre) if isinstance(n, TableScanNode)} == {"sales", "days"}
    assert sorted(pre.grouping_keys) == ["d_year", "s_cust"]


def test_answers_match_duckdb(device_name, reference):
    queries = {**PUSHED, **KEPT}
    if device_name == "cuda-sim":  # the simulator runs a few (the plans are the same on every device)
        queries = {k: queries[k] for k in _SIMULATED}
    session = session_with_tables(TABLES, splits=3, device=device_name, drivers=2, compile_mode="lowest")  # CI time
    assert_queries_match_duckdb(session, reference, list(queries.values()), ordered=order_key_columns, exact_types=True)


def test_tpch_q10_sums_lineitem_and_orders_per_customer_key_before_joining_customers(tpch_data):
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import register_tpch
    from gpu_engine.plans import tpch

    session = Session(device="cpu")
    register_tpch(session, tpch_data(0.01))
    plan = session.sql_plan(tpch.spec_sql(10))
    [pre] = _pre_aggregations(plan)
    assert list(pre.grouping_keys) == ["o_custkey"]
    assert {n.table_name for n in walk_plan(pre) if isinstance(n, TableScanNode)} == {"lineitem", "orders"}
    final = [n for n in walk_plan(plan) if isinstance(n, AggregationNode) and n is not pre]
    assert len(final) == 1 and len(final[0].grouping_keys) == 7


# ------------------------------------------------------------------------------------------- the set-up cost
#: A fact of warehouse stock (TPC-DS q21's shape): per (day, item, warehouse) a quantity, grouped by the
#: warehouse's name and the item's id; the warehouse join keeps every row and its name depends on its key, so
#: a pre-aggregation below it merges only the days, and over few rows that does not pay for its operators.
_STOCK_DAYS, _STOCK_ITEMS, _WAREHOUSES = 8, 40, 3
STOCK = pa.table({
    "st_day": pa.array(np.repeat(np.arange(_STOCK_DAYS), _STOCK_ITEMS * _WAREHOUSES), pa.int32()),
    "st_item": pa.array(np.tile(np.repeat(np.arange(_STOCK_ITEMS), _WAREHOUSES), _STOCK_DAYS), pa.int32()),
    "st_wh": pa.array(np.tile(np.arange(_WAREHOUSES), _STOCK_DAYS * _STOCK_ITEMS), pa.int32()),
    "st_qty": pa.array([None if k % 17 == 4 else k % 23 for k in range(_STOCK_DAYS * _STOCK_ITEMS * _WAREHOUSES)],
                       pa.int64())})
WAREHOUSE = pa.table({"w_key": pa.array(np.arange(_WAREHOUSES), pa.int32()),
                      "w_name": pa.array([f"warehouse {k}" for k in range(_WAREHOUSES)])})
STOCK_TOTALS = ("SELECT w_name, st_item, sum(st_qty) AS q, count(*) AS n FROM stock, warehouse "
                "WHERE st_wh = w_key GROUP BY w_name, st_item ORDER BY w_name, st_item")


@pytest.mark.parametrize("device_name", ["cpu", "cuda-sim"])
def test_a_pre_aggregation_of_few_rows_does_not_pay_its_set_up(device_name, monkeypatch):
    """960 rows merged into 120 groups below a join that keeps every row: no pre-aggregation (without the
    set-up cost the rows alone made it look cheaper); the answer is DuckDB's either way."""
    monkeypatch.setattr(eager_aggregation, "_PRE_AGGREGATION_SETUP", eager_aggregation.PRE_AGGREGATION_SETUP_MEASURED)
    tables = {"stock": STOCK, "warehouse": WAREHOUSE}
    session = session_with_tables(tables, device=device_name, fuse=False, compile_mode="lowest")
    assert not _pre_aggregations(session.sql_plan(STOCK_TOTALS))
    with duckdb_with_tables(tables) as connection:
        assert_queries_match_duckdb(session, connection, [STOCK_TOTALS], ordered=order_key_columns)


def test_without_the_set_up_cost_the_same_rows_are_pre_aggregated():
    """The same query without the set-up (``no_set_up``): the rows' saving alone chooses a pre-aggregation
    (so the test above checks the set-up, not an estimate that never reduces)."""
    plan = session_with_tables({"stock": STOCK, "warehouse": WAREHOUSE}, device="cpu").sql_plan(STOCK_TOTALS)
    assert len(_pre_aggregations(plan)) == 1
