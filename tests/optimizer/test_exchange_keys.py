"""A GROUP BY over string keys repartitions on one fixed-width key of many distinct values
(:mod:`gpu_engine.optimizer.exchange_keys`).

The plan tests check which key each aggregation's exchange hashes: the customer key where the other keys are
the customer's strings (TPC-H q10's shape, alone and over a join), nothing where the fixed-width keys have few
distinct values, where every key is fixed-width, where the only fixed-width key is a float, and where a DISTINCT
under a GROUP BY has its exchange chosen by the GROUP BY above (TPC-H q16's shape). The answers are DuckDB's on
3 drivers over small splits and batches (every group's rows on several drivers before the exchange), with NULL
keys, names shared by several customers, a key whose range promises more distinct values than it has (the
estimate is wrong: the answer must not be), an aggregation by the strings above one partitioned on the key, and an input
filtered to nothing. The tables are far under the rule's floors, which these tests lower.
"""

from __future__ import annotations

import decimal
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.optimizer import exchange_keys, optimize_plan, partial_steps
from gpu_engine.planning.local_exchanges import add_local_exchanges
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.explain import format_plan
from gpu_engine.plans.nodes import AggregationNode, LocalPartitionNode, walk_plan
from gpu_engine.plans.serialization import plan_from_dict, plan_to_dict
from gpu_engine.sql.ordering import order_key_columns

_RNG = np.random.default_rng(52)
_CUSTOMERS = 300
_LINES = 1200
CUST = pa.table({  # c_key unique but one NULL; names and phones repeat, so a group by name alone merges customers
    "c_key": pa.array([None if k == 11 else k for k in range(_CUSTOMERS)], pa.int64()),
    "c_name": pa.array([None if k % 89 == 3 else f"Customer#{k % 120:09d}" for k in range(_CUSTOMERS)]),
    "c_phone": pa.array([f"{k % 25:02d}-{k % 170:05d}-long-enough-to-hash" for k in range(_CUSTOMERS)]),
    "c_nation": pa.array(_RNG.integers(0, 5, _CUSTOMERS), pa.int32()),
    "c_balance": pa.array([decimal.Decimal(int(v)) / 100 for v in _RNG.integers(-9999, 99999, _CUSTOMERS)],
                          pa.decimal128(12, 2)),
    "c_score": pa.array(_RNG.integers(0, 1000, _CUSTOMERS) / 4, pa.float64()),
})
LINES = pa.table({  # ~4 lines per customer, NULL customer on every 13th line
    "l_cust": pa.array([None if k % 13 == 5 else int(v) for k, v in enumerate(_RNG.integers(0, _CUSTOMERS, _LINES))],
                       pa.int64()),
    "l_price": pa.array([decimal.Decimal(int(v)) / 100 for v in _RNG.integers(-500, 90000, _LINES)],
                        pa.decimal128(15, 2)),
    "l_part": pa.array(_RNG.integers(0, 40, _LINES), pa.int64()),
})
# The range of r_key (0..599) says 600 distinct values in 600 rows; it has 22 (and NULLs), too many for its sample to
# be believed (statistics._arrow_sampled_ndv: a value a hundred rows or more), and three hold a sixth of the rows each:
# 2 drivers skew.
REPEATS = pa.table({"r_key": pa.array([599 if k == 0 else (None if k % 61 == 9 else (k % 3) * 10 if k % 2 else
                                                          (k % 40) * 10)
                                       for k in range(600)], pa.int64()),
                    "r_text": pa.array([f"text {k % 7}" for k in range(600)]),
                    "r_value": pa.array(_RNG.integers(-50, 50, 600), pa.int64())})
TABLES = {"cust": CUST, "lines": LINES, "repeats": REPEATS}

_Q10_SHAPE = ("SELECT c_key, c_name, c_phone, c_balance, sum(p) AS revenue, sum(n) AS n "
              "FROM (SELECT l_cust, sum(l_price) AS p, count(*) AS n FROM lines GROUP BY l_cust) AS per_customer, "
              "cust WHERE l_cust = c_key GROUP BY c_key, c_name, c_phone, c_balance")
#: Each query's grouping by these keys repartitions on the one named.
CHOSEN = {
    "customer_key_with_its_strings": ("SELECT c_name, c_key, c_phone, count(*) AS n, sum(c_balance) AS b "
                                      "FROM cust GROUP BY c_name, c_key, c_phone", "c_key"),
    "q10_shape": (_Q10_SHAPE, "c_key"),
    "q10_shape_top": (_Q10_SHAPE + " ORDER BY revenue DESC, c_key LIMIT 7", "c_key"),
    "wrong_estimate": ("SELECT r_text, r_key, sum(r_value) AS s, count(*) AS n FROM repeats GROUP BY r_text, r_key",
                       "r_key"),
    "empty_input": ("SELECT c_key, c_name, count(*) AS n FROM cust WHERE c_balance > 100000 GROUP BY c_key, c_name",
                    None),  # estimated at a row: nothing chosen, answered all the same
}
#: An aggregation over one partitioned on ``c_key`` alone: by the strings alone (rows hashed by ``c_key`` are not
#: hashed by ``c_name``: an exchange of its own), by the same keys and more, renamed by the derived table (the rows
#: are hashed by ``c_key`` under its new name already: no second exchange).
ABOVE = {
    "regrouped_by_name": "SELECT c_name, count(*) AS customers, sum(b) AS b FROM (SELECT c_key, c_name, c_phone, "
                         "sum(c_balance) AS b FROM cust GROUP BY c_key, c_name, c_phone) AS t GROUP BY c_name",
    "regrouped_by_the_same_keys_and_more": "SELECT c_key, c_name, c_phone, n, count(*) AS c FROM (SELECT c_key, "
                                           "c_name, c_phone, count(*) AS n FROM cust GROUP BY c_key, c_name, c_phone) "
                                           "AS t GROUP BY c_key, c_name, c_phone, n",
}
#: Each keeps every key in its exchange.
ALL_KEYS = {
    "few_values": "SELECT c_nation, c_name, count(*) AS n FROM cust GROUP BY c_nation, c_name",
    "fixed_width_keys_only": "SELECT c_key, c_nation, count(*) AS n FROM cust GROUP BY c_key, c_nation",
    "float_key": "SELECT c_score, c_name, count(*) AS n FROM cust GROUP BY c_score, c_name",
    "distinct_under_group_by": "SELECT c_name, count(DISTINCT c_key) AS n FROM cust GROUP BY c_name",
}


@pytest.fixture(autouse=True)
def rule_on_small_tables(monkeypatch, without_unique_groupings):
    """These tables are a few hundred rows: the rule's floors lowered to fit them. ``c_key`` is unique (one
    NULL), and a GROUP BY over rows unique on its keys is no aggregation at all
    (:mod:`gpu_engine.optimizer.unique_groupings`): that rule is off here, or there is no exchange to choose."""
    monkeypatch.setattr(partial_steps, "MIN_ESTIMATED_ROWS", 0)
    monkeypatch.setattr(exchange_keys, "MIN_PARTITION_GROUPS", 100)


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def _optimized(session, sql: str):
    return optimize_plan(session.sql_plan(sql), session.statistics())


def _exchange_keys(plan) -> dict[str, tuple[str, ...]]:
    """Each grouping aggregation's id -> the keys of the repartition in front of it (after its partial step)."""
    out = {}
    for node in walk_plan(plan):
        if isinstance(node, AggregationNode) and node.grouping_keys:
            below = node.sources[0]
            if isinstance(below, LocalPartitionNode) and below.partition_kind == "repartition":
                out[node.id] = tuple(key.split("#")[0] for key in below.keys)  # names the planner made unique
    return out


@pytest.mark.parametrize("name", list(CHOSEN))
def test_the_exchange_hashes_the_chosen_key(name):
    sql, key = CHOSEN[name]
    session = session_with_tables(TABLES, device="cpu")
    plan = _optimized(session, sql)
    top = [n for n in walk_plan(plan) if isinstance(n, AggregationNode) and len(n.grouping_keys) > 1]
    assert len(top) == 1 and top[0].exchange_keys == ((key,) if key else ()), name
    exchanged = _exchange_keys(add_local_exchanges(plan, 2))
    expected = (key,) if key else top[0].grouping_keys
    assert exchanged[top[0].id] == expected, name
    assert add_local_exchanges(plan, 1) is plan  # one driver: no exchange, nothing to choose


@pytest.mark.parametrize("name", list(ALL_KEYS))
def test_the_exchange_keeps_every_key(name):
    session = session_with_tables(TABLES, device="cpu")
    plan = _optimized(session, ALL_KEYS[name])
    assert all(not n.exchange_keys for n in walk_plan(plan) if isinstance(n, AggregationNode)), name
    parallel = add_local_exchanges(plan, 2)
    grouped = {n.id: n.grouping_keys for n in walk_plan(parallel) if isinstance(n, AggregationNode)}
    for node_id, keys in _exchange_keys(parallel).items():
        assert set(keys) == set(grouped[node_id]) or name == "distinct_under_group_by", (name, keys)


def test_an_aggregation_above_exchanges_only_where_the_subset_does_not_partition_it():
    session = session_with_tables(TABLES, device="cpu")
    by_name = add_local_exchanges(_optimized(session, ABOVE["regrouped_by_name"]), 2)
    assert sorted(_exchange_keys(by_name).values()) == [("c_key",), ("c_name",)]
    same = add_local_exchanges(_optimized(session, ABOVE["regrouped_by_the_same_keys_and_more"]), 2)
    assert [n.keys for n in walk_plan(same) if isinstance(n, LocalPartitionNode)] == [("c_key",)]


def test_rows_hashed_by_the_chosen_key_need_no_second_exchange():
    session = session_with_tables(TABLES, splits=3, device="cpu", drivers=2, compile_mode="lowest")
    plan = (PlanBuilder(session.catalog).table_scan("cust").local_partition(["c_key"])
            .aggregation(["c_key", "c_name"], ["count(*) AS n"]).plan())
    exchanges = [n.keys for n in walk_plan(add_local_exchanges(plan, 2)) if isinstance(n, LocalPartitionNode)]
    assert exchanges == [("c_key", "c_name"), ("c_key",)]  # without the rule's choice: a second exchange
    chosen = replace(plan, exchange_keys=("c_key",))
    assert [n.keys for n in walk_plan(add_local_exchanges(chosen, 2)) if isinstance(n, LocalPartitionNode)] == [
        ("c_key",)]
    assert session.execute(chosen).num_rows == _CUSTOMERS


def test_the_choice_survives_serialization_and_explain():
    session = session_with_tables(TABLES, device="cpu")
    plan = _optimized(session, _Q10_SHAPE)
    assert plan_from_dict(plan_to_dict(plan)) == plan
    assert "exchange on [c_key]" in format_plan(add_local_exchanges(plan, 2))


def test_the_floor_keeps_every_key(monkeypatch):
    monkeypatch.setattr(exchange_keys, "MIN_PARTITION_GROUPS", 2048)
    session = session_with_tables(TABLES, device="cpu")
    assert all(not n.exchange_keys for n in walk_plan(_optimized(session, _Q10_SHAPE))
               if isinstance(n, AggregationNode))


def test_answers_match_duckdb(device_name, reference, request):
    # on cpu the aggregations the plan tests above choose for, not projections (unique_groupings); on the
    # simulator they would cost CI time
    if device_name == "cpu":
        request.getfixturevalue("without_unique_groupings")
    queries = [sql for sql, _ in CHOSEN.values()] + list(ABOVE.values())
    small = {"split_rows": 64, "drivers": 3, "batch_rows": 64}  # every group's rows on several drivers
    if device_name == "cuda-sim":  # the simulator runs one, over 3 splits (the plans are the same on every device)
        queries, small = [CHOSEN["customer_key_with_its_strings"][0]], {"splits": 3, "drivers": 2}
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest", **small)
    assert_queries_match_duckdb(session, reference, queries, ordered=order_key_columns, exact_types=True)
