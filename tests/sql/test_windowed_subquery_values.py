"""A window as the value of a correlated scalar subquery, computed over each outer row's rows, as DuckDB does.

``(SELECT sum(u.k) OVER (ORDER BY u.id) FROM u WHERE u.id = t.id)`` was refused: the windowed ``sum`` read as
the subquery's aggregate ("column u.k is not available here (in an aggregate query ...)"), ``row_number() OVER
()`` as "a window function inside an aggregate", and with LIMIT as "unsupported window function 'NULL'". Now
each window is also partitioned by the correlation key and the subquery is its rows per key
(``gpu_engine/sql/subquery_values.py`` ``_windows_per_key``); an outer row meeting two rows fails with DuckDB's
error. Checked against DuckDB on cpu (one query on cuda-sim).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import ExecutionError

T = pa.table({
    "id": pa.array(range(6), pa.int64()),
    "k": pa.array([1, None, 2, 3, 1, 2], pa.int32()),
    "s": pa.array(["a", None, "bc", "", "ä", "z"]),
})
#: ``u`` ends with two rows of an id no outer row meets: with its ids unique, each outer row's one-row check (a
#: count per id) was a projection (optimizer/unique_groupings.py).
U = pa.concat_tables([T.slice(0, 3), pa.table({"id": pa.array([9, 9], pa.int64()), "k": pa.array([4, None], pa.int32()),
                                               "s": pa.array(["q", None])})])
TABLES = {"t": T, "u": U, "v": T, "e": T.slice(0, 0)}

QUERIES = [
    "SELECT t.id, (SELECT sum(u.k) OVER (ORDER BY u.id) FROM u WHERE u.id = t.id) AS w FROM t",
    "SELECT t.id, (SELECT row_number() OVER () FROM u WHERE u.id = t.id) AS w FROM t",
    "SELECT t.id, (SELECT max(v.k) OVER () FROM v WHERE v.k = t.k LIMIT 1) AS w FROM t",
    "SELECT t.id, (SELECT sum(v.id) OVER (ORDER BY v.id) FROM v WHERE v.k = t.k ORDER BY v.id DESC LIMIT 1) AS w "
    "FROM t",
    "SELECT t.id, (SELECT rank() OVER (ORDER BY u.s) FROM u WHERE u.id = t.id AND u.k > 0) + 1 AS w FROM t",
    "SELECT t.id FROM t WHERE t.k = (SELECT max(u.k) OVER () FROM u WHERE u.id = t.id)",
    "SELECT t.id, (SELECT count(*) OVER () FROM v WHERE v.k = t.k QUALIFY row_number() OVER (ORDER BY v.id) = 1) "
    "AS w FROM t",
    "SELECT t.id, (SELECT lag(u.s) OVER (ORDER BY u.id) FROM u WHERE u.id = t.id) AS w FROM t",
    "SELECT t.id, (SELECT sum(e.k) OVER () FROM e WHERE e.id = t.id) AS w FROM t",
]


def test_windowed_subquery_values_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, split_rows=4, device="cpu", drivers=2, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_windowed_subquery_value_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, split_rows=4, device=device_name, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES[:1])


def test_a_windowed_value_of_several_rows_fails_as_in_duckdb(reference):
    sql = "SELECT t.id, (SELECT sum(v.k) OVER (ORDER BY v.id) FROM v WHERE v.k = t.k) AS w FROM t"  # k 1: 2 rows
    with pytest.raises(Exception, match="More than one row returned by a subquery used as an expression"):
        reference.execute(sql).fetchall()
    with pytest.raises(ExecutionError, match="More than one row returned by a subquery used as an expression"):
        session_with_tables(TABLES, device="cpu", fuse=False).sql(sql)
