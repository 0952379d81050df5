"""DuckDB's ``COLUMNS(...)`` star expression through Session.sql against DuckDB (names compared too).

Each SELECT-list expression holding ``COLUMNS(pattern | * | t.* | ['a', 'b'])`` is one expression per matching
column, named by the column (or the expression's alias, repeated); in WHERE the AND of its expansions. Checked over
a join, a derived table, aggregation and NULLs; what stays refused names the construct and its position.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.sql.errors import SqlError

T = pa.table({
    "a": pa.array([1, 2, None, 4, 2], pa.int32()),
    "b": pa.array(["x", "y", "z", None, "y"]),
    "ab": pa.array([1.5, None, 3.0, 4.5, 0.5], pa.float64()),
})
U = pa.table({"x": pa.array([1, 2, 4], pa.int64()), "a": pa.array([10, None, 40], pa.int32())})
TABLES = {"t": T, "u": U}

QUERIES = [
    "SELECT COLUMNS('a') FROM t",
    "SELECT COLUMNS(*) FROM t",
    "SELECT COLUMNS(['ab', 'b']) FROM t",
    "SELECT max(COLUMNS('^a')), count(*) AS n FROM t",
    "SELECT COLUMNS('^a') + 1 FROM t",
    "SELECT min(COLUMNS('a|b')) AS m FROM t",
    "SELECT b FROM t WHERE COLUMNS('^a') > 1",
    "SELECT COLUMNS('a') FROM t JOIN u ON t.a = u.x",
    "SELECT COLUMNS(t.*) FROM t JOIN u ON t.a = u.x",
    "SELECT * FROM (SELECT COLUMNS('^(a|b)$') FROM t) s WHERE s.a > 1",
    "SELECT b, sum(COLUMNS('^a')) FROM t GROUP BY b",
    # two derived tables with COLUMNS joined, the query naming their columns (the compose fuzz, seed 90955:
    # "COLUMNS(...) over FROM items whose columns could not be listed (Unknown column: ...)"), one of them empty
    "SELECT p.a, q.x FROM (SELECT COLUMNS('^(a|b)$') FROM t) p LEFT JOIN (SELECT COLUMNS('^(x|a)$') FROM u) q "
    "ON p.a = q.x",
    "SELECT p.ab, q.x FROM (SELECT COLUMNS('^ab$') FROM t) p FULL JOIN (SELECT COLUMNS(['x']) FROM u WHERE "
    "u.a > 99) q ON p.ab = q.x",
]


def test_columns_expressions_match_duckdb(device_name, reference):
    session = session_with_tables(TABLES, device=device_name, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES if device_name == "cpu" else QUERIES[3:5] + QUERIES[-1:])


@pytest.mark.parametrize("sql, message", [
    ("SELECT COLUMNS('A') FROM t", "matches no column"),
    ("SELECT COLUMNS('a') + COLUMNS('b') FROM t", "two different COLUMNS"),
    ("SELECT COLUMNS(c -> c LIKE 'a%') FROM t", "a lambda"),
    ("SELECT a FROM t ORDER BY COLUMNS('a')", "COLUMNS(...) in ORDER BY"),
    ("SELECT COLUMNS(['a', 'zz']) FROM t", "names column 'zz'"),
])
def test_columns_expressions_refused_name_the_construct_and_position(sql, message):
    with pytest.raises(SqlError) as raised:
        session_with_tables(TABLES, device="cpu").sql(sql)
    assert message in str(raised.value) and raised.value.line == 1 and raised.value.column_number is not None
