"""LEFT JOINs whose NULL-extended rows a condition rejects become inner joins; inner joins commute with LEFT joins.

Two planner rules (:mod:`gpu_engine.sql.outer_joins`, :func:`gpu_engine.sql.join_ordering.join_in_order`):

* ``fact LEFT JOIN ret ..., reason WHERE r_reason = reason_key`` keeps no row
  whose ``ret`` columns are NULL: it is an inner join, which the greedy order
  starts at the selective table (TPC-DS q93 probed every sale into the returns);
* ``fact LEFT JOIN ret ON ..., dim WHERE f_dim = d_key AND d_kind = 1`` joins
  the dimension to the fact before the returns (TPC-DS q40, q80), since that
  inner join reads no LEFT-joined table.

The plans are checked by shape, the answers against DuckDB, with conditions
that reject NULLs and conditions that must not (``IS NULL``, ``coalesce``,
``CASE``, an OR with a branch that keeps NULLs, a NOT over an AND).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables, optimized_sql_plan

_RNG = np.random.default_rng(11)
FACT = pa.table({
    "f_order": pa.array(np.arange(300), pa.int64()),
    "f_dim": pa.array([None if k % 17 == 0 else int(v) for k, v in enumerate(_RNG.integers(0, 40, 300))], pa.int32()),
    "f_qty": pa.array(_RNG.integers(0, 10, 300), pa.int32()),
})
RETURNS = pa.table({  # some orders returned twice, some never, one return of no order, NULL reasons and amounts
    "r_order": pa.array([int(v) for v in _RNG.integers(0, 320, 120)] + [None], pa.int64()),
    "r_reason": pa.array([None if k % 9 == 0 else int(v) for k, v in enumerate(_RNG.integers(0, 6, 121))], pa.int32()),
    "r_amount": pa.array([None if k % 7 == 0 else float(v) for k, v in enumerate(_RNG.integers(0, 50, 121))]),
})
REASON = pa.table({"reason_key": pa.array(np.arange(6), pa.int32()),
                   "reason_desc": pa.array(["late", "broken", "wrong", "late", "gift", "other"])})
DIM = pa.table({"d_key": pa.array(np.arange(40), pa.int32()),
                "d_kind": pa.array([k % 4 for k in range(40)], pa.int32())})
TABLES = {"fact": FACT, "ret": RETURNS, "reason": REASON, "dim": DIM}

LEFT = "FROM fact LEFT JOIN ret ON r_order = f_order"
#: Each rejects the NULL-extended ``ret`` rows: the LEFT JOIN is an inner join.
REJECTING = {
    "equality_with_a_table": f"SELECT f_order, r_amount {LEFT}, reason WHERE r_reason = reason_key "
                             "AND reason_desc = 'late'",
    "range": f"SELECT count(*) AS n, sum(f_qty) AS q {LEFT} WHERE r_amount > 10",
    "arithmetic": f"SELECT f_order, r_amount {LEFT} WHERE r_amount * 2 + f_qty < 40",
    "is_not_null": f"SELECT count(*) AS n {LEFT} WHERE r_reason IS NOT NULL",
    "between": f"SELECT f_qty, count(*) AS n {LEFT} WHERE r_amount BETWEEN 5 AND 30 GROUP BY f_qty",
    "in_list": f"SELECT f_order {LEFT} WHERE r_reason IN (1, 2)",
    "not_in_list": f"SELECT count(*) AS n {LEFT} WHERE r_reason NOT IN (1, 2)",
    "or_of_rejecting": f"SELECT count(*) AS n {LEFT} WHERE r_amount > 40 OR r_reason = 3",
    "inner_on_after": f"SELECT f_order, reason_desc {LEFT} JOIN reason ON reason_key = r_reason",
    "chain": "SELECT count(*) AS n FROM fact LEFT JOIN ret ON r_order = f_order "
             "LEFT JOIN reason ON reason_key = r_reason WHERE reason_desc = 'broken'",
}
#: Each keeps some NULL-extended row: the LEFT JOIN stays.
KEEPING = {
    "is_null": f"SELECT count(*) AS n {LEFT} WHERE r_order IS NULL",
    "coalesce": f"SELECT count(*) AS n, sum(f_qty) AS q {LEFT} WHERE coalesce(r_amount, 0) < 5",
    "case": f"SELECT count(*) AS n {LEFT} WHERE CASE WHEN r_amount IS NULL THEN f_qty > 4 ELSE r_amount > 20 END",
    "or_with_keeping_branch": f"SELECT count(*) AS n {LEFT} WHERE r_amount > 40 OR f_qty = 3",
    "not_of_and": f"SELECT count(*) AS n {LEFT} WHERE NOT (r_amount > 10 AND f_qty > 3)",
    "left_on_only": "SELECT count(*) AS n FROM fact LEFT JOIN ret ON r_order = f_order AND r_amount > 10",
    "chain_keeps_first": "SELECT count(*) AS n, count(r_order) AS r FROM fact LEFT JOIN ret ON r_order = f_order "
                         "LEFT JOIN reason ON reason_key = r_reason AND reason_desc = 'broken'",
}
#: Inner joins after a LEFT JOIN: moved before it when they read no LEFT-joined table.
COMMUTING = {
    "dimension_after_left": f"SELECT d_kind, count(*) AS n, sum(r_amount) AS s {LEFT}, dim "
                            "WHERE f_dim = d_key AND d_kind = 1 GROUP BY d_kind",
    "join_on_after_left": f"SELECT f_order, r_amount {LEFT} JOIN dim ON d_key = f_dim AND d_kind = 2",
    "where_over_both": f"SELECT f_order, r_amount, d_kind {LEFT}, dim WHERE f_dim = d_key AND "
                       "(r_amount IS NULL OR d_kind = 3)",
    "anti_pattern": f"SELECT d_kind, count(*) AS n {LEFT} JOIN dim ON f_dim = d_key WHERE r_order IS NULL "
                    "GROUP BY d_kind",
}


def _joins(plan) -> list:
    from gpu_engine.plans.nodes import HashJoinNode, NestedLoopJoinNode, walk_plan

    return [node for node in walk_plan(plan) if isinstance(node, (HashJoinNode, NestedLoopJoinNode))]


def _scans(plan) -> set[str]:
    from gpu_engine.plans.nodes import TableScanNode, walk_plan

    return {node.table_name for node in walk_plan(plan) if isinstance(node, TableScanNode)}


def _first_join_tables(plan) -> set[str]:
    """Return the tables scanned under the join that has no join below it (the one joined first)."""
    joins = _joins(plan)
    first = next(j for j in joins if not any(other is not j and other in _joins(j) for other in joins))
    return _scans(first)


@pytest.mark.parametrize("name", list(REJECTING))
def test_a_left_join_whose_null_rows_are_rejected_is_planned_inner(name):
    plan = optimized_sql_plan(session_with_tables(TABLES, device="cpu"), REJECTING[name])
    assert all(j.join_type != "left" and j.join_type != "right" for j in _joins(plan)), name


@pytest.mark.parametrize("name", list(KEEPING))
def test_a_left_join_whose_null_rows_may_stay_stays_outer(name):
    plan = optimized_sql_plan(session_with_tables(TABLES, device="cpu"), KEEPING[name])
    assert any(j.join_type in ("left", "right") for j in _joins(plan)), name


def test_the_selective_table_is_joined_first_once_the_left_join_is_inner():
    plan = optimized_sql_plan(session_with_tables(TABLES, device="cpu"), REJECTING["equality_with_a_table"])
    assert _first_join_tables(plan) == {"ret", "reason"}


@pytest.mark.parametrize("name", ["dimension_after_left", "join_on_after_left"])
def test_an_inner_join_reading_no_left_joined_table_joins_before_the_left_join(name):
    plan = optimized_sql_plan(session_with_tables(TABLES, device="cpu"), COMMUTING[name])
    assert _first_join_tables(plan) == {"fact", "dim"}
    assert [j.join_type for j in _joins(plan)].count("inner") == 1


def test_an_inner_join_reading_the_left_joined_table_stays_after_it():
    sql = f"SELECT f_order {LEFT} JOIN reason ON reason_key = r_reason OR reason_key IS NULL"
    plan = optimized_sql_plan(session_with_tables(TABLES, device="cpu"), sql)
    assert "reason" not in _first_join_tables(plan)


def test_answers_match_duckdb(device_name, reference):
    queries = {**REJECTING, **KEEPING, **COMMUTING}
    if device_name == "cuda-sim":  # the simulator runs a few (the plans are the same on every device)
        queries = {k: queries[k] for k in ("equality_with_a_table", "is_null", "dimension_after_left")}
    # cpu runs them all unfused (the join plans are under test; fused, each query compiled generated kernels of its
    # own: CI time), the simulator its few fused.
    session = session_with_tables(TABLES, splits=3, device=device_name, drivers=2, fuse=device_name != "cpu")
    assert_queries_match_duckdb(session, reference, list(queries.values()))
