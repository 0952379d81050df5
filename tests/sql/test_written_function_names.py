"""Unaliased columns named as DuckDB names them where sqlglot prints them otherwise (issue 30): ``string_agg`` /
``group_concat`` / ``listagg`` by the spelling written (sqlglot reads all three into one node it prints as
``listagg``), a scalar subquery's inside by DuckDB's operator printing (``(SELECT min(x) FROM t WHERE (x > 1))``),
``x IN (SELECT ...)`` as ``(x = ANY(SELECT ...))``, ``LIKE`` as ``(s ~~ p)`` and ``LIKE ... ESCAPE`` as
``like_escape(s, p, e)``. Each case asks DuckDB for the name of the same text and checks the rows too."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_table, duckdb_with_tables, session_with_tables

T = pa.table({
    "g": pa.array([1, 1, 2, 2, None], pa.int32()),
    "x": pa.array([1, 2, 3, None, 5], pa.int64()),
    "s": pa.array(["a", "b", None, "dé", "e"]),
})

GROUPED = [
    "string_agg(s, ',')", "string_agg(s)", "STRING_AGG(s)", "string_agg(DISTINCT s, '-')",
    "string_agg(s ORDER BY x DESC)", "string_agg(s, ';' ORDER BY x)", "group_concat(s)", "group_concat(s, '|')",
    "listagg(s)", "string_agg(s, ',') FILTER (WHERE x > 1)", "upper(string_agg(s, ','))",
    "group_concat(s), listagg(s, 'string_agg(')", "string_agg(s) || listagg(s, '/')",
]
PLAIN = [
    "(SELECT min(x) FROM t WHERE x > 1)", "(SELECT max(x) + 1 FROM t)", "(SELECT max(x) AS m FROM t WHERE x > 1 AND g < 3)",
    "(SELECT count(*) FROM t AS u WHERE u.x = t.x)", "(SELECT coalesce(max(x), 0) FROM t WHERE x BETWEEN 1 AND 2)",
    "(SELECT max(x) FROM t) + 1", "(SELECT (SELECT max(g) FROM t) - min(x) FROM t)",
    "x IN (SELECT g FROM t WHERE g > 1)", "x NOT IN (SELECT g FROM t WHERE g > 1)", "x = ANY (SELECT g FROM t)",
    "s LIKE 'a%'", "s NOT LIKE '%e'", "s ILIKE 'D%'", "s NOT ILIKE 'A'", "NOT (s LIKE 'a')",
    "s LIKE 'a!%' ESCAPE '!'", "s NOT ILIKE 'D!_%' ESCAPE '!'",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T}) as connection:
        yield connection


@pytest.mark.parametrize("expression", GROUPED)
def test_string_agg_named_as_written(expression, reference):
    session = session_with_tables({"t": T}, device="cpu")
    sql = f"SELECT g, {expression} FROM t GROUP BY g"
    assert session.sql_plan(sql).output_schema.names == duckdb_table(reference, sql).column_names


@pytest.mark.parametrize("expression", PLAIN)
def test_subqueries_and_like_named_as_duckdb(expression, reference):
    session = session_with_tables({"t": T}, device="cpu")
    sql = f"SELECT {expression} FROM t"
    assert session.sql_plan(sql).output_schema.names == duckdb_table(reference, sql).column_names


@pytest.mark.parametrize("sql", [
    "WITH w AS (SELECT g, group_concat(s) AS a FROM t GROUP BY g) SELECT g, string_agg(a, ';') FROM w GROUP BY g",
    "SELECT g, listagg(s) FROM t WHERE g IN (SELECT g FROM t GROUP BY g HAVING group_concat(s) > '') GROUP BY g "
    "HAVING string_agg(s) > '' ORDER BY group_concat(s)",
])
def test_spellings_are_matched_in_the_order_written(sql, reference):
    session = session_with_tables({"t": T}, device="cpu")
    assert session.sql_plan(sql).output_schema.names == duckdb_table(reference, sql).column_names


def test_named_columns_answer_as_duckdb(reference):
    session = session_with_tables({"t": T}, split_rows=2, device="cpu", drivers=2)
    assert_queries_match_duckdb(session, reference, [
        "SELECT g, string_agg(s ORDER BY x DESC), group_concat(s, '|' ORDER BY x) FROM t GROUP BY g",
        "SELECT x, (SELECT min(x) FROM t WHERE x > 1), x IN (SELECT g FROM t WHERE g > 1), s LIKE 'a%' FROM t",
    ])


#: Functions sqlglot reads several spellings of into one node (named by the spelling written), keyword functions
#: DuckDB quotes, and forms it prints its own way (CASE, SIMILAR TO, IS DISTINCT FROM, true / false).
SPELLED = [
    "var_samp(x), variance(x), min_by(s, x), arg_min(s, x), argmax(s, x), max_by(s, x), countif(x > 1), "
    "count_if(x > 1), bool_and(x > 1), bool_or(g = 1), first(s), last(s)",
    "ceiling(x), ceil(x), pow(x, 2), power(x, 2), mod(x, 2), ucase(s), lcase(s), len(s), char_length(s), "
    "length(s), substr(s, 1, 2), substring(s, 1, 2), instr(s, 'b'), strpos(s, 'b'), position('b' IN s), log10(x), "
    "log2(x), log(2, x), replace(s, 'a', 'b'), trim(s, 'a'), s SIMILAR TO 'b.*', x IS DISTINCT FROM g, "
    "x IS NOT DISTINCT FROM g, g = 1 AND true",
    "x % 3, CASE WHEN x > 1 THEN 1 END, CASE g WHEN 1 THEN 'a' ELSE s END, CASE WHEN s IS NULL THEN x + 1 ELSE 2 END",
]


@pytest.mark.parametrize("expressions", SPELLED, ids=["aggregates", "scalars", "case"])
def test_spelled_and_keyword_functions_named_as_duckdb(expressions, reference):
    session = session_with_tables({"t": T}, device="cpu")
    sql = f"SELECT {expressions} FROM t" + (" GROUP BY ALL" if "var_samp" in expressions else "")
    assert session.sql_plan(sql).output_schema.names == duckdb_table(reference, sql).column_names
