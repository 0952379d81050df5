"""Result columns are named as DuckDB names them, wherever the name was spelled.

A column read through a derived table or a CTE keeps the spelling of the alias
that made it (``SELECT * FROM (SELECT x AS B1_LP ...)`` gives ``B1_LP``, and so
does ``SELECT SEGMENT ... FROM segments`` over ``... AS SEGMENT``): TPC-DS q28
and q54 came back in lower case, as sqlglot folds every unquoted identifier.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import duckdb_with_tables, session_with_tables

T = pa.table({"Id": pa.array([1, 2, 3], pa.int32()), "v": pa.array([1.5, 2.5, None], pa.float64())})

QUERIES = [
    "SELECT * FROM (SELECT v AS B1_LP, count(*) AS B1_Cnt FROM t GROUP BY v) b1",
    "SELECT * FROM (SELECT max(v) AS B1_LP FROM t) b1, (SELECT min(v) AS B2_LP FROM t) b2",
    "WITH segments AS (SELECT Id AS SEGMENT FROM t) SELECT SEGMENT, count(*) AS n FROM segments GROUP BY SEGMENT",
    "WITH segments AS (SELECT Id AS SEGMENT FROM t) SELECT segment FROM segments",
    "SELECT A FROM (SELECT Id AS a FROM t) s",
    "SELECT id, ID AS Other FROM t",
    "SELECT s.Total FROM (SELECT sum(v) AS total FROM t) s",
    "SELECT * FROM (SELECT * FROM (SELECT v AS DeepName FROM t) x) y",
    # a set operation is named by its leftmost SELECT, whatever its branches' types (were _col_0, _col_1)
    "SELECT Id + 1, NULL FROM t EXCEPT SELECT Id, Id FROM t",
    "SELECT v, NULL FROM t UNION SELECT v, 'x' FROM t",
    "(SELECT Id * 2, v FROM t EXCEPT SELECT Id, v FROM t) INTERSECT ALL SELECT Id, v FROM t",
    "SELECT id, max(v) FROM t GROUP BY id UNION ALL SELECT Id, v FROM t",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


@pytest.mark.parametrize("sql", QUERIES)
def test_output_names_match_duckdb(sql, reference):
    session = session_with_tables({"t": T}, device="cpu")
    expected = [d[0] for d in reference.execute(sql).description]
    assert session.sql_plan(sql).output_schema.names == expected
