"""CASE / COALESCE / USING's merged key over string columns where one is dictionary-encoded over no strings.

Why: ``strings.choose_strings`` pools the branches' string tables and each row reads a slot of the pool; a NULL
row of an all-NULL dictionary column (its codes index nothing) took the slot past the pool's end, and the plain
(gathered) path read one offset beyond it: ``IndexError`` on cpu and cuda-sim. Found by fuzz round 8 (seed 314):
``t RIGHT JOIN p USING (s)`` where p's only ``s`` is NULL (its unmatched row reads t's gathered NULL ``s``).
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

ALL_NULL = pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int32()), pa.array([], pa.string()))
TABLES = {
    "t": pa.table({"id": pa.array([0, 1, 2], pa.int64()), "s": pa.array(["a", None, " 7"])}),
    "p": pa.table({"id": pa.array([0], pa.int64()), "s": pa.array([None], pa.string())}),
    "e": pa.table({"id": pa.array([5, 6], pa.int64()), "s": ALL_NULL, "y": pa.array(["x", None])}),
}

QUERIES = [
    "SELECT t.id, p.id AS pid, s FROM t RIGHT JOIN p USING (s)",
    "SELECT t.id, p.id AS pid, s FROM t FULL JOIN p USING (s)",
    "SELECT p.id, coalesce(t.s, p.s) AS c, CASE WHEN t.s IS NULL THEN p.s ELSE t.s END AS w "
    "FROM t RIGHT JOIN p ON t.s = p.s",
    "SELECT id, CASE WHEN id > 5 THEN s ELSE y END AS a, coalesce(s, y) AS b, coalesce(y, s) AS c FROM e",
]


def test_string_choices_over_an_all_null_dictionary_column_match_duckdb(device_name):
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device=device_name, fuse=False)
        assert_queries_match_duckdb(session, connection, QUERIES)
