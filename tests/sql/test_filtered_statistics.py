"""A filter's estimate pins the columns it fixes (:mod:`gpu_engine.sql.filtered_statistics`).

``d_year = 2001`` leaves one distinct year, ``IN`` its list's length, a
BETWEEN its share of the values; the planner's grouping estimates read
those counts (the SQL planner's join ordering here; the typed rules'
estimates, :mod:`gpu_engine.optimizer.cardinality`, pin the same way), so
sales ⋈ date_dim under a year filter grouped by ``(customer key, d_year)`` is a
reduction and eager aggregation (:mod:`gpu_engine.optimizer.eager_aggregation`)
applies (TPC-DS q4/q11/q74's ``year_total`` shape), answering as DuckDB does.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import sqlglot

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.optimizer import eager_aggregation, optimize_plan
from gpu_engine.plans.nodes import AggregationNode, HashJoinNode, walk_plan
from gpu_engine.sql.filtered_statistics import pinned_statistics
from gpu_engine.sql.planning_context import Relation
from gpu_engine.sql.statistics import ColumnStatistics

_RNG = np.random.default_rng(31)
DAYS = pa.table({"d_key": pa.array(np.arange(400), pa.int32()),
                 "d_year": pa.array(1990 + np.arange(400) // 10, pa.int32())})
SALES = pa.table({"s_day": pa.array(_RNG.integers(0, 400, 3000), pa.int32()),
                  "s_cust": pa.array(_RNG.integers(0, 60, 3000), pa.int32()),
                  "s_amount": pa.array(_RNG.integers(0, 1000, 3000), pa.int64())})
CUST = pa.table({"c_key": pa.array(np.arange(60), pa.int32()),
                 "c_name": pa.array([f"name{k % 50}" for k in range(60)]),
                 "c_country": pa.array([f"country{k % 7}" for k in range(60)])})
YEAR_TOTAL = ("SELECT c_name, c_country, d_year, sum(s_amount) AS total FROM sales, days, cust "
              "WHERE s_day = d_key AND s_cust = c_key AND d_year = 2001 GROUP BY c_name, c_country, d_year")


def _relation() -> Relation:
    return Relation(node=None, columns={("d", "d_year"): "y", ("d", "d_key"): "k"}, aliases=frozenset({"d"}),
                    rows=400.0, stats={"y": ColumnStatistics(40.0, 1990, 2029), "k": ColumnStatistics(400.0, 0, 399)})


def _distinct(condition: str, rows: float) -> dict[str, float]:
    conjuncts = [sqlglot.parse_one(condition, read="duckdb")]
    return {name: round(stats.ndv, 6) for name, stats in pinned_statistics(_relation(), conjuncts, rows).items()}


def test_a_filter_pins_the_distinct_values_of_the_column_it_fixes():
    assert _distinct("d.d_year = 2001", 10) == {"y": 1.0, "k": 10.0}
    assert _distinct("2001 = d.d_year", 10) == {"y": 1.0, "k": 10.0}
    assert _distinct("d.d_year IN (2001, 2002, 2003)", 30) == {"y": 3.0, "k": 30.0}
    assert _distinct("d.d_key BETWEEN 0 AND 99", 100)["k"] == pytest.approx(400 * 99 / 399, abs=1e-5)  # its share
    # not pinned: only the cap at the rows
    assert _distinct("d.d_year NOT IN (2001, 2002)", 380) == {"y": 40.0, "k": 380.0}
    assert _distinct("d.d_year + 1 = 2001", 10) == {"y": 10.0, "k": 10.0}
    assert _distinct("d.d_year = d.d_key", 10) == {"y": 10.0, "k": 10.0}


def test_a_year_filter_makes_the_year_total_shape_aggregate_below_its_joins(monkeypatch):
    # tiny tables: without the pre-aggregation set-up cost (their saving is rows, never its 10,000 units)
    monkeypatch.setattr(eager_aggregation, "PRE_AGGREGATION_SETUP", 0.0)
    monkeypatch.setattr(eager_aggregation, "DICTIONARY_BUILD_MAX_ROWS", 0)  # strings as a large build side's
    tables = {"sales": SALES, "days": DAYS, "cust": CUST}
    session = session_with_tables(tables, device="cpu", fuse=False)  # static kernels only: no compile here
    plan = optimize_plan(session.sql_plan(YEAR_TOTAL), session.statistics())
    [pre] = {node for join in walk_plan(plan) if isinstance(join, HashJoinNode)
             for node in walk_plan(join) if isinstance(node, AggregationNode)}
    assert sorted(pre.grouping_keys) == ["d_year", "s_cust"]
    with duckdb_with_tables(tables) as reference:
        assert_same_rows(session.sql(YEAR_TOTAL), duckdb_table(reference, YEAR_TOTAL))
