"""``[NOT] EXISTS`` over a correlated subquery that groups, and the refusals around it (issue 30 item 0).

Correlated by equalities with its GROUP BY columns only, the correlation picks whole groups: the EXISTS is a semi
(anti) join with the subquery's groups, typed (sql/decorrelation.py ``_grouped_exists``), as a WHERE conjunct, under
OR and as a value (mark joins). Against DuckDB with NULL keys on both sides, groups HAVING removes, empty results.
Other correlations of a grouping subquery, and a correlation two levels down, are refused naming the construct,
its position and an alternative.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine.sql.errors import SqlError

TABLES = {
    "t": pa.table({"a": pa.array([1, 2, 3, None, 5, 6], pa.int64()),
                   "g": pa.array(["x", "y", None, "x", "z", "w"])}),
    "u": pa.table({"k": pa.array(["x", "x", "y", None, "z", None, "w"]),
                   "w": pa.array([1, None, 3, 4, 5, 6, None], pa.int64())}),
}
QUERIES = [
    "SELECT a, g FROM t WHERE EXISTS (SELECT k FROM u WHERE u.k = t.g GROUP BY k HAVING count(*) > 1)",
    "SELECT a, g FROM t WHERE NOT EXISTS (SELECT k FROM u WHERE u.k = t.g GROUP BY k HAVING count(w) = 1)",
    "SELECT a, g FROM t WHERE NOT EXISTS (SELECT k FROM u WHERE u.k = t.g AND w > 1 GROUP BY k, w "
    "HAVING max(w) > 2) OR a = 1",
    "SELECT a, g, EXISTS (SELECT max(w) FROM u WHERE u.k = t.g GROUP BY k HAVING min(w) < 3) AS e FROM t",
]


@pytest.mark.parametrize("device, drivers", [("cpu", 1), ("cpu", 2), ("cuda-sim", 2)])
def test_exists_over_groups_matches_duckdb(device, drivers):
    session = session_with_tables(TABLES, device=device, drivers=drivers, fuse=False)
    with duckdb_with_tables(TABLES) as reference:
        assert_queries_match_duckdb(session, reference, QUERIES if device == "cpu" else QUERIES[:2])


@pytest.mark.parametrize("sql, message", [
    ("SELECT a FROM t WHERE EXISTS (SELECT k FROM u WHERE u.k = t.g GROUP BY k LIMIT 1)",
     "EXISTS over a subquery that groups or aggregates, correlated otherwise"),
    ("SELECT a FROM t WHERE EXISTS (SELECT k FROM u WHERE u.w = t.a GROUP BY k)",
     "correlate by a GROUP BY column"),
    ("SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.g AND EXISTS (SELECT 1 FROM u v WHERE v.w = t.a))",
     "a correlation two levels down"),
])
def test_what_stays_refused_names_the_construct_and_position(sql, message):
    session = session_with_tables(TABLES, device="cpu")
    with pytest.raises(SqlError) as raised:
        session.sql(sql)
    assert message in str(raised.value) and raised.value.line == 1 and raised.value.column_number is not None
