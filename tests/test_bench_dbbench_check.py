"""bench/run_dbbench.py's vectorized answer check (answers of millions of rows): multisets, floats within tolerance."""

from __future__ import annotations

import pyarrow as pa

from bench.run_dbbench import columnar_mismatch


def _table(keys, values, counts):
    return pa.table({"id1": pa.array(keys, pa.string()), "v3": pa.array(values, pa.float64()),
                     "count": pa.array(counts, pa.int64())})


def test_the_same_rows_in_another_order_match_and_floats_within_tolerance_match():
    expected = _table(["a", "b", None, "c"], [1.0, float("nan"), 3.0, None], [1, 2, 3, 4])
    actual = _table(["c", None, "a", "b"], [None, 3.0 * (1 + 1e-12), 1.0, float("nan")], [4, 3, 1, 2])
    assert columnar_mismatch(actual, expected) is None


def test_a_differing_key_float_count_or_null_is_reported():
    expected = _table(["a", "b", "c"], [1.0, 2.0, 3.0], [1, 2, 3])
    assert "id1" in columnar_mismatch(_table(["a", "b", "d"], [1.0, 2.0, 3.0], [1, 2, 3]), expected)
    assert "v3" in columnar_mismatch(_table(["a", "b", "c"], [1.0, 2.0, 3.001], [1, 2, 3]), expected)
    assert "count" in columnar_mismatch(_table(["a", "b", "c"], [1.0, 2.0, 3.0], [1, 2, 4]), expected)
    assert "NULL" in columnar_mismatch(_table(["a", "b", "c"], [1.0, None, 3.0], [1, 2, 3]), expected)
    assert "row counts" in columnar_mismatch(_table(["a", "b"], [1.0, 2.0], [1, 2]), expected)


def test_floats_that_cancel_to_almost_zero_match_within_the_absolute_tolerance():
    """db-benchmark q9's r2 of a flat group: DuckDB 1.3e-33, the engine 0.0 or 1.6e-34 (rounding, not a difference)."""
    expected = _table(["a", "b"], [1.3e-33, 2.0], [1, 2])
    assert columnar_mismatch(_table(["a", "b"], [0.0, 2.0], [1, 2]), expected) is None
    assert "v3" in columnar_mismatch(_table(["a", "b"], [1e-6, 2.0], [1, 2]), expected)
