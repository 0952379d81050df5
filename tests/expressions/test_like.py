"""Check [NOT] LIKE against DuckDB: % any run, _ one character (not byte), everything else literal."""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_check import TABLE, batch_of, check, check_predicate, col, small_table
from gpu_engine.expressions import evaluate
from gpu_engine.plans.expressions import Like

PATTERNS = ["%", "", "_", "__", "a%", "%o", "h%o", "%l%", "h_llo", "%é%", "_é%", "%日本%", "%\\%", "a\\%",
            "%a%b%", "%%c", "a_b%c", "_%_", "%x%x%x%", "%🎉%", " %", "ab_", "B%L", "%ZIL%", "_____", "%_"]


@pytest.mark.parametrize("negated", [False, True])
@pytest.mark.parametrize("name", ["s", "ds"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_like(device, name, pattern, negated):
    expr = Like(col(name), pattern, negated)
    sql_pattern = pattern.replace("'", "''")
    check(device, expr, f"{name} {'NOT ' if negated else ''}LIKE '{sql_pattern}'")


def test_like_backtracks(device):
    table = small_table(s=pa.array(["aaab", "abab", "aXbXc", "abcabc", "aab", "mississippi", "ééa", None]))
    for pattern in ["%ab", "a%b", "%a%b%c", "%abc", "a%a%b", "m%iss%ppi", "%ss%ss%", "_%a", "%é_"]:
        check(device, Like(col("s", table), pattern), f"s LIKE '{pattern}'", table)


def test_like_predicate(device):
    check_predicate(device, Like(col("ds"), "%AN%"), "ds LIKE '%AN%'")


def test_like_on_dictionary_matches_each_value_once(device, monkeypatch):
    from gpu_engine.kernels import strings as kernels

    calls = []
    original = kernels.like
    monkeypatch.setattr(kernels, "like", lambda d, offsets, chars, pattern: calls.append(offsets.shape[0] - 1)
                        or original(d, offsets, chars, pattern))
    evaluate(Like(col("ds"), "%A%"), batch_of(TABLE, device))
    assert calls == [len(TABLE.column("ds").chunk(0).dictionary)]


def test_percent_only_patterns_match_the_general_matcher_on_random_strings(device):
    """Patterns without ``_`` take the segment search; random ones must agree with pyarrow's LIKE."""
    import random

    import pyarrow.compute as pc

    from gpu_engine.columnar import Column
    from gpu_engine.kernels.strings import like

    rng = random.Random(3)
    rows = 3000 if device.name == "cpu" else 120
    values = pa.array(["".join(rng.choice("abcé") for _ in range(rng.randint(0, 8))) for _ in range(rows)],
                      pa.large_string())
    column = Column.from_arrow(values, device)
    for _ in range(200 if device.name == "cpu" else 20):
        pattern = "".join(rng.choice("abcé%") for _ in range(rng.randint(0, 6)))
        matched = device.to_host(like(device, column.offsets, column.data, pattern))
        assert matched.tolist() == pc.match_like(values, pattern).to_pylist(), pattern
