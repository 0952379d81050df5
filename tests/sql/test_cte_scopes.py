"""Which names a CTE's body sees, as DuckDB scopes them: the CTEs written before it, not itself or later ones.

``WITH o AS (SELECT * FROM o WHERE ...)`` reads the table ``o`` in its body (the planner put each CTE in its own
body's scope and refused "nests too deeply"); a nested WITH's CTE hides an outer one of its name only after it
(the shared-CTE split renamed the inner reference to the outer CTE's table: a wrong answer); a shared CTE keeps
the column names its alias lists (``WITH x(c)``, read twice: "unknown column"). Under WITH RECURSIVE a CTE that
is not a UNION reading itself is a plain CTE (DuckDB answers); a recursive one and two CTEs of one name are
refused naming the CTE.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.sql import SqlError

TABLES = {"o": pa.table({"a": pa.array([1, 2, 3, None]), "b": ["x", "y", "z", None]}),
          "u": pa.table({"k": pa.array([1, 2, 3]), "v": ["x", "y", "z"]})}
QUERIES = [
    "WITH o AS (SELECT * FROM o WHERE a > 1) SELECT * FROM o",
    "WITH o AS (SELECT a + 10 AS a FROM o) SELECT * FROM o, (SELECT count(*) FROM o) c",
    "WITH u AS (SELECT * FROM o), o AS (SELECT a + 100 AS a FROM u) SELECT * FROM o UNION ALL SELECT a FROM u",
    "WITH o(c) AS (SELECT a FROM o WHERE a > 1) SELECT c FROM o",
    "WITH x(c) AS (SELECT a FROM o) SELECT x.c, y.c FROM x, x AS y",
    "WITH a AS (SELECT k AS x FROM u) SELECT * FROM a, (WITH a AS (SELECT x + 1 AS x FROM a) SELECT * FROM a) b",
    "WITH RECURSIVE x AS (SELECT 1 AS n), y AS (SELECT n + 1 AS n FROM x) SELECT * FROM y",
    "SELECT * FROM u WHERE k IN (WITH u AS (SELECT k + 1 AS k FROM u) SELECT k FROM u)",
]


@pytest.fixture(scope="module")
def reference():
    connection = duckdb_with_tables(TABLES)
    yield connection
    connection.close()


def test_cte_scopes_match_duckdb_on_cpu(reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device="cpu", compile_mode="lowest"), reference, QUERIES)


def test_cte_scopes_match_duckdb_on_each_device(reference, device_name):
    session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")
    assert_queries_match_duckdb(session, reference, QUERIES[1:2] + QUERIES[5:6])


@pytest.mark.parametrize("sql, message", [
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r",
     r"WITH RECURSIVE: the recursive CTE 'r' \(a UNION reading itself\).*\(line 1, column 16\)"),
    ("WITH a AS (SELECT 1 AS x), A AS (SELECT 2 AS x) SELECT * FROM a",
     r"defines the CTE 'A' twice.*\(line 1, column 28\)"),
])
def test_recursive_and_duplicate_ctes_are_refused_naming_the_cte(sql, message):
    with pytest.raises(SqlError, match=message):
        session_with_tables(TABLES, device="cpu").sql(sql)
