"""A correlated ``(SELECT v ... [ORDER BY x LIMIT 1 [OFFSET n]])`` as a typed ScalarSubquery over its rows per key.

In a SELECT list, ORDER BY, HAVING or an aggregate's argument, the SQL planner builds such a subquery (correlated by
column equalities, no aggregate) as a :class:`~gpu_engine.plans.subqueries.ScalarSubquery` over the subquery's
first (n+1-th) row per correlation key (a row_number() per key), which the optimizer's decorrelation rule joins on
the keys; an outer row meeting no row reads NULL, one meeting several fails as in DuckDB (checked on every joined
row, a CASE branch no row takes too). It was a LEFT-joined derived table of the sqlglot tree. Against DuckDB: NULL
keys, duplicate outer keys, an empty subquery input, OFFSET past a key's rows, DESC NULLS LAST.
"""

from __future__ import annotations

import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.errors import ExecutionError
from gpu_engine.optimizer import required_rewrites
from gpu_engine.plans.expressions import walk
from gpu_engine.plans.nodes import AggregationNode, FilterNode, ProjectNode, walk_plan
from gpu_engine.plans.subqueries import ScalarSubquery
from subquery_tables import TABLES

SQL = [
    "SELECT k, (SELECT w FROM u WHERE u.k = t.k ORDER BY w LIMIT 1) AS f FROM t",
    "SELECT k, (SELECT w FROM u WHERE u.k = t.k ORDER BY w DESC NULLS LAST LIMIT 1 OFFSET 1) AS f FROM t",
    "SELECT k, (SELECT w FROM e WHERE e.k = t.k LIMIT 1) AS f FROM t",
    "SELECT k, sum(v) AS s, (SELECT w FROM u WHERE u.k = t.k ORDER BY w LIMIT 1) AS f FROM t GROUP BY k",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING sum(v) > (SELECT w FROM u WHERE u.k = t.k ORDER BY w LIMIT 1)",
    "SELECT k, sum(CASE WHEN v > (SELECT w FROM u WHERE u.k = t.k ORDER BY w LIMIT 1) THEN 1 ELSE 0 END) AS s "
    "FROM t GROUP BY k",
]
#: no LIMIT: one row a key or NULL, DuckDB's error where an outer row meets several (checked on every joined row)
ROWS = [
    "SELECT k, (SELECT w FROM u WHERE u.k = t.k AND u.w > 10) AS f FROM t",
    "SELECT k, (SELECT w * 2 FROM s WHERE s.k = t.k) AS f FROM t",
    "SELECT k, sum(v) AS s, (SELECT w FROM u WHERE u.k = t.k AND u.w > 10) AS f FROM t GROUP BY k",
]
SEVERAL = ["SELECT k, (SELECT w FROM u WHERE u.k = t.k) AS f FROM t",
           "SELECT k, CASE WHEN k = 1 THEN 0 ELSE (SELECT w FROM u WHERE u.k = t.k LIMIT 2) END AS f FROM t"]
ORDERED = ("SELECT k, v FROM t ORDER BY (SELECT w FROM u WHERE u.k = t.k ORDER BY w LIMIT 1) NULLS FIRST, "
           "v NULLS FIRST")


@pytest.mark.parametrize("optimize", [True, False])
def test_limit_one_subqueries_answer_as_duckdb(optimize):
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, optimize=optimize)
    with duckdb_with_tables(TABLES) as reference:
        for sql in SQL + ROWS:
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
        for sql in SEVERAL:
            with pytest.raises(Exception, match="More than one row returned by a subquery"):
                duckdb_table(reference, sql)
            with pytest.raises(ExecutionError, match="More than one row returned by a subquery"):
                session.sql(sql)
        assert session.sql(ORDERED).to_pylist() == duckdb_table(reference, ORDERED).to_pylist()


def test_a_limit_one_subquery_answers_as_duckdb_on_cuda_sim():
    session = session_with_tables(TABLES, split_rows=3, device="cuda-sim", drivers=1, compile_mode="lowest")
    with duckdb_with_tables(TABLES) as reference:
        assert_same_rows(session.sql(SQL[1]), duckdb_table(reference, SQL[1]))


def test_the_sql_plan_holds_a_typed_subquery_not_a_join():
    session = session_with_tables(TABLES, device="cpu")
    for sql in (SQL[0], SQL[4], ROWS[0], SEVERAL[1]):
        plan = session.sql_plan(sql)
        held = [e for n in walk_plan(plan) if isinstance(n, (ProjectNode, FilterNode))
                for x in (n.expressions if isinstance(n, ProjectNode) else (n.predicate,)) for e in walk(x)
                if isinstance(e, ScalarSubquery)]
        assert len(held) == 1 and held[0].correlation is not None, sql


def test_the_rule_joins_the_first_row_per_key_without_grouping_it_again():
    session = session_with_tables(TABLES, device="cpu")
    for sql in SQL[:3]:  # LIMIT 1, LIMIT 1 OFFSET 1: one row_number a key, known unique (no any_value + count)
        plan = required_rewrites(session.sql_plan(sql))
        assert not [n for n in walk_plan(plan) if isinstance(n, AggregationNode)], sql
