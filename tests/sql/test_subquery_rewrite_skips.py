"""A SELECT whose clauses hold no query plans without the planner's subquery rewrites (issue 29).

Each of ``QueryPlanner._plan_select``'s subquery rewrites searched the SELECT's clauses for its shape on every
SELECT, and returned it unchanged (the same object) where it found none; most SELECTs hold no subquery. Now one
walk asks first: a SELECT without a subquery, derived table, EXISTS or IN/ANY/ALL (SELECT ...) plans with every
rewrite replaced by one that raises (fails where they still run), a WITH at its head does not count, and each
kind of nested query still reaches them. What the rewrites answer is tested in their own modules' tests.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from pass_spies import record_calls, refuse_calls

import gpu_engine.sql.planner as planner
from gpu_engine.sql import plan_sql

CATALOG = {"t": pa.schema([("k", pa.int32()), ("s", pa.string())]),
           "u": pa.schema([("k", pa.int32()), ("v", pa.float64())])}

REWRITES = ("with_subqueries_as_windows", "with_one_row_aggregates_merged", "with_correlated_aggregate_sets",
            "with_tuple_memberships", "with_subquery_values_as_comparisons", "with_quantified_comparisons",
            "with_join_condition_subqueries_computed", "with_subquery_values_joined")

PLAIN = ("WITH w AS (SELECT k, sum(v) AS total FROM u GROUP BY k) "
         "SELECT t.s, max(w.total) AS m, count(*) FROM t JOIN w ON t.k = w.k LEFT JOIN u ON u.k = t.k "
         "WHERE t.k > 1 OR t.s = 'a' GROUP BY t.s HAVING count(*) > 1 ORDER BY m DESC LIMIT 5")

NESTED = {
    "scalar subquery": "SELECT k, (SELECT max(v) FROM u WHERE u.k = t.k) FROM t",
    "derived table": "SELECT d.k FROM (SELECT k FROM u) d JOIN t ON t.k = d.k",
    "EXISTS": "SELECT k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k) OR k = 1",
    "IN (SELECT ...)": "SELECT k FROM t WHERE k IN (SELECT k FROM u) OR s = 'b'",
    "ALL (SELECT ...)": "SELECT k FROM t WHERE k > ALL (SELECT k FROM u)",
    "subquery in HAVING": "SELECT s, count(*) FROM t GROUP BY s HAVING count(*) > (SELECT count(*) FROM u)",
}


def test_a_select_without_nested_queries_plans_without_the_subquery_rewrites(monkeypatch):
    refuse_calls(monkeypatch, planner, REWRITES, "ran on a SELECT without a nested query")
    assert plan_sql(PLAIN, CATALOG) is not None


@pytest.mark.parametrize("kind", list(NESTED))
def test_each_nested_query_reaches_the_rewrites(monkeypatch, kind):
    called = record_calls(monkeypatch, planner, REWRITES)
    plan_sql(NESTED[kind], CATALOG)
    assert set(called) == set(REWRITES)
