"""Check the character functions DuckDB users reach for (``strlen``, ``bit_length``, ``ascii``, ``unicode``/``ord``,
``chr``, ``translate``, ``strip_accents``) against DuckDB 2.0.1: values, result types and NULL rules, on plain and
dictionary-encoded columns, on every device; and the refusals that stay (``octet_length`` of a VARCHAR, which DuckDB
refuses too). ``translate`` with column arguments takes each row's own characters (row by row on the host)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from duckdb_check import batch_of, small_table
from function_check import check_sql, schema_of
from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.expressions import evaluate
from gpu_engine.plans.sql_translator import parse_expression

#: NULLs, the empty string, one- to four-byte characters, combining marks (a string that starts with one), NUL,
#: decomposable and non-decomposable accented letters, Hangul, Devanagari (spacing marks), LIKE wildcards.
VALUES = ["", "a", "abc", None, "héllo", "日本語", "🎉 party", "é", "\u0301a", "Ünïcødé ß", "ﬁ Å Ø ł đ ñ",
          "한국어", "हिन्दी", "e\u0301", "a%b_c", "Ǆ", "\x00x", "ÀÉÎ", None, "naïve café"]
#: Code points at every UTF-8 length boundary, and NULL.
POINTS = [65, 233, 0x10FFFF, None, 0x1F389, 0x7FF, 0x800, 0xFFFF, 0x10000, 127, 128, 1, 0, 0x20AC, 97, 0xD7FF,
          0xE000, 99, None, 0x3042]

TABLE = small_table(
    s=pa.array(VALUES, pa.string()),
    ds=pa.DictionaryArray.from_arrays(pa.array([k % 6 if k % 7 else None for k in range(len(VALUES))], pa.int32()),
                                      pa.array(["BRAZIL", "", "éire", "a_b%c", "Ångström", "日本"])),
    n=pa.array(POINTS, pa.int32()),
)
EMPTY = TABLE.slice(0, 0)

CASES = [
    "strlen(s)", "strlen(ds)", "bit_length(s)", "bit_length(ds)", "strlen('héllo')", "strlen(NULL)",
    "ascii(s)", "ascii(ds)", "unicode(s)", "unicode(ds)", "ord(s)", "ascii(NULL)", "unicode('')", "ascii('')",
    "chr(n)", "chr(65)", "chr(NULL)", "chr(n) || chr(233)", "chr(CAST(n % 30000 AS SMALLINT))",
    "translate(s, 'aéb', 'xY')", "translate(ds, 'AÅ', '')", "translate(s, '', 'x')", "translate(s, 'aa', 'xy')",
    "translate(s, 'e\u0301', 'E!')", "translate(s, NULL, 'x')", "translate(s, 'a', NULL)", "translate('abc', 'c', 'Z')",
    "strip_accents(s)", "strip_accents(ds)", "strip_accents(NULL)", "strip_accents('Ünïcødé')",
    "unicode(strip_accents(s)) + strlen(translate(s, 'l', ''))",
    "translate(s, s, 'x')", "translate(s, ds, upper(ds))", "translate('abcé', s, ds)", "translate(ds, 'B', s)",
    "translate(s, NULL, ds)",
]


@pytest.mark.parametrize("sql", CASES)
def test_character_function(device, sql):
    check_sql(device, sql, TABLE)


@pytest.mark.parametrize("sql", ["strlen(s)", "ascii(ds)", "chr(n)", "translate(s, 'a', 'b')", "strip_accents(ds)",
                                 "translate(s, ds, s)"])
def test_character_function_of_no_rows(device, sql):
    check_sql(device, sql, EMPTY)


def test_dictionary_input_keeps_its_codes(device):
    assert check_sql(device, "translate(ds, 'AÅ', 'aa')", TABLE).is_dictionary
    assert check_sql(device, "strip_accents(ds)", TABLE).is_dictionary


@pytest.mark.parametrize("point", [-1, 0xD800, 0xDFFF, 0x110000])
def test_chr_of_no_code_point_raises_as_duckdb(device, point):
    table = small_table(n=pa.array([65, None, point], pa.int32()))
    with pytest.raises(duckdb.Error, match=f"Invalid UTF8 Codepoint {point}"):
        duckdb.connect().sql(f"SELECT chr({point})").fetchall()
    expr = parse_expression("chr(n)", schema_of(table), "Project[0]")
    with pytest.raises(ExecutionError, match=f"Invalid UTF8 Codepoint {point}"):
        evaluate(expr, batch_of(table, device))


def test_chr_skips_the_code_points_of_null_rows(device):
    table = small_table(n=pa.array([66, -5], pa.int32()), m=pa.array([True, None], pa.bool_()))
    expr = parse_expression("chr(CASE WHEN m THEN n END)", schema_of(table), "Project[0]")
    assert evaluate(expr, batch_of(table, device)).to_arrow(device).to_pylist() == ["B", None]


@pytest.mark.parametrize("sql, message", [
    ("octet_length(s)", "octet_length() takes a BLOB"),
    ("translate(s, n, 'x')", "translate() needs a string as argument 2"),
    ("translate(s, 'a')", "translate"),
    ("chr(1.5)", "chr() needs an integer code point as argument 1"),
    ("ascii(n)", "ascii() needs a string as argument 1"),
    ("strlen(s, s)", "strlen() takes 1 arguments"),
])
def test_refusals_name_the_function(sql, message):
    with pytest.raises(PlanError) as raised:
        parse_expression(sql, schema_of(TABLE), "Project[3]")
    assert "Project[3]" in str(raised.value) and message in str(raised.value)
