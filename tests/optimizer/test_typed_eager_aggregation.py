"""Aggregates pushed below inner joins over the typed plan (:mod:`gpu_engine.optimizer.eager_aggregation`).

Small tables with NULL join keys on both sides, a key repeated on the side
that is not aggregated (each of its rows takes the partial again), NULL
values, a customer whose prices are all NULL (its ``avg`` is NULL), and
inputs filtered to nothing (a global ``count`` is 0, a ``sum`` NULL). Each
query of :data:`PUSHED` must be planned, after the optimizer's rules with the
session's statistics, with an aggregation below a join (the SQL planner places
none: eager aggregation was a rule over the sqlglot tree, ``sql/eager_aggregation.py``,
before it was this typed rule); each of :data:`KEPT` without one; both answer as
DuckDB does. A PlanBuilder plan and its JSON form
get the same rewrite (a SQL rule never saw them). The TPC-H Q10 plan test
checks the rule picks lineitem ⋈ orders grouped by ``o_custkey``, the hand
plan's shape. These tables are tiny, so the tests plan without the rule's
fixed cost (:data:`~gpu_engine.optimizer.eager_aggregation.PRE_AGGREGATION_SETUP`:
it keeps a pre-aggregation of few rows out) and with their dimensions'
strings costed as a large build side's, except the set-up tests at the end.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import (assert_queries_match_duckdb, assert_same_rows, duckdb_table, duckdb_with_tables,
                              session_with_tables)
from gpu_engine.optimizer import ESTIMATE_RULES, eager_aggregation
from gpu_engine.optimizer.cardinality import estimate
from gpu_engine.optimizer.statistics import ColumnStatistics, TableStatistics
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator
from gpu_engine.plans.nodes import (AggregationNode, HashJoinNode, NestedLoopJoinNode, PlanNode, TableScanNode,
                                    walk_plan)
from gpu_engine.plans.serialization import plan_from_json, plan_to_json
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
    # Grouping sets: the partial step below GroupId merges partial states of the sales, joined to the customers.
    "rollup": f"SELECT c_name, c_nation, sum(s_qty) AS s, count(*) AS n, avg(s_price) AS a {_JOIN} "
              "GROUP BY ROLLUP (c_nation, c_name)",
    "cube_with_a_key_of_each_side": f"SELECT s_day, c_name, count(s_qty) AS n, min(s_price) AS m, "
                                    f"grouping(s_day, c_name) AS g {_JOIN} GROUP BY CUBE (s_day, c_name)",
    "grouping_sets_with_empty_set": f"SELECT c_nation, c_name, max(s_qty) AS m, count(*) AS n {_JOIN} AND s_day < 3 "
                                    "GROUP BY GROUPING SETS ((c_nation), (c_name), ())",
    # The planner splits DISTINCT and plain aggregates into two branches: the plain one's sum is pre-aggregated
    # (the SQL rule, over the written SELECT, refused the query), the distinct one's dedupe stays above the join.
    "distinct_aggregate": f"SELECT c_name, count(DISTINCT s_qty) AS d, sum(s_qty) AS s {_JOIN} GROUP BY c_name",
}
#: Each must keep its aggregation above the joins.
KEPT = {
    "inputs_of_both_sides": f"SELECT c_name, sum(s_qty * c_nation) AS s {_JOIN} GROUP BY c_name",
    "left_join": "SELECT c_name, count(*) AS n, sum(s_qty) AS s FROM sales LEFT JOIN cust ON s_cust = c_key "
                 "GROUP BY c_name",
    "right_join": "SELECT c_name, count(s_qty) AS n, sum(s_qty) AS s FROM sales RIGHT JOIN cust ON s_cust = c_key "
                  "GROUP BY c_name",
    "holistic": f"SELECT c_name, median(s_qty) AS m {_JOIN} GROUP BY c_name",
    "moments": f"SELECT c_name, stddev_samp(s_price) AS d {_JOIN} GROUP BY c_name",
    "count_star_alone": f"SELECT c_name, count(*) AS n {_JOIN} GROUP BY c_name",
}
_SIMULATED = ("count_star_and_count_x", "sum_avg_min_max", "empty_many_side_global", "rollup")


@pytest.fixture(autouse=True)
def no_set_up(monkeypatch):
    """Plan without the pre-aggregation set-up cost: these tables' saving is rows, never 10,000 units; and
    with their dimensions' strings costed as a large build side's (a tiny one's group as dictionary codes)."""
    monkeypatch.setattr(eager_aggregation, "PRE_AGGREGATION_SETUP", 0.0)
    monkeypatch.setattr(eager_aggregation, "DICTIONARY_BUILD_MAX_ROWS", 0)


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def _pre_aggregations(plan: PlanNode) -> list[AggregationNode]:
    """Return the aggregations below a join (none of these queries writes one there)."""
    out = []
    for join in walk_plan(plan):
        if isinstance(join, (HashJoinNode, NestedLoopJoinNode)):
            out += [n for n in walk_plan(join) if isinstance(n, AggregationNode) and n not in out]
    return out


def _optimize(plan: PlanNode, statistics=None) -> PlanNode:
    import gpu_engine.optimizer as optimizer
    return optimizer.optimize_plan(plan, statistics)


def _optimized(session, text: str) -> PlanNode:
    import gpu_engine.optimizer as optimizer
    return optimizer.optimize_plan(session.sql_plan(text), session.statistics())


def test_the_rule_runs_after_join_ordering_and_before_build_sides():
    """The joins it rebuilds keep the order join ordering chose; build sides and partial steps see the
    pre-aggregation's estimated rows."""
    from gpu_engine.optimizer.build_sides import build_smaller_sides
    from gpu_engine.optimizer.join_order import order_joins
    from gpu_engine.optimizer.partial_steps import choose_partial_steps
    rules = list(ESTIMATE_RULES)
    assert rules.index(order_joins) + 1 == rules.index(eager_aggregation.eager_aggregate)
    assert rules.index(eager_aggregation.eager_aggregate) < rules.index(build_smaller_sides)
    assert rules.index(eager_aggregation.eager_aggregate) < rules.index(choose_partial_steps)


@pytest.mark.parametrize("name", list(PUSHED))
def test_the_aggregation_is_pushed_below_the_join(name):
    session = session_with_tables(TABLES, device="cpu")
    assert not _pre_aggregations(session.sql_plan(PUSHED[name])), "the SQL planner pre-aggregated it"
    pre = _pre_aggregations(_optimized(session, PUSHED[name]))
    assert len(pre) == 1, name


def test_a_second_pass_changes_nothing():
    """A plan optimized once (a JSON plan saved after it, a runner's stage) is not pre-aggregated again: the
    pre-aggregation's groups are unique on its keys."""
    session = session_with_tables(TABLES, device="cpu")
    for name in ("q10_shape", "three_tables_dimension_joined_first", "rollup"):
        once = _optimized(session, PUSHED[name])
        assert eager_aggregation.eager_aggregate(once, session.statistics()) == once, name


def test_the_pre_aggregation_is_built_where_its_groups_are_fewer():
    """The join that first meets the pre-aggregation (relation 2 here) builds it where its estimated groups are no
    more than the other side's rows, else probes with it (TPC-DS q11: the written tree probed customer with the
    store sales, and customer's seven strings were built: +10%); joins elsewhere in the tree stay as written."""
    rows = {(0,): 100.0, (1,): 50.0, (0, 1): 80.0}
    rows_of = lambda part: rows[tuple(sorted(part))]  # noqa: E731
    assert eager_aggregation._built_smaller(((2, 0), 1), 2, 90.0, rows_of) == ((0, 2), 1)
    assert eager_aggregation._built_smaller(((0, 2), 1), 2, 120.0, rows_of) == ((2, 0), 1)
    assert eager_aggregation._built_smaller((1, (2, 0)), 2, 100.0, rows_of) == (1, (0, 2))
    assert eager_aggregation._built_smaller(((0, 1), 2), 2, 60.0, rows_of) == ((0, 1), 2)
    assert eager_aggregation._built_smaller((2, (0, 1)), 2, 60.0, rows_of) == ((0, 1), 2)


@pytest.mark.parametrize("name", list(KEPT))
def test_the_aggregation_stays_above_the_join(name):
    assert not _pre_aggregations(_optimized(session_with_tables(TABLES, device="cpu"), KEPT[name])), name


def test_the_dimension_that_groups_better_joins_below_the_pre_aggregation():
    """Grouping sales by (customer, year) after joining days beats grouping by (customer, day) without it."""
    plan = _optimized(session_with_tables(TABLES, device="cpu"), PUSHED["three_tables_dimension_joined_first"])
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
    plan = _optimized(session, tpch.spec_sql(10))
    [pre] = _pre_aggregations(plan)
    assert list(pre.grouping_keys) == ["o_custkey"]
    assert {n.table_name for n in walk_plan(pre) if isinstance(n, TableScanNode)} == {"lineitem", "orders"}
    # The 7-key re-aggregation is a projection: c_custkey, read, is unique in customer, and the pre-aggregation's
    # rows are unique on o_custkey, so each joined row is a group of its own (optimizer.unique_groupings).
    final = [n for n in walk_plan(plan) if isinstance(n, AggregationNode) and n is not pre]
    assert final == []


# --------------------------------------------------------------------- plans no SQL planner made: PlanBuilder, JSON
def _built_plan() -> PlanNode:
    """sales ⋈ cust ⋈ nation grouped by the nation's name, written by hand: sum, count, avg and min."""
    schemas, ids = {name: TABLES[name].schema for name in ("sales", "cust", "nation")}, PlanNodeIdGenerator()
    nation = PlanBuilder(schemas, id_generator=ids).table_scan("nation")
    cust = PlanBuilder(schemas, id_generator=ids).table_scan("cust").hash_join(["c_nation"], ["n_key"], nation,
                                                                                ["c_key", "n_name"])
    return (PlanBuilder(schemas, id_generator=ids).table_scan("sales")
            .hash_join(["s_cust"], ["c_key"], cust, ["s_qty", "s_price", "n_name"])
            .aggregation(["n_name"], ["sum(s_qty) AS s", "count(*) AS n", "avg(s_price) AS a", "min(s_qty) AS m"])
            .plan())


_BUILT_ANSWER = ("SELECT n_name, sum(s_qty) AS s, count(*) AS n, avg(s_price) AS a, min(s_qty) AS m "
                 "FROM sales JOIN cust ON s_cust = c_key JOIN nation ON c_nation = n_key GROUP BY n_name")


def test_a_plan_builder_plan_and_its_json_form_are_pre_aggregated():
    session = session_with_tables(TABLES, device="cpu")
    plan = _built_plan()
    assert not _pre_aggregations(plan)
    optimized = _optimize(plan, session.statistics())
    [pre] = _pre_aggregations(optimized)
    assert pre.grouping_keys == ("s_cust",)
    assert optimized.output_schema == plan.output_schema
    assert _optimize(plan_from_json(plan_to_json(plan)), session.statistics()) == optimized
    assert not _pre_aggregations(_optimize(plan))  # no statistics: no estimate, no rewrite


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_the_plan_builder_plan_answers_as_duckdb(device, reference):
    session = session_with_tables(TABLES, splits=3, device=device, drivers=2, compile_mode="lowest")
    assert_same_rows(session.execute(_built_plan()), duckdb_table(reference, _BUILT_ANSWER))


# ------------------------------------------------------------------------------------------------- estimates
def test_value_sets_on_one_column_intersect_in_a_filter_estimate():
    """``(y = 1 OR y = 2) AND y = 2`` keeps one value's rows (TPC-DS q74's CTE filter beside its reader's pushed
    one), not the product of the two shares; value sets that share nothing keep no rows."""
    statistics = {"t": TableStatistics(1000.0, {"y": ColumnStatistics(100.0, 0, 99)})}

    def rows(condition: str) -> float:
        builder = PlanBuilder({"t": pa.schema([("y", pa.int64())])})
        return estimate(builder.table_scan("t").filter(condition).plan(), statistics).rows

    assert rows("(y = 1 OR y = 2) AND y = 2") == pytest.approx(10.0)
    assert rows("y IN (1, 2, 3) AND y IN (2, 3, 4)") == pytest.approx(20.0)
    assert rows("y = 1 AND y = 2") == pytest.approx(1.0)  # none: at least one row, as every filter estimate
    assert rows("y = 1") == pytest.approx(10.0)


@pytest.mark.parametrize("years", ["d_year = 1 OR d_year = 2", "d_year IN (1, 2)"])
def test_an_or_of_one_columns_values_pins_its_groups_as_an_in_list_does(years):
    """A shared CTE's filter from its readers is an OR (``sql/cte_reader_filters``: TPC-DS q11's ``d_year = 2002
    OR d_year = 2001``): it leaves two years, as an IN list does, so facts x filtered days group by (year,
    customer) into few groups and are pre-aggregated. With the OR's column left at all its years the groups
    came out near the joined rows and the facts were grouped by the customers' strings above the join (q11's
    web branch: 1.7 s of 8 s CPU)."""
    schemas = {"f": pa.schema([("f_day", pa.int32()), ("f_cust", pa.int32()), ("f_amt", pa.float64())]),
               "d": pa.schema([("d_key", pa.int32()), ("d_year", pa.int32())]),
               "c": pa.schema([("c_key", pa.int32()), ("c_name", pa.string())])}
    statistics = {
        "f": TableStatistics(6e6, {"f_day": ColumnStatistics(20_000.0, 0, 19_999),
                                   "f_cust": ColumnStatistics(10_000.0, 0, 9_999),
                                   "f_amt": ColumnStatistics(1000.0, 0, 999)}),
        "d": TableStatistics(20_000.0, {"d_key": ColumnStatistics(20_000.0, 0, 19_999),
                                        "d_year": ColumnStatistics(200.0, 0, 199)}),
        "c": TableStatistics(10_000.0, {"c_key": ColumnStatistics(10_000.0, 0, 9_999),
                                        "c_name": ColumnStatistics(10_000.0, "a", "z")})}
    ids = PlanNodeIdGenerator()
    days = PlanBuilder(schemas, id_generator=ids).table_scan("d").filter(years)
    customers = PlanBuilder(schemas, id_generator=ids).table_scan("c")
    plan = (PlanBuilder(schemas, id_generator=ids).table_scan("f")
            .hash_join(["f_day"], ["d_key"], days, ["f_cust", "f_amt", "d_year"])
            .hash_join(["f_cust"], ["c_key"], customers, ["f_amt", "d_year", "c_name"])
            .aggregation(["d_year", "c_name"], ["sum(f_amt) AS s"]).plan())
    assert [set(pre.grouping_keys) for pre in _pre_aggregations(_optimize(plan, statistics))] == [{"d_year", "f_cust"}]


def test_a_small_build_sides_strings_group_as_fixed_width_codes(monkeypatch):
    monkeypatch.undo()
    from gpu_engine.operators.hash_build import DICTIONARY_BUILD_MAX_ROWS
    assert eager_aggregation._key_cost(pa.string(), 5) == 1.0
    assert eager_aggregation._key_cost(pa.string(), DICTIONARY_BUILD_MAX_ROWS) == 1.0
    assert eager_aggregation._key_cost(pa.string(), DICTIONARY_BUILD_MAX_ROWS + 1) == eager_aggregation.STRING_KEY_COST
    assert eager_aggregation._key_cost(pa.string(), None) == eager_aggregation.STRING_KEY_COST  # not a build side
    assert eager_aggregation._key_cost(pa.int32(), 10_000_000) == 1.0


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
    monkeypatch.undo()
    tables = {"stock": STOCK, "warehouse": WAREHOUSE}
    session = session_with_tables(tables, device=device_name, fuse=False, compile_mode="lowest")
    assert not _pre_aggregations(_optimized(session, STOCK_TOTALS))
    with duckdb_with_tables(tables) as connection:
        assert_queries_match_duckdb(session, connection, [STOCK_TOTALS], ordered=order_key_columns)


def test_without_the_set_up_cost_the_same_rows_are_pre_aggregated():
    """The same query without the set-up (``no_set_up``): the rows' saving alone chooses a pre-aggregation
    (so the test above checks the set-up, not an estimate that never reduces)."""
    session = session_with_tables({"stock": STOCK, "warehouse": WAREHOUSE}, device="cpu")
    assert len(_pre_aggregations(_optimized(session, STOCK_TOTALS))) == 1


def test_the_set_up_grows_with_the_partial_aggregates(monkeypatch):
    """TPC-DS q66's shape: 24 partial sums weigh six times one's set-up (bench/results/2026-11-28-q66-*.md)."""
    monkeypatch.undo()
    set_up, share = eager_aggregation.PRE_AGGREGATION_SETUP, eager_aggregation.PARTIAL_SETUP_SHARE
    assert eager_aggregation._setup_cost(1) == pytest.approx(set_up * (1 + share))
    assert eager_aggregation._setup_cost(24) == pytest.approx(set_up * (1 + 24 * share))
    assert eager_aggregation._setup_cost(24) > 5 * eager_aggregation._setup_cost(1)
