"""Check SUBSTRING against DuckDB: 1-based, counted in UTF-8 characters, DuckDB's rules for start <= 0."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_check import TABLE, batch_of, binary, check, col, lit, small_table
from gpu_engine.expressions import evaluate
from gpu_engine.plans.expressions import Substring

STARTS = [-12, -3, -1, 0, 1, 2, 3, 8, 40]
LENGTHS = [None, -4, -1, 0, 1, 2, 5, 100]


@pytest.mark.parametrize("name", ["s", "ds"])
@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("length", LENGTHS)
def test_substring(device, name, start, length):
    sql = f"substring({name}, {start})" if length is None else f"substring({name}, {start}, {length})"
    check(device, Substring(col(name), start, length), sql)


def test_substring_counts_characters(device):
    table = small_table(s=pa.array(["héllo", "日本語テキスト", "🎉x🎉y", "", "ab", None]))
    for start, length in [(1, 1), (2, 2), (-2, 2), (0, 3), (3, 10), (2, -1)]:
        check(device, Substring(col("s", table), start, length), f"substring(s, {start}, {length})", table)


def test_substring_of_dictionary_is_a_dictionary(device):
    result = check(device, Substring(col("ds"), 1, 3), "substring(ds, 1, 3)")
    assert result.is_dictionary
    assert len(result.dictionary) == len(TABLE.column("ds").chunk(0).dictionary)


def test_substring_feeds_comparisons(device):
    expr = binary("eq", Substring(col("ds"), 1, 2), lit("BR", pa.string()))
    check(device, expr, "substring(ds, 1, 2) = 'BR'")
    expr = binary("lt", Substring(col("s"), 2, 3), Substring(col("ds"), -3, 2))
    check(device, expr, "substring(s, 2, 3) < substring(ds, -3, 2)")


def test_substring_of_a_literal(device):
    result = evaluate(Substring(lit("héllo", pa.string()), 2, 3), batch_of(TABLE, device))
    assert result.to_arrow(device).to_pylist() == ["éll"] * TABLE.num_rows
