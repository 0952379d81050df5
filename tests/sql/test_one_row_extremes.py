"""A grouped query's one-row FROM item read through max/min/any_value: joined after the GROUP BY, against DuckDB.

:mod:`gpu_engine.sql.one_row_extremes` turns ``FROM t, r ... GROUP BY k ... max(r.m)`` (r one row: TPC-DS q23's
``max_store_sales``) into a scalar subquery read after the aggregation. Checked: the answers (a NULL one-row
value, no input rows, the item first in FROM, a CTE and a derived table, beside a keyed join) and the shapes left
as written (ROLLUP's grand total, FILTER, the column in WHERE, no GROUP BY: each can read the value over no rows),
and that the lifted plans join the one row above every grouped aggregation.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

T = pa.table({
    "q": pa.array([1, 5, 12, 25, 33, None, 41, 7, 18, 25, 60, 3], pa.int32()),
    "p": pa.array([1.5, 2.0, None, 4.25, 2.0, 3.0, 9.0, 2.0, 1.5, 4.25, 7.0, None], pa.float64()),
    "d": pa.array([10, 0, 30, None, 50, 60, 70, 10, 30, 0, 5, 8], pa.int64()),
    "k": pa.array([1, 2, 3, 1, 2, 3, 1, 2, 3, 1, None, 2], pa.int64()),
})
U = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "a"])})
TABLES = {"t": T, "u": U}

HAVING = ("SELECT t.k, sum(q) s FROM t, (SELECT max(d) m FROM t) r GROUP BY t.k "
          "HAVING sum(q) > 0.5 * max(r.m)")
CTE = ("WITH mx AS (SELECT max(q) m, min(p) n, count(*) c FROM t WHERE d > 5) "
       "SELECT k, max(m) a, min(n) b, any_value(c) c, count(*) rows, sum(d) s FROM t, mx GROUP BY k")
LIFTED = [
    HAVING, CTE,
    # the one-row value NULL (an aggregate over no rows), and no input rows at all
    "SELECT k, max(r.m) m, count(*) n FROM t, (SELECT max(d) m FROM t WHERE q > 1000) r GROUP BY k",
    "SELECT k, max(r.m) m, count(*) n FROM t, (SELECT max(d) m FROM t) r WHERE t.q > 1000 GROUP BY k",
    # the item first in FROM, beside a keyed join, read in the SELECT list and in HAVING
    "SELECT u.name, sum(t.p) s, max(r.m) + 1 m1 FROM (SELECT avg(p) m FROM t) r, t, u WHERE t.k = u.k "
    "GROUP BY u.name HAVING sum(t.p) > min(r.m)",
]
KEPT = [
    # each can read the one-row value over no rows, where max gives NULL
    "SELECT k, max(r.m) m, count(*) n FROM t, (SELECT max(d) m FROM t) r WHERE t.q > 1000 GROUP BY ROLLUP (k)",
    "SELECT k, max(r.m) FILTER (WHERE q > 30) m FROM t, (SELECT max(d) m FROM t) r GROUP BY k",
    "SELECT max(r.m) m, count(*) n FROM t, (SELECT max(d) m FROM t) r WHERE t.q > 1000",
    # the column read outside an extreme
    "SELECT k, max(r.m) m, count(*) n FROM t, (SELECT max(d) m FROM t) r WHERE t.d < r.m GROUP BY k",
    "SELECT k, sum(q * r.m) m FROM t, (SELECT max(d) m FROM t) r GROUP BY k",
]


def test_one_row_extremes_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, device="cpu", drivers=2, split_rows=5, compile_mode="lowest")  # CI time
    assert_queries_match_duckdb(session, reference, LIFTED + KEPT)


def test_one_row_extremes_match_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")  # CI time: no kernel generated
    assert_queries_match_duckdb(session, reference, [HAVING])


def _grouped_aggregations_over_a_cross_join(plan) -> int:
    from gpu_engine.plans.nodes import AggregationNode, NestedLoopJoinNode, walk_plan

    return sum(1 for node in walk_plan(plan) if isinstance(node, AggregationNode) and node.grouping_keys
               and any(isinstance(below, NestedLoopJoinNode) for below in walk_plan(node)))


@pytest.mark.parametrize("sql", LIFTED)
def test_the_one_row_item_is_joined_after_the_aggregation(sql):
    session = session_with_tables(TABLES, device="cpu")
    assert _grouped_aggregations_over_a_cross_join(session.sql_plan(sql)) == 0


@pytest.mark.parametrize("sql", KEPT[:2])
def test_an_extreme_that_can_see_no_rows_keeps_the_cross_join(sql):
    session = session_with_tables(TABLES, device="cpu")
    assert _grouped_aggregations_over_a_cross_join(session.sql_plan(sql)) >= 1
