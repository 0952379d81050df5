"""Lists, maps and structs are refused by name, with their position and the scalar alternative (issue 30 item 6).

The engine's columns hold no nested types; before, ``[1, 2]`` was "unsupported function '[1, 2]'" and
``histogram(v)`` "column t.v is not available here". DuckDB aggregates sqlglot does not know (``fsum``,
``geomean``, ...) are refused by name with the nearest aggregate the engine has.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.sql.errors import SqlError

T = pa.table({"k": pa.array([1, 1, 2], pa.int32()), "v": [None, 2.0, 3.0], "s": ["a,b", "b", None]})


@pytest.mark.parametrize("dialect, sql, message", [
    ("duckdb", "SELECT k, array_agg(v) AS a FROM t GROUP BY k", "aggregate function array_agg (list, collect_list) "
     "returns a list, which the engine's columns do not hold; string_agg(x, ',' [ORDER BY y])"),
    ("duckdb", "SELECT k, list(v ORDER BY v) AS a FROM t GROUP BY k", "array_agg (list, collect_list) returns a list"),
    ("duckdb", "SELECT array_agg(DISTINCT s) AS a FROM t", "string_agg(DISTINCT x, ',')"),
    ("duckdb", "SELECT k, histogram(v) AS h FROM t GROUP BY k", "function histogram works on lists"),
    ("duckdb", "SELECT unnest(string_split_regex(s, ',')) AS x FROM t",
     "unnest(...) of this list expands it into rows"),
    ("duckdb", "SELECT [1, 2] AS x FROM t", "a list value ([1, 2])"),
    ("duckdb", "SELECT list_value(k, 2) AS x FROM t", "a list value"),
    ("duckdb", "SELECT string_split(s, ',') AS x FROM t", "str_split(...) returns a list, and the engine's columns "
     "hold no lists; split_part(string, separator, n)"),
    ("duckdb", "SELECT len([k]) AS x FROM t", "list"),
    ("duckdb", "SELECT {'a': k} AS x FROM t", "a struct value"),
    ("duckdb", "SELECT regexp_extract_all(s, 'a') AS x FROM t", "regexp_extract_all(...) returns a list of matches"),
    ("duckdb", "SELECT range(k) AS x FROM t", "range(...) as a value returns a list"),
    ("duckdb", "SELECT generate_series(1, k) AS x FROM t", "generate_series(...) as a value returns a list"),
    ("spark", "SELECT k, collect_list(v) AS a FROM t GROUP BY k", "array_agg (list, collect_list) returns a list"),
    ("spark", "SELECT k, collect_set(v) AS a FROM t GROUP BY k", "collect_set returns a list"),
    ("spark", "SELECT posexplode(array(1, 2)) AS x FROM t", "posexplode(...) AS names two columns"),
    ("spark", "SELECT split(s, ',') AS x FROM t", "split(...) returns a list"),
    ("spark", "SELECT size(array(k)) AS x FROM t", "list"),
])
def test_list_constructs_are_refused_by_name_with_their_position(dialect, sql, message):
    session = Session(device="cpu")
    session.register("t", T)
    with pytest.raises(SqlError) as raised:
        session.sql(sql, dialect=dialect)
    error = raised.value
    assert "unsupported SQL" in str(error) and message in str(error)
    assert error.line == 1 and error.column_number is not None


def test_a_quantile_over_a_list_of_fractions_keeps_its_own_message():
    session = Session(device="cpu")
    session.register("t", T)
    with pytest.raises(SqlError, match="call quantile_cont once per fraction"):
        session.sql("SELECT quantile_cont(v, [0.1, 0.5]) AS q FROM t")


@pytest.mark.parametrize("call, name, alternative", [
    ("fsum(v)", "fsum", "use sum"), ("geomean(v)", "geomean", "exp(avg(ln(x)))"), ("mad(v)", "mad", "median"),
    ("weighted_avg(v, k)", "weighted_avg", "sum(x * w) / sum(w)"),
])
def test_duckdb_aggregates_the_engine_lacks_are_refused_by_name_not_by_their_column(call, name, alternative):
    """They failed as "column t.v is not available here" in a grouped query (sqlglot knows none of them)."""
    session = Session(device="cpu")
    session.register("t", T)
    with pytest.raises(SqlError) as raised:
        session.sql(f"SELECT k, {call} AS a FROM t GROUP BY k")
    assert f"aggregate function {name} is not supported" in str(raised.value) and alternative in str(raised.value)
    assert raised.value.line == 1 and raised.value.column_number == 11
