"""A collated output of the outer query, ``SELECT s COLLATE NOCASE AS z FROM t ORDER BY z``, against DuckDB (issue 30
item 6; refused before as "COLLATE here (a SELECT output").

The value is the text itself (DuckDB shows ``'Ab'``, not ``'ab'``); the ORDER BY keys naming the output (its alias,
its ordinal, or the column collated, as DuckDB binds them) sort by the collation
(gpu_engine/sql/rewrite.py ``_with_collated_outputs``). Covered: NOCASE, NOACCENT, NOCASE.NOACCENT, ties broken by
a second key, NULLs, multi-byte text, the unaliased column's name, empty input. A collated output of a derived
table (its collation would travel into the outer query's comparisons), GROUP BY and DISTINCT stay refused.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.errors import PlanError

TABLES = {"t": pa.table({"s": pa.array(["Ab", "aB", "b", "Éa", "ea", None, "x", "éA"]),
                         "n": pa.array([1, 2, 3, 4, 5, 6, 7, 8], pa.int64())})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT s COLLATE NOCASE FROM t",
    "SELECT s COLLATE NOCASE AS z FROM t",
    "SELECT s COLLATE NOCASE AS z, n FROM t ORDER BY z, n",
    "SELECT s COLLATE NOCASE AS z, n FROM t ORDER BY 1 DESC, 2",
    "SELECT n, s COLLATE NOACCENT AS z FROM t ORDER BY z, n",
    "SELECT n, s COLLATE NOCASE.NOACCENT AS z FROM t ORDER BY z NULLS FIRST, n",
    "SELECT s COLLATE NOCASE AS z, n FROM t ORDER BY s, n",
    "SELECT s COLLATE NOCASE AS z, n FROM t WHERE n > 2 ORDER BY n",
    "SELECT e.s COLLATE NOCASE AS z FROM e ORDER BY z",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables(TABLES) as connection:
        yield connection


def _check(device_name, queries, reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name, drivers=2, batch_rows=3), reference,
                                queries, ordered=lambda sql: "ORDER BY" in sql, exact_types=True)


def test_collated_outputs_match_duckdb_on_cpu(reference):
    _check("cpu", QUERIES, reference)


@pytest.mark.cpu_case_in("test_collated_outputs_match_duckdb_on_cpu")
def test_collated_outputs_match_duckdb_on_each_device(device_name, reference):
    _check(device_name, QUERIES[2:3], reference)


@pytest.mark.parametrize("sql", [
    "SELECT z FROM (SELECT s COLLATE NOCASE AS z FROM t) q",
    "SELECT s COLLATE NOCASE AS z, count(*) AS c FROM t GROUP BY 1",
    "SELECT DISTINCT s COLLATE NOCASE AS z FROM t",
])
def test_collated_outputs_that_would_carry_the_collation_are_refused(sql):
    with pytest.raises(PlanError, match="COLLATE here"):
        session_with_tables(TABLES, device="cpu").sql(sql)
