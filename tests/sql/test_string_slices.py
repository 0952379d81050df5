"""DuckDB's ``s[i]`` and ``s[a:b]`` on strings (were refused: "unsupported SQL construct Bracket").

``s[i]`` is the i-th character (1-based, from the end when negative, '' outside the string), ``s[a:b]`` the
characters a to b, both included, either bound omitted or negative. Each is planned as the SUBSTRING giving
the same characters; compared with DuckDB over NULLs, empty strings, multi-byte UTF-8 and an empty table, on
computed strings (``upper(s)[1]``, whose index sqlglot keeps as written, where a column's it keeps less one),
in WHERE, GROUP BY and a derived table (names as DuckDB's). A computed index ``s[k]`` is ``substring(s, k, 1)``
read per row (DuckDB's, out-of-range errors included); a computed slice bound, a slice whose bounds count from
different ends and a step are refused naming the construct and its position; Spark has no such form.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.errors import PlanError

T = pa.table({
    "k": pa.array([1, 2, 3, None, 5, 6], pa.int32()),
    "s": pa.array(["héllo", "", None, "a", "日本語テキスト", "ab,cd"]),
})
EMPTY = T.slice(0, 0)
INDEXES = ", ".join(f"s[{i}]" for i in (1, 2, -1, -2, 0, 9, -9))
SLICES = ", ".join(f"s[{a}:{b}]" for a, b in (
    (1, 2), (2, 3), (0, 2), (-3, -1), (4, 2), (-9, -4), (2, 9), ("", 2), (3, ""), (-1, ""), ("", ""), (0, 0)))
QUERIES = [
    f"SELECT {INDEXES} FROM t",
    f"SELECT {SLICES} FROM t",
    "SELECT upper(s)[1] AS a, upper(s)[-1] AS b, (s || 'é')[-1] AS c, 'héllo'[2:3] AS e, 'héllo'[2] AS f FROM t",
    "SELECT k FROM t WHERE s[1] = 'a' OR s[-2:] = 'cd'",
    "SELECT s[1], count(*) FROM t GROUP BY 1",
    "SELECT * FROM (SELECT s[1:2], s[-1] FROM t) x",
    f"SELECT {INDEXES} FROM e",
    "SELECT k, s[k] AS a, s[-k] AS b, s[k - 3] AS c, upper(s)[k + 1] AS d FROM t",  # an index read per row
    "SELECT s[k] AS a FROM e",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "e": EMPTY}) as connection:
        yield connection


def _session(device_name):
    return session_with_tables({"t": T, "e": EMPTY}, device=device_name, drivers=2, batch_rows=4)


def test_string_slices_match_duckdb_on_cpu(reference):
    assert_queries_match_duckdb(_session("cpu"), reference, QUERIES)


@pytest.mark.cpu_case_in("test_string_slices_match_duckdb_on_cpu")
def test_string_slices_match_duckdb_on_each_device(device_name, reference):
    assert_queries_match_duckdb(_session(device_name), reference, QUERIES[:3])


@pytest.mark.parametrize("sql, message", [
    ("SELECT s[s] FROM t", r"needs a BIGINT start, got string.*line 1, column"),
    ("SELECT s[2:-1] FROM t", r"bounds count from different ends.*substring.*line 1, column"),
    ("SELECT s[:-2] FROM t", r"bounds count from different ends.*line 1, column"),
    ("SELECT s[1:3:1] FROM t", r"slice step.*line 1, column"),
    ("SELECT k[1] FROM t", r"indexes a string.*int32.*line 1, column"),
])
def test_refusals_name_the_construct(sql, message):
    with pytest.raises(PlanError, match=f"(?s){message}"):
        _session("cpu").sql(sql)


def test_spark_refuses_brackets_on_strings():
    with pytest.raises(PlanError, match=r"(?s)indexes arrays and maps in Spark.*substring.*line 1"):
        _session("cpu").sql("SELECT s[1] FROM t", dialect="spark")
