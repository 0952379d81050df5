"""Scalar subqueries correlated by column equalities, of every shape, bound once into a typed ScalarSubquery.

``gpu_engine.sql.correlated_scalar_rows`` binds a correlated ``(SELECT ...)`` with GROUP BY, HAVING, DISTINCT,
LIMIT / OFFSET over an aggregate, a window as its value, or rows without aggregate — in the SELECT list, ORDER BY,
HAVING, an aggregate's argument, a WHERE comparison and a WHERE conjunct under OR / NOT / CASE — into its rows per
correlation key, a :class:`~gpu_engine.plans.subqueries.ScalarSubquery` the optimizer's decorrelation rule joins.
A window's inputs and a GROUP BY key holding such a subquery (an uncorrelated one too) are typed as well. These
forms were LEFT-joined derived tables of the sqlglot tree (``sql/subquery_values.py``); a QUALIFY in WHERE's, a
window over an aggregating query's groups and an uncorrelated GROUP BY key were refused. Against DuckDB: NULL keys, keys without rows (COUNT's 0, a failed HAVING's NULL), DuckDB's "More than one
row" error; the plan holds the typed subquery before the rules run.
"""

from __future__ import annotations

import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.errors import ExecutionError
from gpu_engine.optimizer.decorrelation import holds_subqueries
from subquery_tables import TABLES

#: (query, whether the plan holds a correlated ScalarSubquery before the rules: those LEFT-joined on the tree before)
SQL = [
    # GROUP BY / ORDER BY ... LIMIT over groups, per key
    "SELECT k, (SELECT sum(w) FROM u WHERE u.k = t.k GROUP BY u.w % 2 ORDER BY 1 LIMIT 1) AS x FROM t",
    # HAVING over one aggregate row: NULL where it fails, COUNT's 0 where a key has no rows and it holds
    "SELECT k, (SELECT count(*) FROM u WHERE u.k = t.k HAVING count(*) < 2) AS c FROM t",
    "SELECT k, (SELECT sum(w) FROM u WHERE u.k = t.k HAVING count(*) > 1) AS s FROM t",
    # DISTINCT and LIMIT over one aggregate row change nothing; OFFSET 1 cuts it
    "SELECT k, (SELECT DISTINCT max(w) FROM u WHERE u.k = t.k LIMIT 3) AS m, "
    "(SELECT count(*) FROM u WHERE u.k = t.k OFFSET 1) AS n FROM t",
    # DISTINCT rows, one a key
    "SELECT k, (SELECT DISTINCT w > 1 FROM u WHERE u.k = t.k) AS d FROM t",
    # a window as the value, per key
    "SELECT k, (SELECT sum(w) OVER (ORDER BY w DESC) FROM u WHERE u.k = t.k ORDER BY 1 LIMIT 1) AS r FROM t",
    # an aggregating outer query, ORDER BY and HAVING
    "SELECT k, sum(v) AS s, (SELECT max(w) FROM u WHERE u.k = t.k GROUP BY u.w ORDER BY 1 DESC LIMIT 1) AS m "
    "FROM t GROUP BY k",
    "SELECT k, v FROM t ORDER BY (SELECT count(*) FROM u WHERE u.k = t.k HAVING count(*) > 0) NULLS FIRST, k, v",
    "SELECT k, count(*) AS c FROM t GROUP BY k HAVING coalesce((SELECT sum(w) FROM u WHERE u.k = t.k "
    "GROUP BY u.k), 0) < 20",
    # WHERE: a comparison with rows, GROUP BY, QUALIFY; conjuncts under OR, NOT and CASE
    "SELECT k, v FROM t WHERE v > (SELECT w FROM u WHERE u.k = t.k ORDER BY w LIMIT 1 OFFSET 1)",
    "SELECT k, v FROM t WHERE v > (SELECT max(w) * 2 FROM u WHERE u.k = t.k GROUP BY u.w ORDER BY 1 LIMIT 1)",
    "SELECT k, v FROM t WHERE v > (SELECT w FROM u WHERE u.k = t.k QUALIFY row_number() OVER (ORDER BY w) = 1)",
    "SELECT k, v FROM t WHERE v = 10 OR v < (SELECT max(w) FROM u WHERE u.k = t.k)",
    "SELECT k, v FROM t WHERE NOT (v < (SELECT count(*) * 20 FROM u WHERE u.k = t.k))",
    "SELECT k, v FROM t WHERE CASE WHEN v > 25 THEN (SELECT count(*) FROM u WHERE u.k = t.k) = 0 ELSE true END",
    "SELECT k, v FROM t WHERE v IS NULL OR (SELECT w FROM u WHERE u.k = t.k ORDER BY w DESC LIMIT 1) > 4",
    # coalesce is desugared to a CASE naming the subquery twice: one subquery still
    "SELECT k, v FROM t WHERE NOT (coalesce((SELECT w FROM u WHERE u.k = t.k QUALIFY row_number() OVER (ORDER BY w) "
    "= 1), 0) < v)",
    # a window's argument, PARTITION BY, FILTER; over an aggregating query's groups
    "SELECT k, v, sum((SELECT max(w) FROM u WHERE u.k = t.k)) OVER (ORDER BY v NULLS FIRST, k) AS s FROM t",
    "SELECT k, v, row_number() OVER (PARTITION BY (SELECT count(*) FROM u WHERE u.k = t.k) ORDER BY v NULLS FIRST, k) "
    "AS r, count(*) FILTER (WHERE (SELECT count(*) FROM u WHERE u.k = t.k) > 1) OVER () AS c FROM t",
    "SELECT k, count(*) AS c, max((SELECT max(w) FROM u WHERE u.k = t.k)) OVER (ORDER BY k NULLS FIRST) AS m "
    "FROM t GROUP BY k",
    # a GROUP BY key holding a subquery (the SELECT list reads it by its text); an uncorrelated one
    "SELECT (SELECT count(*) FROM u WHERE u.k = t.k) AS c, sum(v) AS s FROM t GROUP BY 1",
    "SELECT k, (SELECT w FROM u WHERE u.k = t.k ORDER BY w LIMIT 1) AS f, count(*) AS n FROM t GROUP BY k, 2",
    "SELECT (SELECT max(w) FROM u) AS m, count(*) AS n FROM t GROUP BY 1",
]


@pytest.mark.parametrize("optimize", [True, False])
def test_bound_correlated_scalar_subqueries_answer_as_duckdb(optimize):
    # The lowest tier: what is checked is the binding and the decorrelated plan, not 23 new fused kernels (19 s of
    # compiles in a fresh CI; the tiers' equality has its own suites).
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, optimize=optimize,
                                  compile_mode="lowest")
    with duckdb_with_tables(TABLES) as reference:
        for sql in SQL:
            expected = duckdb_table(reference, sql)
            got = session.sql(sql)
            if "ORDER BY (SELECT" in sql:
                assert got.to_pylist() == expected.to_pylist(), sql
            else:
                assert_same_rows(got, expected)


def test_each_form_is_a_typed_scalar_subquery_before_the_rules():
    session = session_with_tables(TABLES, device="cpu")
    untyped = [sql for sql in SQL if not holds_subqueries(session.sql_plan(sql))]
    assert not untyped


@pytest.mark.parametrize("sql", [
    "SELECT k, (SELECT w FROM u WHERE u.k = t.k GROUP BY w) AS x FROM t",
    "SELECT k FROM t WHERE v IS NULL OR v > (SELECT w FROM u WHERE u.k = t.k)",
])
def test_an_outer_row_meeting_several_rows_fails_as_duckdb(sql):
    session = session_with_tables(TABLES, device="cpu")
    with duckdb_with_tables(TABLES) as reference:
        with pytest.raises(Exception, match="More than one row returned by a subquery"):
            duckdb_table(reference, sql)
    with pytest.raises(ExecutionError, match="More than one row returned by a subquery"):
        session.sql(sql)


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_bound_forms_on_each_device(device):
    session = session_with_tables(TABLES, split_rows=2, device=device, drivers=2, compile_mode="lowest")
    with duckdb_with_tables(TABLES) as reference:
        for sql in (SQL[0], SQL[2], SQL[5], SQL[13]):
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
