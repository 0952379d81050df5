"""LIKE / ILIKE / ESCAPE matched as DuckDB matches them, in time linear in the string.

A column pattern (``like_escape`` / ``ilike_escape``, each row's own pattern) was a Python regular expression per
pattern: ``%a%a%a%a%a%b`` over 100,000 ``a`` backtracked for hours (every placement of the five ``a``). Now the
greedy segment matcher (:mod:`gpu_engine.expressions.like_patterns`); the constant patterns' kernels and RE2 path
never backtracked. Hypothesis draws strings and patterns over a small alphabet (``%``, ``_``, the escape
character, case pairs whose lower case Python maps otherwise than DuckDB, a combining mark, empty strings, NULLs)
and checks the column-pattern and constant-pattern paths against DuckDB, on cpu and cuda-sim; a pattern ending
with its escape character raises where DuckDB's does (where the pattern before it matches a prefix of the string).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duckdb_reference import assert_same_rows, duckdb_table, session_with_tables
from gpu_engine.errors import ExecutionError
from gpu_engine.expressions.like_patterns import like_pattern

CRAFTED = "%a%a%a%a%a%b"
LONG = "a" * 100_000


class _CountingText(str):
    """A string that counts the searches the matcher asks of it."""

    calls = 0

    def find(self, *args):
        type(self).calls += 1
        return super().find(*args)

    def startswith(self, *args):
        type(self).calls += 1
        return super().startswith(*args)


@pytest.mark.parametrize("pattern, expected", [(CRAFTED, False), ("%a%a%a%a%a%a", True), ("%a_a%a__a%_a%b", False),
                                               ("%a%a_a%a%a%", True)])
def test_a_crafted_pattern_costs_a_few_searches(pattern, expected):
    _CountingText.calls = 0
    assert like_pattern(pattern, "").matches(_CountingText(LONG)) is expected
    assert _CountingText.calls <= 4 * len(pattern)


@pytest.mark.timeout(60)  # the regular expression took hours; the matcher takes milliseconds
def test_a_crafted_column_pattern_over_a_long_string_answers():
    table = pa.table({"s": [LONG, LONG + "b", "ab"], "p": [CRAFTED, CRAFTED, CRAFTED]})
    session = session_with_tables({"t": table}, device="cpu")
    result = session.sql("SELECT s LIKE p AS l, s ILIKE p AS i, s NOT LIKE p ESCAPE '!' AS n FROM t")
    assert result.to_pydict() == {"l": [False, True, False], "i": [False, True, False], "n": [True, False, True]}


ALPHABET = ["a", "b", "A", "é", "É", "ß", "ẞ", "İ", "i", "Σ", "σ", "\u0301", "%", "_", "!", "\\", " "]
TEXTS = st.none() | st.text(st.sampled_from(ALPHABET), max_size=7)
PATTERNS = st.none() | st.text(st.sampled_from(ALPHABET + ["%", "_", "!"]), max_size=6)
ESCAPES = st.sampled_from(["!", "", "\\", "%", "a"])
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _outcome(run):
    """Return a query's table, or the word 'error' where it raises (DuckDB's and the engine's errors alike)."""
    try:
        return run()
    except (duckdb.Error, ExecutionError) as error:
        assert "escape" in str(error).lower(), error
        return "error"


def _assert_same(session, connection, sql):
    expected = _outcome(lambda: duckdb_table(connection, sql))
    actual = _outcome(lambda: session.sql(sql))
    if isinstance(expected, str) or isinstance(actual, str):
        assert actual == expected, (sql, actual, expected)
    else:
        assert_same_rows(actual, expected)


@pytest.fixture(scope="module")
def connection():
    with duckdb.connect() as reference:
        yield reference


def _column_pattern_case(device_name, connection, rows, escape):
    table = pa.table({"k": pa.array(range(len(rows)), pa.int64()), "s": pa.array([s for s, _ in rows], pa.string()),
                      "p": pa.array([p for _, p in rows], pa.string())})
    connection.register("t", table)
    session = session_with_tables({"t": table}, split_rows=5, device=device_name, drivers=2)
    e = _literal(escape)
    _assert_same(session, connection, "SELECT k, s LIKE p AS l, s NOT ILIKE p AS i FROM t")
    _assert_same(session, connection, f"SELECT k, s LIKE p ESCAPE {e} AS l, like_escape(s, p, {e}) AS f FROM t")
    _assert_same(session, connection, f"SELECT k, s NOT ILIKE p ESCAPE {e} AS i, ilike_escape(s, p, {e}) AS f FROM t")


def _constant_pattern_case(device_name, connection, texts, pattern, escape):
    # A constant pattern ending with its escape character is refused at plan time (DuckDB: an error on the rows
    # its matcher reaches the end on); the other constant patterns run the LIKE kernels or RE2.
    if like_pattern(pattern, escape).dangling:
        return
    table = pa.table({"k": pa.array(range(len(texts)), pa.int64()), "s": pa.array(texts, pa.string())})
    table = table.append_column("d", table.column("s").dictionary_encode())
    connection.register("t", table)
    session = session_with_tables({"t": table}, split_rows=4, device=device_name, drivers=2)
    p, e = _literal(pattern), _literal(escape)
    _assert_same(session, connection, f"SELECT k, s LIKE {p} AS l, d NOT LIKE {p} AS n, s ILIKE {p} AS i, "
                                      f"d ILIKE {p} AS di FROM t")
    _assert_same(session, connection, f"SELECT k, s LIKE {p} ESCAPE {e} AS l, d ILIKE {p} ESCAPE {e} AS i, "
                                      f"s NOT ILIKE {p} ESCAPE {e} AS n FROM t")


@settings(max_examples=15, **SETTINGS)
@given(rows=st.lists(st.tuples(TEXTS, PATTERNS), min_size=1, max_size=12), escape=ESCAPES)
def test_column_patterns_match_duckdb_on_cpu(connection, rows, escape):
    _column_pattern_case("cpu", connection, rows, escape)


@settings(max_examples=10, **SETTINGS)
@given(texts=st.lists(TEXTS, min_size=1, max_size=12), pattern=st.text(st.sampled_from(ALPHABET), max_size=6),
       escape=ESCAPES)
def test_constant_patterns_match_duckdb_on_cpu(connection, texts, pattern, escape):
    _constant_pattern_case("cpu", connection, texts, pattern, escape)


@settings(max_examples=5, **SETTINGS)
@given(rows=st.lists(st.tuples(TEXTS, PATTERNS), min_size=1, max_size=12), escape=ESCAPES,
       pattern=st.text(st.sampled_from(ALPHABET), max_size=6))
def test_like_matches_duckdb_on_each_device(device_name, connection, rows, escape, pattern):
    _column_pattern_case(device_name, connection, rows, escape)
    _constant_pattern_case(device_name, connection, [s for s, _ in rows], pattern, escape)
