"""``s [NOT] GLOB p`` through Session.sql against DuckDB (was refused): ``*``, ``?``, classes with ranges, ``[!...]``
complements, a ``]`` first in a class, an unterminated class (nothing matches), ``\\`` escapes, regular-expression
characters taken literally, multi-byte text, newlines, NULLs, an empty table; DuckDB's column name ``(s ~~~ p)``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

PATTERNS = ["a*", "a?c", "[ab]bc", "[!b]bc", "[a-c]b?", "a\\*c", "a.c", "?b", "a?b", "[^a]bc", "*", "", "ab]", "a[b",
            "a[]c", "a[]]c", "A*", "a[-]c", "a\\\\c", "[!]]", "[a-]", "[!a-c]", "日?", "a[\\^]b", "a\\", "*$(x|y)+"]
VALUES = ["abc", "a*c", "a.c", "éb", "a\nb", "^bc", "", "ab]", "a[b", "a]c", "a-c", "a\\c", "b", "]", "a", "-", "x",
          "日本", "a^b", "a$(x|y)+", None]
T = pa.table({"k": pa.array(range(len(VALUES)), pa.int64()), "s": pa.array(VALUES)})
T = T.append_column("ds", T.column("s").dictionary_encode())


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


QUERIES = ["SELECT k, " + ", ".join(f"s GLOB {_quoted(p)} AS g{i}" for i, p in enumerate(PATTERNS)) + " FROM t",
           "SELECT k, ds GLOB '[a-c]*' AS a, s NOT GLOB '*c' AS b, NOT (ds GLOB '?') AS c, NULL GLOB 'a' AS e FROM t",
           "SELECT s GLOB 'a*', count(*) AS n FROM t GROUP BY 1",
           "SELECT k FROM t WHERE s GLOB '*' AND k < 0"]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


def test_glob_matches_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T}, split_rows=6, device="cpu", drivers=2, batch_rows=4)
    assert_queries_match_duckdb(session, reference, QUERIES)


def test_glob_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T}, split_rows=30, device=device_name, drivers=1, batch_rows=30)
    assert_queries_match_duckdb(session, reference, QUERIES[1:2])
