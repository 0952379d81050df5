"""GROUP BY without a partial step where a key is about as distinct as the rows (:mod:`gpu_engine.optimizer.partial_steps`).

The plan tests check which aggregations the optimizer refuses a partial step (a key whose range-based
distinct count reaches 80% of the estimated rows: a unique customer key, alone, with the customer's strings,
or after a join that keeps a row per customer; integer keys whose counts multiply to 40% of the rows or more)
and which keep it (keys of few values, also of few values drawn from a wide range, strings whose distinct count
is unknown, an expression, keys whose counts multiply past the rows), and that the local exchanges then plan one single step per driver behind
a repartition. The answers are DuckDB's for all of them on several drivers and splits, with NULL keys, a key
whose range promises more distinct values than it has (the estimate is wrong: the plan must still answer
right), an input filtered to nothing, DISTINCT aggregates, and decimal, float and string values (lowest
tier here, for CI time). The tables are far under the rule's floor (``MIN_ESTIMATED_ROWS``), which these
tests lower to 0; the floor's own test checks that small inputs keep their partial steps, as the TPC-H SQL
tests at SF 0.01 do (at SF1 Q3, Q10, Q11 and Q18 refuse them: ``bench/ab.py partial-steps``).
"""

from __future__ import annotations

import decimal
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import (assert_queries_match_duckdb, assert_same_rows, duckdb_table, duckdb_with_tables,
                              session_with_tables)
from gpu_engine.planning.local_exchanges import add_local_exchanges
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import AggregationNode, AggregationStep, FilterNode, walk_plan
from gpu_engine.optimizer import optimize_plan, partial_steps
from gpu_engine.sql.ordering import order_key_columns

_RNG = np.random.default_rng(31)
_CUSTOMERS = 400
_LINES = 1500
CUST = pa.table({  # c_key unique 0..399 but one NULL; names repeat every 150 customers, so groups by name merge
    "c_key": pa.array([None if k == 7 else k for k in range(_CUSTOMERS)], pa.int64()),
    "c_name": pa.array([None if k % 97 == 5 else f"name {k % 150:03d}" for k in range(_CUSTOMERS)]),
    "c_phone": pa.array([f"{k % 23:02d}-{k:05d}" for k in range(_CUSTOMERS)]),
    "c_nation": pa.array(_RNG.integers(0, 5, _CUSTOMERS), pa.int32()),
    "c_balance": pa.array([decimal.Decimal(int(v)) / 100 for v in _RNG.integers(-9999, 99999, _CUSTOMERS)],
                          pa.decimal128(12, 2)),
})
LINES = pa.table({  # ~4 lines per customer, NULL customer on every 17th line
    "l_cust": pa.array([None if k % 17 == 3 else int(v) for k, v in enumerate(_RNG.integers(0, _CUSTOMERS, _LINES))],
                       pa.int64()),
    "l_price": pa.array([None if k % 11 == 4 else float(v) / 8 for k, v in enumerate(_RNG.integers(0, 800, _LINES))],
                        pa.float64()),
    "l_amount": pa.array([decimal.Decimal(int(v)) / 100 for v in _RNG.integers(-500, 90000, _LINES)],
                         pa.decimal128(15, 2)),
    "l_flag": pa.array(["AR"[v] for v in _RNG.integers(0, 2, _LINES)]),
})
# The range of r_key (0..599) says 600 distinct values in 600 rows; it has 60 (ten rows each, and NULLs).
REPEATS = pa.table({"r_key": pa.array([599 if k == 0 else (None if k % 61 == 9 else (k % 60) * 10)
                                       for k in range(600)], pa.int64()),
                    "r_text": pa.array([f"t{k % 7}" for k in range(600)]),
                    "r_value": pa.array(_RNG.integers(-50, 50, 600), pa.int64())})
# Three integer keys of ranges 40, 20 and 5 over 1000 rows (a NULL in each): together p_a and p_b can take 800
# values (0.8 of the rows), p_a and p_c 200; all three 4000, past the rows.
PAIRS = pa.table({"p_a": pa.array([None if k == 3 else int(v) for k, v in enumerate(_RNG.integers(0, 40, 1000))],
                                  pa.int64()),
                  "p_b": pa.array([None if k == 5 else int(v) for k, v in enumerate(_RNG.integers(0, 20, 1000))],
                                  pa.int32()),
                  "p_c": pa.array([None if k == 8 else int(v) for k, v in enumerate(_RNG.integers(0, 5, 1000))],
                                  pa.int64()),
                  "p_value": pa.array(_RNG.integers(-500, 500, 1000), pa.int64())})
# Eight int64 values drawn from [0, 1e9) over 2000 rows (and NULLs): the range says a value a row, a sample of the
# rows says eight (statistics._arrow_sampled_ndv), so the partial step stays (issue 31: 2.0x the CPU without it).
_WIDE = _RNG.integers(0, 1_000_000_000, 8)
SPARSE = pa.table({"s_key": pa.array([None if k % 97 == 1 else int(_WIDE[k % 8]) for k in range(2000)], pa.int64()),
                   "s_value": pa.array(_RNG.integers(-500, 500, 2000), pa.int64())})
TABLES = {"cust": CUST, "lines": LINES, "repeats": REPEATS, "pairs": PAIRS, "sparse": SPARSE}

#: Q10's re-aggregation by the customer's columns over a join that keeps a row per customer (the lines summed per
#: customer first, as eager aggregation does to Q10, written out so the test does not depend on that rule's choice).
_Q10_SHAPE = ("SELECT c_key, c_name, c_phone, c_balance, sum(p * 2) AS revenue, sum(n) AS n "
              "FROM (SELECT l_cust, sum(l_price) AS p, count(*) AS n FROM lines GROUP BY l_cust) AS per_customer, "
              "cust WHERE l_cust = c_key GROUP BY c_key, c_name, c_phone, c_balance")
#: Each is planned without a partial step.
SINGLE = {
    "unique_key_with_its_strings": "SELECT c_key, c_name, c_phone, count(*) AS n, sum(c_balance) AS b, "
                                   "min(c_name) AS lo FROM cust GROUP BY c_key, c_name, c_phone",
    "unique_key_alone": "SELECT c_key, max(c_phone) AS p, avg(c_balance) AS a FROM cust GROUP BY c_key",
    "after_a_join_a_row_per_customer": _Q10_SHAPE,
    "q10_shape_top": _Q10_SHAPE + " ORDER BY revenue DESC NULLS LAST, c_key LIMIT 5",
    "wrong_estimate": "SELECT r_key, r_text, sum(r_value) AS s, count(*) AS n, max(r_value) AS m FROM repeats "
                      "GROUP BY r_key, r_text",
    "wrong_estimate_alone": "SELECT r_key, count(*) AS n, sum(r_value) AS s FROM repeats GROUP BY r_key",
    "distinct_aggregate": "SELECT r_key, count(DISTINCT r_text) AS d, sum(DISTINCT r_value) AS s FROM repeats "
                          "GROUP BY r_key",
    "empty_input": "SELECT c_key, c_name, count(*) AS n, sum(c_balance) AS b FROM cust WHERE c_balance > 100000 "
                   "GROUP BY c_key, c_name",
    "having": "SELECT c_key, c_phone, sum(c_balance) AS b FROM cust GROUP BY c_key, c_phone HAVING sum(c_balance) > 0",
    "joint_keys": "SELECT p_a, p_b, stddev_samp(p_value) AS s, avg(p_value) AS m, count(*) AS n FROM pairs "
                  "GROUP BY p_a, p_b",
}
#: Each keeps its partial step: no key known to be about as distinct as the rows.
SPLIT = {
    "few_values": "SELECT c_nation, count(*) AS n, sum(c_balance) AS b FROM cust GROUP BY c_nation",
    "string_key": "SELECT c_name, count(*) AS n FROM cust GROUP BY c_name",
    "expression_key": "SELECT c_key % 3 AS k, count(*) AS n, sum(c_balance) AS b FROM cust GROUP BY c_key % 3",
    "joined_customer_key_of_many_lines": "SELECT l_flag, c_nation, sum(l_amount) AS s, count(l_price) AS n "
                                         "FROM lines, cust WHERE l_cust = c_key GROUP BY l_flag, c_nation",
    "joint_keys_few": "SELECT p_a, p_c, sum(p_value) AS s, count(*) AS n FROM pairs GROUP BY p_a, p_c",
    "joint_keys_past_the_rows": "SELECT p_a, p_b, p_c, sum(p_value) AS s FROM pairs GROUP BY p_a, p_b, p_c",
    "few_values_of_a_wide_range": "SELECT s_key, count(*) AS n, sum(s_value) AS s FROM sparse GROUP BY s_key",
}
_SIMULATED = ("unique_key_with_its_strings", "after_a_join_a_row_per_customer", "wrong_estimate", "empty_input",
              "few_values", "joint_keys", "few_values_of_a_wide_range")


#: The rule's floor as the engine ships it (the fixture below lowers it for the plan tests).
_FLOOR = partial_steps.MIN_ESTIMATED_ROWS


@pytest.fixture(autouse=True)
def rule_on_small_tables(monkeypatch):
    """These tables are a few hundred rows, under the rule's floor (``MIN_ESTIMATED_ROWS``): lowered to 0 here
    (the floor's own test puts it back)."""
    monkeypatch.setattr(partial_steps, "MIN_ESTIMATED_ROWS", 0)


@pytest.fixture(scope="module")
def reference():
    """One DuckDB connection over ``TABLES`` for the module's answer checks."""
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def _optimized(session, sql: str):
    """The plan a Session runs (before its exchanges): the SQL planner's, through the optimizer with statistics."""
    return optimize_plan(session.sql_plan(sql), session.statistics())


def _grouped(plan) -> list[AggregationNode]:
    return [n for n in walk_plan(plan) if isinstance(n, AggregationNode) and n.grouping_keys]


@pytest.mark.parametrize("name", list(SINGLE))
def test_the_aggregation_is_planned_without_a_partial_step(name, without_unique_groupings):
    session = session_with_tables(TABLES, device="cpu")
    plan = _optimized(session, SINGLE[name])
    refused = [n for n in _grouped(plan) if not n.partial_step]
    assert refused, name
    parallel = add_local_exchanges(plan, 2)
    steps = {n.id: n.step for n in walk_plan(parallel) if isinstance(n, AggregationNode)}
    for node in refused:
        assert f"{node.id}.partial" not in steps and steps[node.id] is AggregationStep.SINGLE, name


@pytest.mark.parametrize("name", list(SPLIT))
def test_the_aggregation_keeps_its_partial_step(name):
    session = session_with_tables(TABLES, device="cpu")
    plan = _optimized(session, SPLIT[name])
    assert _grouped(plan) and all(n.partial_step for n in _grouped(plan)), name
    parallel = add_local_exchanges(plan, 2)
    assert any(n.step is AggregationStep.PARTIAL for n in walk_plan(parallel) if isinstance(n, AggregationNode))


def test_answers_match_duckdb(device_name, reference, request):
    # on cpu the aggregations the plan tests above choose for, not projections (unique_groupings); on the
    # simulator they would cost CI time
    if device_name == "cpu":
        request.getfixturevalue("without_unique_groupings")
    queries = {**SINGLE, **SPLIT}
    if device_name == "cuda-sim":  # the simulator runs a few (the plans are the same on every device)
        queries = {k: queries[k] for k in _SIMULATED}
    session = session_with_tables(TABLES, splits=3, device=device_name, drivers=2, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference, list(queries.values()), ordered=order_key_columns, exact_types=True)



def test_small_inputs_keep_their_partial_step_whatever_the_constants(monkeypatch, without_unique_groupings):
    """Under ``MIN_ESTIMATED_ROWS`` the plan does not depend on the estimates, so a query with new constants
    plans the same steps (and generates no kernel: ``tests/codegen/test_kernel_parameters.py``)."""
    monkeypatch.setattr(partial_steps, "MIN_ESTIMATED_ROWS", _FLOOR)
    assert _FLOOR > 1500  # the largest table here
    for sql in (SINGLE["unique_key_alone"], SINGLE["empty_input"], _Q10_SHAPE):
        plan = _optimized(session_with_tables(TABLES, device="cpu"), sql)
        assert _grouped(plan) and all(n.partial_step for n in _grouped(plan)), sql


#: 1000 rows; ``k``'s range says 200 distinct values (it has them, five rows each), ``g`` = k % 10.
FILTERED = pa.table({"k": pa.array([None if i == 17 else i % 200 for i in range(1000)], pa.int64()),
                     "g": pa.array([i % 200 % 10 for i in range(1000)], pa.int32()),
                     "v": pa.array(_RNG.integers(-50, 50, 1000), pa.int64())})


def _grouped_then_filtered():
    """A PlanBuilder plan: group ``filtered`` by k and g, keep g = 3 above the grouping. As written the input is
    1000 rows of 200 keys (a partial step pays); once the filter is pushed below the grouping the input is an
    estimated 100 rows, ``k`` capped at 100 distinct values: about a group per row."""
    return (PlanBuilder({"filtered": FILTERED.schema}).table_scan("filtered")
            .aggregation(["k", "g"], ["sum(v) AS s", "count(*) AS n"]).filter("g = 3").plan())


def test_a_plan_builder_plan_is_chosen_after_its_filter_is_pushed_down():
    session = session_with_tables({"filtered": FILTERED}, device="cpu")
    plan = _grouped_then_filtered()
    assert all(n.partial_step for n in _grouped(plan))
    optimized = optimize_plan(plan, session.statistics())
    (aggregation,) = _grouped(optimized)
    assert isinstance(aggregation.sources[0], FilterNode) and not aggregation.partial_step
    assert _grouped(optimize_plan(plan)) == [replace(aggregation, partial_step=True)]  # no statistics: kept
    assert partial_steps.choose_partial_steps(optimized, session.statistics()) is optimized  # nothing to change
    unfiltered = (PlanBuilder({"filtered": FILTERED.schema}).table_scan("filtered")
                  .aggregation(["k", "g"], ["sum(v) AS s"]).plan())
    assert all(n.partial_step for n in _grouped(optimize_plan(unfiltered, session.statistics())))


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_the_plan_builder_plan_answers_as_duckdb(device):
    session = session_with_tables({"filtered": FILTERED}, splits=3, device=device, drivers=2,
                                  compile_mode="lowest")
    with duckdb_with_tables({"filtered": FILTERED}) as reference:
        assert_same_rows(session.execute(_grouped_then_filtered()), duckdb_table(
            reference, "SELECT * FROM (SELECT k, g, sum(v) AS s, count(*) AS n FROM filtered GROUP BY k, g) "
                       "WHERE g = 3"))
