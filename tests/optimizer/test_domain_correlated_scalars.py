"""Scalar subqueries correlated by other than column equalities, bound once over their domain.

``gpu_engine.sql.correlation_domains`` rewrites ``(SELECT ... WHERE u.w < t.v)`` (BETWEEN, ``<>``, ``u.k = t.k +
1``, an expression over outer columns) into a subquery correlated by column equalities over the distinct outer
values (DuckDB's general decorrelation), which ``sql/correlated_scalar_rows.py`` binds into a typed
``ScalarSubquery`` the optimizer's decorrelation rule joins, whatever its shape and position. These were
LEFT-joined derived tables of the sqlglot tree (``subquery_values._Joined._per_domain``). Against DuckDB: NULL
outer values and keys (a NULL outer value meets no row: COUNT's 0, max's NULL), an empty inner table, DuckDB's
"More than one row" error; the plan holds the typed subquery before the rules run.
"""

from __future__ import annotations

import pytest

from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.errors import ExecutionError
from gpu_engine.optimizer.decorrelation import holds_subqueries
from subquery_tables import TABLES

SQL = [
    # one aggregate: COUNT's 0 and max's NULL for an outer value meeting no row (a NULL one too)
    "SELECT k, v, (SELECT count(*) FROM u WHERE u.w < t.v) AS c, (SELECT max(w) FROM u WHERE u.k <> t.k) AS m FROM t",
    "SELECT k, v, (SELECT sum(w) FROM u WHERE u.w BETWEEN t.k AND t.v / 2) AS s FROM t",
    "SELECT k, (SELECT count(*) FROM e WHERE e.w < t.v) AS c FROM t",
    # an equality beside another correlation; an expression over an outer column
    "SELECT k, v, (SELECT count(*) FROM u WHERE u.k = t.k AND u.w * 2 < t.v) AS c FROM t",
    "SELECT k, (SELECT max(w) FROM u WHERE u.k = t.k + 1) AS m FROM t",
    # rows: ORDER BY ... LIMIT per outer value, GROUP BY / HAVING shapes, a window as the value
    "SELECT k, v, (SELECT w FROM u WHERE u.w < t.v ORDER BY w DESC NULLS LAST LIMIT 1) AS f FROM t",
    "SELECT k, v, (SELECT count(*) FROM u WHERE u.w < t.v HAVING count(*) > 2) AS c FROM t",
    "SELECT k, v, (SELECT sum(w) FROM u WHERE u.w < t.v GROUP BY u.k ORDER BY 1 DESC NULLS LAST LIMIT 1) AS s FROM t",
    # WHERE: a comparison, under OR / NOT; HAVING, ORDER BY, an aggregating query, a window's argument
    "SELECT k, v FROM t WHERE v > (SELECT sum(w) FROM u WHERE u.k < t.k)",
    "SELECT k, v FROM t WHERE v = 10 OR v < (SELECT max(w) FROM u WHERE u.k > t.k)",
    "SELECT k, v FROM t WHERE NOT (coalesce((SELECT count(*) FROM u WHERE u.w > t.v), 0) < 1)",
    "SELECT k, count(*) AS n, (SELECT count(*) FROM u WHERE u.k < t.k) AS c FROM t GROUP BY k",
    "SELECT k, count(*) AS n FROM t GROUP BY k HAVING coalesce((SELECT sum(w) FROM u WHERE u.k > t.k), 0) > 5",
    "SELECT k, v FROM t ORDER BY (SELECT count(*) FROM u WHERE u.w < t.v) NULLS FIRST, k NULLS FIRST, v NULLS FIRST",
    "SELECT k, v, sum((SELECT count(*) FROM u WHERE u.w < t.v)) OVER (ORDER BY k NULLS FIRST, v NULLS FIRST) AS r "
    "FROM t",
]

#: EXISTS / IN / ANY / ALL correlated without a column equality: over the domain, a semi / anti / mark join keyed
#: on it (a count per distinct outer value on the sqlglot tree before)
PREDICATES = [
    "SELECT k, v FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.w < t.v)",
    "SELECT k, v FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.w BETWEEN t.k AND t.v)",
    "SELECT k, v, EXISTS (SELECT 1 FROM u WHERE u.w < t.v) AS e FROM t",
    "SELECT k, v FROM t WHERE k = 5 OR NOT EXISTS (SELECT 1 FROM u WHERE u.k > t.k)",
    "SELECT k, v FROM t WHERE EXISTS (SELECT 1 FROM e WHERE e.w < t.v)",
    "SELECT k, v, v IN (SELECT w FROM u WHERE u.k < t.k) AS i FROM t",
    "SELECT k, v FROM t WHERE v NOT IN (SELECT w FROM u WHERE u.k < t.k)",
    "SELECT k, v FROM t WHERE v > ALL (SELECT w FROM u WHERE u.k < t.k)",
    "SELECT k, v FROM t WHERE v > ALL (SELECT w FROM u WHERE u.k <> t.k)",
]

#: x IN / op ANY / op ALL over a correlated aggregation (refused before: "correlated otherwise than by column
#: equalities"): over the domain, sql/correlated_aggregate_sets.py groups it per domain row
AGGREGATE_SETS = [
    "SELECT k, v FROM t WHERE v IN (SELECT max(w) * 10 FROM u WHERE u.k < t.k GROUP BY u.k)",
    "SELECT k, v, v > ALL (SELECT sum(w) FROM u WHERE u.k <> t.k GROUP BY u.k) AS a FROM t",
    "SELECT k, v FROM t WHERE v NOT IN (SELECT count(*) * 10 FROM u WHERE u.w BETWEEN t.k AND t.v GROUP BY u.k)",
    "SELECT k, v FROM t WHERE v < ANY (SELECT sum(w) FROM u WHERE u.k < t.k GROUP BY u.k HAVING count(*) > 1)",
]


@pytest.mark.parametrize("optimize", [True, False])
def test_domain_correlated_scalar_subqueries_answer_as_duckdb(optimize):
    session = session_with_tables(TABLES, split_rows=3, device="cpu", drivers=2, optimize=optimize,
                                  compile_mode="lowest")
    with duckdb_with_tables(TABLES) as reference:
        for sql in SQL + PREDICATES + AGGREGATE_SETS:
            expected = duckdb_table(reference, sql)
            got = session.sql(sql)
            if "ORDER BY (SELECT" in sql:
                assert got.to_pylist() == expected.to_pylist(), sql
            else:
                assert_same_rows(got, expected)


def test_each_form_is_a_typed_scalar_subquery_before_the_rules():
    session = session_with_tables(TABLES, device="cpu")
    untyped = [sql for sql in SQL + PREDICATES if not holds_subqueries(session.sql_plan(sql))]
    assert not untyped


def test_an_outer_value_meeting_several_rows_fails_as_duckdb():
    sql = "SELECT k, (SELECT w FROM u WHERE u.w < t.v) AS x FROM t"
    session = session_with_tables(TABLES, device="cpu")
    with duckdb_with_tables(TABLES) as reference:
        with pytest.raises(Exception, match="More than one row returned by a subquery"):
            duckdb_table(reference, sql)
    with pytest.raises(ExecutionError, match="More than one row returned by a subquery"):
        session.sql(sql)


@pytest.mark.parametrize("device", ["cpu", "cuda-sim"])
def test_domain_forms_on_each_device(device):
    session = session_with_tables(TABLES, split_rows=2, device=device, drivers=2, compile_mode="lowest")
    with duckdb_with_tables(TABLES) as reference:
        for sql in (SQL[0], SQL[5], SQL[9], PREDICATES[3]):
            assert_same_rows(session.sql(sql), duckdb_table(reference, sql))
