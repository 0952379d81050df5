"""``x IN | op ANY | op ALL`` over a correlated subquery that aggregates, through Session.sql against DuckDB.

Grouped subqueries are computed once per correlation key (the correlation columns join the grouping keys) and read
as a filtered set; one-row aggregates (no GROUP BY) are the comparison with the scalar subquery. Checked with NULLs
in the compared value, the correlation key and the aggregates' results, keys without rows (the empty set, COUNT's
0), HAVING, in WHERE (conjunct, NOT IN, under OR) and in the SELECT list; what stays refused names the construct.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.sql.errors import SqlError

T = pa.table({
    "a": pa.array([1, 2, 3, 4, None, 2, 0, 5], pa.int64()),
    "g": pa.array(["x", "y", "x", None, "z", "y", "w", "x"]),
})
U = pa.table({
    "k": pa.array(["x", "x", "y", "y", "z", None, "x", "y"]),
    "h": pa.array([1, 2, 1, 1, 2, 1, 1, None], pa.int64()),
    "v": pa.array([3, 1, 2, None, 4, 9, None, 2], pa.int64()),
})
TABLES = {"t": T, "u": U}

QUERIES = [
    # grouped, in WHERE: IN (a semi join on key and value), NOT IN, ANY / ALL, under OR, with HAVING
    "SELECT a, g FROM t WHERE a IN (SELECT max(v) FROM u WHERE u.k = t.g GROUP BY u.h)",
    "SELECT a, g FROM t WHERE a NOT IN (SELECT min(v) FROM u WHERE u.k = t.g GROUP BY u.h)",
    "SELECT a, g FROM t WHERE a > ANY (SELECT max(v) FROM u WHERE u.k = t.g GROUP BY u.h)",
    "SELECT a, g FROM t WHERE a >= ALL (SELECT sum(v) FROM u WHERE u.k = t.g GROUP BY u.h HAVING count(*) > 1)",
    "SELECT a, g FROM t WHERE a IN (SELECT count(*) FROM u WHERE u.k = t.g GROUP BY u.h) OR a IS NULL",
    # grouped, as values
    "SELECT a, g, a IN (SELECT max(v) FROM u WHERE u.k = t.g GROUP BY u.h) AS m, "
    "a = ALL (SELECT max(v) FROM u WHERE u.k = t.g GROUP BY u.h) AS e, "
    "a < ANY (SELECT count(v) FROM u WHERE u.k = t.g AND u.h > 0 GROUP BY u.h) AS c FROM t",
    # one aggregate row a key (no GROUP BY): COUNT's 0 for a key without rows, NULL for the others
    "SELECT a, g FROM t WHERE a IN (SELECT max(v) FROM u WHERE u.k = t.g)",
    "SELECT a, g FROM t WHERE a NOT IN (SELECT count(*) FROM u WHERE u.k = t.g)",
    "SELECT a, g, a = ALL (SELECT min(v) FROM u WHERE u.k = t.g) AS p, "
    "a > ANY (SELECT count(v) FROM u WHERE u.k = t.g) AS q FROM t",
]
SIMULATED = [QUERIES[0], QUERIES[5]]


def test_sets_of_correlated_aggregates_match_duckdb_on_cpu(reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device="cpu", fuse=False), reference, QUERIES)


def test_sets_of_correlated_aggregates_match_duckdb_on_each_device(device_name, reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name), reference, SIMULATED)


@pytest.mark.parametrize("sql, message", [
    ("SELECT a FROM t WHERE a IN (SELECT max(v) FROM u WHERE u.k = t.g HAVING count(*) > 1)",
     "HAVING but no GROUP BY"),
    ("SELECT a FROM t WHERE a IN (SELECT max(v) FROM u WHERE u.v IS NOT DISTINCT FROM t.a + 1 GROUP BY u.k)",
     "correlated otherwise than by column equalities"),
    ("SELECT a FROM t WHERE a IN (SELECT max(v) FROM u WHERE u.k = t.g GROUP BY u.h LIMIT 1)", "with LIMIT"),
    ("SELECT a FROM t WHERE a IN (SELECT max(v) FROM u WHERE u.k = t.g GROUP BY ROLLUP (u.h))", "ROLLUP"),
])
def test_sets_of_correlated_aggregates_refused_name_the_construct_and_position(sql, message):
    with pytest.raises(SqlError) as raised:
        session_with_tables(TABLES, device="cpu").sql(sql)
    assert message in str(raised.value) and raised.value.line == 1 and raised.value.column_number is not None
