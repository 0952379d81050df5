"""The edge fuzz (tests/sql/edge_queries.py: NULL keys, frames at the edges, decimal(38), unicode text, casts between
text, numbers and times, outer joins on NULL keys, LIMIT over ties, subqueries under OR/NOT, timestamps, NULL logic
and NaN keys) on fixed seeds, and the answers it found wrong, against DuckDB.

One seed of each shape runs on ``cpu`` unfused; the regressions run on every device (tiny tables).
bench/sql_fuzz_breadth.py --generator edge runs thousands of seeds.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from breadth_queries import breadth_session, reference_connection
from duckdb_reference import duckdb_table, duckdb_with_tables, rows_mismatch
from edge_queries import SHAPES, generate_case, run_case, tables
from gpu_engine import Session
from gpu_engine.errors import GpuEngineError
from gpu_engine.plans.type_coercion import common_type

CPU_SEEDS = range(17, 17 + len(SHAPES))  # one of each shape (seed % 9 picks it)

#: Queries the edge fuzz answered otherwise than DuckDB (each failed before its fix).
REGRESSIONS = [
    # 38-digit decimals below 1e-6 were written in Arrow's exponent form ('0E-10', '-1E-10').
    "SELECT id, CAST(big AS VARCHAR) AS v FROM w",
    # CASE/coalesce of decimal(38, 10) and decimal(38, 2) is decimal(38, 2) (DuckDB gives up fraction digits
    # past 38 digits): the engine kept scale 10, so 0.1 came back as 0.1000000000 and 1e-300 as 0E-10.
    "SELECT id, coalesce(CAST(f AS DECIMAL(38, 10)), CAST(k AS DECIMAL(38, 2))) AS v FROM w WHERE abs(f) < 1000",
    # The text of BIGINT's lowest value did not parse (its magnitude has no int64): TRY_CAST NULL, CAST raised.
    "SELECT s, TRY_CAST(s AS BIGINT) AS v FROM (VALUES ('-9223372036854775808'), ('-9223372036854775809'), "
    "('-9223372036854775807.5'), ('9223372036854775807'), ('9223372036854775808'), ('-0')) t(s)",
    "SELECT x, CAST(CAST(x AS VARCHAR) AS BIGINT) AS v FROM w",
    # Dates of negative years came a day early (Hinnant's era shift is for C++'s truncating division, not //),
    # and years past 5877641 were refused where DuckDB's range (+-2147483646 days) holds them.
    # A decimal quantile falling on one value went through a double: 12345678901234.5678 came back ...5680.
    "SELECT k, median(m) AS a, quantile_cont(m, 0.0) AS b FROM w GROUP BY k",
    # Timestamp text as DuckDB reads it: a bare date ends the text, blanks may run before the time, a '.' may
    # end it.
    "SELECT s, TRY_CAST(s AS TIMESTAMP) AS v FROM (VALUES ('2024-03-10 '), ('2024-03-10 UTC'), "
    "('2024-03-10  12:00:00'), ('2024-03-10T 12:00'), ('2024-03-10 12:00:00.'), ('2024-03-10 12:00:00 Z'), "
    "(' 2024-03-10')) t(s)",
    "SELECT s, TRY_CAST(s AS DATE) AS v FROM (VALUES ('2024-03-10  12:00'), ('2024-03-10T 12:00'), "
    "('2024-03-10 12:00:00.'), ('2024-03-10 '), ('2024-03-10 x')) t(s)",
    # A time zone's name after one blank is read and dropped ('... 12:00:00 Europe/Berlin' was NULL).
    "SELECT s, TRY_CAST(s AS DATE) AS d, TRY_CAST(s AS TIMESTAMP) AS t FROM (VALUES "
    "('2024-03-10 12:00 Europe/Berlin'), ('2024-03-10 12:00:00 foo bar'), ('2024-03-10 12:00:00  foo'), "
    "('2024-03-10 12:00:00 +02:00 foo'), ('2024-03-10 12:00:00 UTC'), ('2024-03-10 Europe/Berlin')) t(s)",
    "SELECT s, date_diff('day', DATE '1970-01-01', TRY_CAST(s AS DATE)) AS v FROM (VALUES ('-0001-01-01'), "
    "('-0400-02-29'), ('-0401-12-31'), ('-1-3-1'), ('-5877641-06-24'), ('-5877641-06-25'), ('5881580-07-10'), "
    "('5881580-07-11'), ('5877642-01-01')) t(s)",
]


@pytest.fixture(scope="module")
def edge_data():
    data = tables()
    connection = reference_connection(data)
    yield data, connection
    connection.close()


def test_generated_edge_queries_match_duckdb(edge_data):
    data, connection = edge_data
    outcomes = [run_case(generate_case(seed), breadth_session(seed, "cpu", data, fuse=False), connection)
                for seed in CPU_SEEDS]
    bad = [o for o in outcomes if o.status not in ("ok", "refused", "both_raised")]
    assert not bad, "\n".join(f"seed {o.case.seed} ({o.status}): {o.case.sql}\n  {o.detail}" for o in bad)


@pytest.mark.parametrize("sql", REGRESSIONS)
def test_edge_fuzz_regressions_match_duckdb(edge_data, device_name, sql):
    data, connection = edge_data
    session = Session(device=device_name)
    session.register("w", data["w"])
    problem = rows_mismatch(session.sql(sql), connection.sql(sql).to_arrow_table())
    assert problem is None, problem


def test_decimal_common_type_gives_up_fraction_digits_past_38_as_duckdb():
    assert common_type(pa.decimal128(38, 37), pa.decimal128(22, 2)) == pa.decimal128(38, 18)
    assert common_type(pa.decimal128(38, 30), pa.decimal128(18, 2)) == pa.decimal128(38, 22)
    assert common_type(pa.decimal128(38, 10), pa.decimal128(38, 2)) == pa.decimal128(38, 2)
    assert common_type(pa.decimal128(9, 2), pa.decimal128(18, 4)) == pa.decimal128(18, 4)


def test_a_constant_too_wide_for_the_common_decimal_is_an_engine_error():
    # greatest(decimal(38, 37), 99999999999999999999.99) raised decimal.InvalidOperation from the literal's coercion.
    session = Session(device="cpu")
    with pytest.raises(GpuEngineError):
        session.sql("SELECT greatest(CAST(1 AS DECIMAL(38, 37)), 99999999999999999999.99) AS v")


#: Text whose code points do not reverse as DuckDB reverses it (by grapheme clusters).
CLUSTERED_TEXT = ["e\u0301x", "\U0001F44D\U0001F3FDa", "\U0001F1E9\U0001F1EA\U0001F1EB\U0001F1F7b", "a\r\nb",
                  "\u0e01\u0e49\u0e32", "\u0301ab", "\U0001F468\u200d\U0001F469\u200d\U0001F467x", "\ufe0fa",
                  "日本語", "", None, "abc"]


def test_reverse_keeps_grapheme_clusters_as_duckdb(device_name):
    # reverse('e' + U+0301) gave U+0301 + 'e' (Arrow reverses code points), a flag pair its two letters swapped.
    table = pa.table({"id": pa.array(range(len(CLUSTERED_TEXT)), pa.int64()), "s": pa.array(CLUSTERED_TEXT)})
    session = Session(device=device_name)
    session.register("r", table)
    sql = "SELECT id, reverse(s) AS v FROM r"
    problem = rows_mismatch(session.sql(sql), duckdb_table(duckdb_with_tables({"r": table}), sql))
    assert problem is None, problem


def test_abs_of_a_wide_decimal_holding_the_lowest_int64_is_an_engine_error_not_a_wrapped_value(edge_data):
    # abs(CAST(x AS DECIMAL(20, 0))) of -2**63 gave -9223372036854775808 (64-bit abs wraps); DuckDB's answer,
    # 9223372036854775808, needs more than the 64 bits a function's result holds here.
    session = Session(device="cpu")
    session.register("w", edge_data[0]["w"])
    with pytest.raises(GpuEngineError, match="abs: a value of decimal128.20, 0. needs more than 64 bits"):
        session.sql("SELECT abs(CAST(x AS DECIMAL(20, 0))) AS v FROM w WHERE x < 0")


def test_text_past_64_bits_cast_to_a_wide_decimal_names_the_64_bit_limit_not_the_type_range():
    # '12345678901234567890.1234567890' fits DECIMAL(38, 10) (DuckDB answers); the engine's error said the value
    # was out of range of the type.
    session = Session(device="cpu")
    with pytest.raises(GpuEngineError, match="needs more than the 64 bits a decimal holds here"):
        session.sql("SELECT CAST(s AS DECIMAL(38, 10)) AS v FROM (VALUES ('12345678901234567890.1234567890')) t(s)")


def test_the_edge_generator_covers_its_shapes_and_is_reproducible():
    cases = [generate_case(seed) for seed in range(300)]
    assert {case.shape for case in cases} == set(SHAPES)
    assert generate_case(7) == generate_case(7)
    text = " ".join(case.sql for case in cases)
    for construct in ("NULLS FIRST", "2 FOLLOWING AND 1 FOLLOWING", "EXCEPT ALL", "GROUPING SETS", "DECIMAL(38",
                      "😀", "TRY_CAST(num AS TIMESTAMP)", "FULL JOIN", "IS NOT DISTINCT FROM", "OFFSET", "NOT IN",
                      "FROM we", "FROM w1", "RANGE BETWEEN INTERVAL", "date_trunc(", "NOT IN (", "'nan'::DOUBLE"):
        assert construct in text, construct
    assert any(case.tie_keys for case in cases)
