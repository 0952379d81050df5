"""A CASE / IF whose every condition folds to FALSE or NULL keeps its results' type (DuckDB's), as NULLs.

``CASE WHEN k >= NULL THEN b END``: sqlglot's simplifier folded it to a bare NULL, which the planner refused
("cannot infer the type of NULL"; the compose fuzz, seeds 13825, 14362, 13369, 13378, 15132); DuckDB types it
by its branches. Checked against DuckDB with types, beside CASEs that keep a branch, under aggregates,
arithmetic, joins and ORDER BY ... LIMIT 0, on cpu and cuda-sim (gpu_engine/sql/simplification.py).
"""

from __future__ import annotations

import decimal

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

T = pa.table({
    "id": pa.array(range(6), pa.int64()),
    "k": pa.array([1, None, 2, 3, 1, 2], pa.int32()),
    "b": pa.array([True, False, None, True, False, True]),
    "d": pa.array([decimal.Decimal(v) if v else None for v in ("1.25", "-2.50", None, "0.00", "9.99", "3.10")],
                  pa.decimal128(9, 2)),
    "s": pa.array(["a", None, "bc", "", "a", "z"]),
    "dt": pa.array([10957, 10958, None, 11000, 10957, 12000], pa.date32()),
})
TABLES = {"t": T, "e": T.slice(0, 0)}

QUERIES = [
    "SELECT id, CASE WHEN k >= NULL THEN b END AS x FROM t",
    "SELECT id, CASE WHEN k = NULL THEN d ELSE NULL END AS x FROM t",
    "SELECT id, CASE k WHEN NULL THEN s END AS x FROM t",
    "SELECT id, IF(k < NULL, dt, NULL) AS x FROM t",
    "SELECT id, CASE WHEN k >= NULL THEN d WHEN k > 1 THEN d * 2 END AS x FROM t",
    "SELECT id, CASE WHEN FALSE THEN s WHEN k IS NULL THEN 'n' END AS x FROM t",
    "SELECT id, CASE WHEN k > NULL THEN k END + 1 AS x FROM t",
    "SELECT sum(CASE WHEN k >= NULL THEN d END) AS x, max(CASE WHEN k = NULL THEN s END) AS y FROM t",
    "SELECT a.id, c.x FROM t a LEFT JOIN (SELECT id, CASE WHEN id > NULL THEN b END AS x FROM t) c "
    "ON a.id = c.id AND c.x",
    "SELECT * FROM (SELECT id, CASE WHEN k > NULL THEN d END AS x FROM e) q ORDER BY q.x DESC, q.id LIMIT 0",
]


def test_folded_case_keeps_its_type_on_cpu(reference):
    session = session_with_tables(TABLES, split_rows=4, device="cpu", drivers=2)
    assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


def test_folded_case_keeps_its_type_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, split_rows=4, device=device_name, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES[:2], exact_types=True)
