"""The last subqueries that reached the sqlglot tree's per-domain path, typed: their answers equal DuckDB's.

``subquery_values._Joined._per_domain`` (a derived table of the distinct outer values LEFT joined back) was still
reached by: a scalar subquery of a WHERE conjunct correlated null-safe (the split ``CASE WHEN t.a IS NULL THEN
<one subquery> ELSE <another> END`` is two subqueries of one conjunct, which the typed Filter did not take: row
shapes such as HAVING were refused there); IN / ANY / ALL correlated null-safe (their per-row facts:
``quantified_comparisons``); an outer column of a series reading another FROM item (``FROM t, generate_series(1,
t.a) g``: its domain read the series alone and was refused). Now a WHERE conjunct of several scalar subqueries is
one typed Filter (``correlated_scalar_rows.conjunct_scalars``: the optimizer's decorrelation rule joins each), the
facts are split as any scalar subquery, and a series' domain reads the items it reads
(``correlation_domains._domain_items``). Before, none of these 15 texts was typed: 12 went through ``_per_domain``
(the 4 series texts then refused), the HAVING one was refused, the 2 of several subqueries were LEFT-joined derived
tables.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables
from gpu_engine.optimizer.decorrelation import holds_subqueries
from gpu_engine.sql import subquery_values

TABLES = {"t": pa.table({"a": pa.array([1, 2, None, 4, None, 1], pa.int64()),
                         "b": pa.array([1, None, None, 5, 2, 1], pa.int64()),
                         "c": pa.array([10, 20, 30, None, 50, 60], pa.int64())})}

NS = "t2.b IS NOT DISTINCT FROM t.a"
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
]


@pytest.fixture
def per_domain_refused(monkeypatch):
    def refused(*_args, **_kwargs):
        raise AssertionError("reached subquery_values._Joined._per_domain")
    monkeypatch.setattr(subquery_values._Joined, "_per_domain", refused)


def test_the_last_tree_path_forms_match_duckdb_on_cpu(reference, per_domain_refused):
    # Unfused, 2 drivers of 2-row batches: the plans are the subject (keys and NULLs across batches).
    session = session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=2, fuse=False, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


def test_each_form_is_typed_before_the_rules(per_domain_refused):
    session = session_with_tables(TABLES, device="cpu")
    assert [sql for sql in QUERIES if not holds_subqueries(session.sql_plan(sql))] == []


def test_a_split_where_conjunct_and_a_series_domain_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference, [QUERIES[1], QUERIES[11]], exact_types=True)
