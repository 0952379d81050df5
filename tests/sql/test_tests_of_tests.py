"""``x IS NULL IS NULL`` is ``(x IS NULL) IS NULL`` (always FALSE), not ``x IS TRUE``.

sqlglot parses ``x IS NULL IS NULL`` as a test of a test, and its simplifier re-associated it as ``x IS (NULL IS
NULL)``: ``x IS TRUE``. For a boolean or NULL ``x`` that was a wrong answer (TRUE where ``x`` is TRUE, FALSE where
it is NULL), for any other type a refusal naming a CASE the query never wrote (fuzz round 7,
bench/fuzz_round7.py ``exprs``). The inner test is parenthesized before simplifying
(gpu_engine/sql/simplification.py ``tests_parenthesized``). Answers against DuckDB, NULLs and an empty table.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_rows, session_with_tables

T = pa.table({"id": pa.array(range(5), pa.int64()), "v": pa.array([1, None, 3, -2, None], pa.int64()),
              "b": pa.array([True, None, False, None, True])})
TABLES = {"t": T, "e": T.slice(0, 0)}

QUERIES = [
    "SELECT id, b IS NULL IS NULL AS a, b IS NULL IS NOT NULL AS c, v IS NOT NULL IS NULL AS d FROM t",
    "SELECT id FROM t WHERE NOT (b IS NULL IS NULL)",
    "SELECT id FROM t WHERE (v - 3) IS NULL IS NOT NULL",
    "SELECT id, v IS NULL IS NULL IS NULL AS a FROM t",
    "SELECT count(*) AS n FROM e WHERE b IS NULL IS NOT NULL",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_a_test_of_a_test_answers_as_duckdb(sql):
    session = session_with_tables(TABLES, split_rows=2, device="cpu", drivers=2)
    assert_same_rows(session.sql(sql), duckdb_rows(sql, **TABLES))


def test_a_test_of_a_test_in_spark_sql():
    session = session_with_tables(TABLES, device="cpu")
    sql = "SELECT id, b IS NULL IS NULL AS a, b IS NULL IS NOT NULL AS c FROM t"
    assert_same_rows(session.sql(sql, dialect="spark"), duckdb_rows(sql, **TABLES))
