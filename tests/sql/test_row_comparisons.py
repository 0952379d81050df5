"""Row comparisons ``(a, b) = (c, d)``, ``<>``, ``IS [NOT] DISTINCT FROM``, ``[NOT] IN`` a list of rows: column by
column with DuckDB's struct semantics (a NULL field equals a NULL field; never NULL), as join keys and as predicates
(fuzz round 8 found them refused as "unsupported SQL construct Tuple")."""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine import PlanError

TABLES = {
    "t": pa.table({"id": [1, 2, 3, 4], "k": pa.array([1, 2, None, 2], pa.int32()),
                   "s": pa.array(["a", None, "b", "a"])}),
    "u": pa.table({"id": [10, 20, 30, 40, 50], "k": pa.array([1, 2, None, None, 2], pa.int64()),
                   "s": pa.array(["a", None, "b", None, "x"])}),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT t.id AS a, u.id AS b FROM t JOIN u ON (t.k, t.s) = (u.k, u.s)",  # NULL fields match
    "SELECT t.id AS a, u.id AS b FROM t LEFT JOIN u ON (t.k, t.s) = (u.k, u.s)",
    "SELECT t.id AS a, u.id AS b, (t.k, t.s) = (u.k, u.s) AS eq, (t.k, t.s) <> (u.k, u.s) AS ne FROM t, u",
    "SELECT id, (k, s) = (2, 'a') AS a, (k, s) = (NULL, NULL) AS b, (k, s) <> (2, NULL) AS c FROM t",
    "SELECT id FROM t WHERE (k, s) = (2, 'a')",
    "SELECT id FROM t WHERE (k, s) <> (2, 'a')",
    "SELECT id FROM t WHERE ROW(k, s) IS NOT DISTINCT FROM ROW(2, NULL)",
    "SELECT t.id AS a, u.id AS b FROM t JOIN u ON (t.k, t.s) <> (u.k, u.s) AND t.id < 3",
    "SELECT count(*) AS c FROM e JOIN u ON (e.k, e.s) = (u.k, u.s)",
    "SELECT id FROM t WHERE (k, s) IN ((2, 'a'), (NULL, 'b'))",
    "SELECT id, (k, s) IN ((2, 'a'), (1, NULL)) AS x, (k, s) NOT IN ((2, NULL)) AS y FROM t",
]


def test_row_comparisons_answer_as_duckdb(device_name):
    queries = QUERIES if device_name == "cpu" else QUERIES[:1]
    with duckdb_with_tables(TABLES) as connection:
        assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), connection, queries)


@pytest.mark.parametrize("sql, words", [
    ("SELECT id FROM t WHERE (k, s) < (2, 'b')", "ordering comparison of two rows"),
    ("SELECT id FROM t WHERE (k, s) = (2, 'b', 3)", "a row of 2 values is compared with a row of 3 values"),
])
def test_unplanned_row_comparisons_are_named(sql, words):
    with pytest.raises(PlanError, match=words) as raised:
        session_with_tables(TABLES, device="cpu").sql(sql)
    assert "column" in str(raised.value)
