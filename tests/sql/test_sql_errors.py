"""Bad and unsupported SQL gets an engine error naming the construct and its position, never an internal one.

A sweep over malformed and unsupported query texts (typos, unknown names,
wrong arity, constructs the planner has no node for, table functions, deep
nesting) plans each one and asserts a :class:`SqlError` (a ``PlanError``)
whose message names the construct and carries a line and column: never a
``TypeError``/``KeyError``/``AttributeError``/``RecursionError`` or one of
sqlglot's own errors, and never sqlglot's class names in the message.
Nesting DuckDB answers (hundreds of parentheses, NOTs, CASEs, subqueries) is
planned and answered.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from duckdb_reference import assert_same_rows, duckdb_connection, duckdb_table
from gpu_engine.errors import GpuEngineError
from gpu_engine.plans.expressions import MAX_EXPRESSION_DEPTH
from gpu_engine.session import Session
from gpu_engine.sql import SQL_DIALECTS, SqlError, plan_sql

CATALOG = {
    "t": pa.schema([("a", pa.int64()), ("b", pa.string()), ("d", pa.float64())]),
    "u": pa.schema([("a", pa.int64()), ("c", pa.string())]),
}

#: Query text -> a word the message must contain (the construct or name, case-insensitive).
BAD_SQL = {
    "SELECT a FROM t WHERE": "WHERE",
    "SELEC a FROM t": "SELEC",
    "SELECT a FROM t WHER a = 1": "WHER",
    "SELECT a FROM tt": "tt",
    "SELECT aa FROM t": "aa",
    "SELECT x.a FROM t": "x",
    "SELECT a FROM t JOIN u ON t.a = u.zz": "zz",
    "SELECT nosuchfn(a) FROM t": "nosuchfn",
    "SELECT a FROM t WHERE a = ": "=",
    "SELECT a FROM t GROUP BY": "GROUP BY",
    "SELECT a FROM t ORDER BY": "ORDER BY",
    "SELECT (a FROM t": "(",
    "SELECT a FROM t WHERE a IN (": "(",
    "SELECT 'abc FROM t": "quoted",
    "SELECT a FROM t LIMIT 'x'": "LIMIT",
    "SELECT sum(a, b) FROM t": "sum",
    "SELECT substring() FROM t": "substring",
    "SELECT a FROM t GROUP BY ROLLUP (a, 1)": "GROUP BY position 1 repeats the key",
    "SELECT grouping(b) FROM t GROUP BY CUBE (a)": "must be a grouping column",
    "SELECT a, count(*) FROM t GROUP BY GROUPING SETS (GROUPING SETS ((a)), ())": "GROUPING SETS nested in",
    "SELECT * FROM read_csv('x.csv')": "read_csv(...) in FROM: only Parquet files are read",
    "SELECT * FROM read_parquet('x.parquet')": "read_parquet",
    # a series reading t's columns answers since 0e37516 (an Unnest); under an outer join it is still refused
    "SELECT * FROM t LEFT JOIN u ON t.a = u.a, generate_series(1, t.a) g": "in a query with outer joins",
    "SELECT * FROM range(10.5)": "range",
    "SELECT * FROM 'x.parquet'": "x.parquet",
    "SELECT t.a FROM t, LATERAL (SELECT u.a FROM u WHERE u.a > t.a GROUP BY u.a) s": "LATERAL",  # lateral_joins
    "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r": "RECURSIVE",
    "SELECT * FROM t PIVOT (sum(a) FOR b IN ('x', 'y'))": "PIVOT",
    "SELECT * FROM t UNPIVOT (v FOR k IN (a, d))": "UNPIVOT",
    "SELECT a FROM bogus_catalog.bogus_schema.t": "unknown catalog 'bogus_catalog'",
    "SELECT a FROM bogus_schema.t": "unknown schema 'bogus_schema'",
    "SELECT a FROM memory.bogus_schema.t": "unknown schema 'bogus_schema'",
    'SELECT a AS "" FROM t': "zero-length",
    "SELECT a FROM t USING SAMPLE 10% (bernoulli, 42)": "TABLESAMPLE",  # a seeded sample (p% alone: samples.py)
    "SELECT a FROM t QUALIFY a > 1": "QUALIFY",
    "INSERT INTO t VALUES (1, 'x', 1.0)": "INSERT",
    "SELECT 1; SELECT 2": "statement",
    "SELECT a FROM t ORDER BY 5": "ORDER BY 5: there is no output column 5",
    "SELECT a FROM t GROUP BY 7": "GROUP BY 7: there is no output column 7",
    "SELECT * FROM t JOIN u USING (zz)": "USING (zz)",
    "SELECT substr(b) FROM t": "substring(...) needs a start position",
    "SELECT *": "SELECT * needs a FROM clause",
    "SELECT a FROM": "Expected table name but got the end of the text",
    "SELECT x FROM (VALUES (1), (2, 3)) v(x)": "VALUES lists must all be the same length",
    "SELECT * FROM (VALUES (1, 2)) v(x, y, z)": "2 columns but 3 column names",
    "SELECT * FROM (VALUES ('a'), (1)) v(x)": "no common type",
    "SELECT * FROM (VALUES (a)) v(x)": "unknown column 'a'",
    "SELECT a FROM t WHERE row_number() OVER (ORDER BY a) = 1": "a window function in WHERE",
    "SELECT sum(a) OVER (ORDER BY b RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t": "needs a numeric, DATE or TIMESTAMP ORDER BY key",
    "SELECT sum(b) FROM t": "sum",
    "SELECT a + b FROM t": "+",
    "SELECT upper(a) FROM t": "upper",
    "SELECT a FROM t WHERE sum(a) > 1": "sum",
    "SELECT a FROM t LIMIT a": "LIMIT",
    "SELECT a::nosuchtype FROM t": "nosuchtype",
    "SELECT a FROM t WHERE a IN (SELECT a, c FROM u)": "one-column",
    "SELECT DISTINCT ON (a) a, b FROM t QUALIFY row_number() OVER (ORDER BY b) > 1": "DISTINCT ON with QUALIFY",
    "SELECT a FROM t WHERE a GLOB 'x*'": "GLOB needs a string",
    "SELECT max(a, 2) FROM t": "max",
    "SELECT a FROM t LIMIT 10%": "LIMIT",
    "SELECT percentile_cont([0.25, 0.5]) WITHIN GROUP (ORDER BY a) FROM t": "list of fractions",
    "CREATE TABLE x AS SELECT a FROM t": "CREATE",
    "EXPLAIN SELECT a FROM t": "not EXPLAIN",
    "SELECT a FROM t FOR UPDATE": "FOR UPDATE",
    # Accepted silently before: HAVING made a WHERE, an absent EXCLUDE/REPLACE name was ignored (DuckDB refuses both).
    "SELECT a FROM t HAVING a > 1": "column 'a' must appear in the GROUP BY clause",
    "SELECT * EXCLUDE (zz) FROM t": "column 'zz' in the EXCLUDE list",
    "SELECT * REPLACE (a + 1 AS zz) FROM t JOIN u ON t.a = u.a": "column 'zz' in the REPLACE list",
}


@pytest.mark.parametrize("text", list(BAD_SQL), ids=range(len(BAD_SQL)))
def test_bad_sql_gets_an_engine_error_naming_the_construct_and_its_position(text):
    with pytest.raises(GpuEngineError) as caught:
        plan_sql(text, CATALOG)
    error = caught.value
    message = str(error)
    assert isinstance(error, SqlError), f"{type(error).__name__}: {message}"
    assert BAD_SQL[text].lower() in message.lower(), message
    assert "sqlglot" not in message and "<class" not in message and "Required keyword" not in message, message
    assert error.line is not None and error.column_number is not None, message
    assert f"(line {error.line}, column {error.column_number})" in message


@pytest.mark.parametrize("text, names", [
    ("SELECT (((a))), (t.b) FROM t", ["a", "b"]),  # DuckDB names a parenthesized column by the column
    ("SELECT * EXCLUDE (b) FROM t", ["a", "d"]),
    ("SELECT * REPLACE (a + 1 AS a) FROM t", ["a", "b", "d"]),
    ("SELECT count(*) AS n FROM t HAVING count(*) > 1", ["n"]),
])
def test_accepted_forms_keep_duckdbs_names(text, names):
    assert plan_sql(text, CATALOG).output_schema.names == names


#: Table references DuckDB resolves to the session's own tables (its default catalog and schema).
KNOWN_QUALIFIED = ["SELECT a FROM main.t", "SELECT a FROM memory.main.t", "SELECT t.a FROM memory.t"]


@pytest.mark.parametrize("text", KNOWN_QUALIFIED)
def test_the_default_catalog_and_schema_name_registered_tables(text):
    assert plan_sql(text, CATALOG).output_schema.names == ["a"]


def test_spark_default_database_names_registered_tables():
    assert plan_sql("SELECT a FROM default.t", CATALOG, dialect="spark").output_schema.names == ["a"]


@pytest.mark.parametrize("dialect, error", [("nosuch", ValueError), ("DuckDB ", ValueError), (3, TypeError),
                                            (None, TypeError)])
def test_an_unknown_dialect_is_refused_naming_the_known_ones(dialect, error):
    with pytest.raises(error, match="dialect") as caught:
        plan_sql("SELECT a FROM t", CATALOG, dialect=dialect)
    assert all(name in str(caught.value) for name in SQL_DIALECTS)


def _nested(kind: str, n: int) -> str:
    return {
        "parentheses": "SELECT " + "(" * n + "a" + ")" * n + " AS x FROM t",
        "not": "SELECT a FROM t WHERE " + "NOT " * n + "a = 1",
        "case_else": "SELECT " + "CASE WHEN a = 1 THEN 1 ELSE " * n + "0" + " END" * n + " AS c FROM t",
        "case_then": "SELECT " + "CASE WHEN a > 0 THEN " * n + "a" + " END" * n + " AS c FROM t",
        "subqueries": "SELECT a FROM t WHERE a = " + "(SELECT max(a) FROM t WHERE a = " * n + "1" + ")" * n,
        "derived_tables": "SELECT * FROM " + "(SELECT * FROM " * n + "t" + ")" * n,
    }[kind]


#: Nesting DuckDB answers, as the issue's probes nest it: each must plan (it raised RecursionError).
DEEP = [("parentheses", 300), ("not", 300), ("case_else", 100), ("case_then", 100), ("subqueries", 60),
        ("derived_tables", 200)]


@pytest.mark.parametrize("kind, n", DEEP)
def test_deep_nesting_duckdb_answers_is_planned(kind, n):
    plan_sql(_nested(kind, n), CATALOG)


@pytest.mark.parametrize("kind, construct", [("parentheses", "parentheses"), ("not", "NOT"),
                                             ("case_else", "CASE"), ("case_then", "CASE"),
                                             ("subqueries", "subqueries"), ("derived_tables", "parentheses")])
def test_nesting_past_the_limit_is_a_clean_error_naming_the_construct(kind, construct):
    with pytest.raises(SqlError, match="nests too deeply") as caught:
        plan_sql(_nested(kind, MAX_EXPRESSION_DEPTH + 1), CATALOG)
    assert construct in str(caught.value) and caught.value.line == 1 and caught.value.column_number > 1


def test_a_long_chain_past_the_limit_names_its_operator():
    text = "SELECT " + " || ".join(["b"] * (MAX_EXPRESSION_DEPTH + 5)) + " AS x FROM t"
    with pytest.raises(SqlError, match=r"nests too deeply: more than \d+ levels of \|\| terms") as caught:
        plan_sql(text, CATALOG)
    assert caught.value.line == 1


@pytest.fixture(scope="module")
def table_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("nesting") / "t.parquet"
    pq.write_table(pa.table({"a": pa.array([1, 2, 3, None], pa.int64()), "b": ["x", "y", "z", "w"],
                             "d": [1.5, -2.0, 0.0, None]}), path)
    return path


@pytest.mark.parametrize("kind, n", [("parentheses", 300), ("not", 300), ("case_else", 100), ("subqueries", 40)])
def test_deep_nesting_answers_as_duckdb(kind, n, table_file, device_name):
    session = Session(device_name)
    session.register("t", str(table_file))
    text = _nested(kind, n)
    connection = duckdb_connection({"t": table_file})
    connection.execute("SET max_expression_depth TO 5000")
    assert_same_rows(session.sql(text), duckdb_table(connection, text))


#: Constants wider than BIGINT (DuckDB types them DECIMAL(20, 1) and wider): they raised a raw TypeError (a two-word
#: decimal repeated as one scalar) or failed to convert past Python's default 28 decimal digits.
WIDE_LITERALS = [
    "SELECT a FROM t WHERE a = 9223372036854775807.0",
    "SELECT a, a = 9223372036854775807.0 AS e FROM t",
    "SELECT a + 9223372036854775807.0 AS s FROM t",
    "SELECT a FROM t WHERE a < 92233720368547758070.5",
    "SELECT a, 123456789012345678901234567890.5 AS x FROM t",
]


@pytest.mark.parametrize("text", WIDE_LITERALS, ids=range(len(WIDE_LITERALS)))
def test_constants_wider_than_bigint_answer_as_duckdb(text, tmp_path, device_name):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": pa.array([1, 2, None, 9223372036854775807], pa.int64())}), path)
    session = Session(device_name)
    session.register("t", str(path))
    assert_same_rows(session.sql(text), duckdb_table(duckdb_connection({"t": path}), text))
