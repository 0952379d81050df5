"""A text column compared for equality with a number, boolean or date column: DuckDB casts the text, so does the engine.

DuckDB binds ``text_col = int_col`` (``<>``, IS [NOT] DISTINCT FROM, a correlated EXISTS' equality, a join's ON)
by casting the VARCHAR side to the other side's type, and raises when a compared text is no such value ("Could not
convert string 'x' to INT32"); ordering comparisons (``<``) and IN subqueries of such a pair it refuses. The
engine refused every such pair ("cannot compare string with int32"; "a [NOT] EXISTS / IN whose every correlation
equality compares different types", the breadth fuzz's seeds 9760 and 9864). Checked against DuckDB on cpu, a few
on cuda-sim; NULL texts and an empty table included.
"""

from __future__ import annotations

import decimal

import duckdb
import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

T = pa.table({
    "id": pa.array(range(6), pa.int64()),
    "k": pa.array([1, None, 2, 3, 1, -2], pa.int32()),
    "d": pa.array([decimal.Decimal(v) if v else None for v in ("1.25", "-2.50", None, "0.00", "9.99", "3.10")],
                  pa.decimal128(9, 2)),
    "dt": pa.array([9131, None, 9132, 9162, 9131, 9500], pa.date32()),
    "b": pa.array([True, None, False, True, False, None]),
    "g": pa.array(["x", None, "y", "ü", "x", "y"]),
})
W = pa.table({
    "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
    "sk": pa.array(["1", " 2", None, "3", "-2"]),
    "sd": pa.array(["1.25", "-2.5", "0", None, "3.1"]),
    "sdt": pa.array(["1995-01-01", None, "1995-02-01", "1995-01-02", "1995-01-01"]),
    "sb": pa.array(["true", "f", None, "TRUE", "false"]),
})
TABLES = {"t": T, "w": W, "e": T.slice(0, 0), "we": W.slice(0, 0)}

QUERIES = [
    # correlated EXISTS / NOT EXISTS on a text = number (date, decimal) equality, each side outer
    "SELECT x.id FROM t x WHERE EXISTS (SELECT 1 FROM w y WHERE y.sk = x.k)",
    "SELECT x.id FROM t x WHERE NOT EXISTS (SELECT 1 FROM w y WHERE x.k = y.sk)",
    "SELECT y.id FROM w y WHERE EXISTS (SELECT 1 FROM t x WHERE x.d = y.sd)",
    "SELECT y.id FROM w y WHERE NOT EXISTS (SELECT 1 FROM t x WHERE x.dt = y.sdt AND x.k > 1)",
    "SELECT x.id, NOT EXISTS (SELECT 1 FROM e y WHERE y.k = x.g) AS flag FROM t x",
    "SELECT x.id FROM t x WHERE EXISTS (SELECT 1 FROM we y WHERE y.sk = x.k) OR x.id = 2",
    # joins, filters and values
    "SELECT w.id, t.id AS tid FROM w JOIN t ON w.sk = t.k",
    "SELECT w.id, t.id AS tid FROM w LEFT JOIN t ON w.sd = t.d",
    "SELECT w.id, t.id AS tid FROM w, t WHERE w.sdt = t.dt",
    "SELECT w.id, w.sk = 2 AS a, w.sk <> w.id AS c, w.sd = 1.25 AS e, w.sdt = DATE '1995-01-01' AS f, "
    "w.sb = TRUE AS h, w.sk IS DISTINCT FROM 1 AS i, w.sk IS NOT DISTINCT FROM w.id AS j FROM w",
    "SELECT w.id FROM w WHERE w.sk = w.id OR w.sb = (w.id > 2)",
]

#: DuckDB raises for these: text that is no such value compared (when the query runs), ordering comparisons and
#: an IN subquery of a text and a number (while binding); the engine raises too.
RAISING = [
    ("SELECT x.id FROM t x WHERE NOT EXISTS (SELECT 1 FROM t y WHERE y.g = x.k)", "(?i)could not convert"),
    ("SELECT id FROM t WHERE g = 1", "(?i)could not convert"),
    ("SELECT id FROM w WHERE sk < id", "(?i)compare"),
    ("SELECT id FROM w WHERE sk IN (SELECT k FROM t)", "(?i)compare"),
    ("SELECT id, sk IN (SELECT k FROM t) AS a FROM w", "(?i)compare"),
    ("SELECT id FROM w WHERE sk = ANY (SELECT k FROM t) OR id = 2", "(?i)compare"),
]


def test_text_columns_equal_to_other_types_as_in_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, split_rows=2, device="cpu", drivers=2, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_text_columns_equal_to_other_types_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, split_rows=2, device=device_name, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES[:1] + QUERIES[6:7])


@pytest.mark.parametrize("sql, message", RAISING)
def test_text_that_is_no_such_value_or_an_ordering_raises_as_in_duckdb(sql, message, reference):
    with pytest.raises(duckdb.Error, match=message):
        reference.execute(sql).fetchall()
    with pytest.raises(Exception, match=message):
        session_with_tables(TABLES, device="cpu", fuse=False).sql(sql)


def test_spark_sql_keeps_refusing_a_text_column_equal_to_a_number():
    """Spark casts such text its own way (NULL for text that is no number, a DOUBLE beside a DECIMAL), which the
    engine does not compute: refused in Spark's dialect, as before (gpu_engine/plans/sql_dialects.py)."""
    session = session_with_tables(TABLES, device="cpu", fuse=False)
    with pytest.raises(Exception, match="cannot compare|compares different types"):
        session.sql("SELECT id FROM w WHERE sk = id", dialect="spark")
    with pytest.raises(Exception, match="cannot compare|compares different types"):
        session.sql("SELECT x.id FROM t x WHERE EXISTS (SELECT 1 FROM w y WHERE y.sk = x.k)", dialect="spark")
