"""Check the string functions against DuckDB 2.0.1: values, result types and NULL rules, on plain and
dictionary-encoded columns, through the translator (PlanBuilder's SQL snippets), PlanBuilder and Session.sql."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from duckdb_check import small_table
from gpu_engine import Session
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.expressions import evaluate
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.expressions import Function, Like
from gpu_engine.plans.sql_translator import parse_expression
from duckdb_reference import assert_same_rows
from function_check import check_sql as _check_sql, schema_of

#: NULLs, empty and blank strings, multi-byte characters, LIKE wildcards in the data, case pairs.
STRING_VALUES = ["", "a", "abc", "ABC", None, "hello", "héllo", "naïve café", "日本語テキスト", "🎉 party", "a%b_c",
                 "  spaced  ", "Ωmega", "x" * 12, "é", "HeLLo World", "ß", "tab\there", None, "Ǆ ǅ ǆ", "ﬁne", "l"]

TABLE = small_table(
    s=pa.array(STRING_VALUES, pa.string()),
    ds=pa.DictionaryArray.from_arrays(pa.array([k % 7 if k % 5 else None for k in range(len(STRING_VALUES))],
                                               pa.int32()),
                                      pa.array(["BRAZIL", "", "éire", "a_b%c", "  Pad  ", "日本", "ﬁx"])),
    n=pa.array([k % 9 - 3 if k % 4 else None for k in range(len(STRING_VALUES))], pa.int32()),
)


def check_sql(device, sql: str, table: pa.Table = TABLE):
    """Check ``sql`` against DuckDB: its type, then its values."""
    return _check_sql(device, sql, table)


CASES = [
    "upper(s)", "lower(s)", "upper(ds)", "lower(ds)", "length(s)", "length(ds)", "char_length(s)",
    "s || '!'", "'<' || s || '>'", "s || ds", "ds || '-' || ds", "s || CAST(NULL AS VARCHAR)",
    "concat(s, '-', ds)", "concat(s)",
    "concat(s, n, ds)", "s || n", "concat('a', NULL, 'b')",
    "trim(s)", "ltrim(s)", "rtrim(s)", "trim(ds)", "trim(s, 'ax ')", "ltrim(s, '')", "rtrim(ds, 'Pd ')",
    "replace(s, 'a', 'XY')", "replace(s, 'é', '')", "replace(s, '', 'x')", "replace(ds, 'A', 'a')",
    "strpos(s, 'l')", "strpos(s, 'é')", "strpos(s, '')", "position('b' IN s)", "instr(ds, 'I')", "strpos(s, NULL)",
    "left(s, 2)", "left(s, 0)", "left(s, -2)", "right(s, 3)", "right(s, 0)", "right(s, -1)", "left(ds, 100)",
    "lpad(s, 6, '*')", "rpad(s, 6, 'xy')", "lpad(s, 0, '*')", "lpad(s, -1, '*')", "rpad(ds, 3, 'é')",
    "starts_with(s, 'a')", "ends_with(s, 'o')", "contains(s, 'l')", "contains(s, '')", "contains(ds, '_b%')",
    "starts_with(ds, 'a_')", "ends_with(s, '%')", "prefix(s, 'h')", "suffix(ds, 'IL')",
    "s ILIKE '%L%'", "s NOT ILIKE 'h%'", "ds ILIKE 'brazil'", "ds ILIKE '%É%'", "NOT (s ILIKE 'A%')",
    "upper(NULL)", "length(upper(s)) + strpos(lower(ds), 'a')", "upper('héllo')",
    "regexp_matches(s, 'l+o')", "regexp_matches(s, '^a')", "regexp_matches(ds, '[A-Z]{3}')",
    "regexp_matches(s, 'HEL', 'i')", "regexp_matches(s, 'HEL', 'ic')", "s ~ '[0-9]'", "regexp_matches(s, '')",
    "regexp_full_match(s, 'a.c')", "regexp_full_match(ds, 'br.*', 'i')", "regexp_matches(s, 'é|日')",
    "regexp_replace(s, 'l', 'L')", "regexp_replace(s, 'l', 'L', 'g')", "regexp_replace(s, '(h)(e)', '\\2\\1')",
    "regexp_replace(ds, '[aeiou]', '_', 'gi')", "reverse(s)", "reverse(ds)", "repeat(s, 3)", "repeat(ds, 0)",
    "repeat(s, -2)", "split_part(s, 'l', 2)", "split_part(s, ' ', -1)", "split_part(ds, 'A', 5)",
    "split_part(s, '', 1)", "split_part(s, 'é', 0)", "concat_ws('-', s, ds)", "concat_ws(', ', s, n, 'x', NULL)",
    "concat_ws(ds, s, s)", "concat_ws(NULL, s)", "regexp_replace(s, '^\\s+|\\s+$', '', 'g')",
    # rows whose parts are all NULL join to '' (Arrow's NULL-skipping join dropped those rows: a shorter column)
    "concat_ws('-', s, n)", "concat_ws('/', s)", "concat_ws('é', n, s, NULL)",
]


@pytest.mark.parametrize("sql", CASES)
def test_string_function(device, sql):
    check_sql(device, sql)


def test_dictionary_input_is_transformed_once_per_value(device):
    result = check_sql(device, "upper(ds)")
    assert result.is_dictionary  # rows keep their codes; the dictionary's 7 values were converted
    assert len(result.dictionary) == 7
    result = check_sql(device, "ds || '!'")
    assert result.is_dictionary


def test_lpad_without_fill_to_pad_raises_as_duckdb():
    table = small_table(s=pa.array(["ab", None]))
    with pytest.raises(duckdb.Error, match="Insufficient padding"):
        duckdb.connect().sql("SELECT lpad('ab', 4, '')").fetchall()
    expr = parse_expression("lpad(s, 4, '')", schema_of(table), "Project[0]")
    from duckdb_check import batch_of
    from gpu_engine.device import get_device
    with pytest.raises(ExecutionError, match="Insufficient padding in LPAD"):
        evaluate(expr, batch_of(table, get_device("cpu")))


@pytest.mark.parametrize("sql, message", [
    ("upper(n)", "upper() needs a string as argument 1, got int32"),
    ("replace(s, ds, 'x')", "replace()'s search string (argument 2) must be a constant"),
    ("lpad(s, n, '*')", "lpad()'s length (argument 2) must be a constant"),
    ("left(s)", "left"),
    ("lpad(s, 3)", "lpad() takes 3 arguments"),
    ("s ILIKE n", "the ILIKE pattern must be a string, got int"),
    ("strpos(s, 'a', 2)", None),
    ("regexp_extract(s, 'a', 10)", "regexp_extract() reads groups 0 to 9, got 10"),
    ("regexp_matches(s, '(')", "invalid regular expression"),
    ("regexp_matches(s, 'a', 'x')", "does not support the option(s) 'x'"),
    ("regexp_replace(s, ds, 'x')", "pattern (argument 2) must be a constant"),
])
def test_refusals_name_the_function(sql, message):
    with pytest.raises(PlanError) as raised:
        parse_expression(sql, schema_of(TABLE), "Project[3]")
    assert "Project[3]" in str(raised.value)
    if message is not None:
        assert message in str(raised.value)


def test_ilike_is_like_on_lower():
    expr = parse_expression("s ILIKE 'AbC%'", schema_of(TABLE), "Filter[0]")
    assert isinstance(expr, Like) and expr.pattern == "abc%"
    assert isinstance(expr.operand, Function) and expr.operand.name == "lower"


def _duckdb(sql: str, table: pa.Table) -> pa.Table:
    with duckdb.connect() as connection:
        connection.register("t", table)
        return connection.sql(sql).to_arrow_table()


def test_plan_builder_and_session(device_name):
    table = TABLE.drop_columns(["rid"])
    plan = (PlanBuilder().values(table)
            .filter("s IS NOT NULL AND length(s) > 1")
            .project(["upper(s) AS u", "lpad(ds, 4, '.') AS p", "s || '|' || coalesce(ds, '?') AS j"]).plan())
    session = Session(device=device_name)
    expected = _duckdb("SELECT upper(s) AS u, lpad(ds, 4, '.') AS p, s || '|' || coalesce(ds, '?') AS j "
                       "FROM t WHERE s IS NOT NULL AND length(s) > 1", table)
    assert_same_rows(session.execute(plan), expected)
    session.register("t", table)
    query = ("SELECT lower(ds) AS k, count(*) AS c, max(length(s)) AS m, min(s || ds) AS x, "
             "max(concat(trim(s), '/', right(ds, 2))) AS y FROM t "
             "WHERE s NOT ILIKE '%O%' GROUP BY lower(ds) ORDER BY k NULLS FIRST")
    assert_same_rows(session.sql(query), _duckdb(query, table), ordered=True)


def test_functions_are_named_in_explain():
    plan = PlanBuilder().values(TABLE).project(["s || '!' AS a", "lpad(s, 3, 'x') AS b"]).plan()
    text = Session(device="cpu").explain(plan)
    assert "(s || '!')" in text and "lpad(s, 3, 'x')" in text


@pytest.mark.parametrize("sql", ["s || ds", "concat(s, '-', ds, n)", "s || '!'", "upper(s)", "lower(ds) || s",
                                 "concat(ds, NULL)", "length(s || s)"])
@pytest.mark.parametrize("rows", ["sliced", "empty", "null_dictionary"])
def test_concatenation_and_case_mapping_edges(device, sql, rows):
    """Rows joined on the device read each part's bytes wherever its offsets start (a slice), over no rows, and
    over a dictionary with no values (every row NULL)."""
    if rows == "sliced":
        table = TABLE.slice(5, 11)
    elif rows == "empty":
        table = TABLE.slice(0, 0)
    else:
        table = TABLE.set_column(2, "ds", pa.DictionaryArray.from_arrays(
            pa.array([None] * TABLE.num_rows, pa.int32()), pa.array([], pa.string())))
    check_sql(device, sql, table)


def test_ascii_case_mapping_runs_on_the_device(monkeypatch):
    """upper/lower of ASCII text never copies the strings to the host (Arrow's kernels are for non-ASCII text)."""
    import pyarrow.compute

    from duckdb_check import batch_of
    from gpu_engine.device import get_device

    table = small_table(s=pa.array(["Hello", None, "", "MiXeD 123 !"]))
    monkeypatch.setattr(pyarrow.compute, "utf8_upper", lambda *a, **k: pytest.fail("host case mapping"))
    expr = parse_expression("upper(s)", schema_of(table), "Project[0]")
    assert evaluate(expr, batch_of(table, get_device("cpu"))).to_arrow(get_device("cpu")).to_pylist() == [
        "HELLO", None, "", "MIXED 123 !"]


@pytest.mark.parametrize("sql", ["trim(s)", "ltrim(ds, ' P')", "rtrim(s, 'o ')", "trim(s, 'é')", "trim(s, '')",
                                 "left(s, 3)", "left(ds, -1)", "right(s, 2)", "right(ds, -2)", "right(s, 0)"])
def test_trim_and_slices_run_on_the_device_for_ascii(device, sql, monkeypatch):
    """trim of ASCII characters and left/right (but left with a negative count) never use the host's Arrow
    kernels; trimming other characters does, and both agree with DuckDB."""
    import pyarrow.compute

    host_only = "'é'" in sql or "-1" in sql
    if not host_only:
        for name in ("utf8_trim", "utf8_ltrim", "utf8_rtrim", "utf8_slice_codeunits"):
            monkeypatch.setattr(pyarrow.compute, name, lambda *a, **k: pytest.fail("host string kernel"))
    check_sql(device, sql)
