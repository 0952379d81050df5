"""The last subqueries that reached the sqlglot tree's per-domain path, typed: their answers equal DuckDB's.

``subquery_values._Joined._per_domain`` (a derived table of the distinct outer values LEFT joined back; deleted, its
last callers refused by name) was still reached by: a scalar subquery of a WHERE conjunct correlated null-safe (the
split ``CASE WHEN t.a IS NULL THEN <one subquery> ELSE <another> END`` is two subqueries of one conjunct, which the
typed Filter did not take: row shapes such as HAVING were refused there); IN / ANY / ALL correlated null-safe (their
per-row facts: ``quantified_comparisons``); an outer column of a series reading another FROM item (``FROM t,
generate_series(1, t.a) g``: its domain read the series alone and was refused), of a VALUES list, an uncorrelated
series or an unnested list; the per-row facts of IN / ANY / ALL selecting an expression over a domain correlation;
an EXISTS with a key equality beside another correlation where it is no semi join (a value, under OR). Now a WHERE
conjunct of several scalar subqueries is one typed Filter (``correlated_scalar_rows.conjunct_scalars``: the
optimizer's decorrelation rule joins each), the planner passes quantified comparisons' facts through
``correlation_domains`` again (split or over a domain as any scalar subquery), and a domain reads a VALUES list, or
a series with the items it reads (``correlation_domains._domain_items``), and such an EXISTS goes over its domain
too. Before, none of these 24 texts was typed: 21 went through ``_per_domain`` (the 4 correlated series texts then
refused), the HAVING one was refused, the 2 of several subqueries were LEFT-joined derived tables. An inner join's
ON conjunct holding a subquery is moved to WHERE first
(``join_condition_subqueries.with_inner_join_subqueries_in_where``): the rewrites above read WHERE.
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables
from gpu_engine.optimizer.decorrelation import holds_subqueries
from gpu_engine.plans.expressions import walk
from gpu_engine.plans.nodes import FilterNode, walk_plan
from gpu_engine.plans.subqueries import Exists, InSubquery, QuantifiedComparison, ScalarSubquery

#: The last row repeats the one before: with ``c`` unique, the per-domain DISTINCTs and the per-value counts of IN
#: / ANY / ALL over it were projections (optimizer/unique_groupings.py).
TABLES = {"t": pa.table({"a": pa.array([1, 2, None, 4, None, 1, 1], pa.int64()),
                         "b": pa.array([1, None, None, 5, 2, 1, 1], pa.int64()),
                         "c": pa.array([10, 20, 30, None, 50, 60, 60], pa.int64())})}

NS = "t2.b IS NOT DISTINCT FROM t.a"
NS3 = "t3.b IS NOT DISTINCT FROM t.a"
SERIES = "FROM t, generate_series(1, t.a) g(i)"
QUERIES = [
    # a null-safe scalar subquery in a WHERE conjunct (split in two: one conjunct, two subqueries)
    f"SELECT a, c FROM t WHERE c > (SELECT min(t2.c) FROM t t2 WHERE {NS})",
    f"SELECT a, c FROM t WHERE c > (SELECT count(*) FROM t t2 WHERE {NS} HAVING count(*) > 0)",
    f"SELECT a, c FROM t WHERE c < 15 OR c > (SELECT max(t2.c) FROM t t2 WHERE {NS})",
    f"SELECT a, c FROM t WHERE c > (SELECT t2.c FROM t t2 WHERE {NS} ORDER BY t2.c NULLS LAST LIMIT 1 OFFSET 1)",
    f"SELECT a, c FROM t WHERE NOT (coalesce((SELECT max(t2.c) FROM t t2 WHERE {NS}), 0) < c)",
    # several scalar subqueries in one WHERE conjunct (were LEFT-joined derived tables of the tree)
    "SELECT a, c FROM t WHERE (SELECT max(t2.c) FROM t t2 WHERE t2.b = t.a) > "
    "(SELECT min(t3.c) FROM t t3 WHERE t3.b < t.a)",
    "SELECT a, c FROM t WHERE c > (SELECT min(t2.c) FROM t t2 WHERE t2.b = t.a) + (SELECT count(*) FROM t t3)",
    # IN / ANY / ALL correlated null-safe
    f"SELECT a, c FROM t WHERE c NOT IN (SELECT t2.c FROM t t2 WHERE {NS})",
    f"SELECT a, c > ANY (SELECT t2.c FROM t t2 WHERE {NS}) AS x FROM t",
    f"SELECT a, c >= ALL (SELECT t2.c FROM t t2 WHERE {NS}) AS x FROM t",
    f"SELECT a, c IN (SELECT t2.c FROM t t2 WHERE {NS}) AS x FROM t",
    # a series reading another FROM item, its column read by a subquery correlated otherwise than by equalities
    f"SELECT t.a, g.i, (SELECT count(*) FROM t t2 WHERE t2.b < g.i) AS n {SERIES}",
    f"SELECT t.a, g.i {SERIES} WHERE g.i < (SELECT count(*) FROM t t2 WHERE t2.b <= g.i)",
    f"SELECT t.a, g.i, (SELECT max(t2.c) FROM t t2 WHERE t2.b <> g.i AND t2.a = t.a) AS n {SERIES}",
    f"SELECT t.a, g.i, EXISTS (SELECT 1 FROM t t2 WHERE t2.b < g.i) AS n {SERIES}",
    # a VALUES list, an uncorrelated series, an unnested list (planned as VALUES): their domains read them
    "SELECT v.x, (SELECT count(*) FROM t t2 WHERE t2.b < v.x) AS n FROM (VALUES (1), (2), (NULL)) v(x)",
    "SELECT g.i, (SELECT count(*) FROM t t2 WHERE t2.b IS NOT DISTINCT FROM g.i) AS n FROM range(4) g(i)",
    "SELECT t.a, x.y, (SELECT count(*) FROM t t2 WHERE t2.b < x.y) AS n FROM t, unnest([t.a, t.b]) x(y)",
    # IN / ANY / ALL selecting an expression, correlated over a domain: their per-row facts
    "SELECT a, c IN (SELECT t2.c + 1 FROM t t2 WHERE t2.b < t.a) AS x FROM t",
    "SELECT a, c > ALL (SELECT t2.c * 2 FROM t t2 WHERE t2.b < t.a) AS x FROM t",
    "SELECT a, c FROM t WHERE c NOT IN (SELECT t2.c + 10 FROM t t2 WHERE t2.b <> t.a)",
    # an EXISTS with a key beside another correlation that is no semi join (a value, under OR): a mark join's flag
    "SELECT a, EXISTS (SELECT 1 FROM t t2 WHERE t.c > t2.c AND t.a = t2.b LIMIT 1) AS x FROM t",
    "SELECT a, EXISTS (SELECT 1 FROM t t2 WHERE t.c > t2.c AND t.a = t2.b) AS x FROM t",
    "SELECT a FROM t WHERE c < 20 OR EXISTS (SELECT 1 FROM t t2 WHERE t.c > t2.c AND t.a = t2.b)",
]
#: an inner join's ON condition holding a subquery the WHERE rewrites plan (all 4 refused before, by the WHERE
#: path's names: the rewrites read WHERE only)
ON_CONDITIONS = [
    "SELECT t.a, t2.c FROM t JOIN t t2 ON t2.a = t.a AND t2.c > (SELECT min(t3.c) FROM t t3 WHERE t3.b < t.a)",
    f"SELECT t.a, t2.c FROM t JOIN t t2 ON t2.a = t.a AND t2.c > (SELECT min(t3.c) FROM t t3 WHERE {NS3})",
    "SELECT t.a, t2.c FROM t JOIN t t2 ON t2.a = t.a AND EXISTS (SELECT 1 FROM t t3 WHERE t3.b < t.a)",
    f"SELECT t.a, t2.c FROM t JOIN t t2 ON t2.a = t.a AND t2.c NOT IN (SELECT t3.c FROM t t3 WHERE {NS3})",
]

#: refused before though DuckDB answers them: a scalar subquery correlated inside a derived table of its FROM ("a
#: correlated reference inside a derived table": its correlation is pulled up to its own WHERE first,
#: ``correlated_derived_tables.with_subquery_correlations_pulled_up``), and a subquery key of ROLLUP / CUBE named by
#: position ("an aggregate in GROUP BY": the subquery's own count; now typed as a plain GROUP BY's key)
ANSWERED = [
    "SELECT a, (SELECT count(*) FROM (SELECT * FROM t t2 WHERE t2.b < t.a) s) AS n FROM t",
    "SELECT a, (SELECT sum(s.c) FROM (SELECT t2.c FROM t t2 WHERE t2.b = t.a AND t2.c > 15) s) AS n FROM t",
    "SELECT a, (SELECT max(s.c) FROM (SELECT * FROM (SELECT * FROM t t2 WHERE t2.b <= t.a) s1) s) AS n FROM t",
    "SELECT a, c FROM t WHERE c < 15 OR c > (SELECT avg(s.c) FROM (SELECT * FROM t t2 WHERE t2.b <> t.a) s)",
    "SELECT a FROM t WHERE c > (SELECT min(s.c) FROM (SELECT * FROM t t2 WHERE t2.b = t.a) s)",
    f"SELECT (SELECT count(*) FROM t t2 WHERE {NS}) AS k, count(*) FROM t GROUP BY ROLLUP (1)",
    "SELECT b, (SELECT count(*) FROM t t2 WHERE t2.b = t.a) AS k, sum(c) FROM t GROUP BY ROLLUP (b, 2)",
    "SELECT (SELECT count(*) FROM t t2 WHERE t2.b < t.a) AS k, count(*) FROM t GROUP BY CUBE (1)",
]

#: a WHERE conjunct holding a scalar subquery beside an EXISTS / IN / ANY (under OR, NOT, in a CASE): the scalar one
#: was a LEFT-joined derived table of the tree; now one typed Filter holds both (the rule's mark joins and joins)
MIXED = [
    "SELECT a FROM t WHERE c > (SELECT min(t2.c) FROM t t2 WHERE t2.b = t.a) OR EXISTS (SELECT 1 FROM t t3 "
    "WHERE t3.b = t.a AND t3.c > 40)",
    "SELECT a, c FROM t WHERE c > (SELECT avg(c) FROM t) OR EXISTS (SELECT 1 FROM t t3 WHERE t3.b = t.a)",
    "SELECT a, c FROM t WHERE NOT (c < (SELECT count(*) FROM t t2 WHERE t2.b = t.a) * 10 AND a IN (SELECT t3.b "
    "FROM t t3 WHERE t3.c > 20))",
    "SELECT a, c FROM t WHERE CASE WHEN EXISTS (SELECT 1 FROM t t3 WHERE t3.b = t.a) THEN c > (SELECT max(t2.c) "
    "FROM t t2 WHERE t2.a = t.a) - 30 ELSE (SELECT count(*) FROM t t2 WHERE t2.b = t.b) = 0 END",
    "SELECT t.a, u.c FROM t JOIN t u ON u.a = t.a WHERE u.c >= (SELECT max(t2.c) FROM t t2 WHERE t2.b = t.b) "
    "OR t.b IN (SELECT t3.a FROM t t3 WHERE t3.c = u.c)",
    f"SELECT a FROM t WHERE coalesce((SELECT min(t2.c) FROM t t2 WHERE {NS}), 0) > 15 OR NOT EXISTS "
    "(SELECT 1 FROM t t3 WHERE t3.b = t.a)",
    "SELECT a FROM t WHERE c > ALL (SELECT t2.c FROM t t2 WHERE t2.b = t.a) OR c < (SELECT min(t2.c) FROM t t2 "
    "WHERE t2.a = t.a)",
]


def test_the_last_tree_path_forms_match_duckdb_on_cpu(reference):
    # Unfused, 2 drivers of 2-row batches: the plans are the subject (keys and NULLs across batches).
    session = session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=2, fuse=False, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference, QUERIES + ON_CONDITIONS + ANSWERED + MIXED, exact_types=True)


def test_each_form_is_typed_before_the_rules():
    session = session_with_tables(TABLES, device="cpu")
    assert [sql for sql in QUERIES + ON_CONDITIONS + ANSWERED if not holds_subqueries(session.sql_plan(sql))] == []


def test_a_scalar_subquery_beside_a_mark_is_typed_in_one_filter():
    def mixed(plan) -> bool:
        for node in walk_plan(plan):
            kinds = {type(e) for e in walk(node.predicate)} if isinstance(node, FilterNode) else set()
            if ScalarSubquery in kinds and kinds & {Exists, InSubquery, QuantifiedComparison}:
                return True
        return False

    session = session_with_tables(TABLES, device="cpu")
    assert [sql for sql in MIXED if not mixed(session.sql_plan(sql))] == []


def test_a_split_where_conjunct_and_a_series_domain_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference, [QUERIES[1], QUERIES[11], ANSWERED[0], ANSWERED[6], MIXED[0],
                                                     MIXED[3]], exact_types=True)
