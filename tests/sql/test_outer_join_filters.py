"""A LEFT JOIN's NULL-extended item filtered by what the WHERE keeps of the key it equals
(:mod:`gpu_engine.sql.outer_join_filters`): same answers as DuckDB, and the filter reaches the item's grouping.

Keys with NULLs on both sides, keys the WHERE drops on the preserved side with
matches on the other, chained LEFT JOINs (a filter passed on), conditions that
must not move (on a non-key column, under OR, on the NULL-extended side itself).
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables
from gpu_engine.plans.nodes import AggregationNode, FilterNode, HashJoinNode, walk_plan

S = pa.table({"y": pa.array([2000, 2000, 2001, 2001, None, 2002, 2000], pa.int32()),
              "k": pa.array([1, 2, 1, 3, 1, 2, None], pa.int64()),
              "q": pa.array([5, 6, 7, 8, 9, 10, 11], pa.int64())})
W = pa.table({"wy": pa.array([2000, 2001, 2001, 2002, None, 2000, 2000, 1999], pa.int32()),
              "wk": pa.array([1, 1, 3, 2, 1, 2, None, 1], pa.int64()),
              "wq": pa.array([1, 2, 3, 4, 5, 6, 7, 8], pa.int64())})
C = pa.table({"cy": pa.array([2000, 2001, 2000, None], pa.int32()),
              "cq": pa.array([100, 200, 300, 400], pa.int64())})
TABLES = {"s": S, "w": W, "c": C}

_W_GROUPED = "(SELECT wy, wk, sum(wq) AS wq FROM w GROUP BY wy, wk) ws"
#: q78's shape: the WHERE keeps one year of the preserved side; the grouped right side needs only that year.
YEAR_OF_GROUPED = (f"SELECT s.y, s.k, s.q, ws.wq FROM s LEFT JOIN {_W_GROUPED} ON ws.wy = s.y AND ws.wk = s.k "
                   "WHERE s.y = 2000")
QUERIES = [
    YEAR_OF_GROUPED,
    f"SELECT s.y, s.k, ws.wq FROM s LEFT JOIN {_W_GROUPED} ON s.y = ws.wy WHERE s.y BETWEEN 2000 AND 2001 "
    "AND s.k IN (1, 2)",
    "SELECT s.y, s.k, w.wq FROM s LEFT JOIN w ON w.wy = s.y AND w.wk = s.k WHERE s.y IN (2000, 2002) AND s.k <> 2",
    # chained: c equals w's year, w equals s's year
    "SELECT s.q, w.wq, c.cq FROM s LEFT JOIN w ON w.wy = s.y LEFT JOIN c ON c.cy = w.wy WHERE s.y = 2001",
    # must not move: a non-key column, an OR, a condition on the NULL-extended side, an IS NULL anti join
    "SELECT s.q, w.wq FROM s LEFT JOIN w ON w.wy = s.y WHERE s.q > 6",
    "SELECT s.q, w.wq FROM s LEFT JOIN w ON w.wy = s.y WHERE s.y = 2000 OR s.k = 3",
    "SELECT s.q, w.wq FROM s LEFT JOIN w ON w.wy = s.y WHERE coalesce(w.wk, 0) < 2 AND s.y >= 2001",
    "SELECT s.q FROM s LEFT JOIN w ON w.wk = s.k AND w.wy = s.y WHERE w.wk IS NULL AND s.y = 2000",
]
SIMULATED = QUERIES[:1] + QUERIES[3:4]


def test_answers_match_duckdb(device_name, reference):
    queries = QUERIES if device_name == "cpu" else SIMULATED
    session = session_with_tables(TABLES, device=device_name, drivers=2, split_rows=3, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference, queries)


def test_the_null_extended_side_is_filtered_before_its_grouping():
    """The derived filter goes below the grouping in the plan a Session runs (the optimizer's pushdown places it;
    the SQL plan filters the derived table above it)."""
    from gpu_engine.optimizer import optimize_plan

    plan = optimize_plan(session_with_tables(TABLES, device="cpu").sql_plan(YEAR_OF_GROUPED))
    [join] = [n for n in walk_plan(plan) if isinstance(n, HashJoinNode)]
    [grouped] = [n for n in walk_plan(join) if isinstance(n, AggregationNode)]
    assert any(isinstance(n, FilterNode) and "2000" in str(n.predicate) for n in walk_plan(grouped))
