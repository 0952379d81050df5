"""A DISTINCT under a GROUP BY is repartitioned by the GROUP BY's keys (``local_exchanges.distinct_partition_keys``).

The plan tests check that with several drivers the DISTINCT's exchange hashes by the outer keys only and the
outer aggregation stays one SINGLE step with no exchange of its own (``count(DISTINCT x) GROUP BY keys``, a
GROUP BY over a SELECT DISTINCT), and that a global ``count(DISTINCT x)`` keeps its exchanges. The answers are
DuckDB's on cpu and cuda-sim with two drivers over three splits: NULL keys and NULL arguments, an outer key of
two values, an input filtered to nothing, and a GROUP BY over a DISTINCT of the same keys (in place before).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.planning.local_exchanges import add_local_exchanges
from gpu_engine.plans.nodes import AggregationNode, AggregationStep, LocalPartitionNode, walk_plan
from gpu_engine.sql.ordering import order_key_columns

_RNG = np.random.default_rng(16)
_ROWS = 900
T = pa.table({
    "brand": pa.array([None if k % 41 == 2 else f"Brand#{v}" for k, v in enumerate(_RNG.integers(1, 6, _ROWS))]),
    "size": pa.array([None if k % 37 == 4 else int(v) for k, v in enumerate(_RNG.integers(1, 9, _ROWS))], pa.int32()),
    "flag": pa.array(["AB"[v] for v in _RNG.integers(0, 2, _ROWS)]),
    "supp": pa.array([None if k % 29 == 6 else int(v) for k, v in enumerate(_RNG.integers(0, 60, _ROWS))],
                     pa.int64()),
    "qty": pa.array(_RNG.integers(0, 20, _ROWS), pa.int64()),
})
TABLES = {"t": T}

#: Each has a DISTINCT hashed by its GROUP BY's keys, and that GROUP BY without an exchange.
PARTITIONED = {
    "count_distinct": "SELECT brand, size, count(DISTINCT supp) AS n FROM t GROUP BY brand, size",
    "sum_distinct_filtered": "SELECT brand, sum(DISTINCT qty) AS s, count(DISTINCT qty) AS n FROM t "
                             "WHERE size > 2 GROUP BY brand",
    "two_values": "SELECT flag, count(DISTINCT supp) AS n FROM t GROUP BY flag",
    "over_select_distinct": "SELECT brand, count(*) AS n, sum(supp) AS s FROM (SELECT DISTINCT brand, supp FROM t) d "
                            "GROUP BY brand",
    "empty": "SELECT brand, count(DISTINCT supp) AS n FROM t WHERE qty > 100 GROUP BY brand",
}
#: Each keeps the usual exchanges.
UNCHANGED = {
    "global_count_distinct": "SELECT count(DISTINCT supp) AS n FROM t",
}
#: Already in place before the rule (the DISTINCT's exchange hashes by the same keys): answers only.
SAME_KEYS = {"same_keys": "SELECT brand, supp, count(*) AS n FROM (SELECT DISTINCT brand, supp FROM t) d "
                          "GROUP BY brand, supp"}
_SIMULATED = ("count_distinct", "over_select_distinct", "empty")


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def _parallel(text):
    return add_local_exchanges(session_with_tables(TABLES, device="cpu").sql_plan(text), 2)


@pytest.mark.parametrize("name", list(PARTITIONED))
def test_the_distinct_is_hashed_by_the_outer_keys(name):
    plan = _parallel(PARTITIONED[name])
    outer = [n for n in walk_plan(plan) if isinstance(n, AggregationNode) and n.aggregates and n.grouping_keys]
    assert len(outer) == 1 and outer[0].step is AggregationStep.SINGLE, name
    inner = outer[0].source
    assert isinstance(inner, AggregationNode) and not inner.aggregates, name  # no exchange between the two
    [exchange] = [n for n in walk_plan(inner) if isinstance(n, LocalPartitionNode) and n.id == f"{inner.id}.exchange"]
    assert set(exchange.keys) == set(outer[0].grouping_keys), name


@pytest.mark.parametrize("name", list(UNCHANGED))
def test_other_shapes_keep_their_exchanges(name):
    plan = _parallel(UNCHANGED[name])
    tops = [n for n in walk_plan(plan) if isinstance(n, AggregationNode) and n.aggregates and n.step.output_is_final]
    assert tops and all(isinstance(n.source, LocalPartitionNode) for n in tops), name


def test_answers_match_duckdb(device_name, reference):
    queries = {**PARTITIONED, **UNCHANGED, **SAME_KEYS}
    if device_name == "cuda-sim":  # the simulator runs a few (the plans are the same on every device)
        queries = {k: queries[k] for k in _SIMULATED}
    session = session_with_tables(TABLES, splits=3, device=device_name, drivers=2, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference, list(queries.values()), ordered=order_key_columns, exact_types=True)
