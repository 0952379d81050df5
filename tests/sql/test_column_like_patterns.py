"""``s [NOT] [I]LIKE p [ESCAPE e]`` where the pattern ``p`` is a column or an expression: each row's own pattern
(DuckDB's like_escape / ilike_escape), NULL where the string or the pattern is (fuzz round 8 found it refused as
"the LIKE pattern must be a string constant")."""

from __future__ import annotations

import pyarrow as pa
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

TABLES = {
    "t": pa.table({"id": [1, 2, 3, 4, 5, 6], "s": pa.array(["abc", "ABC", None, "a%c", "xyz", "é_b"]),
                   "p": pa.array(["a%", "a_c", "%", None, "x!%z", "É\\_b"])}),
    "u": pa.table({"q": pa.array(["%b%", "x__", None, "A%"]).dictionary_encode()}),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT id, s LIKE p AS a, s NOT LIKE p AS b, s ILIKE p AS c, s NOT ILIKE p AS d FROM t",
    "SELECT id FROM t WHERE s ILIKE p || '%'",
    "SELECT id, s LIKE p ESCAPE '!' AS a, s ILIKE p ESCAPE '\\' AS b, s NOT LIKE p ESCAPE '\\' AS c FROM t",
    "SELECT id, 'abc' LIKE p AS a, s LIKE s AS b FROM t",
    "SELECT t.id AS i, u.q AS q FROM t JOIN u ON t.s LIKE u.q",  # a pattern per row of the other side
    "SELECT count(*) AS c FROM e WHERE s LIKE p",
]


def test_column_patterns_match_as_duckdb(device_name):
    queries = QUERIES if device_name == "cpu" else QUERIES[:1]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection, queries)
