"""``[NOT] LIKE / ILIKE ... ESCAPE`` through Session.sql against DuckDB: values, NULLs and DuckDB's column names
(``like_escape(s, pattern, escape)``), escaped wildcards (the regular-expression path) and escaped ordinary
characters (the LIKE kernels' path), multi-byte text, an empty escape, an empty table; DuckDB's errors for an
escape string of two characters and for a pattern ending with the escape character (where DuckDB's matcher
reaches it)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.errors import ExecutionError, PlanError

VALUES = ["", "a", "a%b", "a_b", "aXb", None, "a!b", "A_B", "a\nb", "aéb", "a%", "100%", "x.y", "a\\b", "日本_語",
          "_", "%", "A%B", "a$^.*+?()[]{}|-#&~%", None]
T = pa.table({"k": pa.array(range(len(VALUES)), pa.int64()), "s": pa.array(VALUES)})
T = T.append_column("ds", T.column("s").dictionary_encode())

QUERIES = [
    "SELECT k, s LIKE 'a!%b' ESCAPE '!', s LIKE 'a!_b' ESCAPE '!', s LIKE 'a!!b' ESCAPE '!', "
    "s LIKE 'a!Xb' ESCAPE '!', s LIKE '%!%' ESCAPE '!' FROM t",
    "SELECT k, ds LIKE 'a!%%' ESCAPE '!', ds LIKE '_!_%' ESCAPE '!', s LIKE 'a\\%b' ESCAPE '\\', "
    "s LIKE 'x.y' ESCAPE '!', s LIKE 'x_y' ESCAPE '' FROM t",
    "SELECT k, s ILIKE 'A!_b' ESCAPE '!', s NOT ILIKE 'a!%B' ESCAPE '!', s NOT LIKE 'a!_b' ESCAPE '!', "
    "ds ILIKE '%!%%' ESCAPE '!' FROM t",
    "SELECT k, NOT (s LIKE '_!%' ESCAPE '!') AS n, s LIKE '日本!_語' ESCAPE '!', s LIKE '日本__' ESCAPE '!', "
    "s LIKE 'a%%b' ESCAPE '%', s LIKE 'a_%' ESCAPE '#' FROM t",
    "SELECT k, s LIKE 'a$^.*+?()[]{}|-#&~!%' ESCAPE '!', s LIKE 'a' ESCAPE NULL, NULL LIKE 'a!%' ESCAPE '!' FROM t",
    "SELECT count(*) AS n FROM t WHERE s LIKE '%!%' ESCAPE '!' OR ds NOT LIKE '%!_%' ESCAPE '!'",
    "SELECT k FROM t WHERE s LIKE 'a!%' ESCAPE '!' AND k < 0",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


def test_like_escape_matches_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T}, split_rows=7, device="cpu", drivers=2, batch_rows=5)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_like_escape_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T}, split_rows=7, device=device_name, drivers=1, batch_rows=8)
    assert_queries_match_duckdb(session, reference, [QUERIES[0], QUERIES[2]])


@pytest.mark.parametrize("sql, message", [
    ("SELECT s LIKE 'a' ESCAPE 'xy' FROM t", "Escape string must be empty or one character"),
])
def test_bad_escapes_are_refused_as_duckdb_refuses_them(reference, sql, message):
    with pytest.raises(Exception, match="(?i)escape"):
        reference.sql(sql).fetchall()
    session = session_with_tables({"t": T}, split_rows=7, device="cpu", drivers=1)
    with pytest.raises(PlanError, match=message) as raised:
        session.sql(sql)
    assert "ESCAPE" in str(raised.value)


def test_a_pattern_ending_with_its_escape_raises_where_duckdb_does(reference):
    """DuckDB raises "Like pattern must not end with escape character!" only on a row whose match reaches the
    escape at the end (the pattern before it matches a prefix of the string), else the row is false: such a
    constant pattern is matched row by row (it was refused while planning)."""
    session = session_with_tables({"t": T}, split_rows=7, device="cpu", drivers=1)
    assert_queries_match_duckdb(session, reference, [
        "SELECT k, s LIKE 'zz!' ESCAPE '!' AS l, s NOT ILIKE 'Q%!' ESCAPE '!' AS i FROM t",
        "SELECT k FROM t WHERE NOT (s LIKE '日本_x!' ESCAPE '!') OR s IS NULL"])
    sql = "SELECT s LIKE 'a!' ESCAPE '!' FROM t"
    with pytest.raises(Exception, match="(?i)escape"):
        reference.sql(sql).fetchall()
    with pytest.raises(ExecutionError, match="Like pattern must not end with escape character!"):
        session.sql(sql)
