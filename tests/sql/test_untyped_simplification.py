"""The rewriter simplifies a query without sqlglot's type annotation, and ``NOT NOT`` still folds over booleans.

sqlglot's simplifier typed every subtree a rule rewrote (~10% of planning a new TPC-DS text); the engine reads
no sqlglot type, so :mod:`gpu_engine.sql.connectives` leaves them untyped, and types only what the one rule that
needs a type reads: ``NOT NOT x`` drops its negations where ``x`` is boolean by construction (it did so before
only where an earlier rewrite had typed ``x``: ``NOT (k NOT IN (0))`` kept both). Results checked against DuckDB
on cpu and cuda-sim, NULLs and an empty table included.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
import sqlglot
from sqlglot.optimizer.annotate_types import TypeAnnotator

from duckdb_reference import assert_queries_match_duckdb, session_with_tables
from gpu_engine.sql.connectives import simplify_bounded

T = pa.table({
    "id": pa.array(range(6), pa.int64()),
    "k": pa.array([1, None, 0, 3, 0, -2], pa.int32()),
    "s": pa.array(["a", None, "b", "", None, "é"]),
    "b": pa.array([True, None, False, True, False, None]),
})
TABLES = {"t": T, "e": T.slice(0, 0)}

QUERIES = [
    "SELECT id FROM t WHERE NOT (k NOT IN (0))",
    "SELECT id FROM t WHERE NOT (NOT (s IS NULL)) OR k > 2",
    "SELECT id, NOT NOT (s IS NULL) AS p, NOT (NOT b) AS q FROM t",
    "SELECT id FROM t x WHERE NOT (NOT EXISTS (SELECT 1 FROM t y WHERE y.k = x.k AND y.id <> x.id))",
    "SELECT id FROM t WHERE NOT NOT (CASE WHEN b IS NULL THEN FALSE ELSE b END) AND k IS NOT NULL",
    "SELECT id FROM t WHERE NOT (k > 0 AND s IS NOT NULL)",
    "SELECT count(*) AS n FROM e WHERE NOT (k NOT IN (0))",
]


def _simplified(sql: str) -> str:
    return simplify_bounded(sqlglot.parse_one(sql, read="duckdb"), "duckdb").sql(dialect="duckdb")


def test_simplifying_types_nothing(monkeypatch):
    calls = []
    annotate = TypeAnnotator.annotate
    monkeypatch.setattr(TypeAnnotator, "annotate", lambda self, *a, **k: calls.append(1) or annotate(self, *a, **k))
    # Every rule rewrites here (chains re-sorted, a comparison folded, De Morgan): sqlglot typed each rewrite.
    _simplified("SELECT a FROM t WHERE c > 1 AND b < 2 AND NOT (a = 1 OR d IS NULL) AND 1 = 1 AND b < 3")
    assert calls == []


@pytest.mark.parametrize(("written", "simplified"), [
    ("SELECT a FROM t WHERE NOT (k NOT IN (0))", "SELECT a FROM t WHERE k IN (0)"),
    ("SELECT a FROM t WHERE NOT (NOT (s IS NULL))", "SELECT a FROM t WHERE s IS NULL"),
    ("SELECT a FROM t WHERE NOT (NOT EXISTS (SELECT 1 FROM u))", "SELECT a FROM t WHERE EXISTS(SELECT 1 FROM u)"),
    ("SELECT a FROM t WHERE NOT NOT (CASE WHEN b THEN c > 1 ELSE FALSE END)",
     "SELECT a FROM t WHERE CASE WHEN b THEN c > 1 ELSE FALSE END"),
])
def test_double_negation_of_a_boolean_folds(written, simplified):
    assert _simplified(written) == simplified


def test_double_negation_of_an_untyped_value_stays():
    # NOT NOT k is a BOOLEAN where k may be an integer (DuckDB casts it): the negations are kept.
    assert _simplified("SELECT NOT NOT k AS p FROM t") == "SELECT NOT NOT k AS p FROM t"


def test_negations_answer_as_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, split_rows=4, device="cpu", drivers=2)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_negations_answer_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, split_rows=4, device=device_name, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES[:2])
